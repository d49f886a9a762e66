"""Minimum Bayes risk (MBR) selection from N-best lists, with a reference-based utility.

For the candidates ``y_1..y_n`` of one source, each other candidate serves as a pseudo-reference
(Kumar & Byrne 2004; Freitag et al. 2022 with neural utilities; COMET's ``comet-mbr``):

    y* = argmax_i  1/(n-1) * sum_{j != i} u(y_i, y_j)

with ``u`` chrF (sacrebleu), any reference-based baseline, or a reference-based student (its
heads averaged). ``n * (n - 1)`` utility calls per source; a learned utility scores them in one
batched call per source (each distinct text encoded once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from csem.apply.metrics import Metric
from csem.apply.reranking import group_sources
from csem.errors import InputError


@dataclass
class MBRResult:
    """``chosen``: one record per source (with ``mbr.score``, the expected utility);
    ``scored``: every record with ``mbr.score`` and ``mbr.chosen``; ``utility``: the metric name."""

    chosen: list[dict]
    scored: list[dict]
    utility: str


def mbr_select(records: Sequence[Mapping[str, Any]], utility: Metric) -> MBRResult:
    """Pick per source the candidate with the highest expected utility against the others.

    Args:
        records: N-best lists (grouped by ``doc_id``, else by ``source``).
        utility: a loaded reference-based metric (``needs_reference``); several columns are averaged.

    Raises:
        ValueError: the utility does not use references (MBR would be argmax of a constant per row).
    """
    if not utility.needs_reference:
        raise InputError(f"MBR needs a reference-based utility; '{utility.name}' does not read references")
    keys, index = group_sources(records)
    scored = [dict(r) for r in records]
    chosen = []
    for idx in index:
        n = len(idx)
        if n == 1:
            scored[idx[0]].update({"mbr.score": None, "mbr.chosen": True})
            chosen.append(scored[idx[0]])
            continue
        pairs = []
        for a in range(n):
            for b in range(n):
                if a != b:
                    r = records[idx[a]]
                    pairs.append({"id": f"{a}|{b}", "source": r.get("source"), "candidate": r["candidate"],
                                  "reference": records[idx[b]]["candidate"]})
        cols = utility.score(pairs)
        u = np.nanmean(np.array([[np.nan if v is None else float(v) for v in vals] for vals in cols.values()],
                                dtype=float), axis=0)
        mat = np.full((n, n), np.nan)
        k = 0
        for a in range(n):
            for b in range(n):
                if a != b:
                    mat[a, b] = u[k]
                    k += 1
        expected = np.nanmean(mat, axis=1)
        pick = int(np.nanargmax(expected)) if not np.all(np.isnan(expected)) else 0
        for j, i in enumerate(idx):
            scored[i]["mbr.score"] = None if np.isnan(expected[j]) else float(expected[j])
            scored[i]["mbr.chosen"] = j == pick
        chosen.append(scored[idx[pick]])
    return MBRResult(chosen, scored, utility.name)
