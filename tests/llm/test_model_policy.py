"""The request policy of the one LLM wrapper (``csem.llm.Model``): retries, backoff, timeout, deadline,
concurrency, giving up, logprobs fallback and key redaction, over the openai provider against a
scripted real HTTP server on loopback (``fake_openai``: faults a healthy server cannot produce on demand)."""

from __future__ import annotations

import math

import pytest

from csem.judge import judge_records
from csem.llm import (BackendError, BackendUnavailable, GenerateConfig, LogprobsUnsupported, Model, gather_all,
                      get_model, run_sync)
from csem.llm.providers.openai import OpenAIBackend

from fake_openai import ScriptedServer, completion, error

MSGS = [{"role": "user", "content": "Rate it.\n- Coherence:"}]
FAST = dict(backoff=0.01, backoff_max=0.05)


def test_429_then_200_is_retried():
    with ScriptedServer([error(429, "rate limited"), (200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        out = run_sync(m.generate(MSGS, GenerateConfig()))
        assert out[0].text == "4" and len(srv.requests) == 2 and m.stats["retries"] == 1


def test_5xx_retried_until_exhausted_then_transient_error():
    with ScriptedServer([error(503, "overloaded")]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=2, **FAST)
        with pytest.raises(BackendError, match="HTTP 503: overloaded") as err:
            run_sync(m.generate(MSGS, GenerateConfig()))
        assert err.value.transient and len(srv.requests) == 3
    with ScriptedServer([error(500, "boom"), error(502, "bad gateway"), (200, completion("5"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        assert run_sync(m.generate(MSGS, GenerateConfig()))[0].text == "5"


def test_4xx_is_not_retried():
    with ScriptedServer([error(400, "bad request: unknown model")]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=3, **FAST)
        with pytest.raises(BackendError, match="HTTP 400") as err:
            run_sync(m.generate(MSGS, GenerateConfig()))
        assert not err.value.transient and len(srv.requests) == 1


def test_timeout_and_overall_deadline():
    with ScriptedServer([("sleep", 1.5, 200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", timeout=0.3, max_retries=1, **FAST)
        with pytest.raises(BackendError, match="Timeout|timed out") as err:
            run_sync(m.generate(MSGS, GenerateConfig()))
        assert err.value.transient
    with ScriptedServer([error(503, "down")]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", deadline=0.5, max_retries=1000, backoff=0.05,
                      backoff_max=0.1)
        with pytest.raises(BackendError) as err:
            run_sync(m.generate(MSGS, GenerateConfig()))
        assert err.value.transient and len(srv.requests) < 50
        with pytest.raises(BackendError, match="deadline of 0.5 s exceeded"):
            run_sync(m.generate(MSGS, GenerateConfig()))


def test_concurrency_bounds_requests_in_flight():
    with ScriptedServer([("sleep", 0.3, 200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", concurrency=3)
        assert m.concurrency == 3
        outs = run_sync(gather_all([m.generate(MSGS, GenerateConfig(seed=i)) for i in range(9)]))
        assert len(outs) == 9 and len(srv.requests) == 9
        assert srv.max_in_flight == 3, "never more than `concurrency` requests in flight, and that many used"
    with ScriptedServer([("sleep", 0.1, 200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", concurrency=1)
        run_sync(gather_all([m.generate(MSGS) for _ in range(4)]))
        assert srv.max_in_flight == 1


def test_in_process_models_are_capped_at_one_request(smol):
    assert get_model(smol, concurrency=8).concurrency == 1


def test_gives_up_after_consecutive_failures_without_further_requests():
    with ScriptedServer([error(503, "down")]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=0, max_consecutive_failures=2)
        for _ in range(2):
            with pytest.raises(BackendError, match="HTTP 503"):
                run_sync(m.generate(MSGS))
        sent = len(srv.requests)
        with pytest.raises(BackendUnavailable, match="not attempted"):
            run_sync(m.generate(MSGS))
        assert len(srv.requests) == sent == 2 and m.aborted


def test_a_success_resets_the_failure_count():
    with ScriptedServer([error(503, "a"), (200, completion("4")), error(503, "b"), (200, completion("3"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", max_retries=0, max_consecutive_failures=2)
        texts = []
        for _ in range(4):
            try:
                texts.append(run_sync(m.generate(MSGS))[0].text)
            except BackendError as exc:
                assert exc.transient
        assert texts == ["4", "3"] and not m.aborted


def test_keys_are_redacted_from_every_error():
    secret = "sk-test-SECRET-abcdef0123456789"
    with ScriptedServer([error(401, f"Incorrect API key provided: {secret}. Authorization: Bearer {secret}")]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key=secret)
        with pytest.raises(BackendError) as err:
            run_sync(m.generate(MSGS))
        assert "HTTP 401" in str(err.value) and secret not in str(err.value) and "***" in str(err.value)
        assert srv.auth[0] == f"Bearer {secret}", "the key itself is sent"
        assert secret not in m.id


def test_probs_from_top_logprobs():
    top = [("4", -0.2), ("3", -2.0), (" 5", -3.0), ("The", -4.0), ("9", -5.0)]
    with ScriptedServer([(200, completion("4", top_logprobs=top))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k")
        d = run_sync(m.score_distribution(MSGS, [1, 2, 3, 4, 5]))
        assert d.probs[4] == pytest.approx(math.exp(-0.2)) and d.probs[5] == pytest.approx(math.exp(-3.0))
        assert d.probs[1] == 0.0 and d.mass == pytest.approx(math.exp(-0.2) + math.exp(-2.0) + math.exp(-3.0))
        req = srv.requests[0]
        assert req["logprobs"] is True and req["top_logprobs"] == 20 and req["max_tokens"] == 1
        assert m.logprobs_supported is True


def test_server_rejecting_logprobs_falls_back_to_parse():
    def step(body):
        if body.get("logprobs"):
            return error(400, "logprobs are not supported by this model")
        return 200, completion("Coherence: 4")

    with ScriptedServer([step]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k", **FAST)
        with pytest.raises(LogprobsUnsupported):
            run_sync(m.score_distribution(MSGS, [1, 2, 3]))
        sent = len(srv.requests)
        with pytest.raises(LogprobsUnsupported):  # remembered: no second request
            run_sync(m.score_distribution(MSGS, [1, 2, 3]))
        assert len(srv.requests) == sent and m.logprobs_supported is False
        recs = [{"id": str(i), "source": "s", "candidate": f"c{i}"} for i in range(3)]
        rows, summ = judge_records(recs, "geval/summeval-coherence", OpenAIBackend("m", base_url=srv.url, api_key="k"),
                                   progress=False)
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
        b = OpenAIBackend("m", base_url=srv.url, api_key="k")
        rows, summ = judge_records([{"id": "a", "source": "s", "candidate": "c"}], "geval/summeval-coherence", b,
                                   mode="sample", n=3, progress=False, backend_options={"concurrency": 1})
        assert rows[0]["judge.coherence"] == pytest.approx(3.0)  # mean of the parsed 4 and 2; "no idea" skipped
        assert len(srv.requests) == 3 and srv.requests[0]["n"] == 3
        assert [r.get("seed") for r in srv.requests] == [0, 1, 2], "the seeds continue over the extra requests"


def test_unsupported_decoding_is_refused_before_any_request():
    with ScriptedServer([(200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k")
        with pytest.raises(ValueError, match="needs a transformers generator"):
            run_sync(m.generate(MSGS, GenerateConfig(num_beams=4)))
        assert srv.requests == []


def test_a_built_model_is_reused_or_rewrapped():
    api = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1")
    m = Model(api, concurrency=2, max_retries=1)
    assert get_model(m) is m
    m2 = get_model(m, deadline=5)
    assert m2.api is api and (m2.concurrency, m2.max_retries, m2.deadline) == (2, 1, 5.0)
    with pytest.raises(ValueError, match="must be a number"):
        get_model(m, concurrency="many")
    with pytest.raises(TypeError):
        get_model(api, base_url="x")


def test_top_k_is_sent_to_self_hosted_servers_only():
    assert OpenAIBackend("m", base_url="http://127.0.0.1:8000/v1").send_top_k
    assert not OpenAIBackend("m", base_url="https://api.openai.com/v1").send_top_k
    assert not OpenAIBackend("m", base_url="https://x.openai.azure.com").send_top_k
    with ScriptedServer([(200, completion("4"))]) as srv:
        m = get_model("openai:m", base_url=srv.url, api_key="k")
        run_sync(m.generate(MSGS, GenerateConfig(top_k=50)))
        run_sync(get_model("openai:m", base_url=srv.url, api_key="k", send_top_k="false").generate(MSGS, GenerateConfig(top_k=50)))
        assert srv.requests[0]["top_k"] == 50 and "top_k" not in srv.requests[1]
