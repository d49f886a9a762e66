"""The openai provider behind the wrapper against a real llama.cpp OpenAI-compatible server (SmolLM2) on loopback."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import pytest

from csem.judge import judge_records
from csem.llm import BackendAuthError

KEY = "sk-csem-test-SECRET-7f3a9c1e5b"


def test_probs_via_logprobs_and_sample_mode(llama_server, tiny_rubric, tiny_records):
    opts = {"base_url": llama_server.url, "concurrency": 2}
    rows, summ = judge_records(tiny_records, tiny_rubric, "openai:smollm2", backend_options=opts, progress=False)
    assert summ.fallback is None and summ.judged == len(tiny_records)
    for r in rows:
        assert 0.0 <= r["judge.coherence.mass"] <= 1.0 + 1e-6
        v = r["judge.coherence"]
        assert (v is not None and 1.0 <= v <= 5.0) or r["judge.coherence.missing"].startswith("valid-score")
    rows, summ = judge_records(tiny_records[:1], tiny_rubric, "openai:smollm2", backend_options=opts, mode="sample",
                               n=2, temperature=1.0, max_tokens=5, progress=False)
    assert summ.judged == 1 and summ.completion_tokens > 0
    r = rows[0]
    assert r["judge.coherence"] is not None or r["judge.coherence.missing"].startswith("no parsable score in 2")


@pytest.fixture()
def keyed_server_without_logprobs(smollm2_path, llama_server_factory):
    """A server that requires an API key and was started without logits (rejects logprobs)."""
    s = llama_server_factory(smollm2_path, api_key=KEY, extra=("--logits_all", "false")).start()
    yield s
    s.stop()


def test_key_never_leaks_and_rejected_logprobs_fall_back(keyed_server_without_logprobs, tiny_rubric, tiny_records,
                                                         tmp_path, caplog, capsys):
    srv = keyed_server_without_logprobs
    db = tmp_path / "c.sqlite"
    caplog.set_level(logging.DEBUG)
    rows, summ = judge_records(tiny_records[:2], tiny_rubric, "openai:smollm2", cache=db, max_tokens=4,
                               backend_options={"base_url": srv.url, "api_key": KEY}, progress=False)
    assert summ.fallback and "logprob" in summ.fallback and "used mode 'parse'" in summ.fallback
    assert summ.judged == 2 and all(isinstance(r["judge.coherence.raw"], str) for r in rows)
    # a wrong key: a clear 401 that stops the run (issue 11), the wrong key nowhere
    wrong = "sk-wrong-SECRET-0000111122223333"
    with pytest.raises(BackendAuthError, match="HTTP 401") as err:
        judge_records(tiny_records[2:3], tiny_rubric, "openai:smollm2", cache=db, mode="parse",
                      backend_options={"base_url": srv.url, "api_key": wrong}, progress=False)
    out = capsys.readouterr()
    for secret in (KEY, wrong):
        assert secret not in caplog.text and secret not in out.out + out.err
        assert secret not in str(rows) and secret not in " ".join(summ.errors) and secret not in str(err.value)
        assert secret.encode() not in db.read_bytes()
        assert secret.encode() not in (db.with_name(db.name + "-wal").read_bytes()
                                       if db.with_name(db.name + "-wal").exists() else b"")


def test_server_killed_mid_run_then_resumed(smollm2_path, llama_server_factory, tiny_rubric, tmp_path):
    srv = llama_server_factory(smollm2_path).start()
    recs = [{"id": str(i), "source": f"Note {i}: the shop on Elm Street opens at {i} am.",
             "candidate": f"The Elm Street shop opens at {i}."} for i in range(8)]
    db = tmp_path / "c.sqlite"
    opts = {"base_url": srv.url, "concurrency": 1, "max_retries": 1, "backoff": 0.05, "timeout": 10}

    def kill_after(n: int) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            try:
                with sqlite3.connect(db) as c:
                    if c.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] >= n:
                        break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.01)
        srv.stop()

    killer = threading.Thread(target=kill_after, args=(2,))
    try:
        killer.start()
        rows, summ = judge_records(recs, tiny_rubric, "openai:smollm2", cache=db, backend_options=opts, progress=False)
        killer.join()
        done = summ.judged
        assert 2 <= done < len(recs) and summ.failed == len(recs) - done
        assert summ.errors and any("Connection" in e or "connect" in e.lower() for e in summ.errors)
        assert set(summ.missing) <= {"backend error", "not attempted", "valid-score probability mass 0 below min_mass 0"}
        failed = [r for r in rows if r["judge.coherence"] is None and "backend" in r["judge.coherence.missing"]]
        assert len(failed) == len(recs) - done
        srv.start()  # same port: the same backend id, so the cache applies
        rows2, summ2 = judge_records(recs, tiny_rubric, "openai:smollm2", cache=db, backend_options=opts,
                                     progress=False)
        assert (summ2.cached, summ2.judged, summ2.failed) == (done, len(recs) - done, 0)
        with sqlite3.connect(db) as c:
            assert c.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == len(recs)
    finally:
        srv.stop()
