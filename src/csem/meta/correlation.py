"""The one evaluator: correlation functions, and the level logic written once around any of them.

Modelled on mt-metrics-eval's ``stats.py`` (Freitag et al.): each correlation is a small pure
function of two score arrays; the levels are one function (`level_value`) that takes any
such function. Everything that correlates scores in csem goes through here: [`correlate`][csem.meta.correlation.correlate]
(one level, one method), [`correlations`][csem.meta.correlation.correlations] (several at once), `csem.meta.evaluate`
(score columns of records, with bootstrap CIs), the pipeline's agreement table, the student's dev
correlations and the benchmarks.

**Correlation functions** (`CORRELATIONS`; statistics from `scipy.stats`), each
``f(x, y) -> float`` in [-1, 1] over the pairs where both sides are present; NaN when fewer than
2 pairs remain or a side is constant:

* ``pearson``: Pearson's r. ``spearman``: Spearman's rho (average ranks for ties).
* ``kendall`` = ``kendall_b``: Kendall's tau-b (tie-corrected; what scipy and G-Eval report).
* ``kendall_c``: Stuart's tau-c (``scipy.stats.kendalltau(variant="c")``), what mt-metrics-eval
  offers for unequal scales.

**Levels** ([`LEVELS`][csem.meta.correlation.LEVELS]; Louis & Nenkova 2013; G-Eval Sec. 3; CSEM paper Sec. V-B):

* ``summary``: correlate within each group (a source document, dialogue context or source
  segment), then average over groups. Groups where a side is constant or with fewer than 2
  complete pairs are skipped and counted. Also accepted as ``sample`` (the CSEM paper's name)
  and ``item`` (mt-metrics-eval's ``average_by="item"``); results always say ``summary``.
* ``system``: average each system's scores over the items where both sides are present, then
  correlate the per-system means.
* ``dataset``: correlate all complete pairs pooled (mt-metrics-eval's ``average_by="none"``).

Missing values (``None``/NaN) are excluded pairwise and counted, never replaced by 0. Every level
accepts a weight per group (document), which is how the bootstrap (`csem.meta.bootstrap`)
resamples documents without copying data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Hashable, Iterable, Mapping, Sequence, Union

import numpy as np
from scipy import stats

from csem.errors import InputError

CorrelationFn = Callable[[np.ndarray, np.ndarray], float]

METHODS = ("spearman", "kendall", "pearson")
"""The methods reported by default, in report order (Kendall = tau-b)."""
LEVELS = ("summary", "system", "dataset")
"""The levels, in report order."""
LEVEL_ALIASES = {"sample": "summary", "item": "summary"}
"""Other names of a level in the literature, mapped to csem's."""


# ----------------------------------------------------------------------------------------------
# correlation functions: small, pure, NaN-aware
# ----------------------------------------------------------------------------------------------

def as_scores(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """Float array of scores, ``None`` -> NaN. Shape (N,)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return values.astype(float, copy=False)
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def _pairs(x, y) -> tuple[np.ndarray, np.ndarray] | None:
    """The complete pairs of ``x`` and ``y``, or None when a correlation is undefined on them
    (fewer than 2 pairs, or a side constant)."""
    a, b = as_scores(x), as_scores(y)
    if len(a) != len(b):
        raise InputError(f"metric and human scores differ in length: {len(a)} vs {len(b)}")
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return a, b


def pearson(x, y) -> float:
    """Pearson's r in [-1, 1] (``scipy.stats.pearsonr``); NaN if a side is constant or < 2 pairs."""
    p = _pairs(x, y)
    return math.nan if p is None else float(stats.pearsonr(*p).statistic)


def spearman(x, y) -> float:
    """Spearman's rho in [-1, 1] (``scipy.stats.spearmanr``, average ranks for ties); NaN if undefined."""
    p = _pairs(x, y)
    return math.nan if p is None else float(stats.spearmanr(*p).statistic)


def kendall_b(x, y) -> float:
    """Kendall's tau-b in [-1, 1] (tie-corrected, Kendall 1945; scipy's default); NaN if undefined."""
    p = _pairs(x, y)
    return math.nan if p is None else float(stats.kendalltau(*p, variant="b").statistic)


def kendall_c(x, y) -> float:
    """Stuart's tau-c in [-1, 1] (Stuart 1953; ``kendalltau(variant="c")``); NaN if undefined."""
    p = _pairs(x, y)
    return math.nan if p is None else float(stats.kendalltau(*p, variant="c").statistic)


CORRELATIONS: dict[str, CorrelationFn] = {
    "pearson": pearson,
    "spearman": spearman,
    "kendall": kendall_b,
    "kendall_b": kendall_b,
    "kendall_c": kendall_c,
}

Method = Union[str, CorrelationFn]


def correlation_function(method: Method) -> tuple[str, CorrelationFn]:
    """``(name, function)`` for a key of `CORRELATIONS` or any ``f(x, y) -> float``.

    Raises:
        ValueError: unknown method name.
    """
    if callable(method):
        return getattr(method, "__name__", "custom"), method
    if method not in CORRELATIONS:
        raise InputError(f"unknown correlation '{method}'; choose from {sorted(CORRELATIONS)}")
    return method, CORRELATIONS[method]


def level_name(level: str) -> str:
    """The canonical name of a level (``item``/``sample`` -> ``summary``).

    Raises:
        ValueError: unknown level.
    """
    level = LEVEL_ALIASES.get(level, level)
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}'; choose from {LEVELS} (aliases {sorted(LEVEL_ALIASES)})")
    return level


# ----------------------------------------------------------------------------------------------
# aligned scores, and the level logic (written once)
# ----------------------------------------------------------------------------------------------

def _codes(keys: Iterable[Hashable]) -> tuple[np.ndarray, list]:
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
            raise InputError(f"metric ({n}), human ({len(human)}), groups and systems must have one entry per item")
        doc, doc_keys = _codes(groups if groups is not None else range(n))
        sysc, sys_keys = _codes(systems if systems is not None else range(n))
        return cls(as_scores(metric), as_scores(human), doc, sysc, doc_keys, sys_keys)

    @property
    def complete(self) -> np.ndarray:
        """Items where both sides are present, shape (N,) bool."""
        return ~(np.isnan(self.metric) | np.isnan(self.human))

    @property
    def n_docs(self) -> int:
        return len(self.doc_keys)


def per_document(table: ScoreTable, method: Method) -> np.ndarray:
    """Within-document correlation for every document (NaN where skipped), shape (D,)."""
    _, fn = correlation_function(method)
    ok = table.complete
    out = np.full(table.n_docs, np.nan)
    order = np.argsort(table.doc, kind="stable")
    order = order[ok[order]]
    bounds = np.flatnonzero(np.diff(table.doc[order])) + 1
    for idx in np.split(order, bounds):
        if len(idx):
            out[table.doc[idx[0]]] = fn(table.metric[idx], table.human[idx])
    return out


def system_means(table: ScoreTable, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-system means of metric and human scores over complete items, each item counted with its
    document's weight; systems with no complete item are left out. Two arrays of shape (S',)."""
    w = np.ones(table.n_docs) if weights is None else np.asarray(weights, dtype=float)
    ok = table.complete
    item_w = w[table.doc] * ok
    s = table.system
    den = np.bincount(s, weights=item_w, minlength=len(table.system_keys))
    mnum = np.bincount(s, weights=item_w * np.where(ok, table.metric, 0.0), minlength=len(den))
    hnum = np.bincount(s, weights=item_w * np.where(ok, table.human, 0.0), minlength=len(den))
    keep = den > 0
    return mnum[keep] / den[keep], hnum[keep] / den[keep]


def level_value(table: ScoreTable, level: str, method: Method, weights: np.ndarray | None = None,
                per_doc: np.ndarray | None = None) -> float:
    """Correlation at ``level`` with document ``d`` counted ``weights[d]`` times (default 1).

    Args:
        table: the aligned scores. level: a name of [`LEVELS`][csem.meta.correlation.LEVELS] (or an alias).
        method: a key of `CORRELATIONS` or any ``f(x, y) -> float``.
        weights: shape (D,), non-negative; integer counts at dataset level (bootstrap resamples).
        per_doc: precomputed `per_document` values (summary level; saves time in loops).

    Returns:
        The correlation, NaN when undefined (no scorable document, constant side).

    Raises:
        ValueError: unknown level or method.
    """
    level = level_name(level)
    _, fn = correlation_function(method)
    w = np.ones(table.n_docs) if weights is None else np.asarray(weights, dtype=float)
    if level == "summary":
        v = per_document(table, fn) if per_doc is None else per_doc
        ok = ~np.isnan(v) & (w > 0)
        return float(np.dot(w[ok], v[ok]) / w[ok].sum()) if ok.any() else math.nan
    if level == "system":
        return fn(*system_means(table, w))
    reps = (w[table.doc] * table.complete).astype(np.int64)  # dataset: every complete pair, pooled
    return fn(np.repeat(table.metric, reps), np.repeat(table.human, reps))


# ----------------------------------------------------------------------------------------------
# public entry points
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LevelCorrelation:
    """One correlation at one level.

    Attributes:
        value: the correlation (NaN when no group could be scored).
        level: ``summary`` | ``system`` | ``dataset``; method: key of `CORRELATIONS`.
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


def _check(n: int, n_human: int, level: str, groups, systems) -> None:
    if n_human != n:
        raise InputError(f"metric and human scores differ in length: {n} vs {n_human}")
    if level == "summary" and (groups is None or len(groups) != n):
        raise InputError("summary-level correlation needs one group id (doc_id) per item")
    if level == "system" and (systems is None or len(systems) != n):
        raise InputError("system-level correlation needs one system id per item")


def _counted(table: ScoreTable, level: str, name: str, fn: CorrelationFn) -> LevelCorrelation:
    complete = table.complete
    n_pairs, n_missing = int(complete.sum()), int((~complete).sum())
    if level == "summary":
        v = per_document(table, fn)
        n_ok = int((~np.isnan(v)).sum())
        return LevelCorrelation(level_value(table, level, fn, per_doc=v), level, name, n_ok, table.n_docs - n_ok,
                                n_pairs, n_missing)
    value = level_value(table, level, fn)
    n_groups = len(np.unique(table.system[complete])) if level == "system" else int(not math.isnan(value))
    return LevelCorrelation(value, level, name, n_groups, int(math.isnan(value)), n_pairs, n_missing)


def correlate(
    metric: Sequence[float | None],
    human: Sequence[float | None],
    *,
    level: str = "summary",
    method: Method = "spearman",
    groups: Sequence[Hashable] | None = None,
    systems: Sequence[Hashable] | None = None,
) -> LevelCorrelation:
    """Correlation of ``metric`` with ``human`` at one level.

    Args:
        metric, human: scores of the same N items, aligned by position (None/NaN = missing).
        level: ``summary`` (needs ``groups``: the document/context id of each item),
            ``system`` (needs ``systems``) or ``dataset``; aliases in `LEVEL_ALIASES`.
        method: ``spearman`` | ``kendall`` (tau-b) | ``kendall_c`` | ``pearson``, or any
            ``f(x, y) -> float`` over complete float arrays.

    Returns:
        [`LevelCorrelation`][csem.meta.correlation.LevelCorrelation].

    Raises:
        ValueError: unknown level or method, lengths differ, or the grouping key is missing.
    """
    return correlations(metric, human, levels=[level], methods=[method], groups=groups,
                        systems=systems).popitem()[1]


def correlations(
    metric: Sequence[float | None],
    human: Sequence[float | None],
    *,
    levels: Sequence[str] = LEVELS,
    methods: Sequence[Method] = METHODS,
    groups: Sequence[Hashable] | None = None,
    systems: Sequence[Hashable] | None = None,
) -> dict[tuple[str, str], LevelCorrelation]:
    """Every (level, method) correlation of ``metric`` with ``human`` at once (scores aligned once).

    Args: as [`correlate`][csem.meta.correlation.correlate], with lists of levels and methods.

    Returns:
        ``{(level, method name): LevelCorrelation}`` in the order of ``levels`` x ``methods``.

    Raises:
        ValueError: as [`correlate`][csem.meta.correlation.correlate].
    """
    levels = [level_name(lv) for lv in levels]
    fns = [correlation_function(m) for m in methods]
    n = len(metric)
    for lv in levels:
        _check(n, len(human), lv, groups, systems)
    ok = lambda keys: keys if keys is not None and len(keys) == n else None  # noqa: E731
    table = ScoreTable.build(metric, human, ok(groups), ok(systems))
    return {(lv, name): _counted(table, lv, name, fn) for lv in levels for name, fn in fns}


def column_correlations(
    records: Sequence[Mapping],
    metric_col: str,
    human_col: str,
    *,
    levels: Sequence[str] = ("summary",),
    methods: Sequence[Method] = METHODS,
    group_key: str = "doc_id",
    system_key: str = "system_id",
) -> dict[tuple[str, str], LevelCorrelation]:
    """[`correlations`][csem.meta.correlation.correlations] of two columns of csem records (missing or None values count as missing).

    Groups come from ``group_key`` (``doc_id``), systems from ``system_key`` (``system_id``);
    a record without them is its own group / system.

    Raises:
        ValueError: as [`correlate`][csem.meta.correlation.correlate] (e.g. ``summary`` level when no record has a group id).
    """
    m = [r.get(metric_col) for r in records]
    h = [r.get(human_col) for r in records]
    groups = [r.get(group_key) if r.get(group_key) is not None else ("__item__", i) for i, r in enumerate(records)]
    systems = [r.get(system_key) if r.get(system_key) is not None else ("__item__", i) for i, r in enumerate(records)]
    return correlations(m, h, levels=levels, methods=methods, groups=groups, systems=systems)
