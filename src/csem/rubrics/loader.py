"""Load rubrics: built-ins by id (files under ``csem/rubrics/builtin/``) or user files (YAML/TOML).

Built-in ids are the file paths relative to ``builtin/`` without the suffix:
``geval/summeval-coherence``, ``csem/mt-accuracy-ref-free``, ``csem/summ-multi-ref-based`` ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from csem.errors import InputError
from csem.rubrics.model import Rubric

M = TypeVar("M", bound=BaseModel)

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


class RubricError(InputError):
    """A rubric id is unknown or a rubric file is unreadable/invalid; the message names the file."""


def _toml():
    try:
        import tomllib as t
    except ModuleNotFoundError:  # python 3.10
        import tomli as t  # type: ignore[no-redef]
    return t


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RubricError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f", line {mark.line + 1}" if mark is not None else ""
            raise RubricError(f"{path}{where}: malformed YAML: {getattr(exc, 'problem', exc)}") from exc
    elif suffix == ".toml":
        t = _toml()
        try:
            data = t.loads(text)
        except t.TOMLDecodeError as exc:
            raise RubricError(f"{path}: malformed TOML: {exc}") from exc
    else:
        raise RubricError(f"{path}: unknown rubric format '{suffix}' (use .yaml, .yml or .toml)")
    if not isinstance(data, dict):
        raise RubricError(f"{path}: a rubric file must hold a mapping at top level, got {type(data).__name__}")
    return data


def load_rubric_file(path: str | Path) -> Rubric:
    """Load one rubric from a YAML or TOML file.

    The ``id`` defaults to the file name without suffix.

    Raises:
        RubricError: missing file, bad syntax, or a field that fails validation (each field named).
    """
    path = Path(path)
    if not path.is_file():
        raise RubricError(f"{path}: no such rubric file")
    data = _read_mapping(path)
    data.setdefault("id", path.stem)
    return _validated(Rubric, data, path, "rubric")


def _validated(cls: type[M], data: dict[str, Any], path: Path, what: str) -> M:
    """``cls.model_validate(data)``; a failure is one [`RubricError`][csem.rubrics.loader.RubricError] naming the file and each field."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<rubric>'}: {e['msg']}" for e in exc.errors())
        raise RubricError(f"{path}: invalid {what}: {problems}") from exc


def _builtin_files() -> dict[str, Path]:
    out = {}
    for p in sorted(BUILTIN_DIR.rglob("*")):
        if p.relative_to(BUILTIN_DIR).parts[0] == "pairwise":  # comparison rubrics: csem.rubrics.pairwise
            continue
        if p.suffix.lower() in (".yaml", ".yml", ".toml"):
            out[p.relative_to(BUILTIN_DIR).with_suffix("").as_posix()] = p
    return out


def list_rubrics() -> list[str]:
    """Ids of the built-in rubrics, sorted."""
    return sorted(_builtin_files())


def load_rubric(id_or_path: str | Path) -> Rubric:
    """A built-in rubric by id, or a rubric file by path.

    Raises:
        RubricError: neither a built-in id nor an existing file (message lists close ids).
    """
    key = str(id_or_path).strip()
    files = _builtin_files()
    if key in files:
        return load_rubric_file(files[key])
    p = Path(key).expanduser()
    if p.suffix.lower() in (".yaml", ".yml", ".toml") or p.exists():
        return load_rubric_file(p)
    if key.startswith("pairwise/"):
        raise RubricError(f"'{key}' is a pairwise (comparison) rubric: use it with `csem annotate --compare` "
                          "(rating rubrics and pairwise ones: `csem judge --list-rubrics`)")
    tail = key.split("/")[-1]
    close = [k for k in files if tail and tail in k][:8]
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `csem judge --list-rubrics`"
    raise RubricError(f"unknown rubric '{key}' (not a built-in id nor a .yaml/.toml file){hint}")


def load_rubrics(spec: str | list[str]) -> list[Rubric]:
    """Rubrics from a comma-separated list (or a list) of ids and paths, in order, duplicates dropped.

    A prefix ending in ``/`` or ``*`` selects every built-in under it: ``geval/`` = the four
    G-Eval SummEval rubrics.
    """
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s and s.strip()]
    if not items:
        raise RubricError("no rubric given")
    out: list[Rubric] = []
    seen: set[str] = set()
    for item in items:
        if item.endswith(("/", "*")):
            ids = [k for k in list_rubrics() if k.startswith(item.rstrip("*"))]
            if not ids:
                raise RubricError(f"no built-in rubric starts with '{item.rstrip('*')}'")
            rubrics = [load_rubric(k) for k in ids]
        else:
            rubrics = [load_rubric(item)]
        for r in rubrics:
            if r.id not in seen:
                seen.add(r.id)
                out.append(r)
    return out
