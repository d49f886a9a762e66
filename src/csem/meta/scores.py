"""The level statistics for many document-weight vectors at once: the vectorised bootstrap path.

`batch_level_values` equals `csem.meta.correlation.level_value` row by row (tested);
it exists only for speed (1000 resamples x many metrics). The level logic itself, the score
table and the correlation functions live in `csem.meta.correlation`.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from csem.meta.correlation import ScoreTable, level_name, level_value


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
    """`level_value` for each row of ``weights`` (R, D) at once, shape (R,).

    Vectorised for Pearson and Spearman at system and dataset level and for Kendall tau-b at
    system level; other cases loop over `level_value`.
    """
    level = level_name(level)
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
