"""Meta-evaluation: how well metric/judge scores agree with human judgments.

* [`evaluate`][csem.api.evaluate] -> long DataFrame (metric, aspect, level, method, value, CI, counts);
  [`correlation_table`][csem.meta.correlation_table] -> the G-Eval / CSEM paper table (rows = metrics, columns = aspect x method).
* `csem.meta.correlation` is the one evaluator (correlation functions, the level logic once):
  [`correlate`][csem.meta.correlate] (one correlation at one level), [`correlations`][csem.meta.correlations] (several levels and
  methods at once), [`column_correlations`][csem.meta.column_correlations] (two columns of records); [`bootstrap_ci`][csem.meta.bootstrap_ci] (CI over documents),
  [`paired_test`][csem.meta.paired_test] (does A beat B: paired bootstrap or permutation over documents),
  [`compare`][csem.meta.compare] (paired tests of two rows of an [`evaluate`][csem.api.evaluate] table, per aspect and level).
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
