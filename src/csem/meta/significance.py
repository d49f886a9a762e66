"""Paired significance test: does metric A correlate better with humans than metric B on the same data?

Two tests over documents (the unit of resampling, as in `csem.meta.bootstrap`):

* ``bootstrap`` — paired bootstrap (Koehn 2004, "Statistical Significance Tests for Machine
  Translation Evaluation"; Deutsch et al. 2021 BOOT-INPUTS): resample documents, recompute
  ``delta = r(A) - r(B)`` on each resample; one-sided p = fraction of resamples with
  ``delta <= 0``.
* ``permutation`` — paired permutation test (Deutsch, Dror & Roth 2021, TACL, PERM-INPUTS):
  for every document, swap A's and B's scores with probability 1/2 and recompute ``delta``;
  one-sided p = (1 + #{delta_perm >= delta_obs}) / (1 + n). At system and dataset level each
  metric is first turned into z-scores over all items so that swapped values share a scale
  (at summary level whole within-document correlations are swapped, which needs no scaling).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from csem.errors import InputError, MissingInputError
from csem.meta.bootstrap import bootstrap_samples, resample_counts
from csem.meta.correlation import ScoreTable, level_name, level_value, per_document

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class PairedTestResult:
    """``delta`` = r(A) - r(B) on the full data; ``p_value``: one-sided, H1 "A correlates better";
    ``ci_low``/``ci_high``: 95% bootstrap interval of delta (bootstrap test only, else NaN);
    ``n_docs``: documents resampled; ``n_common``: items where A, B and human are all present."""

    metric_a: str
    metric_b: str
    human: str
    level: str
    method: str
    test: str
    delta: float
    p_value: float
    ci_low: float
    ci_high: float
    value_a: float
    value_b: float
    n: int
    n_docs: int
    n_common: int

    def as_dict(self) -> dict:
        return asdict(self)


def _zscore(x: np.ndarray) -> np.ndarray:
    ok = ~np.isnan(x)
    sd = x[ok].std()
    return (x - x[ok].mean()) / (sd if sd > 0 else 1.0)


def paired_test(
    records: Sequence[Mapping],
    metric_a: str,
    metric_b: str,
    human: str,
    *,
    level: str = "summary",
    method: str = "kendall",
    test: str = "bootstrap",
    n: int = 1000,
    seed: int | None = 0,
) -> PairedTestResult:
    """Test whether column ``metric_a`` correlates better with ``human`` than ``metric_b`` does.

    Only items where A, B and the human score are all present are used (so both correlations
    see the same pairs); documents come from ``doc_id`` (each record its own document if
    absent), systems from ``system_id``.

    Args:
        records: csem records. metric_a, metric_b, human: column names (``metric.rouge1``,
            ``judge.coherence``, ``human.coherence``).
        level, method: as in [`csem.meta.correlation.correlate`][].
        test: ``bootstrap`` (paired bootstrap) or ``permutation`` (paired permutation).
        n: resamples / permutations; seed: RNG seed.

    Returns:
        [`PairedTestResult`][csem.meta.significance.PairedTestResult] with ``delta`` and the one-sided ``p_value``.

    Raises:
        KeyError: a column is absent from every record. ValueError: unknown test/level/method.
    """
    if test not in ("bootstrap", "permutation"):
        raise InputError(f"unknown test '{test}'; choose 'bootstrap' or 'permutation'")
    level = level_name(level)
    for col in (metric_a, metric_b, human):
        if not any(col in r for r in records):
            raise MissingInputError(f"column '{col}' is in none of the {len(records)} records")

    def col(name: str) -> np.ndarray:
        return np.array([np.nan if r.get(name) is None else float(r[name]) for r in records], dtype=float)

    a, b, h = col(metric_a), col(metric_b), col(human)
    common = ~(np.isnan(a) | np.isnan(b) | np.isnan(h))
    a, b, h = np.where(common, a, np.nan), np.where(common, b, np.nan), np.where(common, h, np.nan)
    groups = [r["doc_id"] if r.get("doc_id") is not None else r.get("id", i) for i, r in enumerate(records)]
    systems = [r.get("system_id") for r in records]
    if level == "system" and any(s is None for s in systems):
        raise InputError("system-level test needs 'system_id' in every record")
    ta = ScoreTable.build(a, h, groups, systems)
    tb = ScoreTable.build(b, h, groups, systems)
    va, vb = level_value(ta, level, method), level_value(tb, level, method)
    delta = va - vb
    lo = hi = math.nan
    if test == "bootstrap":
        counts = resample_counts(ta.n_docs, n, seed)
        d = bootstrap_samples(ta, level, method, counts) - bootstrap_samples(tb, level, method, counts)
        d = d[~np.isnan(d)]
        p = float(np.mean(d <= 0)) if len(d) else math.nan
        if len(d):
            lo, hi = (float(x) for x in np.quantile(d, [0.025, 0.975]))
    else:
        rng = np.random.default_rng(seed)
        swaps = rng.random((n, ta.n_docs)) < 0.5
        if level == "summary":
            pa, pb = per_document(ta, method), per_document(tb, method)
            perm = []
            for sw in swaps:
                xa, xb = np.where(sw, pb, pa), np.where(sw, pa, pb)
                perm.append(np.nanmean(xa) - np.nanmean(xb) if np.isfinite(xa).any() else math.nan)
        else:
            za, zb = _zscore(a), _zscore(b)
            perm = []
            for sw in swaps:
                item_sw = sw[ta.doc]
                ma, mb = np.where(item_sw, zb, za), np.where(item_sw, za, zb)
                perm.append(level_value(ScoreTable(ma, h, ta.doc, ta.system, ta.doc_keys, ta.system_keys), level, method)
                            - level_value(ScoreTable(mb, h, ta.doc, ta.system, ta.doc_keys, ta.system_keys), level, method))
        perm_arr = np.array(perm, dtype=float)
        perm_arr = perm_arr[~np.isnan(perm_arr)]
        p = float((1 + np.sum(perm_arr >= delta - 1e-12)) / (1 + len(perm_arr)))
    return PairedTestResult(metric_a, metric_b, human, level, method, test, float(delta), p, lo, hi,
                            float(va), float(vb), n, ta.n_docs, int(common.sum()))


def compare(
    records: Sequence[Mapping],
    table: pd.DataFrame,
    metric_a: str,
    metric_b: str,
    *,
    levels: Sequence[str] | None = None,
    method: str = "kendall",
    test: str = "bootstrap",
    n: int = 1000,
    seed: int | None = 0,
) -> pd.DataFrame:
    """Paired tests of two rows of an `csem.meta.evaluate` table, for every aspect they share.

    Args:
        records: the records ``table`` was computed on.
        table: long table of `csem.meta.evaluate` (maps row labels and aspects to columns).
        metric_a, metric_b: row labels (``rouge1``, ``judge``) or score columns.
        levels: default: the levels in ``table``. method, test, n, seed: see [`paired_test`][csem.meta.significance.paired_test].

    Returns:
        DataFrame with one row per (aspect, level): ``aspect``, ``level``, ``method``, ``test``,
        ``metric_a``, ``metric_b`` (the columns), ``value_a``, ``value_b``, ``delta``,
        ``p_value`` (one-sided, A better), ``ci_low``, ``ci_high``, ``n_common``.

    Raises:
        ValueError: a label is not in ``table`` or the two share no aspect.
    """
    import pandas as pd

    def columns(label: str) -> dict[str, str]:
        sub = table[(table["metric"] == label) | (table["column"] == label)]
        return dict(zip(sub["aspect"], sub["column"]))

    ca, cb = columns(metric_a), columns(metric_b)
    for label, c in ((metric_a, ca), (metric_b, cb)):
        if not c:
            raise InputError(f"'{label}' is not a metric of the table; metrics: {sorted(set(table['metric']))}")
    shared = [a for a in ca if a in cb]
    if not shared:
        raise InputError(f"'{metric_a}' and '{metric_b}' share no aspect")
    rows = []
    for aspect in shared:
        for level in levels or list(dict.fromkeys(table["level"])):
            r = paired_test(records, ca[aspect], cb[aspect], f"human.{aspect}", level=level, method=method,
                            test=test, n=n, seed=seed)
            rows.append({"aspect": aspect, "level": level, "method": method, "test": test,
                         "metric_a": r.metric_a, "metric_b": r.metric_b, "value_a": r.value_a,
                         "value_b": r.value_b, "delta": r.delta, "p_value": r.p_value, "ci_low": r.ci_low,
                         "ci_high": r.ci_high, "n_common": r.n_common})
    return pd.DataFrame(rows)
