"""Contrast pretraining: rank rule-made (better, worse) pairs before learning the teacher's labels.

The field's answer to scarce labels (UniEval, Zhong et al. 2022: boolean QA on rule-made negatives;
BLEURT, Sellam et al. 2020: pretraining on perturbed sentences; SEScore, Xu et al. 2022: severity-graded
synthetic errors) is to pretrain the evaluator on synthetic contrasts that cost no LLM call, then
fine-tune on the teacher. `csem.data.contrasts` makes the pairs; this module turns them into
training input for the contrast stage of training (``fit(..., contrast=...)``,
``TrainConfig.contrast_per_record``):

* `contrast_training` maps pair rows to candidate records (each side of each pair a record with
  its own id, so one text may appear in several pairs) and a
  `csem.model.pairs.PreferenceTable` with target ``p(better > worse) = 1``, each pair on
  the head of its aspect (a pair of aspect ``all`` on every head);
* `PairBatchSampler` puts both sides of a pair in the same batch (pairs of one source
  together, so the source is embedded once), which the pairwise loss needs.

The loss is the preference loss of CSEM Eq. 3 (Bradley-Terry: ``-log sigmoid(s_better - s_worse)``) on
the normalised scores of the aspect's head.
"""

from __future__ import annotations

import random
from typing import Any, Iterator, Mapping, Sequence

from csem.errors import InputError
from csem.model.config import LabelSpec
from csem.model.pairs import PreferenceTable, pair_training
from csem.model.validation import TrainingDataError

ALL_ASPECTS = ("all", "*", "any")


def _aspects_of(row: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    aspect = row.get("aspect")
    if isinstance(aspect, str) and aspect.strip():
        a = aspect.strip()
        if a in ALL_ASPECTS:
            return list(names)
        return [a] if a in names else []
    # no aspect field: any preference column (``<kind>.<aspect>`` = 1) naming one of the aspects
    out = []
    for key, value in row.items():
        head, _, tail = str(key).rpartition(".")
        if head and tail in names and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0.5:
            out.append(tail)
    return out


def contrast_training(pair_rows: Sequence[Mapping[str, Any]], specs: Sequence[LabelSpec],
                      where: str = "contrast pairs") -> tuple[list[dict], PreferenceTable]:
    """Candidate records and the preference table of contrast pairs, for the heads of ``specs``
    (through the one builder, `csem.model.pairs.pair_training`).

    Args:
        pair_rows: rows with ``candidate_a`` (the better text), ``candidate_b`` (the worse one),
            ``source``, optional ``reference`` and ``doc_id``, and ``aspect`` (an aspect name of
            ``specs``, or ``all``); without ``aspect``, any column ``<kind>.<aspect>`` above 0.5 names the
            aspect. Rows of other aspects, and rows whose two texts are equal, are skipped.
        specs: the model's aspects (the label specs of the teacher's columns).
        where: the rows' file, named in errors.

    Returns:
        ``(records, table)``: two records per pair (``id`` ``c<k>a`` and ``c<k>b``), in pair order; the
        table holds ``(id_better, id_worse, aspect index, 1.0)``, one entry per aspect of the pair.

    Raises:
        TrainingDataError: no row names an aspect of the model, or a row lacks a text (named by its index).
    """
    names = [s.aspect for s in specs]
    index = {a: k for k, a in enumerate(names)}

    def targets(row: Mapping[str, Any], k: int) -> list[tuple[int, float]]:
        if row.get("candidate_a") == row.get("candidate_b") and isinstance(row.get("candidate_a"), str):
            return []
        return [(index[x], 1.0) for x in _aspects_of(row, names)]

    records, table = pair_training(pair_rows, specs, targets, where=where, ids=lambda r, k: (f"c{k}a", f"c{k}b"),
                                   blank_ok=True)
    if not table.pairs:
        raise TrainingDataError(f"{where}: no pair names one of the model's aspects {names} "
                                "(field 'aspect', or 'all')")
    return records, table


class PairBatchSampler:
    """Batches of whole pairs: record ``2k`` and ``2k + 1`` (the two sides of pair ``k``, as
    `contrast_training` lays them out) always share a batch; the pairs of one source are kept
    together (their source is embedded once), up to ``pairs_per_batch`` pairs; batch order is shuffled
    with ``seed`` every epoch.

    Args:
        records: the records of `contrast_training` (even length).
        pairs_per_batch: pairs per batch (>= 1).
        seed: shuffling seed; the epoch number is added each epoch.
    """

    def __init__(self, records: Sequence[Mapping[str, Any]], pairs_per_batch: int = 16, seed: int = 0):
        if len(records) % 2:
            raise InputError("contrast records come in pairs (an even number)")
        if pairs_per_batch < 1:
            raise InputError("pairs_per_batch must be >= 1")
        by_source: dict[str, list[int]] = {}
        for k in range(len(records) // 2):
            by_source.setdefault(str(records[2 * k].get("source")), []).append(k)
        self.batches: list[list[int]] = []
        for ks in by_source.values():
            for i in range(0, len(ks), pairs_per_batch):
                self.batches.append([j for k in ks[i:i + pairs_per_batch] for j in (2 * k, 2 * k + 1)])
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))
        random.Random(self.seed + self.epoch).shuffle(order)
        self.epoch += 1
        for i in order:
            yield self.batches[i]


def auto_pairs(records: Sequence[Mapping[str, Any]], specs: Sequence[LabelSpec], per_record: int = 1,
               seed: int = 0, max_pairs: int | None = None) -> list[dict]:
    """Contrast pairs made from the training records themselves (no LLM call), for the heads of ``specs``.

    Each record (and each source's first reference, when the records carry references) yields
    ``per_record`` pairs per aspect from `csem.data.contrasts.make_pairs`, empty and whitespace
    texts included. An aspect of ``specs`` that is one of the four perturbation families' aspects
    (coherence, consistency, fluency, relevance) gets its own family's pairs; any other aspect (an
    ``overall`` or ``quality`` rating) gets the pairs of all four families, since each perturbation makes
    a text worse overall.

    ``max_pairs`` keeps a seeded random subset of that many pairs (in their original order).

    Returns:
        Pair rows as `contrast_training` reads them (``aspect`` set), possibly empty.
    """
    from csem.data.contrasts import ASPECTS, make_pairs, reference_records

    recs = [r for r in records if isinstance(r.get("candidate"), str) and r["candidate"].strip()]
    if any(r.get("reference") for r in recs):
        recs = recs + [r for r in reference_records(recs) if str(r.get("id", "")).endswith("~ref0")]
    names = [s.aspect for s in specs]
    known = [a for a in names if a in ASPECTS]
    rows = make_pairs(recs, aspects=known, per_record=per_record, seed=seed, include_empty=True) if known else []
    other = [a for a in names if a not in ASPECTS]
    if other:
        generic = make_pairs(recs, aspects=list(ASPECTS), per_record=per_record, seed=seed, include_empty=True)
        rows += [dict(p, aspect=a) for a in other for p in generic]
    if max_pairs is not None and len(rows) > max_pairs:
        keep = sorted(random.Random(seed).sample(range(len(rows)), max_pairs))
        rows = [rows[i] for i in keep]
    return rows
