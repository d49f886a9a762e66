"""Helpers shared by the baseline adapters: pulling candidates and references out of records."""

from __future__ import annotations

from typing import Mapping, Sequence

from csem.data.records import references_of
from csem.errors import InputError

REDUCTIONS = ("max", "mean")


def candidates_and_references(records: Sequence[Mapping], metric: str) -> tuple[list[str], list[list[str]]]:
    """``(candidates, references)`` of ``records``; every record needs a candidate and >= 1 reference.

    Raises:
        ValueError: a record has no candidate or no reference (the message names its ``id``).
    """
    cands: list[str] = []
    refs: list[list[str]] = []
    for i, r in enumerate(records):
        rid = r.get("id", i)
        cand = r.get("candidate")
        if not isinstance(cand, str):
            raise InputError(f"{metric}: record {rid!r} has no 'candidate' string")
        rr = [x for x in references_of(r) if isinstance(x, str) and x.strip()]
        if not rr:
            raise InputError(f"{metric} is reference-based: record {rid!r} has no 'reference'")
        cands.append(cand)
        refs.append(rr)
    return cands, refs


def reduce_scores(values: Sequence[float], reduce: str) -> float:
    """Combine one candidate's scores against several references: ``max`` or ``mean``."""
    if reduce == "max":
        return float(max(values))
    if reduce == "mean":
        return float(sum(values) / len(values))
    raise InputError(f"unknown reduction '{reduce}'; choose from {REDUCTIONS}")
