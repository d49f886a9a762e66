"""Run-folder bookkeeping: which stage finished with which inputs (content hashes).

``state.json`` in the run folder maps each stage to its fingerprint (sha256 of the stage's
settings, the fingerprints of the stages it reads, the content hash of its input files and the
csem version), its output files, its summary and the time it took. A stage whose fingerprint and
outputs are unchanged is skipped on a re-run.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import csem
from csem.data.jsonio import write_json


def file_hash(path: Path) -> str:
    """sha256 of a file's bytes (of every file under it, by relative path, for a folder)."""
    h = hashlib.sha256()
    if path.is_dir():
        for p in sorted(x for x in path.rglob("*") if x.is_file()):
            h.update(str(p.relative_to(path)).encode())
            h.update(file_hash(p).encode())
        return h.hexdigest()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(settings: Any, upstream: list[str], inputs: list[Path] = ()) -> str:
    payload = json.dumps({"settings": settings, "upstream": upstream,
                          "inputs": [file_hash(p) for p in inputs], "csem": csem.__version__},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class RunState:
    """The ``state.json`` of a run folder, written atomically after every stage."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / "state.json"
        self.data: dict[str, dict] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def is_done(self, stage: str, fp: str, run_dir: Path) -> bool:
        s = self.data.get(stage)
        return bool(s and s.get("fingerprint") == fp and all((run_dir / o).exists() for o in s.get("outputs", [])))

    def fingerprint_of(self, stage: str) -> str:
        return self.data.get(stage, {}).get("fingerprint", "")

    def record(self, stage: str, fp: str, outputs: list[str], summary: dict, seconds: float) -> None:
        self.data[stage] = {"fingerprint": fp, "outputs": outputs, "summary": summary,
                            "seconds": round(seconds, 3), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        write_json(self.path, self.data)
