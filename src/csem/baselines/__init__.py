"""Baseline metrics: reference-based adapters over the standard libraries, and the trivial
reference-free baselines a learned metric must beat.

* `rouge` (ROUGE-1/2/L, ``rouge-score``), [`bleu`][csem.baselines.bleu] and [`chrf`][csem.baselines.chrf] (``sacrebleu``),
  `bertscore` (``bert-score`` with an offline encoder, all-MiniLM-L6-v2 by default).
  Each takes csem records (``candidate`` + ``reference``: one string or a list) and returns one
  float per record; several references are supported by each.
* [`compute_baselines`][csem.baselines.compute_baselines] adds ``metric.<name>`` columns for the names in `BASELINES`.
* Reference-free, from ``candidate`` (and ``source``): [`length`][csem.baselines.length] and [`extractiveness`][csem.baselines.extractiveness]
  (nothing fitted);
  fitted on training labels, returning ``{label column: scores of the test records}``:
  [`system_prior`][csem.baselines.system_prior] (the system's mean training label), [`overlap_least_squares`][csem.baselines.overlap_least_squares] (the
  overlap features alone, least squares) and [`lexical_mlp`][csem.baselines.lexical_mlp] (the lexical student's feature
  MLP alone).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from csem.baselines.bertscore import bertscore
from csem.baselines.lexical import extractiveness, length, lexical_mlp, overlap_least_squares
from csem.baselines.prior import system_prior
from csem.baselines.rouge import rouge, rouge_scores
from csem.baselines.sacrebleu_metrics import bleu, chrf
from csem.data.columns import format_column
from csem.errors import InputError

BASELINES: dict[str, Callable[[Sequence[Mapping]], list[float]]] = {
    "rouge1": lambda recs: rouge(recs, "rouge1"),
    "rouge2": lambda recs: rouge(recs, "rouge2"),
    "rougeL": lambda recs: rouge(recs, "rougeL"),
    "rougeLsum": lambda recs: rouge(recs, "rougeLsum"),
    "bleu": bleu,
    "chrf": chrf,
    "bertscore": bertscore,
}


def compute_baselines(records: Sequence[dict], names: Sequence[str], *, multi_ref: str = "max") -> list[str]:
    """Compute the named baselines and store them in place as ``metric.<name>``.

    Args:
        records: csem records with ``candidate`` and ``reference``; modified in place.
        names: keys of `BASELINES` (``rouge1 rouge2 rougeL rougeLsum bleu chrf bertscore``).
        multi_ref: how ROUGE combines several references: ``max`` (rouge-score's
            ``score_multi``) or ``mean`` (Perl ROUGE-1.5.5's default ``-f A``, the SummEval
            convention). BLEU, chrF and BERTScore always use their library's multi-reference rule.

    Returns:
        The column names written (``metric.rouge1`` ...).

    Raises:
        ValueError: an unknown name, or a record without a reference.
    """
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise InputError(f"unknown baseline(s) {unknown}; choose from {list(BASELINES)}")
    cols = []
    rouge_names = [n for n in names if n.startswith("rouge")]
    cached = rouge_scores(records, rouge_names, reduce=multi_ref) if rouge_names else {}  # one tokenisation pass
    for name in names:
        values = cached[name] if name in cached else BASELINES[name](records)
        col = format_column("metric", name=name)
        for rec, v in zip(records, values):
            rec[col] = v
        cols.append(col)
    return cols


__all__ = ["BASELINES", "bertscore", "bleu", "chrf", "compute_baselines", "extractiveness", "length", "lexical_mlp",
           "overlap_least_squares", "rouge", "rouge_scores", "system_prior"]
