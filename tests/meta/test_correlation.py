"""Correlations at summary/system/dataset level: hand-computed cases and agreement with scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from csem.meta import correlate
from csem.meta.correlation import (
    LEVELS,
    METHODS,
    ScoreTable,
    column_correlations,
    correlations,
    kendall_b,
    kendall_c,
    level_value,
    pearson,
    spearman,
)


def test_hand_computed_spearman_kendall():
    x, y = [1, 2, 3, 4], [1, 3, 2, 4]
    # rho = 1 - 6 * sum d^2 / (n (n^2 - 1)) = 1 - 6 * 2 / 60
    assert spearman(x, y) == pytest.approx(0.8)
    # 5 concordant, 1 discordant of 6 pairs
    assert kendall_b(x, y) == pytest.approx(4 / 6)


def test_hand_computed_tau_b_and_tau_c_with_ties():
    x, y = [1, 1, 2, 3], [1, 2, 2, 3]
    # P = 4, Q = 0; one pair tied only in x, one tied only in y: tau-b = 4 / sqrt(5 * 5)
    assert kendall_b(x, y) == pytest.approx(0.8)
    # Stuart's tau-c = 2 (P - Q) / (n^2 (m - 1) / m), m = 3 distinct values: 8 / (16 * 2 / 3)
    assert kendall_c(x, y) == pytest.approx(0.75)


def test_hand_computed_pearson():
    # cov = 3, var_x = 2, var_y = 42 / 9  (sums of squares)
    assert pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(2 * 42 / 9))


def test_agrees_with_scipy_on_random_data():
    rng = np.random.default_rng(1)
    x = rng.integers(1, 6, 200).astype(float)  # many ties, like 1-5 ratings
    y = x + rng.normal(0, 1.5, 200)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert kendall_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)  # scipy default = tau-b
    assert kendall_c(x, y) == pytest.approx(stats.kendalltau(x, y, variant="c").statistic)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic)
    assert kendall_b(x, y) != pytest.approx(kendall_c(x, y))


def test_summary_level_hand_case_constant_group_skipped():
    metric = [1, 2, 3, 1, 2, 3, 1, 2, 3]
    human = [1, 2, 3, 3, 2, 1, 4, 4, 4]  # doc a: +1, doc b: -1, doc c: human constant -> skipped
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    c = correlate(metric, human, level="summary", method="spearman", groups=groups)
    assert c.value == pytest.approx(0.0)
    assert (c.n_groups, c.n_skipped, c.n_pairs, c.n_missing) == (2, 1, 9, 0)


def test_summary_level_missing_excluded_and_counted():
    metric = [1, 2, 3, None, 1, 2, 4, 3]
    human = [1, 2, 3, 5, 1, 3, 2, None]
    groups = ["a"] * 4 + ["b"] * 4
    c = correlate(metric, human, level="summary", method="spearman", groups=groups)
    # doc a: (1,1) (2,2) (3,3) -> 1; doc b: (1,1) (2,3) (4,2) -> ranks [1,2,3] vs [1,3,2] -> 0.5
    assert c.value == pytest.approx(0.75)
    assert c.n_missing == 2 and c.n_pairs == 6
    # a missing score is not a zero: zero-filling would change the result
    zero = correlate([0 if v is None else v for v in metric], [0 if v is None else v for v in human],
                     level="summary", method="spearman", groups=groups)
    assert zero.value != pytest.approx(c.value)


def test_system_level_is_correlation_of_means():
    metric = [1, 2, 3, 4, 5, 6]
    human = [2, 2, 1, 1, 9, 9]
    systems = ["s1", "s1", "s2", "s2", "s3", "s3"]
    c = correlate(metric, human, level="system", method="pearson", systems=systems)
    assert c.value == pytest.approx(stats.pearsonr([1.5, 3.5, 5.5], [2, 1, 9]).statistic)
    assert c.n_groups == 3


def _random_table(seed=0, n_docs=12, n_sys=5):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_docs), n_sys)
    systems = np.tile(np.arange(n_sys), n_docs)
    h = rng.integers(1, 6, n_docs * n_sys).astype(float)
    m = h + rng.normal(0, 2, len(h))
    h[groups == 3] = 2.0  # a constant document
    m = m.astype(object)
    m[[5, 17, 40]] = None  # missing scores
    return list(m), list(h), list(groups), list(systems)


@pytest.mark.parametrize("level", ["summary", "system", "dataset"])
@pytest.mark.parametrize("method", ["spearman", "kendall", "kendall_c", "pearson"])
def test_weighted_level_value_equals_correlate(level, method):
    m, h, g, s = _random_table()
    table = ScoreTable.build(m, h, g, s)
    ref = correlate(m, h, level=level, method=method, groups=g, systems=s).value
    assert level_value(table, level, method) == pytest.approx(ref)
    # counting every document twice changes nothing (the bootstrap relies on weights)
    assert level_value(table, level, method, weights=np.full(table.n_docs, 2.0)) == pytest.approx(ref)
    # dropping a document with weight 0 equals removing its items
    keep = [i for i, d in enumerate(g) if d != 0]
    w = np.ones(table.n_docs)
    w[table.doc_keys.index(0)] = 0
    sub = correlate([m[i] for i in keep], [h[i] for i in keep], level=level, method=method,
                    groups=[g[i] for i in keep], systems=[s[i] for i in keep]).value
    assert level_value(table, level, method, weights=w) == pytest.approx(sub)


def test_unknown_method_and_level():
    with pytest.raises(ValueError, match="unknown correlation"):
        correlate([1, 2], [1, 2], level="dataset", method="tau")
    with pytest.raises(ValueError, match="unknown level"):
        correlate([1, 2], [1, 2], level="corpus")
    with pytest.raises(ValueError, match="group id"):
        correlate([1, 2], [1, 2], level="summary")


@pytest.mark.parametrize("level", ["system", "dataset"])
@pytest.mark.parametrize("method", ["spearman", "kendall", "kendall_c", "pearson"])
def test_batch_level_values_equal_one_by_one(level, method):
    from csem.meta.bootstrap import resample_counts
    from csem.meta.scores import batch_level_values

    m, h, g, s = _random_table(seed=5, n_docs=15, n_sys=6)
    table = ScoreTable.build(m, h, g, s)
    counts = resample_counts(table.n_docs, 40, seed=2)
    counts[0] = 0
    counts[0, :2] = [3, 0]  # one document only: system means from one doc, or a constant side
    counts[1] = 0  # nothing drawn: undefined
    batch = batch_level_values(table, level, method, counts)
    loop = np.array([level_value(table, level, method, weights=c) for c in counts])
    np.testing.assert_allclose(batch, loop, rtol=1e-9, atol=1e-12, equal_nan=True)
    assert np.isnan(batch[1])


def test_level_aliases_and_any_correlation_function():
    m, h, g, s = _random_table(seed=3)
    ref = correlate(m, h, level="summary", method="spearman", groups=g)
    for alias in ("item", "sample"):
        c = correlate(m, h, level=alias, method="spearman", groups=g)
        assert c.level == "summary" and c.value == pytest.approx(ref.value)

    def top_agreement(x, y):  # any f(x, y) -> float over complete arrays goes through the same level logic
        return float(np.argmax(x) == np.argmax(y))

    c = correlate(m, h, level="summary", method=top_agreement, groups=g)
    assert c.method == "top_agreement" and 0.0 <= c.value <= 1.0
    per_doc = {}
    for mi, hi, gi in zip(m, h, g):
        if mi is not None:
            per_doc.setdefault(gi, []).append((mi, hi))
    hand = [float(np.argmax([p[0] for p in v]) == np.argmax([p[1] for p in v])) for v in per_doc.values()]
    assert c.value == pytest.approx(np.mean(hand))


def test_correlations_equal_correlate_one_by_one():
    m, h, g, s = _random_table(seed=4)
    many = correlations(m, h, levels=LEVELS, methods=(*METHODS, "kendall_c"), groups=g, systems=s)
    assert list(many) == [(lv, me) for lv in LEVELS for me in (*METHODS, "kendall_c")]
    for (lv, me), c in many.items():
        one = correlate(m, h, level=lv, method=me, groups=g, systems=s)
        assert c == one or (math.isnan(c.value) and math.isnan(one.value))


def test_column_correlations_of_records():
    m, h, g, s = _random_table(seed=6)
    recs = [{"doc_id": gi, "system_id": si, "metric.x": mi, "human.q": hi} for mi, hi, gi, si in zip(m, h, g, s)]
    recs[0].pop("metric.x")  # an absent column value counts as missing
    got = column_correlations(recs, "metric.x", "human.q", levels=("summary", "system"), methods=("kendall",))
    m[0] = None
    assert got[("summary", "kendall")] == correlate(m, h, level="summary", method="kendall", groups=g)
    assert got[("system", "kendall")] == correlate(m, h, level="system", method="kendall", systems=s)
