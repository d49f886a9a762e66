"""Sentence-level BLEU and chrF through ``sacrebleu`` (Post 2018), several references supported."""

from __future__ import annotations

from typing import Mapping, Sequence

from sacrebleu.metrics import BLEU, CHRF

from csem.baselines._common import candidates_and_references


def bleu(records: Sequence[Mapping], *, tokenize: str = "13a", lowercase: bool = False) -> list[float]:
    """Sentence BLEU (Papineni et al. 2002) of each ``candidate`` against all its references at once.

    ``sacrebleu.metrics.BLEU(effective_order=True).sentence_score``: clipped n-gram precisions
    (n = 1..4, counts clipped by the max over references), brevity penalty from the closest
    reference length, exponential smoothing; orders with no possible match are skipped.

    Returns:
        One score per record in [0, 100] (sacrebleu's scale), in record order.

    Raises:
        ValueError: a record lacks a candidate or reference.
    """
    cands, refs = candidates_and_references(records, "bleu")
    metric = BLEU(effective_order=True, tokenize=tokenize, lowercase=lowercase)
    return [float(metric.sentence_score(c, r).score) for c, r in zip(cands, refs)]


def chrf(records: Sequence[Mapping], *, word_order: int = 0) -> list[float]:
    """Sentence chrF (Popović 2015; chrF++ with ``word_order=2``) against all references.

    ``sacrebleu.metrics.CHRF``: character n-gram F-beta (n <= 6, beta = 2); with several
    references sacrebleu keeps the best-scoring one.

    Returns:
        One score per record in [0, 100], in record order.
    """
    cands, refs = candidates_and_references(records, "chrf")
    metric = CHRF(word_order=word_order)
    return [float(metric.sentence_score(c, r).score) for c, r in zip(cands, refs)]
