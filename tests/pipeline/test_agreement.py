"""csem.pipeline.agreement's 95% interval over resampled sources (pure logic on records written here)."""

import random

import pytest

from csem.pipeline.agreement import agreement_table


def _records(n_docs=6, per_doc=5, noise=1.0, seed=0):
    rng = random.Random(seed)
    out = []
    for d in range(n_docs):
        for c in range(per_doc):
            judge = rng.uniform(1, 5)
            out.append({"doc_id": f"d{d}", "judge.coherence": judge,
                        "metric.s.coherence": judge + rng.gauss(0, noise)})
    return out


def test_without_bootstrap_rows_carry_no_interval():
    rows = agreement_table(_records(), ["judge.coherence"])
    assert rows and all("spearman_ci" not in r for r in rows)


def test_interval_brackets_the_figure_and_narrows_with_more_sources():
    few = agreement_table(_records(n_docs=6), ["judge.coherence"], bootstrap=500)
    many = agreement_table(_records(n_docs=60), ["judge.coherence"], bootstrap=500)
    for rows in (few, many):
        for r in rows:
            low, high = r["spearman_ci"]
            assert -1 <= low <= r["spearman"] <= high <= 1
    width = lambda rows: next(r["spearman_ci"][1] - r["spearman_ci"][0] for r in rows if r["level"] == "summary")  # noqa: E731
    assert width(many) < width(few) / 1.5  # ~ 1/sqrt(sources)
    assert agreement_table(_records(n_docs=6), ["judge.coherence"], bootstrap=500) == few  # seeded


def test_a_perfect_student_has_a_point_interval():
    recs = _records(noise=0.0)
    rows = agreement_table(recs, ["judge.coherence"], bootstrap=200)
    assert all(r["spearman_ci"] == [pytest.approx(1.0), pytest.approx(1.0)] for r in rows)
