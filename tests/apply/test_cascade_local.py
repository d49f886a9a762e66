"""``csem score --defer`` with the real local judge (Qwen2.5-Coder-0.5B through llama.cpp) and the shipped
student distilled from it (``news-relevance-minilm``, whose card names that judge and rubric): exactly the
asked share judged, and a run killed with SIGKILL resumes without judging a record twice (slow tier)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

JUDGE = "llama-cpp:qwen-0.5b"
RUBRIC = "csem/summ-relevance-ref-free"


@pytest.fixture(scope="module")
def scored_set(shared_data, tmp_path_factory):
    """Ten SummEval summaries of two articles (five systems each) and the shipped student's folder."""
    from csem.data.datasets import load_summeval
    from csem.model.pretrained import resolve

    recs = load_summeval(shared_data / "summeval")
    docs = sorted({r["doc_id"] for r in recs})[:2]
    rows = []
    for d in docs:
        rows += [r for r in recs if r["doc_id"] == d][:5]
    rows = [{k: r[k] for k in ("id", "doc_id", "system_id", "source", "candidate")} for r in rows]
    data = tmp_path_factory.mktemp("cascade_local") / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data, resolve("package:news-relevance-minilm"), len(rows)


def _cmd(scored_set, out, cache, *extra):
    data, model, _ = scored_set
    return [sys.executable, "-m", "csem", "score", "--model", str(model), "--data", str(data), "--out", str(out),
            "--judge", JUDGE, "--rubric", RUBRIC, "--judge-cache", str(cache), "--threads", "1", *extra]


def _cached(cache) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1) as con:
            return con.execute("select count(*) from judgments").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not there yet
        return 0


def test_defer_share_with_the_local_judge(scored_set, tmp_path):
    out, cache = tmp_path / "out.jsonl", tmp_path / "c.sqlite"
    proc = subprocess.run(_cmd(scored_set, out, cache, "--defer", "0.2"), capture_output=True, text=True,
                          timeout=1200, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    col = "metric.student.relevance"
    judged = [r for r in rows if r[f"{col}.provenance"] == "judge"]
    assert len(rows) == scored_set[2] and len(judged) == 2  # exactly 20% of 10
    assert all(1 <= r["judge.relevance"] <= 5 and r[col] == r["judge.relevance"] for r in judged)
    assert all(r[col] == r[f"{col}@student"] for r in rows if r not in judged)
    assert "judgments: 2 new, 0 from the cache, 0 failed" in proc.stdout
    assert _cached(cache) == 2


def test_kill_9_then_resume_judges_no_record_twice(scored_set, tmp_path):
    out, cache = tmp_path / "out.jsonl", tmp_path / "c.sqlite"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    budget = 6
    proc = subprocess.Popen(_cmd(scored_set, out, cache, "--defer-budget", str(budget)), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 1200
    while _cached(cache) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    first = _cached(cache)
    assert first >= 1
    if killed:
        assert not out.exists()  # nothing written before the judging finished
    res = subprocess.run(_cmd(scored_set, out, cache, "--defer-budget", str(budget)), env=env, capture_output=True,
                         text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    # the second run asks the judge only for what the first did not finish, and the cache holds each record once
    assert f"judgments: {budget - first} new, {first} from the cache, 0 failed" in res.stdout, res.stdout
    assert _cached(cache) == budget
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sum(r["metric.student.relevance.provenance"] == "judge" for r in rows) == budget
