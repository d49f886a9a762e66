"""evaluate() long table, correlation_table() and the report tables on real SummEval records."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from csem.data.datasets import load_summeval_llm_ratings
from csem.meta import correlate, correlation_table, evaluate
from csem.meta.evaluate import COLUMNS, metric_label
from csem.report import to_markdown

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
HUMANS = [f"human.{a}" for a in ASPECTS]


@pytest.fixture(scope="module")
def gpt4(shared_data):
    recs = load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023")
    for r in recs:  # a reference-free, cheap real metric: summary length in words
        r["metric.length"] = float(len(r["candidate"].split()))
    return recs


def test_long_table_values_and_counts(gpt4):
    judges = [f"judge.{a}" for a in ASPECTS]
    df = evaluate(gpt4, [*judges, "metric.length"], HUMANS, bootstrap=100, seed=0)
    assert list(df.columns) == list(COLUMNS)
    # judge.<aspect> only against its own aspect; metric.length against all four
    assert len(df) == (4 + 4) * 3 * 3
    row = df[(df.column == "judge.consistency") & (df.level == "summary") & (df.method == "spearman")].iloc[0]
    assert row.metric == "judge" and row.aspect == "consistency"
    assert round(row.value, 3) == 0.603  # the shared folder README's number
    assert (row.n_groups, row.n_skipped, row.n_missing, row.n_pairs) == (78, 22, 2, 1198)
    assert row.ci_low < row.value < row.ci_high
    ref = correlate([r["metric.length"] for r in gpt4], [r["human.relevance"] for r in gpt4], level="system",
                    method="kendall", systems=[r["system_id"] for r in gpt4])
    got = df[(df.metric == "length") & (df.aspect == "relevance") & (df.level == "system") & (df.method == "kendall")]
    assert got.value.iloc[0] == pytest.approx(ref.value) and got.n_groups.iloc[0] == 12


def test_bootstrap_seeded_and_optional(gpt4):
    a = evaluate(gpt4, ["judge.coherence"], HUMANS, levels=["summary", "system"], bootstrap=50, seed=3)
    b = evaluate(gpt4, ["judge.coherence"], HUMANS, levels=["summary", "system"], bootstrap=50, seed=3)
    pd.testing.assert_frame_equal(a, b)
    none = evaluate(gpt4, ["judge.coherence"], HUMANS, levels=["dataset"], bootstrap=0)
    assert none.ci_low.isna().all() and none.value.notna().all()


def test_correlation_table_layout_and_average(gpt4):
    df = evaluate(gpt4, [f"judge.{a}" for a in ASPECTS] + ["metric.length"], HUMANS, levels=["summary"],
                  bootstrap=0)
    p = correlation_table(df, "summary")
    assert list(p.index) == ["judge", "length"]
    assert list(p.columns[:3]) == [("coherence", "spearman"), ("coherence", "kendall"), ("coherence", "pearson")]
    assert p.columns[-1] == ("average", "pearson")
    expected = sum(p.loc["judge", (a, "spearman")] for a in ASPECTS) / 4
    assert p.loc["judge", ("average", "spearman")] == pytest.approx(expected)
    assert round(expected, 3) == 0.506  # README: GPT-4 RTS avg rho .506
    md = to_markdown(p)
    assert md.splitlines()[0].startswith("| metric | coherence ρ | coherence τ-b | coherence r")
    assert "| judge | 0.451 | 0.393 |" in md
    with pytest.raises(ValueError, match="no rows for level 'system'"):
        correlation_table(df, "system")


def test_missing_scores_counted_not_zeroed(gpt4):
    recs = [dict(r) for r in gpt4]
    for r in recs[:100]:
        r["metric.length"] = None
    df = evaluate(recs, ["metric.length"], ["human.fluency"], levels=["dataset"], methods=["pearson"], bootstrap=0)
    assert df.n_missing.iloc[0] == 100 and df.n_pairs.iloc[0] == len(recs) - 100
    zero = [dict(r, **{"metric.length": r["metric.length"] or 0.0}) for r in recs]
    dz = evaluate(zero, ["metric.length"], ["human.fluency"], levels=["dataset"], methods=["pearson"], bootstrap=0)
    assert not math.isclose(df.value.iloc[0], dz.value.iloc[0])


def test_errors_name_the_problem(gpt4):
    with pytest.raises(KeyError, match="metric.nope"):
        evaluate(gpt4, ["metric.nope"], HUMANS)
    with pytest.raises(ValueError, match="unknown level"):
        evaluate(gpt4, ["judge.coherence"], HUMANS, levels=["corpus"])
    no_sys = [{k: v for k, v in r.items() if k != "system_id"} for r in gpt4[:20]]
    with pytest.raises(ValueError, match="system_id"):
        evaluate(no_sys, ["judge.coherence"], HUMANS, levels=["system"])


def test_metric_label():
    assert metric_label("judge.coherence", ASPECTS) == "judge"
    assert metric_label("judge.coherence@gpt4", ASPECTS) == "judge@gpt4"
    assert metric_label("metric.rouge1", ASPECTS) == "rouge1"
    assert metric_label("metric.csem.relevance", ASPECTS) == "csem"
