"""The one scoring path of a trained student: records in, a keyed [`Prediction`][csem.model.prediction.Prediction] out.

[`csem.model.EvaluationModel.predict`][] is its entry, and every consumer of a student calls it:
``csem score``, ``csem serve``, ``csem rerank`` and MBR (through
[`csem.apply.metrics.StudentMetric`][]), MRT rewards, the TRL reward, the Ray engine and
[`csem.load_metric`][csem.api.load_metric]. The model is loaded once and scores many batches; results are keyed by
record (the shape of COMET's ``predict()`` that ``comet-mbr`` reuses), so neither the order of the
records nor the batch they arrive in changes a score. Inputs are checked once
(`check_inputs`) and batched once
(`csem.model.inference.head_scores`).

Output aspects (`output_aspects`):

* the heads (``config.aspects``), each on its label scale ``[min, max]`` from the metric card;
* for a student trained on several judges with one head per judge (``csem train --combine heads``),
  the ensemble aspects recorded in the card (``labels.ensembles``): the mean of the aspect's heads,
  each first mapped to [0, 1] by its scale (`csem.model.labels.ensemble_value`), so an
  ensemble aspect is on [0, 1].

`default_aspects` are what a consumer scores when it names no aspect: every ensemble aspect
(in place of its heads) and every head outside an ensemble. ``csem score`` writes every output aspect.

A seed ensemble (``ModelConfig.members`` > 1: several students trained alike with different seeds,
shipped as one model folder) scores each record with every member and gives the mean of their
scores, and their standard deviation as ``std``; members that share their lower encoder layers
(the default student trains only the top layers) compute those once per text. Everything else
(floors, aspects, columns) is as for one student.

Degenerate candidates (`degenerate_reason`: empty, whitespace only, or containing a NUL
character, the texts csem's file readers reject) are never passed to the encoder. With
``degenerate="floor"`` (the default) they get the minimum of each aspect's scale (the label range
in the metric card; 0 for an ensemble aspect) and a standard deviation of 0: a reward function can
never be paid for an empty completion. With ``degenerate="error"`` they raise
`DegenerateTextError` (a ``ValueError`` naming the record and field) for callers that can
report an error instead (``csem serve`` answers 422). A missing or empty source or reference that
the model's mode needs is always an error.

Note: a student trained only with the pairwise loss (``loss="pairwise"``) orders candidates but is
not on the label scale, so its floor (the scale minimum) need not lie below every real candidate.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from csem.data.columns import metric_column
from csem.errors import InputError
from csem.model.prediction import Prediction, record_ids, system_scores

DEGENERATE_MODES = ("floor", "error")


class DegenerateTextError(InputError):
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
    """Every aspect a loaded [`csem.model.EvaluationModel`][] scores -> its scale ``(min, max)``:
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
    """``aspects`` checked against `output_aspects` (None -> `default_aspects`).

    Raises:
        ValueError: an aspect the model does not score (names the ones it does).
    """
    if not aspects:
        return default_aspects(model)
    known = output_aspects(model)
    unknown = [a for a in aspects if a not in known]
    if unknown:
        raise InputError(f"{where}: no aspect {unknown}; it scores {list(known)}")
    return list(aspects)


def _needed_texts(mode: str) -> tuple[bool, bool]:
    from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

    return bool(NEEDS_SOURCE[mode]), bool(NEEDS_REFERENCE[mode])


def check_inputs(records: Sequence[Mapping[str, Any]], mode: str, skip: Any = ()) -> None:
    """Sources and references that a ``mode`` needs are present, non-empty and free of NUL characters:
    the one input check of the scoring path. ``skip``: positions not to check (floored candidates).

    Raises:
        ValueError: names the record (id and position) and the field.
    """
    from csem.data.records import references_of

    needs_source, needs_ref = _needed_texts(mode)
    for i, r in enumerate(records):
        if i in skip:
            continue
        rid = r.get("id", i)
        if needs_source:
            why = degenerate_reason(r.get("source"))
            if why:
                raise InputError(f"record '{rid}' (position {i}): field 'source' {why}; mode '{mode}' needs a source")
        if needs_ref:
            refs = references_of(r)
            if not refs:
                raise InputError(f"record '{rid}' (position {i}): field 'reference' is missing; mode '{mode}' "
                                 "needs a reference")
            for ref in refs:
                why = degenerate_reason(ref)
                if why:
                    raise InputError(f"record '{rid}' (position {i}): field 'reference' {why}")


def predict(model: Any, records: Sequence[Mapping[str, Any]], *, aspects: Sequence[str] | None = None,
            name: str | None = None, batch_size: int = 64, mc_dropout: int = 0, precision: str = "auto",
            share_encodings: bool = True, degenerate: str = "floor") -> Prediction:
    """The body of [`csem.model.EvaluationModel.predict`][] (arguments, return and errors there)."""
    wanted = list(output_aspects(model)) if not aspects else check_aspects(model, aspects)
    name = name or model.config.name
    scores, std = student_scores(model, records, wanted, degenerate=degenerate, batch_size=batch_size,
                                 mc_dropout=mc_dropout, precision=precision, share_encodings=share_encodings)
    return assemble(model, records, wanted, scores, std, name=name, precision=precision)


def assemble(model: Any, records: Sequence[Mapping[str, Any]], wanted: Sequence[str],
             scores: Mapping[str, Sequence[float | None]], std: Mapping[str, Sequence[float | None]] | None, *,
             name: str, precision: str = "auto", source: Mapping[str, Sequence[str]] | None = None) -> Prediction:
    """A [`Prediction`][csem.model.prediction.Prediction] from per-aspect scores (aspect -> one value
    per record): columns named by [`csem.data.columns.metric_column`][], ``.std`` side columns in
    the records where a deviation is known, the system scores and the settings hash."""
    from csem.model.card import settings_hash

    cols = {a: metric_column(name, a) for a in wanted}
    by_col = {cols[a]: list(scores[a]) for a in wanted}
    std_cols = {cols[a]: list(std[a]) for a in wanted if std and a in std} or None
    pred = Prediction(ids=record_ids(records), scores=by_col, std=std_cols, system_score=system_scores(by_col),
                      hash=settings_hash(model, wanted, precision=precision), columns=list(by_col),
                      source={c: list(v) for c, v in source.items()} if source else None)
    pred.records = add_columns(records, pred.written())
    return pred


def student_scores(model: Any, records: Sequence[Mapping[str, Any]], wanted: Sequence[str], *,
                   degenerate: str = "floor", batch_size: int = 64, mc_dropout: int = 0, precision: str = "auto",
                   share_encodings: bool = True
                   ) -> tuple[dict[str, list[float]], dict[str, list[float]] | None]:
    """The student's scores of ``records`` on the output aspects ``wanted``, in input order.

    The one input check (`check_inputs`, after setting the
    degenerate candidates aside), then the one batching loop (`csem.model.inference.head_scores`)
    over every member of a seed ensemble, whose shared lower layers run once per text.

    Returns:
        ``(scores, std)``: aspect -> one float per record. A seed ensemble's score is its members'
        mean; ``std`` is their (population) standard deviation, for every aspect. With MC dropout
        (heads only), ``std`` is the heads' MC deviation, and for an ensemble its predictive
        deviation ``sqrt(mean of the members' variances + variance of their means)`` (the law of total
        variance; deep ensembles, Lakshminarayanan et al. 2017, Sec. 2.4). ``std`` is None for one
        student without MC dropout. A floored degenerate candidate gets each scale's minimum and a
        deviation of 0.

    Raises:
        DegenerateTextError: ``degenerate="error"`` and a degenerate candidate.
        ValueError: unknown ``degenerate``; a source/reference the mode needs is missing, empty or
            holds a NUL character (names the record and field).
    """
    from csem.model.inference import head_scores

    if degenerate not in DEGENERATE_MODES:
        raise InputError(f"unknown degenerate-text handling '{degenerate}'; choose from {DEGENERATE_MODES}")
    scales = output_aspects(model)
    bad = set()
    for i, r in enumerate(records):
        why = degenerate_reason(r.get("candidate"))
        if why and degenerate == "error":
            raise DegenerateTextError(i, r.get("id", i), "candidate", why)
        if why:
            bad.add(i)
    good = [i for i in range(len(records)) if i not in bad]
    check_inputs(records, model.config.mode, skip=bad)
    members = getattr(model, "members", [model.module])
    mean, mc_std = head_scores(members, [records[i] for i in good], batch_size=batch_size, mc_dropout=mc_dropout,
                               precision=precision, share_encodings=share_encodings,
                               shared=getattr(model, "shared_layers", None))
    per_member = _aspect_values(model, mean, wanted)  # aspect -> [M, G]
    heads = model.config.aspects
    out = {a: v.mean(0) for a, v in per_member.items()}
    spread: dict[str, Any] = {}
    if mc_std is not None:
        for a in wanted:
            if a in heads:
                var = (mc_std[:, :, heads.index(a)] ** 2).mean(0) + per_member[a].var(0, unbiased=False)
                spread[a] = var.sqrt()
    elif len(members) > 1 and good:
        spread = {a: v.std(0, unbiased=False) for a, v in per_member.items()}
    elif len(members) > 1:  # every candidate floored: a deviation of 0 each
        spread = {a: [] for a in wanted}
    row = {g: j for j, g in enumerate(good)}
    scores = {a: [scales[a][0] if i in bad else float(out[a][row[i]]) for i in range(len(records))] for a in wanted}
    std = {a: [0.0 if i in bad else float(s[row[i]]) for i in range(len(records))] for a, s in spread.items()}
    return scores, std or None


def _aspect_values(model: Any, mean: Any, wanted: Sequence[str]) -> dict[str, Any]:
    """Per output aspect, the ``[M, G]`` scores of each member: a head's column of ``mean``
    (``[M, G, A]``), or an ensemble aspect's mean of its heads each mapped to [0, 1] by its scale
    (`csem.model.labels.ensemble_value`, computed per member: the mean commutes with it)."""
    heads = model.config.aspects
    scales = output_aspects(model)
    ens = ensembles_of(model.card)
    out = {}
    for a in wanted:
        if a in heads:
            out[a] = mean[:, :, heads.index(a)]
        else:
            parts = [(mean[:, :, heads.index(h)] - scales[h][0]) / (scales[h][1] - scales[h][0]) for h in ens[a]]
            out[a] = sum(parts) / len(parts)
    return out


def add_columns(records: Sequence[Mapping[str, Any]], columns: Mapping[str, Sequence[Any]]) -> list[dict]:
    """Copies of ``records`` with ``columns`` set (a column of the same name is replaced)."""
    rows = [dict(r) for r in records]
    for col, values in columns.items():
        if len(values) != len(rows):
            raise InputError(f"column '{col}' has {len(values)} values for {len(rows)} records")
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

