"""What [`csem.model.EvaluationModel.predict`][] returns: one shape for every consumer of a student.

A [`Prediction`][csem.model.prediction.Prediction] holds, for ``N`` records scored on the columns
``metric.<name>.<aspect>``:

* ``ids``: the records' ids in input order (a record without ``id`` gets its position, ``"0"``, ``"1"`` ...);
* ``scores``: column -> ``N`` scores in input order (None where a row has no score);
* ``std``: column -> ``N`` standard deviations (seed-ensemble members or MC dropout), or None;
* ``system_score``: column -> the mean of its scores (COMET's system score), None without any score;
* ``hash``: the settings hash (`csem.model.card.settings_hash`): equal hashes, equal scores;
* ``columns``: the score columns, in aspect order;
* ``source``: column -> per row ``"student"`` or ``"judge"`` when a cascade deferred rows to the
  judge, else None;
* ``records``: copies of the input records with the score columns (and ``.std`` side columns) added.

Scores are keyed by record: the order of the input never changes a score, and
[`Prediction.by_id`][csem.model.prediction.Prediction.by_id] looks one record's scores up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from csem.errors import MissingInputError


@dataclass
class Prediction:
    """Scores of a student over records (see the module docstring for each field).

    Attributes:
        ids: record ids, input order.
        scores: ``{column: [score or None per record]}``; a head's score is on its label scale, a
            multi-judge ensemble aspect's on [0, 1].
        std: ``{column: [std or None per record]}``, same scale as the score, or None.
        system_score: ``{column: mean score or None}``.
        hash: the settings hash.
        columns: the score columns (``metric.<name>.<aspect>``), in aspect order.
        source: ``{column: ["student" | "judge" per record]}`` after a cascade, else None.
        records: copies of the input records with the columns added.
        cascade: after a cascade, its [`csem.apply.cascade.CascadeReport`][] (rule, deferred
            records, judge calls, the judge's summary); else None.
    """

    ids: list[str]
    scores: dict[str, list[float | None]]
    std: dict[str, list[float | None]] | None
    system_score: dict[str, float | None]
    hash: str
    columns: list[str]
    source: dict[str, list[str]] | None = None
    records: list[dict] = field(default_factory=list, repr=False)
    cascade: Any = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def written(self) -> dict[str, list[float | None]]:
        """The columns ``records`` got: each score column, then each ``.std`` side column
        (``metric.<name>.<aspect>.std``), as ``{column: one value per record}``."""
        from csem.data.columns import parse_column

        out: dict[str, list[float | None]] = dict(self.scores)
        for col, values in (self.std or {}).items():
            out[str(parse_column(col).with_side("std"))] = list(values)
        return out

    def by_id(self, record_id: Any) -> dict[str, float | None]:
        """``{column: score}`` of the record with id ``record_id`` (compared as a string).

        Raises:
            KeyError: no record has that id, or several do (the message says which).
        """
        key = str(record_id)
        rows = [i for i, rid in enumerate(self.ids) if rid == key]
        if len(rows) != 1:
            raise MissingInputError(f"record id '{key}': {'no record' if not rows else f'{len(rows)} records'} "
                           "in this prediction" + (" (ids must be unique to look one up)" if rows else ""))
        return {c: self.scores[c][rows[0]] for c in self.columns}


def system_scores(scores: Mapping[str, Sequence[float | None]]) -> dict[str, float | None]:
    """Per column, the mean of its non-None scores (None when it has none)."""
    out: dict[str, float | None] = {}
    for col, values in scores.items():
        xs = [float(v) for v in values if v is not None]
        out[col] = sum(xs) / len(xs) if xs else None
    return out


def record_ids(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each record's ``id`` as a string, or its position where it has none."""
    return [str(r["id"]) if r.get("id") is not None else str(i) for i, r in enumerate(records)]
