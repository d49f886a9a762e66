"""The one JSON writer of csem: strict JSON (NaN and infinities become ``null``), written atomically.

Every JSON file csem writes (run state, metric cards, provenance sidecars, meta-evaluation and
benchmark results) goes through [`write_json`][csem.data.jsonio.write_json], so that a crash never leaves half a file and no
file holds the non-standard ``NaN`` token that strict JSON readers reject.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def json_safe(obj: Any) -> Any:
    """``obj`` with every float NaN/inf replaced by None (recursively through dicts, lists, tuples);
    numpy scalars become Python numbers. Other objects are returned unchanged."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    item = getattr(obj, "item", None)  # numpy scalar
    if callable(item) and type(obj).__module__ == "numpy" and getattr(obj, "ndim", None) == 0:
        return json_safe(item())
    return obj


def write_json(path: str | Path, obj: Any, *, indent: int | None = 2, default: Any = str) -> Path:
    """Write ``obj`` as strict JSON (UTF-8, NaN -> null) to ``path`` atomically; returns the path.

    The text goes to a temporary sibling (``<name>.tmp``) that is then renamed over ``path``
    (``os.replace``), so readers see the old file or the new one, never a partial one. The folder
    is created when missing.

    Args:
        default: called for objects JSON cannot encode (default ``str``; None raises TypeError).

    Raises:
        TypeError: an object cannot be encoded and ``default`` is None. OSError: the folder is
        not writable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(json_safe(obj), indent=indent, ensure_ascii=False, allow_nan=False, default=default)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


class JsonlLog:
    """An append-only JSONL log that a crash cannot spoil: the resumable record of finished work
    (collected samples, MRT rewards, a benchmark's generated lists).

    Each [`append`][csem.data.jsonio.JsonlLog.append] writes one strict-JSON line (NaN -> null, as [`write_json`][csem.data.jsonio.write_json]) and flushes
    it, so a kill loses at most the line being written. [`read`][csem.data.jsonio.JsonlLog.read] returns every complete row and
    skips a line that is not JSON (a line cut by a crash; counted in `skipped`). Opening for
    appending first cuts such a partial last line off, so the next row starts on a line of its own
    instead of being glued to the fragment. ``path=None`` keeps nothing (reads nothing, appends
    nowhere), for callers whose log is optional.

    Usage::

        log = JsonlLog("samples.partial.jsonl")
        done = {row["id"]: row for row in log.read()}
        with log:                      # opened for appending on first use, closed on exit
            log.append({"id": "a/1", "candidate": "..."})

    Attributes:
        path: the file (or None). skipped: lines the last [`read`][csem.data.jsonio.JsonlLog.read] could not parse.
    """

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.skipped = 0
        self._fh = None

    def read(self) -> list[dict]:
        """Every row of the file, in order (empty when the file is absent); unparseable lines skipped.

        Raises:
            OSError: the file exists but cannot be read.
        """
        self.skipped = 0
        if self.path is None or not self.path.exists():
            return []
        rows = []
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    self.skipped += 1  # a line cut by a crash
                    continue
                if isinstance(row, dict):
                    rows.append(row)
                else:
                    self.skipped += 1
        return rows

    def _open(self):
        if self._fh is None and self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._drop_partial_tail()
            self._fh = self.path.open("a", encoding="utf-8")
        return self._fh

    def _drop_partial_tail(self) -> None:
        """Cut a last line that has no newline (written in part when the process died)."""
        if not self.path.exists():
            return
        with self.path.open("rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            block = 1 << 16
            pos = size
            while pos > 0:  # find the last newline
                start = max(0, pos - block)
                fh.seek(start)
                chunk = fh.read(pos - start)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    fh.truncate(start + nl + 1)
                    return
                pos = start
            fh.truncate(0)

    def append(self, row: Any) -> None:
        """Write one row as a JSON line and flush it.

        Raises:
            TypeError: the row cannot be encoded. OSError: the file cannot be written.
        """
        fh = self._open()
        if fh is None:
            return
        fh.write(json.dumps(json_safe(row), ensure_ascii=False, allow_nan=False, default=str) + "\n")
        fh.flush()

    def extend(self, rows: Any) -> None:
        """[`append`][csem.data.jsonio.JsonlLog.append] each row."""
        for row in rows:
            self.append(row)

    def close(self) -> None:
        """Close the file (a later [`append`][csem.data.jsonio.JsonlLog.append] opens it again)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "JsonlLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
