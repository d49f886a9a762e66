"""Tables as people read them: Markdown for READMEs and reports, rich tables for the terminal.

[`markdown_table`][csem.report.tables.markdown_table] renders any rows (the run report's agreement table, benchmark tables);
[`to_markdown`][csem.report.tables.to_markdown] and [`to_rich`][csem.report.tables.to_rich] render a correlation table of [`csem.meta.correlation_table`][];
[`fmt`][csem.report.tables.fmt] formats one cell for all of them.

The layout is the one of G-Eval (Liu et al. 2023, Table 1) and the CSEM paper (Table V):
rows = metrics, columns = aspects x correlation methods, plus an average column.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

METHOD_SYMBOL = {"spearman": "ρ", "kendall": "τ-b", "kendall_b": "τ-b", "kendall_c": "τ-c", "pearson": "r"}


def fmt(v: Any, digits: int = 3, missing: str = "–") -> str:
    """A table cell: floats with ``digits`` decimals, ``missing`` for None/NaN, ints and text as they are."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return missing
    if isinstance(v, bool) or not isinstance(v, (float, np.floating)):
        return str(v)
    return f"{v:.{digits}f}"


def markdown_table(rows: Sequence[Mapping[str, Any]] | Sequence[Sequence[Any]], columns: Sequence[str], *,
                   headers: Sequence[str] | None = None, digits: int = 3, missing: str = "–",
                   align: str | Sequence[str] | None = None) -> str:
    """A Markdown table: one header row, one line per row; the one renderer of csem's Markdown tables.

    Args:
        rows: dicts (cells looked up by ``columns``; an absent key is ``missing``) or sequences
            (cells in ``columns`` order).
        columns: keys of the cells; headers: header texts (default ``columns``).
        digits, missing: see [`fmt`][csem.report.tables.fmt]; a cell that is already a string is written as is.
        align: per column ``"l"`` or ``"r"`` (one string for all, e.g. ``"lrr"``, or a list);
            default: ``---`` everywhere.

    Returns:
        The table as one string (no trailing newline).
    """
    heads = list(headers or columns)
    if align is None:
        marks = ["---"] * len(heads)
    else:
        marks = ["---:" if a == "r" else "---" for a in (list(align) + ["l"] * len(heads))[:len(heads)]]
    lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join(marks) + " |"]
    for r in rows:
        cells = [r.get(c) for c in columns] if isinstance(r, Mapping) else list(r)
        lines.append("| " + " | ".join(c if isinstance(c, str) else fmt(c, digits, missing) for c in cells) + " |")
    return "\n".join(lines)


def _header(col: tuple) -> str:
    aspect, method = col
    return f"{aspect} {METHOD_SYMBOL.get(method, method)}"


def to_markdown(pivot: pd.DataFrame, *, digits: int = 3, low: pd.DataFrame | None = None,
                high: pd.DataFrame | None = None) -> str:
    """Markdown table of a [`csem.meta.correlation_table`][] result.

    Args:
        pivot: rows = metrics, MultiIndex columns (aspect, method).
        digits: decimals shown.
        low, high: pivots of ``ci_low``/``ci_high`` (same shape); when given every cell reads
            ``value [low, high]``.

    Returns:
        The table as a string (one header row, one row per metric).
    """
    cols = list(pivot.columns)
    rows = []
    for name, row in pivot.iterrows():
        cells = [str(name)]
        for c in cols:
            cell = fmt(row[c], digits)
            if low is not None and high is not None and c in low.columns and name in low.index:
                lo, hi = low.loc[name, c], high.loc[name, c]
                if not (isinstance(lo, float) and math.isnan(lo)):
                    cell += f" [{fmt(lo, 2)}, {fmt(hi, 2)}]"
            cells.append(cell)
        rows.append(cells)
    return markdown_table(rows, ["metric", *map(str, cols)], headers=["metric", *(_header(c) for c in cols)],
                          align="l" + "r" * len(cols))


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
            s = fmt(row[c], digits)
            if len(pivot) > 1 and not pd.isna(row[c]) and row[c] == best[c]:
                s = f"[bold]{s}[/bold]"
            cells.append(s)
        table.add_row(str(name), *cells)
    return table
