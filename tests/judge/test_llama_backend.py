"""Probability-weighted scoring and generation through real llama-cpp (SmolLM2-135M: plumbing only)."""

from __future__ import annotations

import math

import pytest

from csem.judge import GenerationConfig, judge_records, run_sync, score_probs
from csem.judge.backends.base import BackendError


def _msgs(rubric, rec):
    return rubric.render(rec)


def test_probs_mass_scale_determinism_and_prefix_reuse(smol, tiny_rubric, tiny_records):
    msgs = _msgs(tiny_rubric, tiny_records[0])
    smol.llm.reset()
    a = run_sync(score_probs(smol, msgs, tiny_rubric.scale.values))
    assert 0.0 < a.mass <= 1.0 + 1e-9
    assert all(0.0 <= p <= 1.0 for p in a.probs.values()) and set(a.probs) == {1, 2, 3, 4, 5}
    assert 1.0 <= a.score <= 5.0
    assert a.score == pytest.approx(sum(s * p for s, p in a.probs.items()) / a.mass)
    # same prompt again: the whole prompt is cached, only the last token is re-run
    b = run_sync(score_probs(smol, msgs, tiny_rubric.scale.values))
    # only the last, partial block is re-run (+ the " s" variant node); the result is bitwise the same
    assert b.evaluated_tokens <= 2 * smol.block_size < b.prompt_tokens
    assert b.score == a.score and b.probs == a.probs
    # a sibling candidate of the same source reuses the source prefix ...
    sib = _msgs(tiny_rubric, tiny_records[1])
    reused = run_sync(score_probs(smol, sib, tiny_rubric.scale.values))
    assert 0 < reused.evaluated_tokens < reused.prompt_tokens
    # ... and gives the same score as a cold evaluation without reuse
    smol.prefix_reuse = False
    try:
        cold = run_sync(score_probs(smol, sib, tiny_rubric.scale.values))
    finally:
        smol.prefix_reuse = True
    assert cold.evaluated_tokens >= cold.prompt_tokens
    assert cold.score == pytest.approx(reused.score, abs=1e-4)  # the bound; in fact bitwise equal:
    assert cold.probs == reused.probs


def test_multi_token_scales_use_the_chain_rule(smol, tiny_rubric, tiny_records):
    msgs = _msgs(tiny_rubric, tiny_records[0])
    five = run_sync(score_probs(smol, msgs, list(range(1, 6))))
    ten = run_sync(score_probs(smol, msgs, list(range(1, 11))))
    hundred = run_sync(score_probs(smol, msgs, list(range(0, 101))))
    for d, (lo, hi) in ((ten, (1, 10)), (hundred, (0, 100))):
        assert 0.0 < d.mass <= 1.0 + 1e-9
        assert lo <= d.score <= hi
    # "1" on a 1-10 scale must end after the "1": p(1) + p(10) cannot exceed p(first token "1")
    assert ten.probs[1] + ten.probs[10] <= five.probs[1] + 1e-6
    assert ten.probs[1] < five.probs[1]
    # single-token scores not prefixing another are unchanged
    assert ten.probs[5] == pytest.approx(five.probs[5], abs=1e-6)


def test_runner_scores_do_not_depend_on_order(smol, tiny_rubric, tiny_records):
    fwd, s1 = judge_records(tiny_records, tiny_rubric, smol, progress=False)
    rev, s2 = judge_records(list(reversed(tiny_records)), tiny_rubric, smol, progress=False)
    assert [r["id"] for r in fwd] == [r["id"] for r in tiny_records]  # input order kept
    by_id = {r["id"]: r["judge.coherence"] for r in rev}
    for r in fwd:
        assert r["judge.coherence"] == by_id[r["id"]]  # bitwise: aligned blocks make the cache state irrelevant
        assert 0.0 <= r["judge.coherence.mass"] <= 1.0 + 1e-9
    assert s1.judged == s2.judged == len(tiny_records) and s1.cached == 0
    # one source prefix evaluated once per group: fewer tokens evaluated than prompted
    assert s1.evaluated_tokens < s1.prompt_tokens


def test_sample_and_parse_record_missing_with_raw_never_zero(smol, tiny_rubric, tiny_records):
    rows, summ = judge_records(tiny_records[:2], tiny_rubric, smol, mode="sample", n=3, temperature=1.0,
                               max_tokens=6, progress=False)
    for r in rows:
        v = r["judge.coherence"]
        assert r["judge.coherence.raw"].startswith("[")  # the n answers, as JSON
        if v is None:
            assert r["judge.coherence.missing"].startswith("no parsable score in 3 answers")
        else:
            assert 1.0 <= v <= 5.0 and not math.isnan(v)
    assert summ.completion_tokens > 0
    rows, summ = judge_records(tiny_records[:2], tiny_rubric, smol, mode="parse", max_tokens=6, progress=False)
    n_missing = 0
    for r in rows:
        assert isinstance(r["judge.coherence.raw"], str)
        if r["judge.coherence"] is None:
            n_missing += 1
            assert r["judge.coherence.missing"].startswith("unparseable answer")
        else:
            assert 1 <= r["judge.coherence"] <= 5
    assert summ.n_missing == n_missing


def test_greedy_generation_is_deterministic(smol, tiny_rubric, tiny_records):
    msgs = _msgs(tiny_rubric, tiny_records[2])
    cfg = GenerationConfig(n=1, max_tokens=5, temperature=0.0)
    a = run_sync(smol.generate(msgs, cfg))
    b = run_sync(smol.generate(msgs, cfg))
    assert a[0].text == b[0].text and a[0].tokens <= 5
    s1 = run_sync(smol.generate(msgs, GenerationConfig(n=2, max_tokens=5, temperature=1.0, seed=7)))
    s2 = run_sync(smol.generate(msgs, GenerationConfig(n=2, max_tokens=5, temperature=1.0, seed=7)))
    assert [x.text for x in s1] == [x.text for x in s2]  # seeded sampling reproduces


def test_too_long_prompt_is_a_recorded_missing_not_a_crash(smol, tiny_rubric):
    rec = {"id": "long", "source": "word " * 3000, "candidate": "short"}
    rows, summ = judge_records([rec], tiny_rubric, smol, progress=False)
    assert rows[0]["judge.coherence"] is None
    assert "more than the context" in rows[0]["judge.coherence.missing"]
    assert summ.missing == {"backend error": 1}
    with pytest.raises(BackendError, match="tokens"):
        run_sync(score_probs(smol, tiny_rubric.render(rec), [1, 2, 3]))


def test_unknown_backend_and_bad_records(tiny_rubric):
    with pytest.raises(ValueError, match="unknown judge backend 'nope:x'.*llama-cpp"):
        judge_records([{"id": "1", "source": "s", "candidate": "c"}], tiny_rubric, "nope:x")
    with pytest.raises(ValueError, match="record 1 \\(id '7'\\).*needs 'source'"):
        judge_records([{"id": "7", "candidate": "c"}], tiny_rubric, "llama-cpp:smollm2", progress=False)
    with pytest.raises(ValueError, match="unknown mode"):
        judge_records([], tiny_rubric, "llama-cpp:smollm2", mode="vote")


def test_multi_aspect_rubric_one_score_per_aspect_sharing_the_prompt(smol):
    recs = [{"id": "t1", "source": "this movie was awful", "candidate": "This movie was wonderful."},
            {"id": "t2", "source": "this movie was awful", "candidate": "movie good."}]
    rows, summ = judge_records(recs, "csem/tst-multi-ref-free", smol, progress=False)
    for r in rows:
        for a in ("content", "style", "fluency"):
            assert 1.0 <= r[f"judge.{a}"] <= 5.0
    # the three prompts of a candidate differ only in their last line: the long head is evaluated once
    assert summ.judged == 6 and summ.evaluated_tokens < summ.prompt_tokens / 3


def test_plugin_backends_register_a_uri_scheme(smol, tiny_rubric, tiny_records):
    from csem.judge import register_backend
    from csem.judge.backends import backend_schemes

    seen = {}

    def factory(target, **options):
        seen.update(target=target, **options)
        return smol

    register_backend("test-plugin", factory)
    assert {"local", "llama-cpp", "openai", "test-plugin"} <= set(backend_schemes())
    rows, _ = judge_records(tiny_records[:1], tiny_rubric, "test-plugin:some/model", progress=False,
                            backend_options={"flavour": "x"})
    assert seen == {"target": "some/model", "flavour": "x"} and rows[0]["judge.coherence"] is not None
