"""The reference-free baselines of csem.baselines: system prior, extractiveness, the overlap features
fitted by least squares, the lexical feature MLP alone (tiny random encoder: only its tokenizer is used)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import spearmanr

from csem.baselines import extractiveness, length, lexical_mlp, overlap_least_squares, system_prior
from csem.model.features import overlap_features

WORDS = ("river bank money loan water city court judge storm rain police market vote party team goal "
         "coach player school teacher doctor hospital road bridge train station fire crowd music film").split()


def _records(n: int, seed: int) -> list[dict]:
    """Candidates that copy a share ``p`` of their words in order from the source and invent the
    rest; ``judge.q`` = 1 + 4 p (a label that the lexical features can read), ``judge.r`` = 5 - 4 p."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        source = " ".join(rng.choice(WORDS) for _ in range(80))
        p = (i % 11) / 10
        src = source.split()
        start = rng.randrange(0, 40)
        copied = src[start:start + round(20 * p)]
        invented = [rng.choice(WORDS) + "x" for _ in range(20 - len(copied))]
        out.append({"id": f"r{i}", "doc_id": f"d{i // 4}", "system_id": f"S{i % 4}", "source": source,
                    "candidate": " ".join(copied + invented), "judge.q": 1 + 4 * p, "judge.r": 5 - 4 * p})
    return out


# ---------------------------------------------------------------------------------------- system prior

def test_system_prior_hand_computed():
    train = [{"id": "a", "system_id": "A", "judge.x": 1.0}, {"id": "b", "system_id": "A", "judge.x": 3.0},
             {"id": "c", "system_id": "B", "judge.x": 5.0}, {"id": "d", "system_id": "B", "judge.x": None},
             {"id": "e", "system_id": "C", "judge.x": float("nan")}]
    test = [{"id": "t1", "system_id": "B"}, {"id": "t2", "system_id": "A"}, {"id": "t3", "system_id": "C"}]
    before = [dict(r) for r in test]
    assert system_prior(train, test, "judge.x") == {"judge.x": [5.0, 2.0, None]}  # C has no label: unseen
    assert system_prior(train, test, ["judge.x"], unseen="mean") == {"judge.x": [5.0, 2.0, 3.0]}
    assert test == before  # not modified


def test_system_prior_groups_by_several_fields_and_columns():
    train = [{"dataset": "d1", "system_id": "A", "y": 1, "z": 10}, {"dataset": "d2", "system_id": "A", "y": 3, "z": 30}]
    test = [{"dataset": "d2", "system_id": "A"}, {"dataset": "d1", "system_id": "A"}]
    assert system_prior(train, test, ["y", "z"], by=("dataset", "system_id")) == {"y": [3.0, 1.0], "z": [30.0, 10.0]}
    assert system_prior(train, test, "y") == {"y": [2.0, 2.0]}  # by system_id alone, the two datasets pool


def test_system_prior_errors_name_the_record():
    with pytest.raises(ValueError, match="training record 'b' has no 'system_id'"):
        system_prior([{"id": "a", "system_id": "A", "y": 1}, {"id": "b", "y": 2}], [], "y")
    with pytest.raises(ValueError, match="record 'a'.*'y'.*not a number"):
        system_prior([{"id": "a", "system_id": "A", "y": "good"}], [], "y")
    with pytest.raises(ValueError, match="no training record has a label in 'y'"):
        system_prior([{"id": "a", "system_id": "A", "y": None}], [{"system_id": "A"}], "y")
    with pytest.raises(ValueError, match="unknown unseen"):
        system_prior([{"system_id": "A", "y": 1}], [], "y", unseen="zero")


# ---------------------------------------------------------------------------------------- extractiveness

def test_extractiveness_hand_computed():
    recs = [{"id": "a", "candidate": "The cat sat on the mat", "source": "the cat sat on a mat"},
            {"id": "b", "candidate": "the cat sat", "source": "the cat sat down"},
            {"id": "c", "candidate": "dogs bark loudly", "source": "the cat sat down"},
            {"id": "d", "candidate": "hi", "source": "the cat"}]
    # a: trigrams (the cat sat) (cat sat on) (sat on the) (on the mat): the first two are in the source
    assert extractiveness(recs) == [pytest.approx(0.5), 1.0, 0.0, 1.0]
    for r, e in zip(recs, extractiveness(recs)):
        assert e == 1.0 - overlap_features(r["candidate"], [r["source"]])[2]


def test_extractiveness_needs_source():
    with pytest.raises(ValueError, match="record 'x' has no 'source' string"):
        extractiveness([{"id": "x", "candidate": "a b c"}])


# ---------------------------------------------------------------------------------------- least squares

def test_overlap_least_squares_matches_numpy_and_recovers_a_linear_label():
    train, test = _records(40, 0), _records(20, 1)
    x = lambda recs: np.array([overlap_features(r["candidate"], [r["source"]]) + [1.0] for r in recs])  # noqa: E731
    w_true = np.array([-2.0, 0.5, -1.0, 0.3, 2.0, 1.5])
    for r, v in zip(train, x(train) @ w_true):
        r["y"] = float(v)
    train[0]["y"] = None  # skipped
    out = overlap_least_squares(train, test, ["y", "judge.q"])
    assert list(out) == ["y", "judge.q"] and len(out["y"]) == len(test)
    assert out["y"] == pytest.approx(list(x(test) @ w_true), abs=1e-8)  # an exactly linear label is recovered
    w, *_ = np.linalg.lstsq(x(train), [r["judge.q"] for r in train], rcond=None)
    assert out["judge.q"] == pytest.approx(list(x(test) @ w))
    assert spearmanr(out["judge.q"], [r["judge.q"] for r in test])[0] > 0.9


def test_overlap_least_squares_novelty_set_leaves_the_length_out():
    """``feature_set="novelty"``: the fit on the 4 features without the length; a label that is the length
    alone is then not recovered, while the ``overlap`` fit recovers it exactly."""
    train, test = _records(40, 0), _records(20, 1)
    for i, r in enumerate(train + test):  # lengths 20-26 words
        r["candidate"] += " " + " ".join(f"tail{k}" for k in range(i % 7))
        r["y"] = overlap_features(r["candidate"], [r["source"]])[4]
    full = overlap_least_squares(train, test, "y")["y"]
    assert full == pytest.approx([r["y"] for r in test], abs=1e-8)
    x = lambda recs: np.array([overlap_features(r["candidate"], [r["source"]])[:4] + [1.0] for r in recs])  # noqa: E731
    w, *_ = np.linalg.lstsq(x(train), [r["y"] for r in train], rcond=None)
    novelty = overlap_least_squares(train, test, "y", feature_set="novelty")["y"]
    assert novelty == pytest.approx(list(x(test) @ w))
    assert max(abs(a - r["y"]) for a, r in zip(novelty, test)) > 1e-3
    with pytest.raises(ValueError, match="feature set 'lexical'"):
        overlap_least_squares(train, test, "y", feature_set="lexical")


def test_overlap_least_squares_too_few_labels():
    train = _records(8, 0)
    for r in train[3:]:
        r["judge.q"] = None
    with pytest.raises(ValueError, match="3 training rows labelled in 'judge.q', fewer than the 6 coefficients"):
        overlap_least_squares(train, _records(2, 1), "judge.q")


# ---------------------------------------------------------------------------------------- lexical MLP

@pytest.fixture
def one_thread():
    """A 28-64-2 MLP on 44 rows: torch's inter-thread syncs cost more than they save (on a busy machine, 10x)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_lexical_mlp_learns_a_lexical_label(tiny_encoder, one_thread):
    train, test = _records(44, 0), _records(22, 1)
    out = lexical_mlp(train, test, ["judge.q", "judge.r"], label_range=(1, 5), encoder=str(tiny_encoder))
    assert list(out) == ["judge.q", "judge.r"]
    q, r = np.array(out["judge.q"]), np.array(out["judge.r"])
    assert len(q) == len(test) and ((q >= 1) & (q <= 5) & (r >= 1) & (r <= 5)).all()
    assert spearmanr(q, [x["judge.q"] for x in test])[0] > 0.8
    assert spearmanr(r, [x["judge.r"] for x in test])[0] > 0.8
    # seeded, and the default range is the training labels' observed one (here also 1..5): the same fit
    assert lexical_mlp(train, test, ["judge.q", "judge.r"], encoder=str(tiny_encoder)) == out


def test_lexical_mlp_errors(tiny_encoder):
    train = _records(6, 0)
    for r in train:
        r["judge.q"] = None
    with pytest.raises(ValueError, match="no training record has a label"):
        lexical_mlp(train, _records(2, 1), "judge.q", encoder=str(tiny_encoder))
    with pytest.raises(ValueError, match="record 'r0' has no 'candidate' string"):
        lexical_mlp([{"id": "r0", "source": "x"}], [], "judge.q", encoder=str(tiny_encoder))
    with pytest.raises(ValueError, match="empty label range"):
        lexical_mlp(_records(6, 0), [], "judge.q", label_range=(3, 3), encoder=str(tiny_encoder))


def test_length_counts_words_and_names_a_record_without_a_candidate():
    assert length([{"candidate": "Two  words"}, {"candidate": ""}, {"candidate": " a b\nc "}]) == [2.0, 0.0, 3.0]
    with pytest.raises(ValueError, match="record 'r7' has no 'candidate'"):
        length([{"id": "r7", "source": "x"}])
