"""The run folder of ``csem run`` as one object: each file read once while it is unchanged.

A pipeline run reads the same files in several stages (``labelled.jsonl`` by compare, train, score,
seeds and mrt, and for the label columns; ``scored.jsonl`` by meta_eval and rerank). A
[`RunFolder`][csem.pipeline.folder.RunFolder] parses each file once and serves it again while its size and modification time
are unchanged; a stage that rewrites a file (annotate re-run) makes the next read parse it anew.
The label columns' declared scales come from the provenance ``csem annotate`` (and the annotate
stage) writes beside the labelled file (``labelled.jsonl.judge.json``,
`csem.pipeline.annotate.read_provenance`), not from the rubrics again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from csem.data.records import read_records

LABELLED = "labelled.jsonl"
SCORED = "scored.jsonl"
BASELINES_FILE = "baselines.json"  # the meta_eval stage's trivial baselines (csem.pipeline.agreement.baseline_rows)
CASCADE_FILE = "cascade.json"  # meta_eval, with a score section: the combined column's agreement (csem.pipeline.cascade)


def _signature(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class RunFolder:
    """The files of one run folder, each parsed once while unchanged.

    Attributes:
        path: the folder. parses: ``{file name: times parsed}`` (what the cache saved is visible here).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.parses: dict[str, int] = {}
        self._cache: dict[Any, tuple[tuple, Any]] = {}

    def file(self, name: str) -> Path:
        """The path of ``name`` inside the folder."""
        return self.path / name

    def memo(self, key: Any, files: Sequence[str], compute: Callable[[], Any]) -> Any:
        """``compute()``, cached under ``key`` until one of ``files`` (names in the folder) changes."""
        sig = tuple(_signature(self.file(f)) for f in files)
        hit = self._cache.get(key)
        if hit is not None and hit[0] == sig:
            return hit[1]
        value = compute()
        self._cache[key] = (sig, value)
        return value

    def rows(self, name: str, *, required: Sequence[str] = ("candidate",)) -> list[dict]:
        """The records of ``name``, parsed once while the file is unchanged: the cached list itself,
        to be read and not changed ([`records`][csem.pipeline.folder.RunFolder.records] gives copies).

        Raises:
            csem.data.records.RecordError: a malformed file (names file, line and field).
        """
        def parse() -> list[dict]:
            self.parses[name] = self.parses.get(name, 0) + 1
            return read_records(self.file(name), required=required)

        return self.memo(("records", name, tuple(required)), [name], parse)

    def records(self, name: str, *, required: Sequence[str] = ("candidate",)) -> list[dict]:
        """Copies of the records of ``name`` (each a new dict; a stage may add columns)."""
        return [dict(r) for r in self.rows(name, required=required)]

    def provenance(self, name: str = LABELLED) -> dict | None:
        """What the annotate stage wrote beside ``name`` (``<name>.judge.json``), or None."""
        from csem.pipeline.annotate import provenance_path, read_provenance

        side = provenance_path(self.file(name)).name
        return self.memo(("provenance", name), [side], lambda: read_provenance(self.file(name)))

    def scales(self, name: str = LABELLED) -> dict[str, tuple[float, float]]:
        """``{label column: (min, max)}``: each judge column's declared scale from the provenance of
        ``name`` (empty without one)."""
        prov = self.provenance(name) or {}
        return {col: (float(c["scale"][0]), float(c["scale"][1]))
                for col, c in (prov.get("columns") or {}).items() if c.get("scale") is not None}
