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


# ----------------------------------------------------------------------------------------------
# the same statistics for many weight vectors at once (bootstrap); equal to level_value row by row
# ----------------------------------------------------------------------------------------------

def _row_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted Pearson r per row: x, y of shape (K,) or (R, K), weights (R, K) >= 0.

    Equals Pearson's r of the sample in which item k appears w[r, k] times. NaN where a side is
    constant over the items with positive weight or fewer than 2 items are drawn."""
    x = np.broadcast_to(x, w.shape)
    y = np.broadcast_to(y, w.shape)
    sw = w.sum(axis=1)
    pos = w > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=1) / sw
        my = (w * y).sum(axis=1) / sw
        dx, dy = x - mx[:, None], y - my[:, None]
        sxy = (w * dx * dy).sum(axis=1)
        sxx = (w * dx * dx).sum(axis=1)
        syy = (w * dy * dy).sum(axis=1)
        r = sxy / np.sqrt(sxx * syy)
    const_x = np.where(pos, x, np.inf).min(axis=1) == np.where(pos, x, -np.inf).max(axis=1)
    const_y = np.where(pos, y, np.inf).min(axis=1) == np.where(pos, y, -np.inf).max(axis=1)
    bad = const_x | const_y | (sw < 2)
    return np.where(bad, np.nan, np.clip(r, -1.0, 1.0))


def _weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of every item in the sample where item k appears
    w[r, k] times: rank = weight of smaller values + (weight of equal values + 1) / 2. Shape (R, K)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    group_sorted = np.cumsum(np.r_[True, xs[1:] != xs[:-1]]) - 1
    group = np.empty_like(group_sorted)
    group[order] = group_sorted
    wg = np.add.reduceat(w[:, order], starts, axis=1)
    before = np.cumsum(wg, axis=1) - wg
    rank_g = before + (wg + 1) / 2
    return rank_g[:, group]


def _row_kendall_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b per row of (R, S) arrays without NaN: sum sx*sy / sqrt(sum|sx| sum|sy|) over
    pairs i < j (Kendall 1945); NaN where a side is constant."""
    sx = np.sign(x[:, :, None] - x[:, None, :])
    sy = np.sign(y[:, :, None] - y[:, None, :])
    num = (sx * sy).sum(axis=(1, 2))
    den = np.sqrt(np.abs(sx).sum(axis=(1, 2)) * np.abs(sy).sum(axis=(1, 2)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def batch_level_values(table: ScoreTable, level: str, method: str, weights: np.ndarray) -> np.ndarray:
    """:func:`level_value` for each row of ``weights`` (R, D) at once, shape (R,).

    Vectorised for Pearson and Spearman at system and dataset level and for Kendall tau-b at
    system level; other cases loop over :func:`level_value`.
    """
    weights = np.asarray(weights, dtype=float)
    ok = table.complete
    if level == "dataset" and method in ("pearson", "spearman"):
        m, h = table.metric[ok], table.human[ok]
        w = weights[:, table.doc[ok]]
        if method == "pearson":
            return _row_pearson(m, h, w)
        return _row_pearson(_weighted_ranks(m, w), _weighted_ranks(h, w), w)
    if level == "system" and method in ("pearson", "spearman", "kendall", "kendall_b"):
        item_w = weights[:, table.doc] * ok
        onehot = np.zeros((len(table.metric), len(table.system_keys)))
        onehot[np.arange(len(table.metric)), table.system] = 1.0
        den = item_w @ onehot
        mm = (item_w * np.where(ok, table.metric, 0.0)) @ onehot
        hh = (item_w * np.where(ok, table.human, 0.0)) @ onehot
        present = den > 0
        out = np.full(len(weights), np.nan)
        full = present.all(axis=1) if present.shape[1] else np.zeros(len(weights), bool)
        if full.any():
            ms, hs = mm[full] / den[full], hh[full] / den[full]
            if method == "pearson":
                vals = _row_pearson(ms, hs, np.ones_like(ms))
            elif method == "spearman":
                vals = _row_pearson(stats.rankdata(ms, axis=1), stats.rankdata(hs, axis=1), np.ones_like(ms))
            else:
                vals = _row_kendall_b(ms, hs)
            out[full] = vals
        for i in np.flatnonzero(~full):  # a system absent from this resample: the general path
            out[i] = level_value(table, level, method, weights=weights[i])
        return out
    return np.array([level_value(table, level, method, weights=wr) for wr in weights])
