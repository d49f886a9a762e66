"""File helpers shared by the dataset loaders: locating the data folder and a dataset, reading JSONL
(through [`csem.data.records`][]), checking rows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from csem.errors import InputError


class DatasetError(InputError):
    """A dataset file is missing a field, of an unexpected format or inconsistent; names file and line."""


def _repo_root() -> Path:
    # src/csem/data/loaders/_io.py -> parents[4] is the checkout root (editable install)
    return Path(__file__).resolve().parents[4]


def default_data_dir() -> Path:
    """Folder holding the human-judgment datasets, one sub-folder per dataset.

    Resolution order: the ``CSEM_DATA`` environment variable; ``../shared/data`` relative to the
    current directory if it exists; ``../shared/data`` beside the checkout (the project layout,
    also what CI lays out). The returned folder may not exist; loaders then raise
    `FileNotFoundError` saying where to get the data.

    Expected sub-folders (each loader's docstring names the official download source):
    ``summeval/``, ``summeval_llm_shen2023/``, ``summeval_geval_metriceval/``, ``topical_chat/``,
    ``topical_chat_llm_chiang2023/``, ``newsroom/``, ``realsumm/``, ``qags/``,
    ``wmt21_ted_mqm_ende/``, ``wmt23_da_sqm_ende/``.
    """
    env = os.environ.get("CSEM_DATA")
    if env:
        return Path(env).expanduser()
    cwd = Path.cwd().resolve().parent / "shared" / "data"
    if cwd.is_dir():
        return cwd
    return _repo_root().parent / "shared" / "data"


def resolve(path: str | Path | None, folder: str, filename: str, hint: str) -> Path:
    """``path`` itself, ``path/filename`` when ``path`` is a folder holding it, or the default location.

    Raises:
        FileNotFoundError: nothing there; the message says where to get the data (``hint``).
    """
    p = Path(path).expanduser() if path is not None else default_data_dir() / folder
    if p.is_dir() and (p / filename).exists():
        p = p / filename
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or folder. Get it from: {hint} "
                                f"(or set CSEM_DATA to the folder holding '{folder}/')")
    return p


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(1-based line, row)`` through csem's one JSONL reader
    ([`csem.data.records.iter_jsonl`][]); its errors are raised as [`DatasetError`][csem.data.loaders._io.DatasetError]."""
    from csem.data.records import RecordError
    from csem.data.records import iter_jsonl as read

    try:
        yield from read(path)
    except RecordError as exc:
        raise DatasetError(str(exc)) from exc


def need(row: dict, keys: tuple[str, ...], path: Path, line: int) -> None:
    """Raise [`DatasetError`][csem.data.loaders._io.DatasetError] naming file, line and the missing fields."""
    missing = [k for k in keys if k not in row]
    if missing:
        raise DatasetError(f"{path}, line {line}: field(s) {missing} missing; fields present: {sorted(row)}")


def unique(records: list[dict], path: Path) -> list[dict]:
    """Check that record ids are unique (raises [`DatasetError`][csem.data.loaders._io.DatasetError] naming the first repeat)."""
    seen: set[str] = set()
    for r in records:
        if r["id"] in seen:
            raise DatasetError(f"{path}: record id '{r['id']}' occurs twice")
        seen.add(r["id"])
    return records
