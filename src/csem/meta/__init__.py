"""Meta-evaluation: how well metric/judge scores agree with human judgments.

* :func:`evaluate` -> long DataFrame (metric, aspect, level, method, value, CI, counts);
  :func:`correlation_table` -> the G-Eval / CSEM paper table (rows = metrics, columns = aspect x method).
* :mod:`csem.meta.correlation` is the one evaluator (correlation functions, the level logic once):
  :func:`correlate` (one correlation at one level), :func:`correlations` (several levels and
  methods at once), :func:`column_correlations` (two columns of records); :func:`bootstrap_ci` (CI over documents),
  :func:`paired_test` (does A beat B: paired bootstrap or permutation over documents),
  :func:`compare` (paired tests of two rows of an :func:`evaluate` table, per aspect and level).
* Kendall's tau is **tau-b** (scipy's and G-Eval's) unless ``kendall_c`` is asked for.
"""

from __future__ import annotations

from csem.meta.bootstrap import BootstrapCI, bootstrap_ci
from csem.meta.correlation import (
    CORRELATIONS,
    LEVELS,
    METHODS,
    LevelCorrelation,
    column_correlations,
    correlate,
    correlations,
)
from csem.meta.evaluate import correlation_table, evaluate
from csem.meta.significance import PairedTestResult, compare, paired_test

__all__ = ["CORRELATIONS", "LEVELS", "METHODS", "BootstrapCI", "LevelCorrelation", "PairedTestResult",
           "bootstrap_ci", "column_correlations", "compare", "correlate", "correlation_table",
           "correlations", "evaluate", "paired_test"]
