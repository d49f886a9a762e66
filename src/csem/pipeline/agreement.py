"""How well the student agrees with its teacher judge (and both with humans) on held-out sources.

For every aspect: the student's score column ``metric.<name>.<aspect>`` against the judge's
``judge.<aspect>`` and, where present, against ``human.<aspect>``; the judge against the humans
too. Spearman, Kendall tau-b and Pearson at summary level (per source, averaged) and dataset level
(pooled), from the one evaluator, :func:`csem.meta.correlation.correlations`.
"""

from __future__ import annotations

import math

from csem.data.columns import format_column, parse_column, score_columns
from csem.meta.correlation import METHODS, correlations


def aspect_of(col: str) -> str:
    """``judge.coherence`` -> ``coherence`` (a name outside the column grammar is its own aspect)."""
    c = parse_column(col)
    return c.aspect if c is not None and c.aspect else col


def student_col(records: list[dict], aspect: str) -> str:
    """The student's score column for an aspect (``metric.<name>.<aspect>``, untagged)."""
    for k in score_columns(records, ("metric",)):
        c = parse_column(k)
        if c.aspect == aspect and c.tag is None:
            return k
    raise KeyError(f"no student score column metric.<name>.{aspect} in the scored records")


def agreement_table(records: list[dict], label_cols: list[str], *, human_cols: list[str] = (),
                    levels: tuple[str, ...] = ("summary", "dataset")) -> list[dict]:
    """Rows ``{aspect, scorer, target, level, spearman, kendall, pearson, n_groups, n_skipped,
    n_pairs, n_missing}`` for the student vs judge, student vs human and judge vs human.

    Raises:
        KeyError: a label column has no matching student column.
    """
    rows = []
    groups = [r.get("doc_id") for r in records]
    for label in label_cols:
        aspect = aspect_of(label)
        pairs = [("student", student_col(records, aspect), "judge", label)]
        human = format_column("human", aspect)
        if human in human_cols or any(r.get(human) is not None for r in records):
            pairs += [("student", student_col(records, aspect), "human", human), ("judge", label, "human", human)]
        for scorer, xcol, target, ycol in pairs:
            x = [r.get(xcol) for r in records]
            y = [r.get(ycol) for r in records]
            values = correlations(x, y, levels=levels, methods=METHODS, groups=groups)
            for level in levels:
                row = {"aspect": aspect, "scorer": scorer, "target": target, "level": level}
                for method in METHODS:
                    res = values[(level, method)]
                    row[method] = None if math.isnan(res.value) else round(res.value, 4)
                    row.update(n_groups=res.n_groups, n_skipped=res.n_skipped, n_pairs=res.n_pairs,
                               n_missing=res.n_missing)
                rows.append(row)
    return rows
