"""The one JSON writer (strict JSON, atomic) and the one Markdown table renderer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from csem.data.jsonio import JsonlLog, json_safe, write_json
from csem.report.tables import fmt, markdown_table


def test_write_json_is_strict_and_replaces_atomically(tmp_path):
    p = tmp_path / "sub" / "state.json"
    write_json(p, {"a": math.nan, "b": [1.5, float("inf"), np.float32(0.25), np.int64(3)], "c": {"d": None}})
    text = p.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.5, None, 0.25, 3], "c": {"d": None}}
    write_json(p, {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1}
    assert [q.name for q in p.parent.iterdir()] == ["state.json"]  # no temporary file left behind
    assert json_safe((math.nan, 2)) == [None, 2]


def test_write_json_refuses_what_it_cannot_encode_without_default(tmp_path):
    with pytest.raises(TypeError):
        write_json(tmp_path / "x.json", {"a": object()}, default=None)
    assert not (tmp_path / "x.json").exists()


def test_markdown_table_of_dicts_and_sequences():
    rows = [{"metric": "rouge1", "rho": 0.17123, "n": 100}, {"metric": "bleu", "rho": math.nan, "n": 99}]
    assert markdown_table(rows, ["metric", "rho", "n"], align="lrr").splitlines() == [
        "| metric | rho | n |", "| --- | ---: | ---: |", "| rouge1 | 0.171 | 100 |", "| bleu | – | 99 |"]
    assert markdown_table([["a", None]], ["x", "y"], headers=["X", "Y"], missing="").splitlines()[2] == "| a |  |"
    assert fmt(0.5, 2) == "0.50" and fmt(None) == "–" and fmt(True) == "True" and fmt("n/a") == "n/a"


def test_jsonl_log_keeps_every_row_of_a_killed_writer(tmp_path):
    """A real process appending rows is killed (SIGKILL) mid-run: every row it wrote reads back, and
    a resumed writer continues the same file."""
    import subprocess
    import sys
    import time

    path = tmp_path / "log.jsonl"
    code = ("import sys, itertools; from csem.data.jsonio import JsonlLog\n"
            "log = JsonlLog(sys.argv[1])\n"
            "for i in itertools.count():\n    log.append({'id': i, 'x': float('nan'), 'text': 'é' * 50})\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)])
    deadline = time.monotonic() + 60
    while (not path.exists() or path.stat().st_size < 20_000) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    log = JsonlLog(path)
    rows = log.read()
    assert len(rows) >= 100 and log.skipped == 0
    assert [r["id"] for r in rows] == list(range(len(rows)))
    assert rows[0] == {"id": 0, "x": None, "text": "é" * 50}
    with log:
        log.append({"id": len(rows)})
    assert [r["id"] for r in JsonlLog(path).read()] == list(range(len(rows) + 1))


def test_jsonl_log_drops_a_line_cut_by_a_crash_and_starts_a_new_one(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"id": 1}\n{"id": 2}\n{"id": 3, "cand', encoding="utf-8")  # a torn last write
    log = JsonlLog(path)
    assert log.read() == [{"id": 1}, {"id": 2}] and log.skipped == 1
    with log:
        log.extend([{"id": 3}, {"id": 4}])
    assert path.read_text(encoding="utf-8").splitlines() == ['{"id": 1}', '{"id": 2}', '{"id": 3}', '{"id": 4}']
    assert JsonlLog(tmp_path / "absent.jsonl").read() == []
    nowhere = JsonlLog(None)
    nowhere.append({"id": 1})  # an optional log: nothing kept, nothing read
    assert nowhere.read() == []
