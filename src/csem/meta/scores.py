"""Aligned score arrays and the level statistics with document weights, shared by bootstrap and tests.

A :class:`ScoreTable` holds, for N items, the metric and human scores (NaN = missing), the
integer document and system index of each item. :func:`level_value` computes the correlation
at one level when every document ``d`` is counted ``weights[d]`` times, which is what both the
bootstrap (weights = resample counts) and the point estimate (weights = 1) need.

Conventions are those of :mod:`csem.meta.correlation` (Louis & Nenkova 2013; G-Eval Sec. 3;
CSEM Sec. V-B): summary level = mean over documents of the within-document correlation
(documents where a side is constant or with < 2 complete pairs are skipped), system level =
correlation of per-system means over complete pairs, dataset level = all pairs pooled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np
from scipy import stats

from csem.meta.correlation import CORRELATIONS


def corr(a: np.ndarray, b: np.ndarray, method: str) -> float:
    """Correlation of two complete float arrays (no NaN); NaN if < 2 pairs or a side is constant.

    ``spearman`` (scipy.stats.spearmanr), ``kendall``/``kendall_b`` (tau-b, scipy's default),
    ``kendall_c`` (Stuart's tau-c), ``pearson`` (scipy.stats.pearsonr).

    Raises:
        ValueError: unknown method.
    """
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    if method == "spearman":
        return float(stats.spearmanr(a, b).statistic)
    if method in ("kendall", "kendall_b"):
        return float(stats.kendalltau(a, b, variant="b").statistic)
    if method == "kendall_c":
        return float(stats.kendalltau(a, b, variant="c").statistic)
    if method == "pearson":
        return float(stats.pearsonr(a, b).statistic)
    raise ValueError(f"unknown correlation '{method}'; choose from {sorted(CORRELATIONS)}")


def _codes(keys: Sequence[Hashable]) -> tuple[np.ndarray, list]:
    uniq: dict[Hashable, int] = {}
    codes = np.array([uniq.setdefault(k, len(uniq)) for k in keys], dtype=np.int64)
    return codes, list(uniq)


@dataclass
class ScoreTable:
    """N aligned items: ``metric``/``human`` (float arrays, NaN = missing), ``doc``/``system``
    (int codes 0..D-1 / 0..S-1), and the original keys ``doc_keys``/``system_keys``."""

    metric: np.ndarray
    human: np.ndarray
    doc: np.ndarray
    system: np.ndarray
    doc_keys: list
    system_keys: list

    @classmethod
    def build(cls, metric: Sequence[float | None], human: Sequence[float | None],
              groups: Sequence[Hashable] | None = None, systems: Sequence[Hashable] | None = None) -> "ScoreTable":
        """Align scores; a missing ``groups`` makes each item its own document, missing ``systems``
        one system per item.

        Raises:
            ValueError: lengths differ.
        """
        n = len(metric)
        if len(human) != n or (groups is not None and len(groups) != n) or (systems is not None and len(systems) != n):
            raise ValueError(f"metric ({n}), human ({len(human)}), groups and systems must have one entry per item")
        m = np.array([np.nan if v is None else float(v) for v in metric], dtype=float)
        h = np.array([np.nan if v is None else float(v) for v in human], dtype=float)
        doc, doc_keys = _codes(groups if groups is not None else range(n))
        sysc, sys_keys = _codes(systems if systems is not None else range(n))
        return cls(m, h, doc, sysc, doc_keys, sys_keys)

    @property
    def complete(self) -> np.ndarray:
        return ~(np.isnan(self.metric) | np.isnan(self.human))

    @property
    def n_docs(self) -> int:
        return len(self.doc_keys)


def per_document(table: ScoreTable, method: str) -> np.ndarray:
    """Within-document correlation for every document (NaN where skipped), shape (D,)."""
    ok = table.complete
    out = np.full(table.n_docs, np.nan)
    order = np.argsort(table.doc, kind="stable")
    order = order[ok[order]]
    bounds = np.flatnonzero(np.diff(table.doc[order])) + 1
    for idx in np.split(order, bounds):
        if len(idx):
            out[table.doc[idx[0]]] = corr(table.metric[idx], table.human[idx], method)
    return out


def level_value(table: ScoreTable, level: str, method: str, weights: np.ndarray | None = None,
                per_doc: np.ndarray | None = None) -> float:
    """Correlation at ``level`` with document ``d`` counted ``weights[d]`` times (default 1).

    Args:
        per_doc: precomputed :func:`per_document` values (summary level; saves time in loops).

    Returns:
        The correlation, NaN when undefined (no scorable document, constant side).
    """
    w = np.ones(table.n_docs) if weights is None else np.asarray(weights, dtype=float)
    if level == "summary":
        v = per_document(table, method) if per_doc is None else per_doc
        ok = ~np.isnan(v) & (w > 0)
        return float(np.dot(w[ok], v[ok]) / w[ok].sum()) if ok.any() else math.nan
    ok = table.complete
    item_w = w[table.doc] * ok
    if level == "system":
        s = table.system
        den = np.bincount(s, weights=item_w, minlength=len(table.system_keys))
        mnum = np.bincount(s, weights=item_w * np.where(ok, table.metric, 0.0), minlength=len(den))
        hnum = np.bincount(s, weights=item_w * np.where(ok, table.human, 0.0), minlength=len(den))
        keep = den > 0
        return corr(mnum[keep] / den[keep], hnum[keep] / den[keep], method)
    if level == "dataset":
        reps = item_w.astype(np.int64)
        return corr(np.repeat(table.metric, reps), np.repeat(table.human, reps), method)
    raise ValueError(f"unknown level '{level}'; choose from summary, system, dataset")
