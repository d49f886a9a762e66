"""The SQLite judgment cache: a finished job costs nothing again; a killed job resumes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from csem.judge import JudgmentCache, judge_records, judgment_key


def test_second_run_judges_nothing(smol, tiny_rubric, tiny_records, tmp_path, capsys):
    db = tmp_path / "c.sqlite"
    first, s1 = judge_records(tiny_records, tiny_rubric, smol, cache=db, progress=False)
    second, s2 = judge_records(tiny_records, tiny_rubric, smol, cache=db, progress=True)
    err = capsys.readouterr().err  # the rich progress bar (count, elapsed, ETA) goes to stderr
    assert f"{len(tiny_records)}/{len(tiny_records)}" in err and "ETA" in err
    assert (s1.judged, s1.cached) == (len(tiny_records), 0)
    assert (s2.judged, s2.cached) == (0, len(tiny_records))
    assert [r["judge.coherence"] for r in first] == [r["judge.coherence"] for r in second]
    with JudgmentCache(db) as c:
        assert len(c) == len(tiny_records)
    # a different generation parameter is a different key
    _, s3 = judge_records(tiny_records[:1], tiny_rubric, smol, mode="parse", max_tokens=3, cache=db, progress=False)
    assert s3.judged == 1


def test_key_covers_every_parameter():
    base = judgment_key("b", [{"role": "user", "content": "x"}], "sample", {"n": 20, "temperature": 1.0})
    assert base != judgment_key("b2", [{"role": "user", "content": "x"}], "sample", {"n": 20, "temperature": 1.0})
    assert base != judgment_key("b", [{"role": "user", "content": "y"}], "sample", {"n": 20, "temperature": 1.0})
    assert base != judgment_key("b", [{"role": "user", "content": "x"}], "parse", {"n": 20, "temperature": 1.0})
    assert base != judgment_key("b", [{"role": "user", "content": "x"}], "sample", {"n": 19, "temperature": 1.0})
    assert base == judgment_key("b", [{"role": "user", "content": "x"}], "sample", {"temperature": 1.0, "n": 20})


def test_corrupt_cache_file_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.sqlite"
    p.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RuntimeError, match="bad.sqlite: cannot open judgment cache"):
        JudgmentCache(p)


def test_job_killed_by_signal_resumes_without_loss_or_duplicates(smollm2_path, tiny_template, tmp_path):
    """A ``csem judge`` process is SIGKILLed halfway; the re-run judges only what is missing."""
    sources = [f"Report {i}: the council met on day {i} and approved budget item {i}." for i in range(5)]
    data = tmp_path / "data.jsonl"
    with data.open("w") as f:
        for i, src in enumerate(sources):
            for j, cand in enumerate([f"The council approved item {i}.", f"Day {i} council budget."]):
                f.write(json.dumps({"id": f"{i}-{j}", "source": src, "candidate": cand, "system_id": f"s{j}"}) + "\n")
    n_total = 10
    rubric = tmp_path / "tiny.yaml"
    rubric.write_text(yaml.safe_dump({"id": "test/tiny", "aspect": "coherence", "criteria": "reads well",
                                      "template": tiny_template, "system": None}))
    db, out = tmp_path / "cache.sqlite", tmp_path / "out.jsonl"
    cmd = [sys.executable, "-c", "from csem.cli import main; main()", "judge", "--data", str(data), "--rubric", str(rubric),
           "--judge", f"llama-cpp:{smollm2_path}", "--mode", "parse", "--max-tokens", "12", "--cache", str(db),
           "--out", str(out), "--no-progress", "--judge-opt", "n_threads=1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def rows() -> int:
        if not db.exists():
            return 0
        try:
            with sqlite3.connect(db) as c:
                return c.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
        except sqlite3.OperationalError:
            return 0

    t0 = time.monotonic()
    while rows() < 3 and proc.poll() is None and time.monotonic() - t0 < 240:
        time.sleep(0.05)
    assert proc.poll() is None, "the job finished before it could be killed: " + proc.stdout.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    done_before = rows()
    assert 3 <= done_before < n_total
    assert not out.exists()  # killed before writing: nothing half-written

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"judged {n_total - done_before}, cached {done_before}" in res.stdout
    assert rows() == n_total  # nothing lost, nothing duplicated
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == [f"{i}-{j}" for i in range(5) for j in range(2)]
    for r in lines:
        assert r["judge.coherence"] is not None or r["judge.coherence.missing"]
