"""From labelled records to a trained student: the one path of ``csem train``, :func:`csem.train` and
the pipeline's train stage, so the three produce the same model from the same data and settings.

:func:`training_set` turns labelled rows and a label specification into what
:func:`csem.model.train.train` takes: the label columns (one head each), their declared scales,
the judged pairs of a preference file, and the metric card's ``labels`` entry. It covers

* **one judge** (``judge.coherence,judge.relevance``): the columns as they are, the scale from
  ``label_range`` or the provenance ``csem annotate`` wrote beside its output
  (:func:`csem.pipeline.annotate.read_provenance`), else inferred by training;
* **several judges** (``a+b`` in a wide file, or a long file with ``judge_col``): pivoted,
  normalised per judge and combined as :mod:`csem.model.labels` defines (``normalise``,
  ``combine``), the combination recorded in the card (``combine="heads"``: the card's
  ``labels.ensembles`` make the scoring path add the aspect's score, the mean of its heads);
* **preference pairs** (``pairs=True``, a file of ``csem annotate --compare``): the ranking loss of
  Eq. 3 on the judged pairs (:mod:`csem.model.preferences`).

:func:`fit` is :func:`training_set` then :func:`csem.model.train.train`, the card entries, and saving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from csem.errors import InputError
from csem.model.labels import LabelSpecError, parse_label_spec


@dataclass
class TrainingSet:
    """What :func:`training_set` prepared for :func:`csem.model.train.train`.

    Attributes:
        records, dev_records: the rows to train on (and validate on, or None), with the label
            columns (normalised / combined where asked).
        label_cols: the columns to train on, one head each.
        label_range: declared scale per column, one ``(min, max)`` for all, or None (inferred).
        preferences: the judged pairs (``pairs=True``), else None.
        judge, rubric: provenance for the metric card (given, else from ``provenance``).
        card_labels: the metric card's ``labels`` entry (None for plain single-judge labels).
        notes: one line per decision taken from the data (scale source, judges found, pairs), for a
            command to print.
    """

    records: list[dict]
    dev_records: list[dict] | None
    label_cols: list[str]
    label_range: Any
    preferences: Any = None
    judge: str | None = None
    rubric: str | None = None
    card_labels: dict | None = None
    notes: list[str] = field(default_factory=list)


def label_columns(label_col: str | Sequence[str]) -> list[str]:
    """Every column a label specification names (``"a+b,c"`` -> ``["a", "b", "c"]``): the
    columns a reader must convert to numbers.

    Raises:
        LabelSpecError: an empty item or a column named twice.
    """
    return [c for g in parse_label_spec(label_col) for c in g]


def training_set(records: Sequence[Mapping[str, Any]], label_col: str | Sequence[str], *,
                 dev_records: Sequence[Mapping[str, Any]] | None = None, judge_col: str | None = None,
                 normalise: str = "none", combine: str = "mean", pairs: bool = False,
                 label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
                 provenance: Mapping[str, Any] | None = None, judge: str | None = None,
                 rubric: str | None = None, where: str = "training data",
                 dev_where: str = "dev data") -> TrainingSet:
    """Prepare labelled rows for training (see the module docstring for the cases); reads nothing
    from disk and trains nothing.

    Args:
        records: labelled rows (label columns numeric or None); with ``pairs``, preference rows.
        label_col: the label specification: columns comma separated (one head each), several judges
            of one aspect joined with ``+``; with ``judge_col``, one column per aspect.
        dev_records: rows for per-epoch validation (prepared as ``records``).
        judge_col: a long file's column naming each row's judge (one row per candidate and judge).
        normalise: ``none`` | ``zscore`` | ``rank``, per judge (:func:`csem.model.labels.normalise_values`).
        combine: ``mean`` (one label per aspect) | ``heads`` (one head per judge).
        pairs: ``records`` is a preference file: train on the pairs (Eq. 3).
        label_range: the declared scale ``(min, max)``, or per column; default: the provenance's
            scale of every label column when it records all of them, else inferred by training.
        provenance: what ``csem annotate`` wrote beside its output (``<out>.judge.json``), or None.
        judge, rubric: for the metric card; default: the provenance's judge and rubrics.
        where, dev_where: names of the data in error messages (a file path).

    Returns:
        :class:`TrainingSet`.

    Raises:
        LabelSpecError: a bad label specification, an unknown normalisation or combination, a
            column absent from the data, judges on different scales combined without normalising.
        ValueError: ``pairs`` with a dev set, ``judge_col``, ``normalise`` or ``a+b`` columns;
            ``judge_col`` with ``a+b`` columns.
        TrainingDataError: a preference file that cannot be read as pairs.
    """
    prov = provenance or {}
    groups = parse_label_spec(label_col)
    label_cols = [c for g in groups for c in g]
    notes: list[str] = []
    ranges: Any = None
    if label_range is not None:
        ranges = label_range
    elif label_cols and all(c in prov.get("columns", {}) for c in label_cols):
        ranges = {c: tuple(float(x) for x in prov["columns"][c]["scale"]) for c in label_cols}
        notes.append("label range from the rubric scale recorded by `csem annotate`: "
                     + ", ".join(f"{c} {lo:g}-{hi:g}" for c, (lo, hi) in ranges.items()))
    elif not pairs and label_cols:
        notes.append("label range not declared: inferred from the training labels' lowest and highest values "
                     "(declare the rubric's scale with --label-range MIN,MAX / label_range=(MIN, MAX), or keep "
                     "the .judge.json that `csem annotate` writes beside its output)")
    judge = judge or prov.get("judge")
    rubric = rubric or (",".join(prov["rubrics"]) if prov.get("rubrics") else None)
    multi = any(len(g) > 1 for g in groups)
    if pairs:
        from csem.model.preferences import pairs_to_training

        if dev_records is not None or judge_col or multi or normalise != "none":
            raise InputError("--pairs trains on one preference column per aspect; --dev, --judge-col, "
                             "--normalise and A+B label columns are for ratings")
        cands, prefs = pairs_to_training(records, label_cols, where=where)
        notes.append(f"{len(prefs)} judged pairs of {len(cands)} candidates")
        return TrainingSet(cands, None, label_cols, None, prefs, judge, rubric,
                           {"preference_pairs": len(prefs), "loss": "Eq. 3 on judged pairs"}, notes)
    rows = [dict(r) for r in records]
    dev = [dict(r) for r in dev_records] if dev_records is not None else None
    if not (judge_col or multi or normalise != "none"):
        return TrainingSet(rows, dev, label_cols, ranges, None, judge, rubric, None, notes)

    from csem.model.labels import pivot_long, prepare_labels
    from csem.model.validation import aspect_name

    if judge_col and multi:
        raise InputError("with --judge-col give one label column per aspect (the judges come from the file)")
    if judge_col:
        if isinstance(ranges, Mapping):
            ranges = {f"{c}@{j}": v for c, v in ranges.items() for j in {str(r.get(judge_col)) for r in rows}}
        rows, groups, judges = pivot_long(rows, judge_col, label_cols, where=where)
        if dev is not None:
            dev, _, _ = pivot_long(dev, judge_col, label_cols, where=dev_where)
        notes.append(f"{len(judges)} judges in '{judge_col}': {', '.join(judges)}; {len(rows)} candidates")
    prep = prepare_labels(rows, groups, normalise=normalise, combine=combine, label_range=ranges, where=where)
    if dev is not None:
        dev = prepare_labels(dev, groups, normalise=normalise, combine=combine,
                             label_range=prep.label_range if normalise == "none" else None, where=dev_where).records
    cols = prep.label_cols
    card = None
    if prep.ensembles or normalise != "none":
        card = {"normalise": normalise, "combine": combine, "judge_col": judge_col,
                "ensembles": {aspect_name(k, cols): [aspect_name(c, cols) for c in v]
                              for k, v in prep.ensembles.items()}}
    return TrainingSet(prep.records, dev, cols, prep.label_range, None, judge, rubric, card, notes)


def fit(records: Sequence[Mapping[str, Any]], label_col: str | Sequence[str], *, mode: str = "ref-free",
        out_dir: str | Path | None = None, config: Any = None, train_config: Any = None,
        dev_records: Sequence[Mapping[str, Any]] | None = None, judge_col: str | None = None,
        normalise: str = "none", combine: str = "mean", pairs: bool = False,
        label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
        provenance: Mapping[str, Any] | None = None, judge: str | None = None, rubric: str | None = None,
        notes: str | None = None, where: str = "training data", dev_where: str = "dev data",
        log: Callable[[str], Any] | None = None, lower_cache: dict | None = None,
        contrast: Sequence[Mapping[str, Any]] | None = None, contrast_where: str = "contrast pairs") -> Any:
    """Train a student on labelled rows: :func:`training_set`, :func:`csem.model.train.train`, the
    card's ``labels`` entry, and (with ``out_dir``, on the main process only under DDP) saving.

    Args:
        records, label_col, dev_records, judge_col, normalise, combine, pairs, label_range,
            provenance, judge, rubric, where, dev_where: as :func:`training_set`.
        mode: ``ref-free`` | ``ref-based`` | ``fluency`` | ``fluency-ref``.
        out_dir: the model folder to write (None: only return the model).
        config, train_config: :class:`csem.model.ModelConfig` / :class:`csem.model.TrainConfig`
            (None: their defaults, the cross-validated recipe).
        notes: free text for the metric card. log: called with each line of
            :attr:`TrainingSet.notes` (e.g. ``print``). lower_cache, contrast, contrast_where: see :func:`csem.model.train.train`.

    Returns:
        The trained :class:`csem.model.EvaluationModel`.

    Raises:
        as :func:`training_set` and :func:`csem.model.train.train` (``TrainingDataError`` for bad
        rows, before training starts).
    """
    from csem.model.train import is_global_zero, train

    ts = training_set(records, label_col, dev_records=dev_records, judge_col=judge_col, normalise=normalise,
                      combine=combine, pairs=pairs, label_range=label_range, provenance=provenance, judge=judge,
                      rubric=rubric, where=where, dev_where=dev_where)
    for line in ts.notes:
        if log is not None:
            log(line)
    model = train(ts.records, ts.label_cols, mode, out_dir=None, config=config, train_config=train_config,
                  dev_records=ts.dev_records, label_range=ts.label_range, judge=ts.judge, rubric=ts.rubric,
                  notes=notes, preferences=ts.preferences, lower_cache=lower_cache, contrast=contrast,
                  contrast_where=contrast_where)
    if ts.card_labels is not None:
        model.card["labels"] = ts.card_labels
    if out_dir is not None and is_global_zero():
        model.save(out_dir)
    return model


__all__ = ["LabelSpecError", "TrainingSet", "fit", "label_columns", "training_set"]
