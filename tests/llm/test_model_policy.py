"""Retry, backoff, timeout, deadline and logprobs-fallback behaviour of the openai backend against a
scripted real HTTP server on loopback (faults a healthy server cannot produce on demand)."""

from __future__ import annotations

import pytest

from csem.judge import BackendError, GenerationConfig, LogprobsUnsupported, judge_records, run_sync
from csem.judge.backends.openai import OpenAIBackend

from fake_openai import ScriptedServer, completion, error

MSGS = [{"role": "user", "content": "Rate it.\n- Coherence:"}]
FAST = dict(backoff=0.01, backoff_max=0.05)


def test_429_then_200_is_retried():
    with ScriptedServer([error(429, "rate limited"), (200, completion("4"))]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        out = run_sync(b.generate(MSGS, GenerationConfig()))
        assert out[0].text == "4" and len(srv.requests) == 2


def test_5xx_retried_until_exhausted_then_transient_error():
    with ScriptedServer([error(503, "overloaded")]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", max_retries=2, **FAST)
        with pytest.raises(BackendError, match="HTTP 503: overloaded") as err:
            run_sync(b.generate(MSGS, GenerationConfig()))
        assert err.value.transient and len(srv.requests) == 3
    with ScriptedServer([error(500, "boom"), error(502, "bad gateway"), (200, completion("5"))]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        assert run_sync(b.generate(MSGS, GenerationConfig()))[0].text == "5"


def test_4xx_is_not_retried():
    with ScriptedServer([error(400, "bad request: unknown model")]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        with pytest.raises(BackendError, match="HTTP 400") as err:
            run_sync(b.generate(MSGS, GenerationConfig()))
        assert not err.value.transient and len(srv.requests) == 1


def test_timeout_and_overall_deadline():
    with ScriptedServer([("sleep", 1.5, 200, completion("4"))]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", timeout=0.3, max_retries=1, **FAST)
        with pytest.raises(BackendError, match="Timeout|timed out") as err:
            run_sync(b.generate(MSGS, GenerationConfig()))
        assert err.value.transient
    with ScriptedServer([error(503, "down")]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", deadline=0.5, max_retries=1000, backoff=0.05,
                          backoff_max=0.1)
        with pytest.raises(BackendError) as err:
            run_sync(b.generate(MSGS, GenerationConfig()))
        assert err.value.transient and len(srv.requests) < 50
        with pytest.raises(BackendError, match="deadline of 0.5 s exceeded"):
            run_sync(b.generate(MSGS, GenerationConfig()))


def test_probs_from_top_logprobs():
    top = [("4", -0.2), ("3", -2.0), (" 5", -3.0), ("The", -4.0), ("9", -5.0)]
    with ScriptedServer([(200, completion("4", top_logprobs=top))]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k")
        d = run_sync(b.score_distribution(MSGS, [1, 2, 3, 4, 5]))
        import math

        assert d.probs[4] == pytest.approx(math.exp(-0.2)) and d.probs[5] == pytest.approx(math.exp(-3.0))
        assert d.probs[1] == 0.0 and d.mass == pytest.approx(math.exp(-0.2) + math.exp(-2.0) + math.exp(-3.0))
        req = srv.requests[0]
        assert req["logprobs"] is True and req["top_logprobs"] == 20 and req["max_tokens"] == 1


def test_server_rejecting_logprobs_falls_back_to_parse():
    def step(body):
        if body.get("logprobs"):
            return error(400, "logprobs are not supported by this model")
        return 200, completion("Coherence: 4")

    with ScriptedServer([step]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", **FAST)
        with pytest.raises(LogprobsUnsupported):
            run_sync(b.score_distribution(MSGS, [1, 2, 3]))
        recs = [{"id": str(i), "source": "s", "candidate": f"c{i}"} for i in range(3)]
        rows, summ = judge_records(recs, "geval/summeval-coherence", b, progress=False)
        assert [r["judge.coherence"] for r in rows] == [4.0, 4.0, 4.0]
        assert "used mode 'parse'" in summ.fallback and summ.judged == 3


def test_server_returning_no_logprobs_falls_back_too():
    with ScriptedServer([(200, completion("3"))]) as srv:  # ignores logprobs=True silently
        b = OpenAIBackend("m", base_url=srv.url, api_key="k")
        rows, summ = judge_records([{"id": "a", "source": "s", "candidate": "c"}], "geval/summeval-coherence", b,
                                   progress=False)
        assert rows[0]["judge.coherence"] == 3.0 and summ.fallback


def test_n_samples_on_a_server_without_n():
    with ScriptedServer([(200, completion("4")), (200, completion("2")), (200, completion("no idea"))]) as srv:
        b = OpenAIBackend("m", base_url=srv.url, api_key="k", concurrency=1)
        rows, summ = judge_records([{"id": "a", "source": "s", "candidate": "c"}], "geval/summeval-coherence", b,
                                   mode="sample", n=3, progress=False)
        assert rows[0]["judge.coherence"] == pytest.approx(3.0)  # mean of the parsed 4 and 2; "no idea" skipped
        assert len(srv.requests) == 3 and srv.requests[0]["n"] == 3
