"""The one scoring path of a trained student: records in, keyed scores of every output aspect out.

Every consumer of a student goes through here: ``csem score`` (:meth:`EvaluationModel.score_records`),
the apply layer's :class:`csem.apply.metrics.StudentMetric` (reranking, MBR, MRT rewards, the TRL
reward, ``csem serve``) and the functional :func:`csem.model.score`. The model is loaded once and
scores many batches; results are keyed by record (the shape of COMET's ``estimate()`` that
``comet-mbr`` reuses), so neither the order of the records nor the batch they arrive in changes a
score.

Output aspects (:func:`output_aspects`):

* the heads (``config.aspects``), each on its label scale ``[min, max]`` from the metric card;
* for a student trained on several judges with one head per judge (``csem train --combine heads``),
  the ensemble aspects recorded in the card (``labels.ensembles``): the mean of the aspect's heads,
  each first mapped to [0, 1] by its scale (:func:`csem.model.labels.ensemble_value`), so an
  ensemble aspect is on [0, 1].

:func:`default_aspects` are what a consumer scores when it names no aspect: every ensemble aspect
(in place of its heads) and every head outside an ensemble. ``csem score`` writes every output aspect.

A seed ensemble (``ModelConfig.members`` > 1: several students trained alike with different seeds,
shipped as one model folder) scores each record with every member and gives the mean of their head
scores (:func:`member_mean`); everything else (floors, aspects, columns) is as for one student.

Degenerate candidates (:func:`degenerate_reason`: empty, whitespace only, or containing a NUL
character, the texts csem's file readers reject) are never passed to the encoder. With
``degenerate="floor"`` (the default) they get the minimum of each aspect's scale (the label range
in the metric card; 0 for an ensemble aspect) and a standard deviation of 0: a reward function can
never be paid for an empty completion. With ``degenerate="error"`` they raise
:class:`DegenerateTextError` (a ``ValueError`` naming the record and field) for callers that can
report an error instead (``csem serve`` answers 422). A missing or empty source or reference that
the model's mode needs is always an error.

Note: a student trained only with the pairwise loss (``loss="pairwise"``) orders candidates but is
not on the label scale, so its floor (the scale minimum) need not lie below every real candidate.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from csem.data.columns import metric_column
from csem.model.inference import ScoreResult, predict

DEGENERATE_MODES = ("floor", "error")


class DegenerateTextError(ValueError):
    """A record's candidate cannot be scored (empty, whitespace, NUL): the message names the
    record and the field. ``index``: the record's position; ``field``; ``reason``."""

    def __init__(self, index: int, record_id: Any, field: str, reason: str):
        self.index, self.record_id, self.field, self.reason = index, record_id, field, reason
        super().__init__(f"record '{record_id}' (position {index}): field '{field}' {reason}")


def degenerate_reason(text: Any) -> str | None:
    """Why ``text`` is not a text a reader would accept, or None when it is one.

    Returns:
        ``"is missing or not a string"``, ``"is empty"``, ``"is whitespace only"``,
        ``"contains a NUL character"``, or None.
    """
    if not isinstance(text, str):
        return "is missing or not a string"
    if not text:
        return "is empty"
    if not text.strip():
        return "is whitespace only"
    if "\x00" in text:
        return "contains a NUL character"
    return None


def ensembles_of(card: Mapping[str, Any]) -> dict[str, list[str]]:
    """The card's ensemble aspects: aspect -> its head aspects (empty for a one-judge student)."""
    return {str(k): [str(h) for h in v] for k, v in ((card.get("labels") or {}).get("ensembles") or {}).items()}


def output_aspects(model: Any) -> dict[str, tuple[float, float]]:
    """Every aspect a loaded :class:`~csem.model.EvaluationModel` scores -> its scale ``(min, max)``:
    the heads in config order, then the ensemble aspects of the card (scale ``(0, 1)``)."""
    out = {s.aspect: (float(s.min), float(s.max)) for s in model.config.labels}
    for aspect in ensembles_of(model.card):
        out.setdefault(aspect, (0.0, 1.0))
    return out


def default_aspects(model: Any) -> list[str]:
    """The aspects a consumer scores by default: each ensemble aspect where its first head stands,
    and every head outside an ensemble (for a one-judge student: its heads)."""
    ens = ensembles_of(model.card)
    member = {h: a for a, heads in ens.items() for h in heads}
    out: list[str] = []
    for head in model.config.aspects:
        pick = member.get(head, head)
        if pick not in out:
            out.append(pick)
    return out


def check_aspects(model: Any, aspects: Sequence[str] | None, where: str = "model") -> list[str]:
    """``aspects`` checked against :func:`output_aspects` (None -> :func:`default_aspects`).

    Raises:
        ValueError: an aspect the model does not score (names the ones it does).
    """
    if not aspects:
        return default_aspects(model)
    known = output_aspects(model)
    unknown = [a for a in aspects if a not in known]
    if unknown:
        raise ValueError(f"{where}: no aspect {unknown}; it scores {list(known)}")
    return list(aspects)


def _needed_texts(mode: str) -> tuple[bool, bool]:
    from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

    return bool(NEEDS_SOURCE[mode]), bool(NEEDS_REFERENCE[mode])


def check_inputs(records: Sequence[Mapping[str, Any]], mode: str) -> None:
    """Sources and references that a ``mode`` needs are present, non-empty and free of NUL characters.

    Raises:
        ValueError: names the record (id and position) and the field.
    """
    from csem.data.records import references_of

    needs_source, needs_ref = _needed_texts(mode)
    for i, r in enumerate(records):
        rid = r.get("id", i)
        if needs_source:
            why = degenerate_reason(r.get("source"))
            if why:
                raise ValueError(f"record '{rid}' (position {i}): field 'source' {why}; mode '{mode}' needs a source")
        if needs_ref:
            refs = references_of(r)
            if not refs:
                raise ValueError(f"record '{rid}' (position {i}): field 'reference' is missing; mode '{mode}' "
                                 "needs a reference")
            for ref in refs:
                why = degenerate_reason(ref)
                if why:
                    raise ValueError(f"record '{rid}' (position {i}): field 'reference' {why}")


def score_results(model: Any, records: Sequence[Mapping[str, Any]], *, aspects: Sequence[str] | None = None,
                  degenerate: str = "floor", batch_size: int = 64, mc_dropout: int = 0, precision: str = "auto",
                  share_encodings: bool = True) -> list[ScoreResult]:
    """Score ``records`` with a loaded model: one :class:`ScoreResult` per record, in input order.

    Args:
        model: a loaded :class:`~csem.model.EvaluationModel`.
        records: dicts with ``candidate`` and the texts the model's mode needs (``source``,
            ``reference``); ``id`` is reported back (records are keyed by position internally, so
            missing or repeated ids are fine).
        aspects: output aspects to return (default: every one, :func:`output_aspects`).
        degenerate: ``floor`` (scale minimum for an empty/whitespace/NUL candidate) | ``error``.
        batch_size, mc_dropout, precision, share_encodings: see :func:`csem.model.inference.predict`.

    Returns:
        ``ScoreResult(id, scores={aspect: float}, std={aspect: float} | None)``; a head's score is on
        its label scale (not clipped), an ensemble aspect's on [0, 1]; ``std`` (MC dropout) is given
        for heads only, and 0 for a floored candidate. A seed ensemble (``config.members`` > 1)
        gives the mean of its members' head scores (:func:`member_mean`).

    Raises:
        DegenerateTextError: ``degenerate="error"`` and a degenerate candidate.
        ValueError: unknown ``degenerate`` or aspect; a source/reference the mode needs is missing,
            empty or holds a NUL character (names the record and field).
    """
    from csem.model.labels import ensemble_value

    if degenerate not in DEGENERATE_MODES:
        raise ValueError(f"unknown degenerate-text handling '{degenerate}'; choose from {DEGENERATE_MODES}")
    scales = output_aspects(model)
    wanted = list(scales) if not aspects else check_aspects(model, aspects)
    mode = model.config.mode
    bad: dict[int, str] = {}
    for i, r in enumerate(records):
        why = degenerate_reason(r.get("candidate"))
        if why:
            if degenerate == "error":
                raise DegenerateTextError(i, r.get("id", i), "candidate", why)
            bad[i] = why
    good = [i for i in range(len(records)) if i not in bad]
    check_inputs([records[i] for i in good], mode)
    todo = [dict(records[i], id=str(i)) for i in good]  # keyed by position: ids need not be unique
    heads = {}
    if todo:
        runs = [predict(module, todo, batch_size=batch_size, mc_dropout=mc_dropout, precision=precision,
                        share_encodings=share_encodings) for module in getattr(model, "members", [model.module])]
        for res in member_mean(runs):
            heads[int(res.id)] = res
    ens = ensembles_of(model.card)
    out: list[ScoreResult] = []
    for i, r in enumerate(records):
        rid = r.get("id", i)
        if i in bad:
            scores = {a: scales[a][0] for a in wanted}
            std = {a: 0.0 for a in wanted if a in model.config.aspects} if mc_dropout else None
        else:
            res = heads[i]
            scores = {}
            for a in wanted:
                scores[a] = res.scores[a] if a in res.scores else ensemble_value(res.scores, ens[a], scales)
            std = {a: v for a, v in res.std.items() if a in wanted} if res.std is not None else None
        out.append(ScoreResult(id=str(rid) if rid is not None else str(i), scores=scores, std=std))
    return out


def member_mean(runs: Sequence[Sequence[ScoreResult]]) -> list[ScoreResult]:
    """A seed ensemble's scores: per record, the mean over members of each head's score.

    Args:
        runs: one list of :class:`ScoreResult` per member, aligned (same records, same order).

    Returns:
        One :class:`ScoreResult` per record; with MC dropout, ``std`` is the ensemble's predictive
        deviation, ``sqrt(mean of the members' variances + variance of their means)`` (the law of
        total variance; deep ensembles, Lakshminarayanan et al. 2017, Sec. 2.4). One run is
        returned as it is.
    """
    if len(runs) == 1:
        return list(runs[0])
    out: list[ScoreResult] = []
    k = len(runs)
    for row in zip(*runs):
        scores = {a: sum(r.scores[a] for r in row) / k for a in row[0].scores}
        std = None
        if row[0].std is not None:
            std = {a: math.sqrt(sum(r.std[a] ** 2 for r in row) / k
                                + sum((r.scores[a] - scores[a]) ** 2 for r in row) / k) for a in row[0].std}
        out.append(ScoreResult(id=row[0].id, scores=scores, std=std))
    return out


def score_columns(model: Any, records: Sequence[Mapping[str, Any]], *, aspects: Sequence[str] | None = None,
                  name: str | None = None, **options: Any) -> dict[str, list[float | None]]:
    """The one column writer: ``{metric.<name>.<aspect>: one float per record}`` (and
    ``...<aspect>.std`` with MC dropout), column names from :func:`csem.data.columns.metric_column`.

    Args:
        model: a loaded :class:`~csem.model.EvaluationModel`. records: as :func:`score_results`.
        aspects: output aspects (default: every one). name: metric name (default ``config.name``).
        options: :func:`score_results` keyword arguments.

    Returns:
        Columns in aspect order, each a list aligned with ``records``.

    Raises:
        as :func:`score_results`.
    """
    name = name or model.config.name
    wanted = list(output_aspects(model)) if not aspects else check_aspects(model, aspects)
    results = score_results(model, records, aspects=wanted, **options)
    cols: dict[str, list[float | None]] = {}
    for a in wanted:
        cols[metric_column(name, a)] = [res.scores[a] for res in results]
    for a in wanted:
        if any(res.std is not None and a in res.std for res in results):
            cols[metric_column(name, a, side="std")] = [res.std.get(a) if res.std else None for res in results]
    return cols


def add_columns(records: Sequence[Mapping[str, Any]], columns: Mapping[str, Sequence[Any]]) -> list[dict]:
    """Copies of ``records`` with ``columns`` set (a column of the same name is replaced)."""
    rows = [dict(r) for r in records]
    for col, values in columns.items():
        if len(values) != len(rows):
            raise ValueError(f"column '{col}' has {len(values)} values for {len(rows)} records")
        for row, v in zip(rows, values):
            row[col] = v
    return rows


def model_fingerprint(model: Any) -> str:
    """sha256 (hex, 64 chars) of what a loaded model computes: its config (JSON) and every weight
    tensor (name, dtype, shape, bytes, in name order) and the card's ensembles. Two folders with the
    same weights share it; a retrained student never does, whatever its name or path (the key of
    MRT's reward cache). Computed once per model object (~0.3 s for MiniLM on one CPU core)."""
    import hashlib
    import json

    import torch

    cached = getattr(model, "_csem_fingerprint", None)
    if cached:
        return cached
    h = hashlib.sha256()
    h.update(model.config.model_dump_json().encode("utf-8"))
    h.update(json.dumps(ensembles_of(model.card), sort_keys=True).encode("utf-8"))
    members = getattr(model, "members", [model.module])
    state = {(f"members.{i}." if len(members) > 1 else "") + k: v
             for i, module in enumerate(members) for k, v in module.state_dict().items()}
    for key, tensor in sorted(state.items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}".encode("utf-8"))
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    digest = h.hexdigest()
    try:
        model._csem_fingerprint = digest
    except AttributeError:  # pragma: no cover - a model object without a __dict__
        pass
    return digest

