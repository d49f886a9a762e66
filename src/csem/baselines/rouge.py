"""ROUGE-1/2/L through Google's ``rouge-score`` package (Lin 2004), several references supported."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from rouge_score import rouge_scorer, tokenizers

from csem.baselines._common import REDUCTIONS, candidates_and_references, reduce_scores
from csem.errors import InputError

ROUGE_VARIANTS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
MEASURES = {"f": "fmeasure", "fmeasure": "fmeasure", "p": "precision", "precision": "precision",
            "r": "recall", "recall": "recall"}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> str:
    """One sentence per line (split after ``.``, ``!`` or ``?`` followed by white space), as
    ``rougeLsum`` expects. Text that already holds newlines is returned as is. (rouge-score's own
    ``split_summaries`` needs NLTK's punkt data, a download; this rule needs nothing.)"""
    if "\n" in text:
        return text
    return "\n".join(s for s in _SENTENCE_END.split(text.strip()) if s)


class _CachingTokenizer(tokenizers.Tokenizer):
    """rouge-score's ``DefaultTokenizer`` with a memo: SummEval repeats each of a document's 11
    references for 16 systems, and Porter stemming dominates the run time. Same tokens, cached."""

    def __init__(self, use_stemmer: bool):
        self._inner = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)
        self._memo: dict[str, list[str]] = {}

    def tokenize(self, text: str) -> list[str]:
        toks = self._memo.get(text)
        if toks is None:
            toks = self._memo[text] = self._inner.tokenize(text)
        return toks


def rouge_scores(
    records: Sequence[Mapping],
    variants: Sequence[str] = ("rouge1", "rouge2", "rougeL"),
    *,
    measure: str = "f",
    reduce: str = "max",
    use_stemmer: bool = True,
    sentence_split: bool = True,
) -> dict[str, list[float]]:
    """Several ROUGE variants in one pass (texts tokenised once); see `rouge`.

    Returns:
        ``{variant: one score in [0, 1] per record}``.
    """
    bad = [v for v in variants if v not in ROUGE_VARIANTS]
    if bad:
        raise InputError(f"unknown ROUGE variant(s) {bad}; choose from {ROUGE_VARIANTS}")
    if measure not in MEASURES:
        raise InputError(f"unknown measure '{measure}'; choose from f, p, r")
    if reduce not in REDUCTIONS:
        raise InputError(f"unknown reduction '{reduce}'; choose from {REDUCTIONS}")
    field = MEASURES[measure]
    cands, refs = candidates_and_references(records, "/".join(variants))
    scorer = rouge_scorer.RougeScorer(list(variants), tokenizer=_CachingTokenizer(use_stemmer))
    out: dict[str, list[float]] = {v: [] for v in variants}
    if "rougeLsum" in variants and sentence_split:
        cands = [split_sentences(c) for c in cands]
        refs = [[split_sentences(r) for r in rr] for rr in refs]
    for cand, rr in zip(cands, refs):
        per_ref = [scorer.score(ref, cand) for ref in rr]
        for v in variants:
            out[v].append(reduce_scores([getattr(s[v], field) for s in per_ref], reduce))
    return out


def rouge(
    records: Sequence[Mapping],
    variant: str = "rouge1",
    *,
    measure: str = "f",
    reduce: str = "max",
    use_stemmer: bool = True,
    sentence_split: bool = True,
) -> list[float]:
    """Sentence-level ROUGE of each record's ``candidate`` against its ``reference`` (str or list).

    ROUGE-N is n-gram overlap, ROUGE-L the longest common subsequence (Lin 2004, "ROUGE: A
    Package for Automatic Evaluation of Summaries"); computed by ``rouge_score.RougeScorer``
    (lower-cases, keeps [a-z0-9] tokens, Porter stemming when ``use_stemmer``).

    Args:
        records: csem records with ``candidate`` and ``reference`` (one string or a list).
        variant: ``rouge1`` | ``rouge2`` | ``rougeL`` (LCS of the whole text as one sequence) |
            ``rougeLsum`` (summary-level ROUGE-L: union LCS over sentences, Lin 2004 Sec. 3.2 —
            what Perl ROUGE-1.5.5 reports as ROUGE-L).
        measure: ``f`` (F1, default), ``p`` (precision) or ``r`` (recall).
        reduce: combine scores against several references by ``max`` (default; = rouge-score's
            ``score_multi``) or ``mean``.
        use_stemmer: Porter stemming (Perl ROUGE's ``-m``, used for SummEval's numbers).
        sentence_split: for ``rougeLsum``, put one sentence per line first (`split_sentences`).

    SummEval convention (reproduces the per-aspect summary-level Spearman of G-Eval Table 1 /
    CSEM Table V within 0.005): ``reduce="mean"`` over the 11 references (Perl ROUGE's default
    ``-f A``), ``use_stemmer=True``, F1, and ``rougeLsum`` for ROUGE-L.

    Returns:
        One score in [0, 1] per record, in record order.

    Raises:
        ValueError: unknown variant/measure/reduce, or a record lacks a candidate or reference.
    """
    return rouge_scores(records, (variant,), measure=measure, reduce=reduce, use_stemmer=use_stemmer,
                        sentence_split=sentence_split)[variant]
