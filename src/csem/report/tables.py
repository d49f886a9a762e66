"""Correlation tables as people read them: Markdown for READMEs, rich tables for the terminal.

The layout is the one of G-Eval (Liu et al. 2023, Table 1) and the CSEM paper (Table V):
rows = metrics, columns = aspects x correlation methods, plus an average column.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

METHOD_SYMBOL = {"spearman": "ρ", "kendall": "τ-b", "kendall_b": "τ-b", "kendall_c": "τ-c", "pearson": "r"}


def _fmt(v: Any, digits: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{digits}f}"


def _header(col: tuple) -> str:
    aspect, method = col
    return f"{aspect} {METHOD_SYMBOL.get(method, method)}"


def to_markdown(pivot: pd.DataFrame, *, digits: int = 3, low: pd.DataFrame | None = None,
                high: pd.DataFrame | None = None) -> str:
    """Markdown table of a :func:`csem.meta.pivot_table` result.

    Args:
        pivot: rows = metrics, MultiIndex columns (aspect, method).
        digits: decimals shown.
        low, high: pivots of ``ci_low``/``ci_high`` (same shape); when given every cell reads
            ``value [low, high]``.

    Returns:
        The table as a string (one header row, one row per metric).
    """
    cols = list(pivot.columns)
    lines = ["| metric | " + " | ".join(_header(c) for c in cols) + " |",
             "| --- | " + " | ".join("---:" for _ in cols) + " |"]
    for name, row in pivot.iterrows():
        cells = []
        for c in cols:
            cell = _fmt(row[c], digits)
            if low is not None and high is not None and c in low.columns and name in low.index:
                lo, hi = low.loc[name, c], high.loc[name, c]
                if not (isinstance(lo, float) and math.isnan(lo)):
                    cell += f" [{_fmt(lo, 2)}, {_fmt(hi, 2)}]"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_rich(pivot: pd.DataFrame, *, title: str = "", digits: int = 3):
    """A ``rich.table.Table`` of a pivot (aspect on the first header line, method on the second);
    the best value of every column is bold."""
    from rich.table import Table

    table = Table(title=title or None, show_lines=False)
    table.add_column("metric", style="bold")
    for aspect, method in pivot.columns:
        table.add_column(f"{aspect}\n{METHOD_SYMBOL.get(method, method)}", justify="right")
    best = {c: pivot[c].max(skipna=True) for c in pivot.columns}
    for name, row in pivot.iterrows():
        cells = []
        for c in pivot.columns:
            s = _fmt(row[c], digits)
            if len(pivot) > 1 and not pd.isna(row[c]) and row[c] == best[c]:
                s = f"[bold]{s}[/bold]"
            cells.append(s)
        table.add_row(str(name), *cells)
    return table
