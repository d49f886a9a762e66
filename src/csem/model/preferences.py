"""Training on preference pairs directly (comparison data, CSEM paper Eq. 3).

A preference file has one row per judged pair of candidates of one source, as
:func:`csem.judge.comparison.compare_records` (``csem annotate --compare``) writes it: ``id_a``,
``id_b``, ``candidate_a``, ``candidate_b``, ``source``, optional ``reference``, ``doc_id``,
``system_a``/``system_b``, and per aspect ``judge.<aspect>`` = the judge's probability that ``a``
is better than ``b`` (in [0, 1]; 1 or 0 for a hard preference).

:func:`pairs_to_training` turns the rows into candidate records (each distinct candidate once, keyed
by its id) and a :class:`PreferenceTable`; :func:`csem.model.train.train` given ``preferences=``
trains with :func:`csem.model.losses.preference_loss` over the pairs whose two candidates are in
the same batch (batches hold whole sources, so every pair is, unless one source has more candidates
than ``batch_size``). Scores are then relative (the loss fixes differences, not the level), as with
``loss: pairwise``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from csem.data.columns import score_columns
from csem.model.config import LabelSpec
from csem.model.losses import preference_loss
from csem.model.validation import TrainingDataError, aspect_name, label_value

_TEXT_FIELDS = ("source", "reference", "doc_id")


class PreferenceTable:
    """Judged pairs by candidate id: ``(id_a, id_b, aspect index, p(a > b))``.

    Attributes:
        pairs: the pairs. specs: one :class:`LabelSpec` per aspect (scale [0, 1]: scores are relative).
        specificity: weight of the aspect-specificity term of :meth:`loss` (0 = off; set for rule-made
            contrast pairs by ``TrainConfig.contrast_specificity``).
    """

    def __init__(self, pairs: Sequence[tuple[str, str, int, float]], specs: Sequence[LabelSpec],
                 specificity: float = 0.0):
        self.pairs = list(pairs)
        self.specs = list(specs)
        self.specificity = specificity
        self._by_id: dict[str, list[int]] = {}
        for k, (a, b, _, _) in enumerate(self.pairs):
            self._by_id.setdefault(a, []).append(k)

    def __len__(self) -> int:
        return len(self.pairs)

    def loss(self, score: Tensor, ids: Sequence[str]) -> Tensor:
        """Eq. 3 over the pairs whose two candidates are among ``ids``, plus, with
        :attr:`specificity` ``w > 0`` and several aspects, the aspect-specificity term

        ``w * mean over pairs and other heads g of -log sigmoid(m_x - max(m_g, 0))``,
        ``m_h = s_h(a) - s_h(b)``,

        where ``x`` is the pair's aspect: the pair's own head must separate the two texts by more than
        every other head does (a Bradley-Terry preference between the heads' margins); a head that
        already does not prefer the better text counts as 0, so no head is pushed to prefer the worse
        one. It is meant to make an aspect's head, not all of them alike, respond to that aspect's
        errors (rule-made pairs of one aspect's perturbation family, :mod:`csem.data.contrasts`;
        per-dimension negatives as in UniEval, Zhong et al. 2022; the margin term is csem's; measured in
        ``benchmarks/results/student_aspects.md``).

        Args: ``score`` ``[B, A]`` the batch's scores; ``ids``: the ``B`` record ids, in batch order.
        Returns: a scalar (0 with grad when no pair of the batch is in the table).
        """
        pos = {str(i): k for k, i in enumerate(ids)}
        ia, ib, asp, tgt = [], [], [], []
        for rid in ids:
            for k in self._by_id.get(str(rid), ()):
                a, b, x, p = self.pairs[k]
                if b in pos:
                    ia.append(pos[a])
                    ib.append(pos[b])
                    asp.append(x)
                    tgt.append(p)
        if not ia:
            return score.sum() * 0.0
        dev = score.device
        a_idx = torch.tensor(ia, device=dev)
        b_idx = torch.tensor(ib, device=dev)
        x_idx = torch.tensor(asp, device=dev)
        loss = preference_loss(score[a_idx, x_idx], score[b_idx, x_idx], torch.tensor(tgt, device=dev))
        if self.specificity > 0 and score.shape[1] > 1:
            margin = score[a_idx] - score[b_idx]  # [P, A]
            own = margin.gather(1, x_idx[:, None])  # [P, 1]
            other = torch.ones_like(margin, dtype=torch.bool).scatter(1, x_idx[:, None], False)
            diff = (own - margin.clamp(min=0))[other]  # own margin minus each other head's (>= 0) margin
            loss = loss + self.specificity * preference_loss(diff, torch.zeros_like(diff), torch.ones_like(diff))
        return loss

    def check(self, records: Sequence[Mapping[str, Any]], mode: str, min_pairs: int = 4) -> list[LabelSpec]:
        """Validate for training (called by :func:`csem.model.train.train`); returns the aspects.

        Raises:
            TrainingDataError: too few pairs, or the mode needs a text the candidates lack.
        """
        from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

        if len(self.pairs) < min_pairs:
            raise TrainingDataError(f"preference data: {len(self.pairs)} judged pairs, fewer than the minimum of "
                                    f"{min_pairs}")
        if NEEDS_SOURCE[mode]:
            bad = [r.get("id") for r in records if not r.get("source")]
            if bad:
                raise TrainingDataError(f"preference data: mode '{mode}' needs a source; pairs of candidate(s) "
                                        f"{bad[:5]} have none")
        if NEEDS_REFERENCE[mode]:
            bad = [r.get("id") for r in records if not r.get("reference")]
            if bad:
                raise TrainingDataError(f"preference data: mode '{mode}' needs a reference; pairs of candidate(s) "
                                        f"{bad[:5]} have none")
        return self.specs


def pairs_to_training(pair_rows: Sequence[Mapping[str, Any]], label_cols: Sequence[str] | str,
                      where: str = "preference data") -> tuple[list[dict], PreferenceTable]:
    """Candidate records and the :class:`PreferenceTable` of a preference file.

    Args:
        pair_rows: rows as described in the module docstring.
        label_cols: preference columns, one per aspect (``judge.coherence``).

    Returns:
        ``(records, table)``: one record per distinct candidate id (``id``, ``candidate``,
        ``source``, ``reference``, ``doc_id``, ``system_id``), in order of first appearance.

    Raises:
        TrainingDataError: a missing column, a preference outside [0, 1] or not a number, one
        candidate id with two different texts, a pair of a candidate with itself (each named with
        its row id).
    """
    cols = [c.strip() for c in label_cols.split(",")] if isinstance(label_cols, str) else list(label_cols)
    if not pair_rows:
        raise TrainingDataError(f"{where}: no rows")
    present = set().union(*(r.keys() for r in pair_rows))
    need = [c for c in ("id_a", "id_b", "candidate_a", "candidate_b") if c not in present]
    if need:
        raise TrainingDataError(f"{where}: column(s) {need} not found; a preference file has one row per pair "
                                "(id_a, id_b, candidate_a, candidate_b, source, judge.<aspect>), as written by "
                                "`csem annotate --compare`")
    missing = [c for c in cols if c not in present]
    if missing:
        score_cols = sorted(score_columns(pair_rows))
        raise TrainingDataError(f"{where}: preference column(s) {missing} not found; present: {score_cols}")
    records: dict[str, dict] = {}
    pairs: list[tuple[str, str, int, float]] = []
    for r in pair_rows:
        rid = r.get("id")
        ids = []
        for side in ("a", "b"):
            cid = r.get(f"id_{side}")
            text = r.get(f"candidate_{side}")
            if cid is None or not isinstance(text, str) or not text.strip():
                raise TrainingDataError(f"{where}: row '{rid}' lacks id_{side} or candidate_{side}")
            cid = str(cid)
            rec = records.get(cid)
            if rec is None:
                rec = records[cid] = {"id": cid, "candidate": text, "system_id": r.get(f"system_{side}"),
                                      **{f: r.get(f) for f in _TEXT_FIELDS}}
            elif rec["candidate"] != text or rec.get("source") != r.get("source"):
                raise TrainingDataError(f"{where}: row '{rid}': candidate id '{cid}' appears with a different "
                                        "candidate or source text elsewhere in the file")
            ids.append(cid)
        if ids[0] == ids[1]:
            raise TrainingDataError(f"{where}: row '{rid}' compares candidate '{ids[0]}' with itself")
        for k, col in enumerate(cols):
            p = label_value(r.get(col), f"{where}: row '{rid}', column '{col}'")
            if p is None:
                continue
            if not 0.0 <= p <= 1.0:
                raise TrainingDataError(f"{where}: row '{rid}', column '{col}': preference {p} outside [0, 1] "
                                        "(the probability that candidate a is better than b)")
            pairs.append((ids[0], ids[1], k, p))
    specs = [LabelSpec(aspect=aspect_name(c, cols), column=c, min=0.0, max=1.0) for c in cols]
    return list(records.values()), PreferenceTable(pairs, specs)
