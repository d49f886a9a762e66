"""A judge's repeatability: how well it agrees with itself under a second, independent rendering.

The judge scores a share of the candidates twice: under the rubric and under a second rendering of it
(a paraphrased wording, another rubric file, or in ``sample`` mode a second set of samples;
[`csem.judge.repeat`][]). The agreement of the two scores, ``r`` (Spearman, at summary level: within each
source, averaged over sources; and at dataset level: pooled), is the judge's repeatability on these
candidates. By classical test theory (Spearman 1904, the correction for attenuation; Lord & Novick 1968,
ch. 3) a student that learnt everything the two renderings share, and nothing of either one's own noise,
agrees with one of them at about ``sqrt(r)``: ``r`` and ``sqrt(r)`` frame what any student can reach
against this judge. Summary-level figures are means of per-source rank correlations, so the bound is
approximate.

Every figure comes from the one evaluator ([`csem.meta.correlation.correlations`][]) and its interval
from the one bootstrap over sources ([`csem.meta.bootstrap.bootstrap_ci`][]).
"""

from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence

from csem.errors import InputError
from csem.meta.bootstrap import bootstrap_ci
from csem.meta.correlation import correlations

#: resamples of the sources behind each repeatability figure's 95% interval
BOOTSTRAP = 1000


def attenuation_bound(r: float | None) -> float | None:
    """``sqrt(r)``: the agreement with one rendering that a student following only what the two renderings
    share can reach (None for an undefined or non-positive ``r``: no shared signal to bound)."""
    if r is None or (isinstance(r, float) and math.isnan(r)) or r <= 0:
        return None
    return math.sqrt(r)


def repeatability(first: Sequence[float | None], second: Sequence[float | None], groups: Sequence[Hashable], *,
                  bootstrap: int = BOOTSTRAP, seed: int = 0, method: str = "spearman") -> dict:
    """The judge's repeatability from its two scores of the same candidates.

    Args:
        first: the judge's scores (None where missing or not re-judged), one per candidate.
        second: its scores of the same candidates under the second rendering (None where not re-judged).
        groups: the source (``doc_id``) of each candidate: summary level correlates within each source.
        bootstrap: resamples of the sources for the 95% percentile interval (0: none).
        seed: the resampling seed. method: the correlation (default Spearman).

    Returns:
        ``{"method", "n_candidates", "summary": {"r", "ci", "n_sources", "n_skipped", "sqrt_r"}, "dataset":
        {...}}``: per level the correlation ``r`` (None when undefined: fewer than 2 candidates of a source
        re-judged, or a side constant), its interval ``ci`` ``[low, high]`` (None without one),
        ``n_sources`` (sources that entered the figure), ``n_skipped`` and ``sqrt_r``
        ([`attenuation_bound`][csem.meta.repeatability.attenuation_bound]). ``n_candidates``: candidates
        with both scores.

    Raises:
        ValueError: the three sequences differ in length.
    """
    if not len(first) == len(second) == len(groups):
        raise InputError(f"first ({len(first)}), second ({len(second)}) and groups ({len(groups)}) differ in length")
    both = [i for i, (a, b) in enumerate(zip(first, second)) if a is not None and b is not None
            and not (isinstance(a, float) and math.isnan(a)) and not (isinstance(b, float) and math.isnan(b))]
    x, y, g = [first[i] for i in both], [second[i] for i in both], [groups[i] for i in both]
    out: dict = {"method": method, "n_candidates": len(both)}
    if len(both) < 2:
        for level in ("summary", "dataset"):
            out[level] = {"r": None, "ci": None, "n_sources": 0, "n_skipped": len(set(g)), "sqrt_r": None}
        return out
    values = correlations(x, y, levels=("summary", "dataset"), methods=(method,), groups=g)
    for level in ("summary", "dataset"):
        res = values[(level, method)]
        r = None if math.isnan(res.value) else res.value
        ci = None
        if r is not None and bootstrap > 0:
            b = bootstrap_ci(x, y, level=level, method=method, groups=g, n=bootstrap, seed=seed)
            ci = None if math.isnan(b.low) or math.isnan(b.high) else [b.low, b.high]
        n_sources = res.n_groups if level == "summary" else len(set(g))
        out[level] = {"r": r, "ci": ci, "n_sources": n_sources, "n_skipped": res.n_skipped,
                      "sqrt_r": attenuation_bound(r)}
    return out


def column_repeatability(records: Sequence[Mapping], column: str, repeat_column: str, *,
                         group_key: str = "doc_id", bootstrap: int = BOOTSTRAP, seed: int = 0) -> dict:
    """[`repeatability`][csem.meta.repeatability.repeatability] of two columns of csem records (the
    judge's ``judge.<aspect>`` and its ``judge.<aspect>.repeat``), grouped by ``group_key``; a record
    without a group is its own source."""
    groups = [r.get(group_key) if r.get(group_key) is not None else ("__item__", i) for i, r in enumerate(records)]
    return repeatability([r.get(column) for r in records], [r.get(repeat_column) for r in records], groups,
                         bootstrap=bootstrap, seed=seed)
