"""Judged or rule-made pairs of candidates as training input: the one home of the
`PreferenceTable` and of the builder that makes one from pair rows (`pair_training`).

Two kinds of pair rows come here, with the same layout (``id_a``/``candidate_a``,
``id_b``/``candidate_b``, ``source``, optional ``reference``, ``doc_id``, ``system_a``/``system_b``):

* a preference file of ``csem annotate --compare`` (`csem.model.preferences.pairs_to_training`):
  per aspect ``judge.<aspect>`` = the judge's probability that ``a`` is better than ``b``;
* rule-made contrast pairs (`csem.model.contrast.contrast_training`): ``a`` is the real text, ``b``
  its perturbed copy, target 1 on the head of the pair's aspect.

The loss is the preference loss of CSEM Eq. 3 (Bradley-Terry, ``-log sigmoid(s_a - s_b)`` with soft
targets, `csem.model.losses.preference_loss`) over the pairs whose two candidates share a batch.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from csem.model.config import LabelSpec
from csem.model.losses import preference_loss
from csem.model.validation import TrainingDataError

_TEXT_FIELDS = ("source", "reference", "doc_id")

#: what a pair row yields for one head: ``(aspect index, p(a better than b))``
Targets = Callable[[Mapping[str, Any], int], Sequence[tuple[int, float]]]


class PreferenceTable:
    """Pairs by candidate id: ``(id_a, id_b, aspect index, p(a > b))``.

    Attributes:
        pairs: the pairs. specs: one `LabelSpec` per aspect.
    """

    def __init__(self, pairs: Sequence[tuple[str, str, int, float]], specs: Sequence[LabelSpec]):
        self.pairs = list(pairs)
        self.specs = list(specs)
        self._by_id: dict[str, list[int]] = {}
        for k, (a, _, _, _) in enumerate(self.pairs):
            self._by_id.setdefault(a, []).append(k)

    def __len__(self) -> int:
        return len(self.pairs)

    def loss(self, score: Tensor, ids: Sequence[str]) -> Tensor:
        """Eq. 3 over the pairs whose two candidates are among ``ids``.

        Args:
            score: ``[B, A]`` the batch's normalised scores.
            ids: the ``B`` record ids, in batch order.

        Returns:
            A scalar (0 with grad when no pair of the batch is in the table).
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
        a_idx, b_idx, x_idx = (torch.tensor(v, device=dev) for v in (ia, ib, asp))
        return preference_loss(score[a_idx, x_idx], score[b_idx, x_idx], torch.tensor(tgt, device=dev))

    def check(self, records: Sequence[Mapping[str, Any]], mode: str, min_pairs: int = 4) -> list[LabelSpec]:
        """Validate for training on the pairs as labels; returns the aspects.

        Raises:
            TrainingDataError: too few pairs, or the mode needs a text the candidates lack.
        """
        from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

        if len(self.pairs) < min_pairs:
            raise TrainingDataError(f"preference data: {len(self.pairs)} judged pairs, fewer than the minimum of "
                                    f"{min_pairs}")
        for field, needed in (("source", NEEDS_SOURCE[mode]), ("reference", NEEDS_REFERENCE[mode])):
            bad = [r.get("id") for r in records if needed and not r.get(field)]
            if bad:
                raise TrainingDataError(f"preference data: mode '{mode}' needs a {field}; pairs of candidate(s) "
                                        f"{bad[:5]} have none")
        return self.specs


def pair_training(rows: Sequence[Mapping[str, Any]], specs: Sequence[LabelSpec], targets: Targets, *,
                  where: str, ids: Callable[[Mapping[str, Any], int], tuple[Any, Any]] | None = None,
                  keep_unjudged: bool = False, blank_ok: bool = False) -> tuple[list[dict], PreferenceTable]:
    """Candidate records and the `PreferenceTable` of pair rows: the one builder of both.

    Args:
        rows: pair rows (module docstring).
        specs: the heads, in order (a target's aspect index points into it).
        targets: ``(row, k) -> [(aspect index, p(a > b)), ...]`` for row ``k``; an empty list skips the
            row, or with ``keep_unjudged`` keeps its candidates without a pair.
        where: the rows' file, named in errors.
        ids: ``(row, k) -> (id_a, id_b)``; None: the row's ``id_a`` and ``id_b``.
        keep_unjudged: see ``targets``. blank_ok: an empty or whitespace text is a candidate (rule-made
            degenerate texts); otherwise it is an error.

    Returns:
        ``(records, table)``: one record per distinct candidate id (``id``, ``candidate``, ``source``,
        ``reference``, ``doc_id``, ``system_id``), in order of first appearance.

    Raises:
        TrainingDataError: a side without an id or a text, one id with two different texts or sources,
            a candidate compared with itself (each named with the row).
    """
    records: dict[str, dict] = {}
    pairs: list[tuple[str, str, int, float]] = []
    for k, r in enumerate(rows):
        found = list(targets(r, k))
        if not found and not keep_unjudged:
            continue
        given = ids(r, k) if ids is not None else (r.get("id_a"), r.get("id_b"))
        rid = f" (id '{r['id']}')" if r.get("id") is not None else ""
        sides = []
        for side, cid in zip("ab", given):
            text = r.get(f"candidate_{side}")
            if cid is None or not isinstance(text, str) or not (blank_ok or text.strip()):
                what = f"candidate_{side}" + ("" if ids is not None else f" or id_{side}")
                raise TrainingDataError(f"{where}: row {k + 1} lacks {what}{rid}")
            cid = str(cid)
            rec = records.get(cid)
            if rec is None:
                records[cid] = {"id": cid, "candidate": text, "system_id": r.get(f"system_{side}"),
                                **{f: r.get(f) for f in _TEXT_FIELDS}}
            elif rec["candidate"] != text or rec.get("source") != r.get("source"):
                raise TrainingDataError(f"{where}: row {k + 1}{rid}: candidate id '{cid}' appears with a different "
                                        "candidate or source text elsewhere in the file")
            sides.append(cid)
        if sides[0] == sides[1]:
            raise TrainingDataError(f"{where}: row {k + 1}{rid} compares candidate '{sides[0]}' with itself")
        pairs.extend((sides[0], sides[1], x, p) for x, p in found)
    return list(records.values()), PreferenceTable(pairs, specs)


__all__ = ["PreferenceTable", "Targets", "pair_training"]
