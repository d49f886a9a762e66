"""The backend protocol every judge/generator implements, its result types, and the URI registry.

A backend turns chat messages into either

* a **score distribution** (``score_distribution``): p(score) for each integer of a scale, read from
  the next-token distribution of one forward pass (G-Eval's probability-weighted scoring), or
* **generations** (``generate``): ``n`` sampled or greedy answers (G-Eval's n=20 sampling, greedy
  parsing, and candidate generation for CSEM's collector).

Both are ``async`` (one code path); :func:`run_sync` is the sync wrapper. Backends are chosen by a
URI: ``local``, ``llama-cpp:PATH`` (or an alias such as ``llama-cpp:smollm2``), ``openai:MODEL``.
Plug-ins add schemes with :func:`register_backend`.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence, TypeVar, runtime_checkable

Messages = Sequence[dict]  # [{"role": "system"|"user"|"assistant", "content": str}, ...]
T = TypeVar("T")


class BackendError(RuntimeError):
    """A backend failed to answer.

    Attributes:
        transient: True when retrying later may succeed (connection refused, 5xx, 429, timeout,
            deadline): such failures are recorded as missing but never cached, so a re-run retries.
    """

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class LogprobsUnsupported(BackendError):
    """The backend cannot return token probabilities (the runner falls back to sample/parse)."""


@dataclass
class ScoreDistribution:
    """Probability of each score of a scale from one forward pass.

    Attributes:
        probs: ``{score: p}`` with p in [0, 1]: the probability that the answer is exactly that
            number (chain rule over its tokens, see the backend's docstring). Not renormalised.
        mass: ``sum(probs.values())`` in [0, 1]: the probability mass that fell on valid scores.
        prompt_tokens: prompt length in tokens; evaluated_tokens: tokens actually computed for this
            request (smaller than ``prompt_tokens`` when a cached prefix was reused; -1 if unknown).
        top: the most probable next token's text (kept as the judgment's raw output).
    """

    probs: dict[int, float]
    mass: float
    prompt_tokens: int = 0
    evaluated_tokens: int = -1
    top: str | None = None


@dataclass
class GenerationResult:
    """One generated answer. tokens: completion tokens; prompt_tokens: prompt length (0 if unknown)."""

    text: str
    tokens: int = 0
    prompt_tokens: int = 0
    finish_reason: str | None = None


@dataclass
class GenerationConfig:
    """Sampling parameters; every field is part of the cache key (inspect_ai-style typed config)."""

    n: int = 1
    max_tokens: int = 8
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = 0
    stop: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "max_tokens": self.max_tokens, "temperature": self.temperature,
                "top_k": self.top_k, "top_p": self.top_p, "seed": self.seed, "stop": list(self.stop)}


@runtime_checkable
class Backend(Protocol):
    """What the judge runner (and the candidate collector) needs from a model.

    Attributes:
        id: stable identity of backend + model, including the model file hash where there is one
            (part of every cache key; never contains an API key).
        concurrency: how many requests the runner may have in flight (1 for in-process models:
            requests are then served in submission order, which keeps a source's prefix cached).
    """

    id: str
    concurrency: int

    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        """p(score) for each of ``scores`` as the first thing the assistant writes.

        Raises:
            LogprobsUnsupported: the backend exposes no logits/logprobs.
            BackendError: any other failure (``transient`` set when a retry may succeed).
        """
        ...

    async def generate(self, messages: Messages, config: GenerationConfig) -> list[GenerationResult]:
        """``config.n`` answers to ``messages`` (greedy when ``temperature == 0``).

        Raises:
            BackendError: the request failed (``transient`` set when a retry may succeed).
        """
        ...

    def close(self) -> None:
        """Release the model / connections."""
        ...


BackendFactory = Callable[..., Backend]
_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(scheme: str, factory: BackendFactory) -> None:
    """Register ``factory(target: str, **options) -> Backend`` for URIs ``<scheme>:<target>``.

    ``local`` is a scheme without target.
    """
    _REGISTRY[scheme] = factory


def backend_schemes() -> list[str]:
    _ensure_builtins()
    return sorted(_REGISTRY)


def _ensure_builtins() -> None:
    if "llama-cpp" not in _REGISTRY:
        from csem.judge.backends import llama_cpp as _lc  # noqa: F401  (registers llama-cpp, local)
    if "openai" not in _REGISTRY:
        from csem.judge.backends import openai as _oa  # noqa: F401  (registers openai)


def get_backend(uri: str | Backend, **options: Any) -> Backend:
    """A backend from its URI: ``local`` | ``llama-cpp:PATH_OR_ALIAS`` | ``openai:MODEL`` | plug-ins.

    Args:
        uri: the URI, or an already built backend (returned as is).
        options: backend keyword options (e.g. ``n_ctx=4096`` for llama-cpp, ``base_url=...`` for
            openai); unknown options raise TypeError from the backend.

    Raises:
        ValueError: unknown scheme (the message lists the known ones).
    """
    if not isinstance(uri, str):
        return uri
    _ensure_builtins()
    scheme, _, target = uri.partition(":")
    scheme = scheme.strip().lower()
    if scheme not in _REGISTRY:
        raise ValueError(f"unknown judge backend '{uri}'; use one of: "
                         + ", ".join(f"{s}:..." if s != "local" else s for s in sorted(_REGISTRY)))
    return _REGISTRY[scheme](target.strip(), **options)


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code (also when an event loop is already running,
    e.g. in Jupyter: it then runs in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
