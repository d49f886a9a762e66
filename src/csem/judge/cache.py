"""SQLite cache of judgments: re-running a finished job costs nothing; a killed job resumes.

Key: sha256 over (backend id incl. model file hash, the rendered chat messages, the scoring mode,
and every generation parameter), so any change of prompt, model or parameter is a new key. Values:
score or missing reason, raw output, valid probability mass, per-score probabilities, token counts,
latency. The database runs in WAL mode and every judgment is committed as soon as it finishes, so
a run killed by a signal keeps everything it finished. API keys are never part of key or value.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Mapping

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    rubric TEXT,
    aspect TEXT,
    mode TEXT NOT NULL,
    score REAL,
    missing TEXT,
    raw TEXT,
    mass REAL,
    probs TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    latency_s REAL,
    created REAL NOT NULL
)
"""


def judgment_key(backend_id: str, messages: Any, mode: str, params: Mapping[str, Any]) -> str:
    """sha256 hex of everything that determines a judgment (JSON with sorted keys)."""
    blob = json.dumps({"backend": backend_id, "messages": messages, "mode": mode, "params": dict(params)},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgmentCache:
    """A judgment store in one SQLite file (``path=None``: in memory, nothing persists).

    Thread-safe (one connection guarded by a lock). Use as a context manager or call `close`.
    """

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(":memory:" if self.path is None else str(self.path), check_same_thread=False,
                                       timeout=30)
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise RuntimeError(f"{self.path}: cannot open judgment cache ({exc}); delete the file to start afresh") from exc
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        """The stored judgment (dict with the table's columns, ``probs`` decoded) or None."""
        with self._lock:
            cur = self._db.execute("SELECT * FROM judgments WHERE key = ?", (key,))
            row = cur.fetchone()
            if row is None:
                return None
            out = dict(zip([c[0] for c in cur.description], row))
        out["probs"] = json.loads(out["probs"]) if out.get("probs") else None
        return out

    def put(self, key: str, *, backend: str, mode: str, rubric: str | None = None, aspect: str | None = None,
            score: float | None = None, missing: str | None = None, raw: str | None = None,
            mass: float | None = None, probs: Mapping | None = None, prompt_tokens: int | None = None,
            completion_tokens: int | None = None, latency_s: float | None = None) -> None:
        """Store (or replace) one judgment and commit at once."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO judgments VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, backend, rubric, aspect, mode, score, missing, raw, mass,
                 json.dumps({str(k): v for k, v in probs.items()}) if probs else None,
                 prompt_tokens, completion_tokens, latency_s, time.time()))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "JudgmentCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
