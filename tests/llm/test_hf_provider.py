"""The transformers provider (``hf:``) on a real model: SmolLM2-135M read from its GGUF by transformers,
behind the same wrapper and generation config as every backend."""

from __future__ import annotations

import pytest

from csem.collect.prompts import render_task_prompt
from csem.llm import GenerateConfig, LogprobsUnsupported, get_model, run_sync


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


def test_no_score_distribution(gen):
    with pytest.raises(LogprobsUnsupported):
        run_sync(gen.score_distribution(render_task_prompt("respond", "hi"), [1, 2, 3]))


def test_unknown_task_prompt():
    with pytest.raises(ValueError, match="unknown task prompt"):
        render_task_prompt("poem", "x")
    assert render_task_prompt("Shorten: {source}", "abc")[1]["content"] == "Shorten: abc"
