"""Meta-evaluation of score columns against human columns: the long table and the papers' pivot.

[`evaluate`][csem.api.evaluate] correlates every metric column (``metric.<name>``, ``judge.<aspect>``) with
every human column (``human.<aspect>``) at the requested levels and methods, with bootstrap CIs
over documents; [`correlation_table`][csem.meta.evaluate.correlation_table] turns the long table into the table G-Eval (Table 1) and
the CSEM paper (Table V) print: rows = metrics, columns = aspect x method, plus an average.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from csem.data.columns import aspect_of as _aspect
from csem.data.columns import parse_column, score_columns
from csem.errors import InputError, MissingInputError
from csem.meta.bootstrap import ci_from_table, resample_counts
from csem.meta.correlation import LEVELS, METHODS, ScoreTable, correlations, level_name

COLUMNS = ("metric", "column", "aspect", "level", "method", "value", "ci_low", "ci_high",
           "n_groups", "n_skipped", "n_pairs", "n_missing")


def aspect_of(column: str) -> str:
    """``human.coherence`` -> ``coherence`` (the grammar of [`csem.data.columns`][]; a name outside
    it is its own aspect)."""
    return _aspect(column) or column


def metric_label(column: str, aspects: Sequence[str]) -> str:
    """Row label of a score column: an aspect-specific column loses its aspect
    (``judge.coherence`` -> ``judge``; ``judge.coherence@gpt4`` -> ``judge@gpt4``); others keep
    their name without the ``metric.`` prefix (``metric.rouge1`` -> ``rouge1``)."""
    c = parse_column(column)
    if c is None:
        return column
    if c.kind == "metric":
        base = c.name if c.aspect in aspects or c.aspect is None else f"{c.name}.{c.aspect}"
    else:
        base = c.kind if c.aspect in aspects else f"{c.kind}.{c.aspect}"
    return f"{base}@{c.tag}" if c.tag else base


def _targets(column: str, humans: Sequence[str], match_aspects: bool, known_aspects: set[str]) -> list[str]:
    """Human columns to correlate ``column`` with: its own aspect only when it is aspect-specific
    (its aspect is that of any human column of the data; none if that aspect is not selected),
    else every selected human column."""
    a = _aspect(column)
    if match_aspects and a is not None and a in known_aspects | {aspect_of(h) for h in humans}:
        return [h for h in humans if aspect_of(h) == a]
    return list(humans)


def evaluate(
    records: Sequence[Mapping],
    metrics: Sequence[str],
    humans: Sequence[str],
    *,
    levels: Sequence[str] = LEVELS,
    methods: Sequence[str] = METHODS,
    bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    match_aspects: bool = True,
) -> pd.DataFrame:
    """Correlate score columns with human columns at several levels and methods.

    Args:
        records: csem records; ``doc_id`` groups items for the summary level and is the
            bootstrap unit (each record its own document if absent), ``system_id`` is needed
            for the system level.
        metrics: score columns, e.g. ``metric.rouge1``, ``judge.coherence``.
        humans: human columns, e.g. ``human.coherence``.
        levels: subset of ``summary`` (per document, then averaged; CSEM: sample level),
            ``system`` (per-system means), ``dataset`` (pooled).
        methods: subset of ``spearman``, ``kendall`` (Kendall tau-b, as scipy and G-Eval
            report), ``kendall_c``, ``pearson``.
        bootstrap: resamples of documents for the CI (0: no CI). The same resamples are used
            for every metric, so CIs of different metrics are paired.
        seed: RNG seed (same seed, same CIs). confidence: CI level in (0, 1).
        match_aspects: a column ending in ``.<aspect>`` of a human column of the data
            (``judge.coherence``) is correlated only with that aspect (and skipped when that
            aspect is not in ``humans``); others with every human column.

    Returns:
        Long DataFrame, one row per (metric column, human aspect, level, method), columns
        `COLUMNS`: ``metric`` (row label, see `metric_label`), ``column``,
        ``aspect``, ``level``, ``method``, ``value`` (correlation in [-1, 1], NaN if undefined),
        ``ci_low``/``ci_high`` (percentile bootstrap over documents; NaN without bootstrap),
        ``n_groups`` (documents averaged / systems / 1), ``n_skipped`` (documents skipped for a
        constant side or < 2 pairs), ``n_pairs`` (complete pairs), ``n_missing`` (pairs dropped
        for a missing score; never zero-filled).

    Raises:
        KeyError: a column is absent from every record (message lists the score columns present).
        ValueError: unknown level or method; ``system`` level without ``system_id``.
    """
    present = sorted(score_columns(records))
    for col in [*metrics, *humans]:
        if not any(col in r for r in records):
            raise MissingInputError(f"column '{col}' is in none of the {len(records)} records; score columns present: {present}")
    levels = [level_name(lv) for lv in levels]
    groups = [r["doc_id"] if r.get("doc_id") is not None else r.get("id", i) for i, r in enumerate(records)]
    systems = [r.get("system_id") for r in records]
    if "system" in levels and any(s is None for s in systems):
        raise InputError("system-level correlation needs 'system_id' in every record")
    aspects = [aspect_of(h) for h in humans]
    table0 = ScoreTable.build([0.0] * len(records), [0.0] * len(records), groups, systems)
    counts = resample_counts(table0.n_docs, bootstrap, seed) if bootstrap else None

    def column(name: str) -> list[float | None]:
        return [r.get(name) for r in records]

    known = {aspect_of(k) for k in score_columns(records, ("human",))}
    rows = []
    for mcol in metrics:
        mvals = column(mcol)
        for hcol in _targets(mcol, humans, match_aspects, known):
            hvals = column(hcol)
            table = ScoreTable.build(mvals, hvals, groups, systems)
            values = correlations(mvals, hvals, levels=levels, methods=methods, groups=groups, systems=systems)
            for lv in levels:
                for meth in methods:
                    c = values[(lv, meth)]
                    lo = hi = math.nan
                    if counts is not None:
                        ci = ci_from_table(table, lv, meth, n=bootstrap, seed=seed, confidence=confidence,
                                           counts=counts)
                        lo, hi = ci.low, ci.high
                    rows.append({"metric": metric_label(mcol, aspects), "column": mcol, "aspect": aspect_of(hcol),
                                 "level": lv, "method": meth, "value": c.value, "ci_low": lo, "ci_high": hi,
                                 "n_groups": c.n_groups, "n_skipped": c.n_skipped, "n_pairs": c.n_pairs,
                                 "n_missing": c.n_missing})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def correlation_table(df: pd.DataFrame, level: str = "summary", *, methods: Sequence[str] | None = None,
                value: str = "value", average: bool = True) -> pd.DataFrame:
    """The papers' table for one level: rows = metrics (in first-seen order), columns =
    (aspect, method) plus ("average", method) = mean over the aspects (NaN-skipping).

    Args:
        df: output of [`evaluate`][csem.api.evaluate]. level: which level to show.
        methods: column order of methods (default: those in ``df``, in the order of [`METHODS`][csem.meta.METHODS]).
        value: ``value``, ``ci_low`` or ``ci_high``. average: add the average column.

    Raises:
        ValueError: ``df`` has no row for ``level``.
    """
    sub = df[df["level"] == level]
    if sub.empty:
        raise InputError(f"no rows for level '{level}'; levels present: {sorted(df['level'].unique())}")
    if methods is None:
        found = list(dict.fromkeys(sub["method"]))
        methods = [m for m in METHODS if m in found] + [m for m in found if m not in METHODS]
    aspects = list(dict.fromkeys(sub["aspect"]))
    rows = list(dict.fromkeys(sub["metric"]))
    wide = sub.pivot_table(index="metric", columns=["aspect", "method"], values=value, aggfunc="first", dropna=False)
    cols = [(a, m) for a in aspects for m in methods if (a, m) in wide.columns]
    wide = wide.reindex(index=rows, columns=pd.MultiIndex.from_tuples(cols, names=["aspect", "method"]))
    if average and len(aspects) > 1:
        for m in methods:
            mc = [(a, m) for a in aspects if (a, m) in wide.columns]
            wide[("average", m)] = wide[mc].mean(axis=1, skipna=True) if mc else np.nan
    wide.index.name = "metric"
    return wide
