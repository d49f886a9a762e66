"""One redaction rule for URLs and headers (csem.llm.redact), checked wherever a backend is named: the
one-line CLI error, missing reasons in output rows, log records, the judgment cache (keys and its
``backend`` column), provenance, the metric card, the run's state and report. The real ``openai`` and
``AzureOpenAI`` clients talk to a scripted OpenAI-compatible server on loopback (``fake_openai``: a FAKE
server, for replies a healthy server cannot give on demand: a 500, a reply after a password in the URL).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records, write_records
from csem.judge import judge_records
from csem.judge.cache import JudgmentCache
from csem.llm import get_model
from csem.llm.redact import digest, is_secret_name, redact_headers, redact_options, redact_text, redact_url

from fake_openai import ScriptedServer, completion, error

_load_commands()

PASSWORD = "pw-SECRET-0123456789"
KEY = "sk-test-SECRETKEY-abcdefghijklmnop"
SIG = "SIG-SECRET-987654321"
SECRETS = (PASSWORD, KEY, SIG, "SECRET")
PROBS = completion("4", top_logprobs=[("4", -0.1), ("3", -2.5), ("5", -3.0)])


def _varied(body: dict):
    """A step of the scripted server: a score that depends on the prompt (a constant label trains nothing)."""
    n = sum(map(ord, str(body.get("messages")))) % 5 + 1
    return 200, completion(str(n), top_logprobs=[(str(n), -0.2), (str(n % 5 + 1), -1.8)])


def _with_password(url: str, password: str = PASSWORD) -> str:
    return url.replace("http://", f"http://user:{password}@")


def _records(n: int = 3) -> list[dict]:
    return [{"id": str(i), "source": f"The mill flooded on day {i}.", "candidate": f"Mill flooded {i}."}
            for i in range(n)]


def _no_secret(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{s!r} leaked into {where}"


def _tree_text(folder: Path) -> str:
    """Every file under ``folder`` as text (bytes decoded leniently: SQLite and JSON alike)."""
    return "\n".join(f"{p}: {p.read_bytes().decode('utf-8', 'replace')}" for p in sorted(folder.rglob("*"))
                     if p.is_file())


# ----------------------------------------------------------------------------------------------- the rule

def test_the_rule_masks_userinfo_secret_parameters_headers_and_tokens():
    assert redact_url(f"http://user:{PASSWORD}@127.0.0.1:8000/v1") == f"http://***-{digest(f'user:{PASSWORD}')}@127.0.0.1:8000/v1"
    url = redact_url(f"https://acct.blob.core.windows.net/c?sv=2022&sig={SIG}&api-key={KEY}&x=1")
    assert SIG not in url and KEY not in url and "sv=2022" in url and "x=1" in url
    assert redact_url("http://127.0.0.1:8000/v1?api-version=2024-06-01") == "http://127.0.0.1:8000/v1?api-version=2024-06-01"
    text = redact_text(f"POST http://u:{PASSWORD}@h/v1 failed; Authorization: Bearer {KEY}; api-key: {KEY}; "
                       f"openai:m@user:{PASSWORD}@127.0.0.1:9/v1")
    _no_secret(text, "redact_text")
    assert redact_headers({"Authorization": "Bearer x", "api-key": "k", "Content-Type": "json"}) == {
        "Authorization": "***", "api-key": "***", "Content-Type": "json"}
    opts = redact_options({"base_url": f"http://u:{PASSWORD}@h/v1", "api_key": KEY, "max_tokens": "10",
                           "headers": {"x-api-key": KEY}})
    _no_secret(str(opts), "redact_options")
    assert opts["max_tokens"] == "10"
    assert [is_secret_name(n) for n in ("max_tokens", "top_k", "api_key", "X-Amz-Signature", "sig", "apiKey")] == [
        False, False, True, True, True, True]


def test_two_endpoints_that_differ_only_in_their_password_keep_apart():
    a = get_model("openai:m", base_url=_with_password("http://127.0.0.1:1/v1", "one-secret"))
    b = get_model("openai:m", base_url=_with_password("http://127.0.0.1:1/v1", "two-secret"))
    assert a.id != b.id and "one-secret" not in a.id and "two-secret" not in b.id
    assert a.id.startswith("openai:m@***-") and a.id.endswith("@127.0.0.1:1/v1")


# ----------------------------------------------------------------------------------------------- each place

def test_cli_error_rows_and_logs_carry_no_password(tmp_path, caplog):
    """A server answering 500: the one-line error, every row's missing reason, the summary's errors and
    the httpx/openai log records at DEBUG name the backend without its password."""
    data = write_records(_records(), tmp_path / "c.jsonl")
    with ScriptedServer([error(500, "upstream down")]) as srv, caplog.at_level(logging.DEBUG):
        res = CliRunner().invoke(app, ["judge", "--data", str(data), "--rubric", "csem/summ-coherence-ref-free",
                                       "--judge", "openai:m", "--judge-opt", f"base_url={_with_password(srv.url)}",
                                       "--judge-opt", "max_retries=1", "--judge-opt", "backoff=0.01",
                                       "--out", str(tmp_path / "out.jsonl"), "--no-cache", "--mode", "parse"])
        assert srv.auth and len(srv.requests) >= 1  # the requests did reach the server
    assert res.exit_code == 1, res.output
    assert "csem: error:" in res.output and "127.0.0.1" in res.output
    _no_secret(res.output, "the CLI error")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "127.0.0.1" in logged  # httpx logged the requests ...
    _no_secret(logged, "log records")  # ... without the password
    if (tmp_path / "out.jsonl").exists():
        rows = (tmp_path / "out.jsonl").read_text()
        _no_secret(rows, "the output rows")


def test_rows_cache_and_summary_of_a_judge_run_carry_no_password(tmp_path):
    """A server that answers: the cache's key and ``backend`` column, the rows and the summary; and a 500
    on the same endpoint: each row's missing reason says what happened, without the password."""
    cache = tmp_path / "cache.sqlite"
    with ScriptedServer([(200, PROBS)]) as srv:
        rows, summary = judge_records(_records(), "csem/summ-coherence-ref-free", "openai:m", cache=cache,
                                      progress=False, backend_options={"base_url": _with_password(srv.url),
                                                                       "api_key": KEY})
        assert srv.auth and all(a.startswith(("Basic ", "Bearer ")) for a in srv.auth)  # credentials were sent
    assert all(r["judge.coherence"] is not None for r in rows)
    _no_secret(cache.read_bytes().decode("utf-8", "replace"), "the judgment cache file")
    with sqlite3.connect(cache) as db:
        backends = {b for (b,) in db.execute("SELECT backend FROM judgments")}
    assert len(backends) == 1 and next(iter(backends)).startswith("openai:m@***-")
    _no_secret(str(rows) + str(summary.as_dict()), "rows and summary")
    with ScriptedServer([error(500, "upstream down")]) as srv:
        rows, summary = judge_records(_records(5), "csem/summ-coherence-ref-free", "openai:m", cache=None,
                                      progress=False, backend_options={
                                          "base_url": _with_password(srv.url), "api_key": KEY, "max_retries": 2,
                                          "backoff": 0.01, "concurrency": 1})
    reasons = [r["judge.coherence.missing"] for r in rows]
    _no_secret(str(reasons) + str(summary.as_dict()), "missing reasons")
    # each row says what happened to it: sent 3 times (or sent, then the backend was given up)
    assert all(m.startswith("backend error: openai:m@***-") and "HTTP 500: upstream down (failed after " in m
               for m in reasons), reasons
    assert any(m.endswith("(failed after 3 attempts)") for m in reasons), reasons


def test_calls_after_giving_up_say_why_they_were_not_attempted():
    """After ``max_consecutive_failures`` calls failed, a later call is not sent, and its reason names
    the last failure (redacted)."""
    from csem.llm import BackendError, BackendUnavailable, GenerateConfig, run_sync

    msgs = [{"role": "user", "content": "hi"}]
    with ScriptedServer([error(503, "overloaded")]) as srv:
        model = get_model("openai:m", base_url=_with_password(srv.url), max_retries=0, max_consecutive_failures=2)
        for _ in range(2):
            with pytest.raises(BackendError, match="HTTP 503"):
                run_sync(model.generate(msgs, GenerateConfig(max_tokens=2)))
        sent = len(srv.requests)
        with pytest.raises(BackendUnavailable) as info:
            run_sync(model.generate(msgs, GenerateConfig(max_tokens=2)))
    assert len(srv.requests) == sent  # not sent
    msg = str(info.value)
    assert msg.startswith("not attempted: backend unavailable (given up after 2 failed calls in a row; the last: ")
    assert "HTTP 503: overloaded" in msg
    _no_secret(msg, "the not-attempted reason")


def test_azure_client_with_a_signed_url_and_key(tmp_path, caplog):
    """``AzureOpenAI`` (the ``api-key`` header) on an endpoint with a signature in its query: the id,
    the cache and the logs keep neither the key nor the signature."""
    with ScriptedServer([(200, PROBS)]) as srv, caplog.at_level(logging.DEBUG):
        endpoint = srv.url.rsplit("/v1", 1)[0]
        model = get_model("openai:gpt-4o", base_url=_with_password(endpoint), api_key=KEY, azure="true")
        assert model.api.azure
        cache = JudgmentCache(tmp_path / "c.sqlite")
        rows, _ = judge_records(_records(1), "csem/summ-coherence-ref-free", model, cache=cache, progress=False)
        cache.close()
        assert srv.headers and {k.lower(): v for k, v in srv.headers[0].items()}.get("api-key") == KEY
    assert rows[0]["judge.coherence"] is not None
    _no_secret(model.id, "the backend id")
    _no_secret((tmp_path / "c.sqlite").read_bytes().decode("utf-8", "replace"), "the Azure judgment cache")
    _no_secret("\n".join(r.getMessage() for r in caplog.records), "the Azure client's logs")


def test_annotate_provenance_card_state_and_report_carry_no_password(tmp_path, fake_llm, tiny_encoder):
    """A whole run (``csem run``: collect on the FAKE backend, annotate with the openai judge at a URL
    with a password, train the tiny encoder, report): no file of the run folder, the judge cache
    included, holds the password or the key."""
    from csem.pipeline.runner import Pipeline

    examples = Path(__file__).resolve().parents[2] / "src" / "csem" / "pipeline" / "examples"
    write_records(read_records(examples / "news_sources.jsonl", required=("source",))[:6], tmp_path / "s.jsonl")
    with ScriptedServer([_varied]) as srv:
        cfg = {"name": "secret-run", "sources": {"path": "s.jsonl"},
               "split": {"test_fraction": 0.34, "dev_fraction": 0.2, "seed": 0},
               "collect": {"task": "summarize", "generators": [{"uri": fake_llm, "name": "fake", "num_samples": 2}],
                           "decoding": {"max_tokens": 20}, "seed": 0},
               "annotate": {"judge": "openai:m", "rubrics": ["csem/summ-coherence-ref-free"], "mode": "probs",
                            "options": {"base_url": _with_password(srv.url), "api_key": KEY}},
               "train": {"encoder": str(tiny_encoder), "mode": "ref-free",
                         "model": {"hidden_sizes": [16], "max_length": 64},
                         "options": {"max_epochs": 1, "batch_size": 8, "frozen_epochs": 0, "num_threads": 1}}}
        (tmp_path / "pipe.yaml").write_text(yaml.safe_dump(cfg))
        Pipeline.from_file(tmp_path / "pipe.yaml", tmp_path / "run", progress=False).run()
        assert srv.requests
    run = tmp_path / "run"
    for name in ("labelled.jsonl.judge.json", "judge_cache.sqlite", "model/metric_card.json", "model/metric_card.md",
                 "state.json", "report.md", "report.html", "labelled.jsonl"):
        assert (run / name).exists(), name  # provenance, cache, card, state and report were written ...
    assert "openai:m" in (run / "model" / "metric_card.md").read_text()  # ... the card names the judge ...
    _no_secret(_tree_text(run), "the run folder")  # ... and no file holds a secret
