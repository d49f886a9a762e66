"""Replies and requests of the OpenAI-compatible backend (issue 20), against the scripted real HTTP
server on loopback (``fake_openai``: malformed 200 replies, 401s and ``Retry-After`` cannot be
produced on demand by a healthy server):

* a 200 reply with an empty ``choices`` list, an HTML body, JSON cut off or without ``choices`` is a
  transient backend error naming the backend and the fault, retried, then missing with that reason;
  the run exits 3 and keeps the good replies of the same run (never a traceback, never exit 2);
* ``Retry-After`` (seconds or an HTTP date) on 429/503 is waited for, bounded by ``retry_after_max``
  (measured by the server's arrival timestamps);
* ``csem annotate --compare`` stops at once on HTTP 401, as a rating run does;
* an empty input file is a one-line error, exit 2 (``csem annotate``, ``csem run``);
* an async client is closed in the event loop that made it (no "Event loop is closed" later).
"""

from __future__ import annotations

import gc
import json
import logging
import time
from email.utils import formatdate

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records, write_records
from csem.judge import judge_records
from csem.llm import BackendError, GenerateConfig, get_model, run_sync
from csem.llm.providers.openai import retry_after_seconds

from fake_openai import ScriptedServer, completion, error

_load_commands()

MSGS = [{"role": "user", "content": "Rate it.\n- Coherence:"}]
FAST = dict(backoff=0.01, backoff_max=0.05)

EMPTY_CHOICES = (200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}})
HTML = (200, "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1>nginx</body></html>",
        {"Content-Type": "text/html; charset=utf-8"})
TRUNCATED = (200, json.dumps(completion("Score: 4"))[:57])
NO_CHOICES = (200, {"id": "x", "object": "chat.completion", "detail": "upstream busy"})
MALFORMED = {"empty choices": (EMPTY_CHOICES, "no choices"), "html body": (HTML, "not JSON"),
             "truncated json": (TRUNCATED, "not valid JSON"), "no choices key": (NO_CHOICES, "no 'choices' list")}


def _invoke(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_200_reply_is_a_transient_backend_error_naming_backend_and_fault(name):
    step, what = MALFORMED[name]
    with ScriptedServer([step]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=2, **FAST)
        with pytest.raises(BackendError) as err:
            run_sync(m.generate(MSGS, GenerateConfig()))
        assert err.value.transient and len(srv.requests) == 3  # retried twice
        msg = str(err.value)
        assert f"openai:m@{srv.url.split('//')[1]}" in msg and "malformed reply" in msg and what in msg, msg
        # the same in probs mode (one token with its logprobs)
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=0, **FAST)
        with pytest.raises(BackendError, match="malformed reply"):
            run_sync(m.score_distribution(MSGS, [1, 2, 3, 4, 5]))


def test_a_malformed_reply_then_a_good_one_is_retried():
    with ScriptedServer([HTML, TRUNCATED, (200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        assert run_sync(m.generate(MSGS, GenerateConfig()))[0].text == "4"
        assert len(srv.requests) == 3 and m.stats["retries"] == 2


def _by_candidate(bad_step, good):
    """A step that answers the prompt of the candidate containing "BROKEN" with ``bad_step``."""
    def step(body):
        text = json.dumps(body["messages"])
        return bad_step if "BROKEN" in text else good(body)
    return step


@pytest.fixture()
def rubric_file(tmp_path, tiny_template):
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump({"id": "test/tiny", "aspect": "coherence", "criteria": "reads well",
                                 "template": tiny_template, "system": None}))
    return p


@pytest.fixture()
def candidates(tmp_path):
    rows = [{"id": f"r{i}", "doc_id": "d0", "source": "The river flooded the old mill on Monday.",
             "candidate": ("BROKEN " if i == 2 else "") + f"Summary {i}: the mill flooded.", "system_id": f"s{i}"}
            for i in range(4)]
    return write_records(rows, tmp_path / "cands.jsonl")


@pytest.mark.parametrize("name", ["empty choices", "html body", "truncated json"])
def test_one_bad_reply_is_missing_with_its_reason_and_the_run_exits_3(name, tmp_path, rubric_file, candidates):
    bad, what = MALFORMED[name]
    out = tmp_path / "labelled.jsonl"
    with ScriptedServer([_by_candidate(bad, lambda body: (200, completion("Score: 4")))]) as srv:
        code, text = _invoke("annotate", "--data", candidates, "--rubric", rubric_file, "--out", out,
                             "--judge", "openai:m", "--mode", "parse", "--judge-opt", f"base_url={srv.url}",
                             "--judge-opt", "max_retries=2", "--judge-opt", "backoff=0.01")
        n_bad = sum("BROKEN" in json.dumps(b["messages"]) for b in srv.requests)
    assert code == 3, text
    assert "Traceback" not in text and "Expecting" not in text.split("malformed reply")[0]
    assert "1 of 4 judgments failed" in text and "malformed reply" in text and what in text
    assert n_bad == 3  # the bad one was retried
    rows = {r["id"]: r for r in read_records(out)}
    assert [rows[f"r{i}"]["judge.coherence"] for i in (0, 1, 3)] == [4.0, 4.0, 4.0]  # the good replies kept
    assert rows["r2"]["judge.coherence"] is None
    reason = rows["r2"]["judge.coherence.missing"]
    assert reason.startswith("backend error: openai:m@") and "malformed reply" in reason and what in reason


def test_probs_run_with_a_truncated_reply_keeps_the_others(rubric_file, tiny_rubric, tiny_records):
    recs = [dict(r) for r in tiny_records]
    recs[1]["candidate"] = "BROKEN " + recs[1]["candidate"]
    good = lambda body: (200, completion("4", top_logprobs=[("4", -0.2), ("3", -2.0)]))  # noqa: E731
    with ScriptedServer([_by_candidate(TRUNCATED, good)]) as srv:
        rows, summ = judge_records(recs, tiny_rubric, "openai:m", progress=False,
                                   backend_options={"base_url": srv.url, "max_retries": 1, **FAST})
    assert summ.failed == 1 and summ.judged == 3 and summ.fallback is None
    assert "not valid JSON" in summ.errors[0]
    assert [r["judge.coherence"] is not None for r in rows] == [True, False, True, True]


def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": " 1.5 "}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = 1_700_000_000.0
    assert retry_after_seconds({"retry-after": formatdate(now + 7, usegmt=True)}, now=now) == pytest.approx(7.0)
    assert retry_after_seconds({"retry-after": formatdate(now - 60, usegmt=True)}, now=now) == 0.0
    for bad in ({}, {"retry-after": ""}, {"retry-after": "soon"}, {"retry-after": "nan"}):
        assert retry_after_seconds(bad) is None


@pytest.mark.parametrize("status,header,at_least", [
    (429, "1", 1.0),
    (503, "1.2", 1.2),
    (429, "date", None),  # an HTTP date 3 s ahead (whole seconds): until that date
])
def test_retry_after_is_honoured(status, header, at_least):
    date = int(time.time()) + 3
    value = formatdate(date, usegmt=True) if header == "date" else header
    with ScriptedServer([(status, error(status, "slow down")[1], {"Retry-After": value}),
                         (200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=2, **FAST)  # backoff alone: <= 0.05 s
        assert run_sync(m.generate(MSGS, GenerateConfig()))[0].text == "4"
        gap = srv.times[1] - srv.times[0]
    if header == "date":  # the wait a date asks for runs from the reply (a loaded machine takes a while to get there)
        at_least = date - (time.time() - time.monotonic()) - srv.times[0]
        assert at_least >= 0.5, f"the first request came {3 - at_least:.1f} s after the date was written"
    assert gap >= at_least - 0.02, gap


def test_retry_after_is_bounded_by_retry_after_max():
    with ScriptedServer([(429, error(429, "slow down")[1], {"Retry-After": "30"}), (200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=2, retry_after_max=0.3, **FAST)
        run_sync(m.generate(MSGS, GenerateConfig()))
        gap = srv.times[1] - srv.times[0]
    assert 0.28 <= gap < 10.0, gap


def test_compare_run_stops_at_once_on_401(tmp_path, candidates, rubric_file):
    out = tmp_path / "pairs.jsonl"
    secret = "sk-wrong-key-5555666677778888"
    with ScriptedServer([error(401, "Invalid API key")]) as srv:
        code, text = _invoke("annotate", "--compare", "--data", candidates, "--rubric", "csem/summ-coherence-ref-free",
                             "--out", out, "--judge", "openai:m", "--mode", "parse", "--judge-opt",
                             f"base_url={srv.url}", "--judge-opt", f"api_key={secret}", "--judge-opt", "concurrency=1")
        n = len(srv.requests)
    assert code == 1, text
    assert n == 1  # 6 pairs x 2 orders would be 12 requests
    assert "HTTP 401" in text and "authentication failed" in text and secret not in text
    assert not out.exists()


def test_annotate_on_an_empty_file_is_a_one_line_error(tmp_path, rubric_file):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "out.jsonl"
    for extra in ([], ["--compare"]):
        code, text = _invoke("annotate", *extra, "--data", empty, "--rubric",
                             "csem/summ-coherence-ref-free" if extra else rubric_file, "--out", out, "--judge", "openai:m",
                             "--judge-opt", "base_url=http://127.0.0.1:9/v1")
        assert code == 2, text
        assert text.strip().count("\n") == 0 and "empty.jsonl" in text and "no records" in text
        assert not out.exists()


def test_run_on_an_empty_sources_file_names_the_file(tmp_path, fake_llm, tiny_encoder):
    (tmp_path / "sources.jsonl").write_text("")
    cfg = {"name": "empty", "sources": {"path": "sources.jsonl"},
           "collect": {"task": "summarize", "generators": [{"uri": fake_llm, "name": "fake", "num_samples": 2}]},
           "annotate": {"judge": fake_llm, "rubrics": ["csem/summ-coherence-ref-free"]},
           "train": {"encoder": str(tiny_encoder), "mode": "ref-free"}}
    (tmp_path / "pipe.yaml").write_text(yaml.safe_dump(cfg))
    code, text = _invoke("run", tmp_path / "pipe.yaml", "--run-dir", tmp_path / "run")
    assert code == 2, text
    assert "sources.jsonl" in text and "no sources" in text and "split" not in text


def test_async_client_is_closed_in_the_loop_that_made_it(caplog):
    """Two run_sync calls (two event loops, as two pipeline stages) on one backend, against a server
    that keeps connections open: the first loop's client is closed in that loop, so collecting it
    during the second logs nothing (before: "Task exception was never retrieved ... Event loop is
    closed")."""
    import asyncio

    caplog.set_level(logging.ERROR, logger="asyncio")
    with ScriptedServer([(200, completion("4"))], keep_alive=True) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", **FAST)
        run_sync(m.generate(MSGS, GenerateConfig()))

        async def next_stage():
            await m.generate(MSGS, GenerateConfig())
            gc.collect()  # the first stage's client is dropped and collected here
            await asyncio.sleep(0.1)

        run_sync(next_stage())
        gc.collect()
    assert "Event loop is closed" not in caplog.text and "never retrieved" not in caplog.text, caplog.text
