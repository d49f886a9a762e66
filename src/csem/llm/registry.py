"""Backends by URI: one registry, filled from the ``csem.llm_backends`` entry-point group.

A backend URI is ``<scheme>:<target>`` (``llama-cpp:smollm2``, ``openai:gpt-4o-mini``,
``hf:HuggingFaceTB/SmolLM2-135M-Instruct``) or a bare scheme (``local``). A scheme names a factory
``factory(target: str, **options) -> ModelAPI``. csem's own providers are declared like any plug-in,
in ``pyproject.toml``::

    [project.entry-points."csem.llm_backends"]
    openai = "csem.llm.providers.openai:openai_backend"

so a third-party package adds a scheme the same way (or, at run time, with [`register_backend`][csem.llm.registry.register_backend]).
Entry points are loaded on first use of their scheme only.
"""

from __future__ import annotations

import inspect
import re
import typing
from importlib.metadata import entry_points
from typing import Any, Callable

from csem.errors import InputError
from csem.llm.api import ModelAPI
from csem.llm.model import WRAPPER_OPTIONS, Model

ENTRY_POINT_GROUP = "csem.llm_backends"

BackendFactory = Callable[..., ModelAPI]
_REGISTRY: dict[str, BackendFactory] = {}
_ENTRY_POINTS: dict[str, Any] = {}
_scanned = False


def register_backend(scheme: str, factory: BackendFactory) -> None:
    """Register ``factory(target: str, **options) -> ModelAPI`` for URIs ``<scheme>:<target>``
    (a scheme registered here wins over an entry point of the same name)."""
    _REGISTRY[scheme.strip().lower()] = factory


def _scan() -> None:
    global _scanned
    if not _scanned:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _ENTRY_POINTS.setdefault(ep.name.strip().lower(), ep)
        _scanned = True


def backend_schemes() -> list[str]:
    """Every known scheme (registered or declared by an entry point), sorted."""
    _scan()
    return sorted(set(_REGISTRY) | set(_ENTRY_POINTS))


def _factory(scheme: str, uri: str) -> BackendFactory:
    _scan()
    if scheme not in _REGISTRY and scheme in _ENTRY_POINTS:
        _REGISTRY[scheme] = _ENTRY_POINTS[scheme].load()
    if scheme not in _REGISTRY:
        known = ", ".join(s if s == "local" else f"{s}:..." for s in backend_schemes())
        raise InputError(f"unknown backend '{uri}'; use one of: {known or '(none: is csem installed?)'}")
    return _REGISTRY[scheme]


def provider_options(factory: BackendFactory) -> dict[str, str] | None:
    """The keyword options of the provider class a factory returns (its ``-> Class`` annotation), as
    ``{name: annotation text}``; None when they cannot be known (a plug-in without annotations)."""
    try:
        cls = typing.get_type_hints(factory).get("return")
        if not isinstance(cls, type) or cls.__init__ is object.__init__:
            return None
        params = list(inspect.signature(cls.__init__).parameters.values())
    except Exception:  # noqa: BLE001 - any plug-in shape: then no checking
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):  # takes any option: nothing to check against
        return None
    return {p.name: p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
            for p in params if p.kind == p.KEYWORD_ONLY}


def _coerce(name: str, value: Any, annotation: str, uri: str) -> Any:
    """A command-line string converted to the option's annotated type (int, float, bool or None)."""
    if not isinstance(value, str):
        return value
    kinds = set(re.findall(r"\b(int|float|bool|str|None)\b", annotation))
    if not kinds or "str" in kinds:
        return value
    low = value.strip().lower()
    if "None" in kinds and low in ("none", "null"):
        return None
    if "bool" in kinds and low in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return low in ("1", "true", "yes", "on")
    for conv in (int, float):
        if conv.__name__ in kinds:
            try:
                return conv(value)
            except ValueError:
                pass
    want = " or ".join(k if k != "None" else "none" for k in sorted(kinds))
    raise InputError(f"backend option {name}={value!r} for '{uri}' must be {want}")


def get_api(uri: str, **options: Any) -> ModelAPI:
    """The provider for ``uri``; ``options`` go to its factory, checked against the options the
    provider takes (`provider_options`) and converted from strings to their types.

    Raises:
        ValueError: unknown scheme (the message lists the known ones); an option the provider does not
            take (the message lists the valid ones) or a value of the wrong type (named).
    """
    scheme, _, target = uri.partition(":")
    factory = _factory(scheme.strip().lower(), uri)
    known = provider_options(factory)
    if known is not None:
        unknown = sorted(k for k in options if k not in known)
        if unknown:
            raise InputError(f"unknown backend option(s) {unknown} for '{uri}'; valid options: "
                             f"{', '.join(sorted(known) + sorted(WRAPPER_OPTIONS))}")
        options = {k: _coerce(k, v, known[k], uri) for k, v in options.items()}
    return factory(target.strip(), **options)


def get_model(uri: "str | ModelAPI | Model", **options: Any) -> Model:
    """A [`Model`][csem.llm.Model] for a backend URI, a provider, or a model (returned as is without options,
    else a new wrapper with the options changed).

    Args:
        uri: ``local`` | ``llama-cpp:PATH_OR_ALIAS`` | ``openai:MODEL`` | ``hf:MODEL`` | a plug-in
            scheme; or a [`ModelAPI`][csem.llm.ModelAPI] (wrapped) or a [`Model`][csem.llm.Model].
        options: wrapper options (``concurrency``, ``max_retries``, ``backoff``, ``backoff_max``,
            ``deadline``, ``max_consecutive_failures``; strings from the command line are converted)
            and provider options (e.g. ``n_ctx`` for llama-cpp, ``base_url`` for openai).

    Raises:
        ValueError: unknown scheme, or a wrapper option that is not a number.
        TypeError: an option the provider does not take.
        BackendError: the provider cannot be created (model file missing ...).
    """
    wrapper: dict[str, Any] = {}
    for k, conv in WRAPPER_OPTIONS.items():
        if k in options:
            v = options.pop(k)
            try:
                wrapper[k] = None if v is None else conv(v)
            except (TypeError, ValueError):
                raise InputError(f"backend option {k}={v!r} must be a number (valid options of the wrapper: "
                                 f"{', '.join(sorted(WRAPPER_OPTIONS))})") from None
    if isinstance(uri, Model):
        if options:
            raise TypeError(f"provider options {sorted(options)} given with an already built model")
        if not wrapper:
            return uri
        return Model(uri.api, **{**uri.settings(), **wrapper})
    api = get_api(uri, **options) if isinstance(uri, str) else uri
    if not isinstance(uri, str) and options:
        raise TypeError(f"provider options {sorted(options)} given with an already built provider")
    return Model(api, **wrapper)
