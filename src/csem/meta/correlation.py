"""Correlation of metric scores with human scores at summary, system and dataset level.

Pure functions over arrays; the statistics come from :mod:`scipy.stats`.

* ``pearson``: Pearson's r. ``spearman``: Spearman's rho. ``kendall`` / ``kendall_b``: Kendall's
  tau-b (ties corrected; what scipy and G-Eval report). ``kendall_c``: Stuart's tau-c
  (``scipy.stats.kendalltau(variant="c")``), what mt-metrics-eval offers for unequal scales.
* Levels (Louis & Nenkova 2013; G-Eval Sec. 3; CSEM paper Sec. V-B; mt-metrics-eval ``stats.py``):

  - **summary level** (CSEM: sample level): correlate within each group (a source document or
    dialogue context), then average over groups. Groups where either side is constant, or with
    fewer than 2 complete pairs, are skipped and counted.
  - **system level**: average each system's scores (over the items where both sides are present),
    then correlate the per-system means.
  - **dataset level**: correlate all pairs pooled.

Missing values (``None``/NaN) are excluded pairwise and counted, never replaced by 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Callable, Hashable, Sequence

import numpy as np
from scipy import stats

METHODS = ("spearman", "kendall", "pearson")
LEVELS = ("summary", "system", "dataset")


def _clean(x: Sequence[float | None], y: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray, int]:
    if len(x) != len(y):
        raise ValueError(f"metric and human scores differ in length: {len(x)} vs {len(y)}")
    a = np.array([np.nan if v is None else float(v) for v in x], dtype=float)
    b = np.array([np.nan if v is None else float(v) for v in y], dtype=float)
    ok = ~(np.isnan(a) | np.isnan(b))
    return a[ok], b[ok], int((~ok).sum())


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r in [-1, 1]; NaN if either side is constant or fewer than 2 pairs."""
    a, b, _ = _clean(x, y)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.pearsonr(a, b).statistic)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho in [-1, 1] (average ranks for ties); NaN if a side is constant."""
    a, b, _ = _clean(x, y)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.spearmanr(a, b).statistic)


def kendall_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b in [-1, 1] (tie-corrected); NaN if a side is constant."""
    a, b, _ = _clean(x, y)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.kendalltau(a, b, variant="b").statistic)


def kendall_c(x: Sequence[float], y: Sequence[float]) -> float:
    """Stuart's tau-c in [-1, 1]; NaN if a side is constant."""
    a, b, _ = _clean(x, y)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.kendalltau(a, b, variant="c").statistic)


CORRELATIONS: dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "pearson": pearson,
    "spearman": spearman,
    "kendall": kendall_b,
    "kendall_b": kendall_b,
    "kendall_c": kendall_c,
}


@dataclass(frozen=True)
class LevelCorrelation:
    """One correlation at one level.

    Attributes:
        value: the correlation (NaN when no group could be scored).
        level: ``summary`` | ``system`` | ``dataset``; method: key of :data:`CORRELATIONS`.
        n_groups: groups that entered the average (summary level), systems (system level) or 1.
        n_skipped: groups skipped because a side was constant or had < 2 complete pairs.
        n_pairs: complete (metric, human) pairs used; n_missing: pairs dropped for a missing side.
    """

    value: float
    level: str
    method: str
    n_groups: int
    n_skipped: int
    n_pairs: int
    n_missing: int

    def as_dict(self) -> dict:
        return asdict(self)


def correlate(
    metric: Sequence[float | None],
    human: Sequence[float | None],
    *,
    level: str = "summary",
    method: str = "spearman",
    groups: Sequence[Hashable] | None = None,
    systems: Sequence[Hashable] | None = None,
) -> LevelCorrelation:
    """Correlation of ``metric`` with ``human`` at one level.

    Args:
        metric, human: scores of the same N items, aligned by position (None/NaN = missing).
        level: ``summary`` (needs ``groups``: the document/context id of each item),
            ``system`` (needs ``systems``) or ``dataset``.
        method: ``spearman`` | ``kendall`` (tau-b) | ``kendall_c`` | ``pearson``.

    Returns:
        :class:`LevelCorrelation`.

    Raises:
        ValueError: unknown level or method, lengths differ, or the grouping key is missing.
    """
    if method not in CORRELATIONS:
        raise ValueError(f"unknown correlation '{method}'; choose from {sorted(CORRELATIONS)}")
    fn = CORRELATIONS[method]
    n = len(metric)
    if len(human) != n:
        raise ValueError(f"metric and human scores differ in length: {n} vs {len(human)}")
    m = np.array([np.nan if v is None else float(v) for v in metric], dtype=float)
    h = np.array([np.nan if v is None else float(v) for v in human], dtype=float)
    complete = ~(np.isnan(m) | np.isnan(h))
    n_missing = int((~complete).sum())
    if level == "dataset":
        v = fn(m[complete], h[complete])
        return LevelCorrelation(v, level, method, 0 if math.isnan(v) else 1, int(math.isnan(v)),
                                int(complete.sum()), n_missing)
    if level == "summary":
        if groups is None or len(groups) != n:
            raise ValueError("summary-level correlation needs one group id (doc_id) per item")
        by: dict[Hashable, list[int]] = defaultdict(list)
        for i, g in enumerate(groups):
            if complete[i]:
                by[g].append(i)
        all_groups = set(groups)
        values = []
        for idx in by.values():
            v = fn(m[idx], h[idx])
            if not math.isnan(v):
                values.append(v)
        skipped = len(all_groups) - len(values)
        value = float(np.mean(values)) if values else math.nan
        return LevelCorrelation(value, level, method, len(values), skipped, int(complete.sum()), n_missing)
    if level == "system":
        if systems is None or len(systems) != n:
            raise ValueError("system-level correlation needs one system id per item")
        by = defaultdict(list)
        for i, s in enumerate(systems):
            if complete[i]:
                by[s].append(i)
        keys = sorted(by, key=str)
        ms = [float(m[by[k]].mean()) for k in keys]
        hs = [float(h[by[k]].mean()) for k in keys]
        v = fn(ms, hs)
        return LevelCorrelation(v, level, method, len(keys), int(math.isnan(v)), int(complete.sum()), n_missing)
    raise ValueError(f"unknown level '{level}'; choose from {LEVELS}")
