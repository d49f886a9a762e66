"""Och's MERT: the exact line search on hand-made N-best lists, and the search around it (pure numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from csem.apply.tune import envelope, line_search, mert, objective, random_search

W = np.array([1.0, 0.0])
D = np.array([0.0, 1.0])  # w(gamma) = (1, gamma)
# source A: scores 1, gamma, 0.6 + 0.6 gamma -> argmax c0 on (-inf, 2/3), c2 on (2/3, 3/2), c1 on (3/2, inf)
FA = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.6]])
# source B: scores gamma, 1 -> c1 on (-inf, 1), c0 on (1, inf)
FB = np.array([[0.0, 1.0], [1.0, 0.0]])


def test_envelope_of_hand_made_lines():
    pts, own = envelope(FA @ W, FA @ D)
    assert np.allclose(pts, [2 / 3, 1.5]) and own.tolist() == [0, 2, 1]
    pts, own = envelope(FB @ W, FB @ D)
    assert np.allclose(pts, [1.0]) and own.tolist() == [1, 0]


def test_line_search_picks_the_best_interval_exactly():
    # gains favour c1 (only beyond 3/2): an unbounded interval, one unit past its end
    r = line_search([FA], [np.array([0.0, 1.0, 0.5])], W, D)
    assert r.value == 1.0 and r.gamma == pytest.approx(2.5) and r.intervals == 3
    # gains favour c2: the middle interval's midpoint
    r = line_search([FA], [np.array([0.0, 0.2, 1.0])], W, D)
    assert r.value == 1.0 and r.gamma == pytest.approx((2 / 3 + 1.5) / 2)


def test_line_search_merges_sources():
    # intervals: (-inf, 2/3): (0 + 1)/2 ... A: c0=0, c2=1, c1=0.2; B: c1=1 before 1, c0=0 after... see below
    ga, gb = np.array([0.0, 0.2, 1.0]), np.array([0.0, 1.0])
    # (-inf,2/3): A 0, B 1 -> .5 ; (2/3,1): A 1, B 1 -> 1 ; (1,3/2): A 1, B 0 -> .5 ; (3/2,inf): A .2, B 0 -> .1
    r = line_search([FA, FB], [ga, gb], W, D)
    assert r.value == pytest.approx(1.0) and r.gamma == pytest.approx((2 / 3 + 1) / 2) and r.intervals == 4
    for gamma, expected in ((-5.0, 0.5), (0.8, 1.0), (1.2, 0.5), (9.0, 0.1)):
        assert objective([FA, FB], [ga, gb], W + gamma * D) == pytest.approx(expected)


def test_line_search_stays_put_when_nothing_gains():
    r = line_search([FA], [np.array([0.5, 0.5, 0.5])], W, D)
    assert r.gamma == 0.0 and r.value == 0.5
    # the current interval is among the best: no move (ties go to gamma = 0)
    r = line_search([FA], [np.array([1.0, 0.0, 1.0])], W, D)
    assert r.gamma == 0.0 and r.value == 1.0


def test_identical_candidates_follow_the_first_index_tie_rule():
    f = np.array([[1.0, 1.0], [1.0, 1.0]])
    r = line_search([f], [np.array([0.0, 1.0])], W, D)
    assert r.value == 0.0  # the argmax always takes the first of two identical candidates
    assert objective([f], [np.array([0.0, 1.0])], W + r.gamma * D) == 0.0


def test_line_search_is_exact_against_a_dense_grid():
    rng = np.random.default_rng(0)
    for _ in range(40):
        k = int(rng.integers(1, 4))
        feats = [np.round(rng.normal(size=(int(rng.integers(1, 6)), k)), 1) for _ in range(int(rng.integers(1, 5)))]
        gains = [np.round(rng.random(len(f)), 2) for f in feats]
        w, d = rng.normal(size=k), rng.normal(size=k)
        r = line_search(feats, gains, w, d)
        assert objective(feats, gains, w + r.gamma * d) == pytest.approx(r.value, abs=1e-12)
        grid = max(objective(feats, gains, w + g * d) for g in np.linspace(-20, 20, 801))
        assert r.value >= grid - 1e-12


def _instance(seed: int, sources: int = 12, n: int = 8, k: int = 3):
    rng = np.random.default_rng(seed)
    feats = [rng.normal(size=(n, k)) for _ in range(sources)]
    true_w = np.array([1.0, -0.5, 0.3])[:k]
    gains = [f @ true_w + 0.3 * rng.normal(size=n) for f in feats]
    return feats, gains


def test_mert_is_seeded_and_beats_its_start_and_random_search():
    feats, gains = _instance(1)
    a = mert(feats, gains, restarts=3, seed=7)
    b = mert(feats, gains, restarts=3, seed=7)
    assert a.weights == b.weights and a.value == b.value and a.evaluations == b.evaluations
    assert a.value >= a.start_value
    assert abs(sum(abs(x) for x in a.weights) - 1) < 1e-9  # unit L1 norm
    assert objective(feats, gains, np.array(a.weights)) == pytest.approx(a.value)
    rs = random_search(feats, gains, budget=a.line_searches, seed=7)
    assert a.value >= rs.value
    print(f"MERT {a.value:.4f} ({a.line_searches} line searches, {a.evaluations} evaluations); "
          f"random search {rs.value:.4f} at {rs.evaluations} points")


def test_mert_reaches_the_best_direction_in_two_dimensions():
    # with K = 2 the argmax only depends on the direction of w: a fine sweep over angles is the truth
    feats, gains = _instance(3, k=2)
    best = max(objective(feats, gains, np.array([np.cos(t), np.sin(t)])) for t in np.linspace(0, 2 * np.pi, 7201))
    res = mert(feats, gains, restarts=4, seed=0)
    assert res.value >= best - 1e-12


def test_errors():
    with pytest.raises(ValueError):
        mert([], [])
    with pytest.raises(ValueError):
        mert([FA], [np.zeros(3)], restarts=0)
