"""Reports of a meta-evaluation: the papers' tables (Markdown, rich) and figures (matplotlib)."""

from __future__ import annotations

from csem.report.plots import plot_correlations, plot_scatter
from csem.report.tables import to_markdown, to_rich

__all__ = ["plot_correlations", "plot_scatter", "to_markdown", "to_rich"]
