"""Meta-evaluation: how well metric/judge scores agree with human judgments.

* :func:`evaluate` -> long DataFrame (metric, aspect, level, method, value, CI, counts);
  :func:`pivot_table` -> the G-Eval / CSEM paper table.
* :func:`correlate` (one correlation at one level), :func:`bootstrap_ci` (CI over documents),
  :func:`paired_test` (does A beat B: paired bootstrap or permutation over documents),
  :func:`compare` (paired tests of two rows of an :func:`evaluate` table, per aspect and level).
* Kendall's tau is **tau-b** (scipy's and G-Eval's) unless ``kendall_c`` is asked for.
"""

from __future__ import annotations

from csem.meta.bootstrap import BootstrapCI, bootstrap_ci
from csem.meta.correlation import CORRELATIONS, LEVELS, LevelCorrelation, correlate
from csem.meta.evaluate import METHODS, evaluate, pivot_table
from csem.meta.significance import PairedTestResult, compare, paired_test

__all__ = ["CORRELATIONS", "LEVELS", "METHODS", "BootstrapCI", "LevelCorrelation", "PairedTestResult",
           "bootstrap_ci", "compare", "correlate", "evaluate", "paired_test", "pivot_table"]
