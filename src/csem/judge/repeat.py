"""The judge's repeatability, measured while annotating: a seeded share of the sources judged again.

``csem annotate --repeatability 0.2`` (the API's ``annotate(..., repeatability=0.2)``, a pipeline's
``annotate: {repeatability: 0.2}``) judges every candidate as usual, then judges the candidates of a
seeded share of the sources a second time under a second, independent rendering of each rubric:

* ``probs`` and ``parse`` mode: the rubric's paraphrase (``paraphrase`` in the rubric file, a second
  wording of its intro, criteria and steps; every built-in rating rubric ships one,
  [`csem.rubrics.model.Rubric.paraphrased`][]), or the user's second rubric file for each rubric
  (``repeat_rubrics``: the same aspects and scale, in the same order);
* ``sample`` mode: the same rubric with a second set of samples (the sampling seed + 1), unless
  ``repeat_rubrics`` are given.

Whole sources are drawn, not single candidates, so that the agreement can be computed within each
source (summary level) as the student is measured. The second score goes into the side field
``judge.<aspect>.repeat`` ([`csem.data.columns`][]): a side field is never a score column, so it is
never a training label. The agreement of the two scores is the judge's repeatability ``r`` with its
interval over resampled sources, and ``sqrt(r)`` the attenuation bound
([`csem.meta.repeatability`][]); both go to ``<labelled>.repeatability.json``.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any, Mapping, Sequence

from csem.data.columns import Column
from csem.errors import InputError
from csem.rubrics import Rubric, load_rubrics


def repeat_sources(records: Sequence[Mapping[str, Any]], share: float, seed: int = 0) -> list:
    """The sources whose candidates are judged a second time: ``ceil(share * sources)`` of them (at least
    2 where there are 2, so that an interval over sources exists), drawn by a seeded shuffle of the sorted
    source ids (``doc_id``, else the record's ``id``). Same records, share and seed: same sources.

    Raises:
        InputError: ``share`` outside [0, 1].
    """
    if not 0.0 <= share <= 1.0:
        raise InputError(f"repeatability must be a share of the sources in [0, 1], got {share}")
    ids = sorted({str(_source(r, i)) for i, r in enumerate(records)})
    if share == 0 or not ids:
        return []
    k = min(len(ids), max(math.ceil(share * len(ids) - 1e-9), 2))
    shuffled = ids[:]
    random.Random(seed).shuffle(shuffled)
    return sorted(shuffled[:k])


def _source(record: Mapping[str, Any], i: int) -> Any:
    return record.get("doc_id") if record.get("doc_id") is not None else record.get("id", i)


def second_rendering(rubrics: Sequence[Rubric], mode: str, repeat_rubrics: Sequence[str] | None = None
                     ) -> tuple[list[Rubric], str]:
    """The rubrics of the second judging pass and what they are (``paraphrase``, ``rubric files`` or
    ``second samples``; see the module docstring).

    Raises:
        InputError: a rubric without a paraphrase (and no second file), or second rubric files that do not
            match the first ones (count, aspects, scale).
    """
    if repeat_rubrics:
        second = load_rubrics(list(repeat_rubrics))
        if len(second) != len(rubrics):
            raise InputError(f"repeat rubrics: give one second rubric per rubric ({len(rubrics)}), got {len(second)}")
        for a, b in zip(rubrics, second):
            if a.aspect_names != b.aspect_names or (a.scale.min, a.scale.max) != (b.scale.min, b.scale.max):
                raise InputError(f"repeat rubric {b.id} must rate the aspects {a.aspect_names} on the scale "
                                 f"{a.scale.min}-{a.scale.max} of {a.id} (it rates {b.aspect_names}, "
                                 f"{b.scale.min}-{b.scale.max})")
        return second, "rubric files"
    if mode == "sample":
        return list(rubrics), "second samples"
    return [r.paraphrased() for r in rubrics], "paraphrase"


def repeat_columns(rubrics: Sequence[Rubric], second: Sequence[Rubric]) -> list[tuple[Column, Column]]:
    """``(first pass column, second pass column)`` for every rubric aspect, in order."""
    from csem.judge.runner import rubric_columns

    return list(zip(rubric_columns(rubrics).values(), rubric_columns(second).values()))


def judge_again(labelled: list[dict], rubrics: Sequence[Rubric], judge: Any, *, share: float, seed: int = 0,
                repeat_rubrics: Sequence[str] | None = None, mode: str = "probs", n: int = 20,
                temperature: float = 1.0, cache: str | Path | None = None, progress: bool = True,
                backend_options: Mapping | None = None, batch: Any = None) -> tuple[list[dict], dict]:
    """Judge the candidates of a seeded share of the sources again under the second rendering and add
    ``judge.<aspect>.repeat`` to them; compute the repeatability of every judge column.

    Args:
        labelled: the first pass's records (``judge.<aspect>`` present), changed in place and returned.
        rubrics: the first pass's rubrics. judge, mode, n, temperature, cache, progress, backend_options,
            batch: as the first pass ([`csem.judge.judge_records`][]; ``sample`` mode draws with seed 1;
            with ``batch`` the second pass's requests travel as batch jobs too).
        share: share of the sources to re-judge ([`repeat_sources`][csem.judge.repeat.repeat_sources]).
        seed: the draw of the sources. repeat_rubrics: the user's second rubric files (one per rubric).

    Returns:
        ``(labelled, report)``: ``report`` = ``{"share", "seed", "rendering", "rubrics", "sources",
        "candidates", "columns": {judge column: repeatability}, "judge": {judged, cached, failed, seconds,
        ...}}``; each column's figures from [`csem.meta.repeatability.column_repeatability`][].
    """
    from csem.judge import judge_records
    from csem.meta.repeatability import column_repeatability

    second, rendering = second_rendering(rubrics, mode, repeat_rubrics)
    chosen = set(repeat_sources(labelled, share, seed))
    idx = [i for i, r in enumerate(labelled) if str(_source(r, i)) in chosen]
    pairs = repeat_columns(rubrics, second)
    again, summary = judge_records([labelled[i] for i in idx], second, judge, mode=mode, n=n, temperature=temperature,
                                   seed=1 if rendering == "second samples" else 0, cache=cache, progress=progress,
                                   backend_options=backend_options, batch=batch)
    for i, rec in zip(idx, again):
        for first_col, second_col in pairs:
            labelled[i][str(first_col.with_side("repeat"))] = rec.get(str(second_col))
    columns = {str(c): column_repeatability(labelled, str(c), str(c.with_side("repeat"))) for c, _ in pairs}
    report = {"share": share, "seed": seed, "rendering": rendering, "rubrics": [r.id for r in second],
              "sources": sorted(chosen), "candidates": len(idx), "columns": columns, "judge": summary.as_dict()}
    return labelled, report
