"""Report tables and figures from a real evaluate() result."""

from __future__ import annotations

import pandas as pd
import pytest

from csem.data.datasets import load_summeval_llm_ratings
from csem.meta import correlation_table, evaluate
from csem.report import plot_correlations, plot_scaling_curve, plot_scatter, to_markdown, to_rich


@pytest.fixture(scope="module")
def result(shared_data):
    recs = load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023")[:240]  # 20 documents
    humans = ["human.coherence", "human.relevance"]
    df = evaluate(recs, ["judge.coherence", "judge.relevance"], humans, levels=["summary"], bootstrap=100)
    return recs, df


def test_markdown_with_ci(result):
    _, df = result
    p = correlation_table(df, "summary")
    lo, hi = correlation_table(df, "summary", value="ci_low"), correlation_table(df, "summary", value="ci_high")
    md = to_markdown(p, low=lo, high=hi)
    row = md.splitlines()[2]
    v = p.loc["judge", ("coherence", "spearman")]
    assert row.startswith(f"| judge | {v:.3f} [{lo.loc['judge', ('coherence', 'spearman')]:.2f}, ")
    nan_pivot = p.copy()
    nan_pivot.iloc[0, 0] = float("nan")
    assert "| judge | – |" in to_markdown(nan_pivot)


def test_rich_table_has_every_column(result):
    from rich.console import Console

    _, df = result
    console = Console(width=200, record=True)
    console.print(to_rich(correlation_table(df, "summary"), title="t"))
    text = console.export_text()
    assert "coherence" in text and "relevance" in text and "average" in text and "τ-b" in text


def test_figures_written_and_errors(result, tmp_path):
    recs, df = result
    bar = plot_correlations(df, tmp_path / "bar.png", level="summary", method="kendall")
    sc = plot_scatter(recs, "judge.relevance", "human.relevance", tmp_path / "sc.png")
    for p in (bar, sc):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    with pytest.raises(ValueError, match="no correlations"):
        plot_correlations(df, tmp_path / "x.png", level="system")
    with pytest.raises(ValueError, match="fewer than 2"):
        plot_scatter(recs[:1], "judge.relevance", "human.relevance", tmp_path / "y.png")
    assert isinstance(df, pd.DataFrame)


def test_scaling_curve_figure(tmp_path):
    """The teacher-scale figure: points without a value are left out, the fit and baselines are drawn."""
    curve = [{"labels": 50, "spearman": 0.31, "sd": 0.03}, {"labels": 500, "spearman": 0.37, "sd": 0.02},
             {"labels": 1000, "spearman": None, "sd": None}]
    png = plot_scaling_curve({"default": curve}, tmp_path / "curve.png", baselines={"length": 0.37, "nan": float("nan")},
                             fit={"a": 0.2, "b": 0.03})
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
