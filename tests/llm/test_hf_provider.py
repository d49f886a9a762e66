"""The transformers generator on a real model: SmolLM2-135M read from its GGUF by transformers."""

from __future__ import annotations

import pytest

from csem.collect.hf_generator import HFGenerator
from csem.collect.prompts import render_task_prompt


@pytest.fixture(scope="module")
def gen(smollm2_path):
    return HFGenerator(str(smollm2_path))


def test_top_k_sampling_is_seeded(gen):
    msgs = render_task_prompt("summarize", "The council voted to close the bridge for repairs for 18 months.")
    a = gen.generate(msgs, n=2, seed=1, strategy="top_k", max_tokens=12)
    b = gen.generate(msgs, n=2, seed=1, strategy="top_k", max_tokens=12)
    c = gen.generate(msgs, n=2, seed=2, strategy="top_k", max_tokens=12)
    assert a == b and len(a) == 2 and all(isinstance(t, str) and t for t in a)
    assert a != c


def test_beam_search_returns_n_best(gen):
    msgs = render_task_prompt("summarize", "Heavy snow closed several mountain roads on Tuesday.")
    out = gen.generate(msgs, n=3, seed=0, strategy="beam", num_beams=3, max_tokens=10)
    assert len(out) == 3 and len(set(out)) == 3, "beam search returns distinct beams"
    assert out == gen.generate(msgs, n=3, seed=5, strategy="beam", num_beams=3, max_tokens=10), "beam search ignores the seed"


def test_unknown_strategy(gen):
    with pytest.raises(ValueError, match="unknown decoding strategy"):
        gen.generate(render_task_prompt("respond", "hi"), n=1, seed=0, strategy="nucleus")


def test_unknown_task_prompt():
    with pytest.raises(ValueError, match="unknown task prompt"):
        render_task_prompt("poem", "x")
    assert render_task_prompt("Shorten: {source}", "abc")[1]["content"] == "Shorten: abc"
