"""The score-token chain rule shared by the in-process providers (csem.llm.providers.score_tokens):
pure logic, checked against hand-computed probabilities on a small fake vocabulary (named as fake:
the real models are exercised in test_llama_cpp.py and test_hf_provider.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from csem.llm.providers.score_tokens import digit_mask, log_softmax, score_probs, score_variants

# fake vocabulary: ids 0-9 are the digits, 10 is " ", 11 is "x"
PIECES = [str(d) for d in range(10)] + ["\u0120", "x"]


def tokenize(text: str) -> list[int]:
    return [10 if ch == " " else int(ch) for ch in text]


def dist(**p: float) -> np.ndarray:
    """Log-probabilities over the fake vocabulary from ``{name: p}`` (names d0..d9, sp, x)."""
    probs = np.full(len(PIECES), 1e-12)
    for k, v in p.items():
        probs[{"sp": 10, "x": 11}.get(k, int(k[1:]) if k.startswith("d") else -1)] = v
    return np.log(probs / probs.sum())


def test_variants_drop_duplicates_and_empty():
    v = score_variants(lambda t: [] if t == " 3" else tokenize(t), [1, 3, 10])
    assert v == {1: [(1,), (10, 1)], 3: [(3,)], 10: [(1, 0), (10, 1, 0)]}
    assert score_variants(lambda t: tokenize(t.strip()), [2]) == {2: [(2,)]}


def test_digit_mask_reads_byte_level_and_sentencepiece_spaces():
    assert digit_mask(["1", "\u01207", "\u25819x", "x1", "", None]).tolist() == [True, True, True, False, False, False]


def test_single_token_scores_and_space_variant():
    nodes = {(): dist(d1=0.2, d2=0.3, d5=0.4, sp=0.1), (10,): dist(d2=0.5, x=0.5)}
    asked = []

    def logp(path):
        asked.append(path)
        return nodes[path]

    p = score_probs(score_variants(tokenize, [1, 2, 3, 4, 5]), logp, lambda: digit_mask(PIECES))
    assert p[1] == pytest.approx(0.2, abs=1e-9) and p[5] == pytest.approx(0.4, abs=1e-9)
    assert p[2] == pytest.approx(0.3 + 0.1 * 0.5, abs=1e-9), "p(' 2') = p(' ') * p('2' | ' ')"
    assert p[3] < 1e-9 and p[4] < 1e-9
    assert set(asked) == {(), (10,)}


def test_a_score_that_prefixes_another_must_end_there():
    # scale 1-10: "1" is a prefix of "10"; after "1" the next token is "0" with p 0.4
    nodes = {(): dist(d1=0.5, d2=0.5), (1,): dist(d0=0.4, x=0.6)}
    p = score_probs(score_variants(lambda t: tokenize(t.strip()), range(1, 11)), lambda path: nodes[path],
                    lambda: digit_mask(PIECES))
    assert p[1] == pytest.approx(0.5 * 0.6, abs=1e-9)
    assert p[10] == pytest.approx(0.5 * 0.4, abs=1e-9)
    assert p[2] == pytest.approx(0.5, abs=1e-9)
    assert sum(p.values()) == pytest.approx(1.0, abs=1e-6)


def test_negligible_paths_are_not_expanded():
    nodes = {(): dist(d3=1.0)}  # p(" ") ~ 1e-12: the " s" paths stop at their first token

    def logp(path):
        if path not in nodes:
            raise AssertionError(f"expanded a negligible path {path}")
        return nodes[path]

    p = score_probs(score_variants(tokenize, [1, 2, 3, 4, 5]), logp, lambda: digit_mask(PIECES))
    assert p[3] == pytest.approx(1.0, abs=1e-6)


def test_log_softmax_is_normalised_float64():
    out = log_softmax(np.array([1000.0, 1000.0, -math.inf], dtype=np.float32))
    assert out.dtype == np.float64
    assert np.exp(out).sum() == pytest.approx(1.0) and out[0] == pytest.approx(math.log(0.5))
