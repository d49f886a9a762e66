"""The transformers provider (``hf:``) on a real model: SmolLM2-135M read from its GGUF by transformers,
behind the same wrapper and generation config as every backend; its score distributions (G-Eval probs
mode), one request at a time and gathered into batches."""

from __future__ import annotations

import asyncio

import pytest

from csem.collect.prompts import render_task_prompt
from csem.llm import GenerateConfig, get_model, run_sync


@pytest.fixture(scope="module")
def gen(smollm2_path):
    return get_model(f"hf:{smollm2_path}")


def _texts(model, msgs, **cfg):
    return [r.text.strip() for r in run_sync(model.generate(msgs, GenerateConfig(**cfg)))]


def test_top_k_sampling_is_seeded(gen):
    msgs = render_task_prompt("summarize", "The council voted to close the bridge for repairs for 18 months.")
    a = _texts(gen, msgs, n=2, seed=1, top_k=50, max_tokens=12)
    b = _texts(gen, msgs, n=2, seed=1, top_k=50, max_tokens=12)
    c = _texts(gen, msgs, n=2, seed=2, top_k=50, max_tokens=12)
    assert a == b and len(a) == 2 and all(isinstance(t, str) and t for t in a)
    assert a != c
    assert gen.id == f"hf:{gen.api.model}" and gen.concurrency == 1


def test_beam_search_returns_n_best(gen):
    msgs = render_task_prompt("summarize", "Heavy snow closed several mountain roads on Tuesday.")
    out = _texts(gen, msgs, n=3, seed=0, num_beams=3, max_tokens=10)
    assert len(out) == 3 and len(set(out)) == 3, "beam search returns distinct beams"
    assert out == _texts(gen, msgs, n=3, seed=5, num_beams=3, max_tokens=10), "beam search ignores the seed"


RATE = [[{"role": "user", "content": f"Rate this summary from 1 to 5. Summary: {'the cat sat ' * k}. "
                                     "Answer with one number."}] for k in (1, 2, 4, 8, 16)]


def _scores(model, prompts):
    async def all_at_once():
        return await asyncio.gather(*[model.score_distribution(m, [1, 2, 3, 4, 5]) for m in prompts])

    return run_sync(all_at_once())


def test_score_distribution_batched_equals_one_at_a_time(gen, smollm2_path):
    batched = get_model(f"hf:{smollm2_path}", batch_size=4, batch_wait=0.5)
    assert batched.concurrency == 4 and gen.concurrency == 1
    one = _scores(gen, RATE)
    many = _scores(batched, RATE)
    for a, b in zip(one, many):
        assert set(a.probs) == {1, 2, 3, 4, 5}
        assert 0 < a.mass <= 1 and a.mass == pytest.approx(sum(a.probs.values()))
        assert a.prompt_tokens == b.prompt_tokens and a.top == b.top
        for s in a.probs:  # left padding changes a probability only by fp32 rounding
            assert b.probs[s] == pytest.approx(a.probs[s], abs=1e-4)
    assert len({round(d.probs[1], 6) for d in one}) > 1, "different prompts, different distributions"
    # 5 requests in batches of up to 4: two passes per round instead of five
    assert batched.api.stats["requests"] == 5 and batched.api.stats["batches"] < gen.api.stats["batches"]


def test_probs_mode_judging_through_hf(smollm2_path):
    from csem.judge import judge_records

    recs = [{"id": "a", "source": "The council voted to close the bridge for 18 months.",
             "candidate": "The bridge closes for repairs."}]
    out, summary = judge_records(recs, "csem/summ-relevance-ref-free", f"hf:{smollm2_path}", mode="probs",
                                 progress=False, backend_options={"batch_size": 2})
    assert summary.fallback is None and summary.judged == 1
    assert 1.0 <= out[0]["judge.relevance"] <= 5.0 and 0 < out[0]["judge.relevance.mass"] <= 1


@pytest.mark.parametrize("opts, msg", [({"dtype": "float8"}, "unknown dtype"), ({"batch_size": 0}, "at least 1")])
def test_bad_options_are_refused_before_loading(opts, msg):
    from csem.llm.providers.hf import HFBackend

    with pytest.raises(ValueError, match=msg):
        HFBackend("/nonexistent/model.gguf", **opts)


def test_unknown_task_prompt():
    with pytest.raises(ValueError, match="unknown task prompt"):
        render_task_prompt("poem", "x")
    assert render_task_prompt("Shorten: {source}", "abc")[1]["content"] == "Shorten: abc"
