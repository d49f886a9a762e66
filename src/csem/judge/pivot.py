"""The G-Eval example's pivot table: mean judge score per aspect (rows) and candidate set (columns)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from csem.data.columns import parse_column, score_columns


def judge_columns(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Score columns ``judge.<aspect>`` present in ``records`` (not their .missing/.raw/.mass)."""
    return score_columns(records, ("judge",))


def _row_label(column: str) -> str:
    """``judge.coherence`` -> ``coherence``; ``judge.coherence@r/x`` -> ``coherence@r/x``."""
    c = parse_column(column)
    if c is None or c.aspect is None:
        return column
    return c.aspect + (f"@{c.tag}" if c.tag else "")


def pivot(records: Sequence[Mapping[str, Any]], *, columns: Sequence[str] | None = None,
          group_by: str = "system_id") -> dict[str, dict[str, dict[str, float | int | None]]]:
    """Mean score per (score column, group).

    Args:
        records: judged records. columns: score columns (default: every ``judge.*`` score column).
        group_by: record field naming the candidate set / system (missing value -> ``"all"``).

    Returns:
        ``{column: {group: {"mean": float | None, "n": scored items, "missing": items without score}}}``;
        missing scores are excluded from the mean, never counted as 0.
    """
    cols = list(columns) if columns is not None else judge_columns(records)
    groups = list(dict.fromkeys(str(r.get(group_by)) if r.get(group_by) is not None else "all" for r in records))
    out: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for c in cols:
        out[c] = {}
        for g in groups:
            vals = [r.get(c) for r in records if (str(r.get(group_by)) if r.get(group_by) is not None else "all") == g]
            got = [float(v) for v in vals if v is not None]
            out[c][g] = {"mean": sum(got) / len(got) if got else None, "n": len(got), "missing": len(vals) - len(got)}
    return out


def pivot_table(records: Sequence[Mapping[str, Any]], *, columns: Sequence[str] | None = None,
                group_by: str = "system_id", title: str | None = None):
    """The pivot as a `rich.table.Table` (rows: aspects, columns: groups, cells: mean score,
    ``(k missing)`` appended when some items have no score)."""
    from rich.table import Table

    data = pivot(records, columns=columns, group_by=group_by)
    groups = list(next(iter(data.values())).keys()) if data else []
    table = Table(title=title or f"mean judge score by {group_by}")
    table.add_column("aspect")
    for g in groups:
        table.add_column(g, justify="right")
    for col, cells in data.items():
        row = [_row_label(col)]
        for g in groups:
            cell = cells[g]
            text = "-" if cell["mean"] is None else f"{cell['mean']:.3f}"
            if cell["missing"]:
                text += f" ({cell['missing']} missing)"
            row.append(text)
        table.add_row(*row)
    return table
