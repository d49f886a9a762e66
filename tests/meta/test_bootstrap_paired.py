"""Bootstrap CIs over documents and the paired A-vs-B tests."""

from __future__ import annotations

import numpy as np
import pytest

from csem.meta import bootstrap_ci, correlate, paired_test
from csem.meta.bootstrap import resample_counts


def _data(seed=0, n_docs=40, n_sys=8, noise=1.0):
    rng = np.random.default_rng(seed)
    docs = np.repeat(np.arange(n_docs), n_sys)
    systems = np.tile(np.arange(n_sys), n_docs)
    quality = rng.normal(0, 1, n_sys)[systems] + rng.normal(0, 1, len(docs))
    human = np.round(np.clip(3 + quality, 1, 5) * 3) / 3  # 1-5, thirds, like SummEval means
    metric = quality + rng.normal(0, noise, len(docs))
    return metric, human, docs, systems


def test_resample_counts_seeded():
    a, b = resample_counts(10, 50, 3), resample_counts(10, 50, 3)
    assert np.array_equal(a, b) and a.shape == (50, 10) and (a.sum(axis=1) == 10).all()
    assert not np.array_equal(a, resample_counts(10, 50, 4))


@pytest.mark.parametrize("level", ["summary", "system", "dataset"])
def test_bootstrap_ci_reproducible_and_contains_estimate(level):
    m, h, d, s = _data()
    kw = dict(level=level, method="kendall", groups=d, systems=s, n=300)
    ci1 = bootstrap_ci(m, h, seed=7, **kw)
    ci2 = bootstrap_ci(m, h, seed=7, **kw)
    assert ci1 == ci2
    point = correlate(m, h, level=level, method="kendall", groups=d, systems=s).value
    assert ci1.low < point < ci1.high
    assert ci1.n_valid == 300
    assert bootstrap_ci(m, h, seed=8, **kw) != ci1


def test_bootstrap_ci_narrows_with_more_documents():
    m, h, d, s = _data(n_docs=10)
    small = bootstrap_ci(m, h, level="summary", method="spearman", groups=d, n=400)
    m, h, d, s = _data(n_docs=160)
    big = bootstrap_ci(m, h, level="summary", method="spearman", groups=d, n=400)
    assert (big.high - big.low) < (small.high - small.low)


def test_bootstrap_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1, 2, 3], [1, 2, 3], level="dataset", confidence=1.5)


def _records(noise_b):
    m, h, d, s = _data(seed=3, noise=0.5)
    rng = np.random.default_rng(11)
    b = m + rng.normal(0, noise_b, len(m))
    return [{"id": str(i), "doc_id": str(d[i]), "system_id": str(s[i]), "metric.a": float(m[i]),
             "metric.b": float(b[i]), "human.q": float(h[i])} for i in range(len(m))]


@pytest.mark.parametrize("test", ["bootstrap", "permutation"])
@pytest.mark.parametrize("level", ["summary", "dataset"])
def test_paired_metric_beats_noisy_copy(test, level):
    recs = _records(noise_b=2.0)
    r = paired_test(recs, "metric.a", "metric.b", "human.q", level=level, method="kendall", test=test, n=300)
    assert r.delta > 0 and r.p_value < 0.05
    back = paired_test(recs, "metric.b", "metric.a", "human.q", level=level, method="kendall", test=test, n=300)
    assert back.delta == pytest.approx(-r.delta) and back.p_value > 0.5


def test_paired_identical_metrics_not_significant():
    recs = _records(noise_b=0.0)  # b == a
    r = paired_test(recs, "metric.a", "metric.b", "human.q", n=200)
    assert r.delta == 0 and r.p_value == 1.0
    p = paired_test(recs, "metric.a", "metric.b", "human.q", n=200, test="permutation")
    assert p.p_value == 1.0


def test_paired_system_level_and_seed():
    recs = _records(noise_b=2.0)
    r1 = paired_test(recs, "metric.a", "metric.b", "human.q", level="system", method="pearson", n=200, seed=1)
    r2 = paired_test(recs, "metric.a", "metric.b", "human.q", level="system", method="pearson", n=200, seed=1)
    assert r1 == r2 and r1.ci_low <= r1.delta <= r1.ci_high


def test_paired_uses_common_items_only_and_errors():
    recs = _records(noise_b=1.0)
    recs[0]["metric.b"] = None
    r = paired_test(recs, "metric.a", "metric.b", "human.q", n=50)
    assert r.n_common == len(recs) - 1
    with pytest.raises(KeyError, match="metric.zz"):
        paired_test(recs, "metric.a", "metric.zz", "human.q")
    with pytest.raises(ValueError, match="unknown test"):
        paired_test(recs, "metric.a", "metric.b", "human.q", test="t-test")


def test_compare_rows_of_an_evaluate_table():
    from csem.meta import compare, evaluate

    recs = _records(noise_b=2.0)
    df = evaluate(recs, ["metric.a", "metric.b"], ["human.q"], levels=["summary", "system"], bootstrap=0)
    out = compare(recs, df, "a", "b", method="kendall", n=200, seed=0)
    assert list(out.level) == ["summary", "system"] and (out.aspect == "q").all()
    direct = paired_test(recs, "metric.a", "metric.b", "human.q", level="summary", method="kendall", n=200, seed=0)
    assert out.p_value.iloc[0] == direct.p_value and out.delta.iloc[0] == pytest.approx(direct.delta)
    with pytest.raises(ValueError, match="'c' is not a metric"):
        compare(recs, df, "a", "c")
