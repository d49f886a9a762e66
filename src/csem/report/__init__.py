"""Reports: the papers' tables (Markdown, rich), any Markdown table, and figures (matplotlib)."""

from __future__ import annotations

from csem.report.plots import plot_correlations, plot_scaling_curve, plot_scatter, plot_training_curve
from csem.report.tables import fmt, markdown_table, to_markdown, to_rich

__all__ = ["fmt", "markdown_table", "plot_correlations", "plot_scaling_curve", "plot_scatter", "plot_training_curve", "to_markdown",
           "to_rich"]
