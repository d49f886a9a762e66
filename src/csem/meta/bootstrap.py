"""Bootstrap confidence intervals for correlations, resampling documents (Efron & Tibshirani 1993).

Documents (source articles, dialogue contexts, source segments), not items, are the resampling
unit, since items of one document are not independent: the recommendation of Deutsch, Dror &
Roth (2021, "A Statistical Analysis of Summarization Evaluation Metrics using Resampling
Methods", TACL; their BOOT-INPUTS), also what mt-metrics-eval does for segments.

* summary level: resample documents, average their within-document correlations;
* system level: resample documents, recompute every system's mean over the resampled
  documents, correlate the means;
* dataset level: resample documents, pool their items, correlate.

CIs are percentile intervals of the resampled values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from csem.errors import InputError
from csem.meta.correlation import ScoreTable, level_name, per_document
from csem.meta.scores import batch_level_values


def resample_counts(n_docs: int, n: int, seed: int | None) -> np.ndarray:
    """(n, n_docs) array: how often each document is drawn in each of ``n`` resamples (with
    replacement, ``n_docs`` draws each). Seeded: the same seed gives the same resamples."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_docs, size=(n, n_docs))
    return np.stack([np.bincount(row, minlength=n_docs) for row in draws]) if n else np.zeros((0, n_docs))


def bootstrap_samples(table: ScoreTable, level: str, method: str, counts: np.ndarray) -> np.ndarray:
    """Level correlation under each resample's document counts, shape (n,) (NaN where undefined)."""
    if level_name(level) == "summary":
        v = per_document(table, method)
        ok = ~np.isnan(v)
        num = counts[:, ok] @ v[ok]
        den = counts[:, ok].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.maximum(den, 1), np.nan)
    return batch_level_values(table, level, method, counts)


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile interval ``[low, high]`` at ``confidence`` from ``n`` resamples (``n_valid`` defined)."""

    low: float
    high: float
    confidence: float
    n: int
    n_valid: int


def bootstrap_ci(
    metric: Sequence[float | None],
    human: Sequence[float | None],
    *,
    level: str = "summary",
    method: str = "spearman",
    groups: Sequence[Hashable] | None = None,
    systems: Sequence[Hashable] | None = None,
    n: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> BootstrapCI:
    """Bootstrap CI of the correlation of ``metric`` with ``human`` at ``level``, resampling documents.

    Args:
        metric, human: scores of the same N items (None/NaN = missing, excluded pairwise).
        level: ``summary`` | ``system`` | ``dataset``; method: ``spearman`` | ``kendall`` (tau-b) |
            ``kendall_c`` | ``pearson``.
        groups: document id per item (the resampling unit; each item its own document if None,
            which is only sensible at dataset level). systems: system id per item (system level).
        n: number of resamples; seed: RNG seed (same seed, same interval); confidence in (0, 1).

    Returns:
        [`BootstrapCI`][csem.meta.bootstrap.BootstrapCI] (NaN bounds when no resample gives a defined value).

    Raises:
        ValueError: confidence outside (0, 1), unknown level/method, lengths differ, or
            ``systems`` missing at system level.
    """
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence}")
    if level_name(level) == "system" and systems is None:
        raise InputError("system-level bootstrap needs one system id per item")
    table = ScoreTable.build(metric, human, groups, systems)
    return ci_from_table(table, level, method, n=n, seed=seed, confidence=confidence)


def ci_from_table(table: ScoreTable, level: str, method: str, *, n: int, seed: int | None,
                  confidence: float = 0.95, counts: np.ndarray | None = None) -> BootstrapCI:
    """[`bootstrap_ci`][csem.meta.bootstrap.bootstrap_ci] on a prepared `ScoreTable` (optionally with shared ``counts``)."""
    if counts is None:
        counts = resample_counts(table.n_docs, n, seed)
    samples = bootstrap_samples(table, level, method, counts)
    valid = samples[~np.isnan(samples)]
    if not len(valid):
        return BootstrapCI(math.nan, math.nan, confidence, len(samples), 0)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(valid, [alpha, 1 - alpha])
    return BootstrapCI(float(lo), float(hi), confidence, len(samples), len(valid))
