"""From labelled records to a trained student: the one path of ``csem train``, `csem.train` and
the pipeline's train stage, so the three produce the same model from the same data and settings.

`training_set` turns labelled rows and a label specification into what the training steps
(`csem.model.train`) take: the label columns (one head each), their declared scales,
the judged pairs of a preference file, and the metric card's ``labels`` entry. It covers

* **one judge** (``judge.coherence,judge.relevance``): the columns as they are, the scale from
  ``label_range`` or the provenance ``csem annotate`` wrote beside its output
  (`csem.pipeline.annotate.read_provenance`), else inferred by training;
* **several judges** (``a+b`` in a wide file, or a long file with ``judge_col``): pivoted,
  normalised per judge and combined as `csem.model.labels` defines (``normalise``,
  ``combine``), the combination recorded in the card (``combine="heads"``: the card's
  ``labels.ensembles`` make the scoring path add the aspect's score, the mean of its heads);
* **preference pairs** (``pairs=True``, a file of ``csem annotate --compare``): the ranking loss of
  Eq. 3 on the judged pairs (`csem.model.preferences`).

`fit`, the one training entry, is `training_set` then the training steps, the card entries,
and saving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from csem.errors import InputError
from csem.model.labels import LabelSpecError, parse_label_spec


@dataclass
class TrainingSet:
    """What `training_set` prepared for the training steps (`csem.model.train.train_student`).

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


def training_set(records: Sequence[Mapping[str, Any]], label_col: str | Sequence[str] | Sequence[Sequence[str]], *,
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
        normalise: ``none`` | ``zscore`` | ``rank``, per judge (`csem.model.labels.normalise_values`).
        combine: ``mean`` (one label per aspect) | ``heads`` (one head per judge).
        pairs: ``records`` is a preference file: train on the pairs (Eq. 3).
        label_range: the declared scale ``(min, max)``, or per column; default: the provenance's
            scale of every label column when it records all of them, else inferred by training.
        provenance: what ``csem annotate`` wrote beside its output (``<out>.judge.json``), or None.
        judge, rubric: for the metric card; default: the provenance's judge and rubrics.
        where, dev_where: names of the data in error messages (a file path).

    Returns:
        `TrainingSet`.

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


def fit(records: Sequence[Mapping[str, Any]], label_col: str | Sequence[str] | Sequence[Sequence[str]],
        mode: str = "ref-free", *, out_dir: str | Path | None = None, config: Any = None, train_config: Any = None,
        dev_records: Sequence[Mapping[str, Any]] | None = None, judge_col: str | None = None,
        normalise: str = "none", combine: str = "mean", pairs: bool = False,
        label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
        provenance: Mapping[str, Any] | None = None, judge: str | None = None, rubric: str | None = None,
        notes: str | None = None, where: str = "training data", dev_where: str = "dev data",
        log: Callable[[str], Any] | None = None, lower_cache: dict | None = None,
        contrast: Sequence[Mapping[str, Any]] | None = None, contrast_where: str = "contrast pairs",
        verdict: bool = False) -> Any:
    """Train a student on labelled rows: the one training entry of csem (``csem train``,
    `csem.train`, the pipeline's train stage, cross-validation and the benchmarks all call it).

    It runs `training_set` (the label specification parsed once, the judges pivoted and combined,
    preference rows converted to pairs once), the training steps of `csem.model.train` (set-up, warm
    start, contrast stage, label stage, ensemble), the card's ``labels`` entry, and (with ``out_dir``,
    on the main process only under DDP) saving.

    Args:
        records, label_col, dev_records, judge_col, normalise, combine, pairs, label_range,
            provenance, judge, rubric, where, dev_where: as `training_set` (``label_col`` may be
            already parsed: one list of columns per aspect).
        mode: ``ref-free`` | ``ref-based`` | ``fluency`` | ``fluency-ref``.
        out_dir: the model folder to write (None: only return the model).
        config, train_config: `csem.model.ModelConfig` / `csem.model.TrainConfig`
            (None: their defaults, the cross-validated recipe).
        notes: free text for the metric card. log: called with each line of
            ``TrainingSet.notes`` (e.g. ``print``); the card keeps them under ``training.data_notes``.
        lower_cache: with ``train_layers``, a dict shared by runs with the same encoder and layers
            (cross-validation folds): the frozen lower layers' token states are computed once for all.
        contrast: rule-made (better, worse) pair rows (`csem.data.contrasts`) ranked before the labels
            (``TrainConfig.contrast_epochs``) and mixed into label training (``contrast_mix``); without
            them ``TrainConfig.contrast_per_record`` makes pairs from the training rows.
        contrast_where: the pairs' file, named in errors.
        verdict: put the verdict on the dev records of sources absent from the training data into the card's
            ``verdict`` (or, without any, why there is none; [`csem.pipeline.trust.train_verdict`][]: the
            rule of [`csem.report.verdict`][] a ``csem run`` applies to its held-out split), and the judge's
            repeatability where the records carry ``judge.<aspect>.repeat`` scores into its
            ``judge_repeatability``. ``csem train`` and [`csem.train`][csem.api.train] set it; a ``csem run``
            fills the card from its own held-out split instead.

    Returns:
        The trained `csem.model.EvaluationModel` (best dev epoch with a dev set, else the last).

    Raises:
        TrainingDataError: bad rows, before training starts. LabelSpecError: a bad label specification.
        InputError: a bad setting (``train_layers`` beyond the encoder, an initial model of another
            architecture).
    """
    from csem.model.train import is_global_zero, train_student

    ts = training_set(records, label_col, dev_records=dev_records, judge_col=judge_col, normalise=normalise,
                      combine=combine, pairs=pairs, label_range=label_range, provenance=provenance, judge=judge,
                      rubric=rubric, where=where, dev_where=dev_where)
    for line in ts.notes:
        if log is not None:
            log(line)
    model = train_student(ts.records, ts.label_cols, mode, config, train_config, ts.dev_records,
                          label_range=ts.label_range, preferences=ts.preferences, lower_cache=lower_cache,
                          provenance={"judge": ts.judge, "rubric": ts.rubric, "notes": notes},
                          contrast=contrast, contrast_where=contrast_where, where=where)
    _card_entries(model.card, ts)
    if out_dir is not None and is_global_zero():
        model.save(out_dir)
    if verdict and is_global_zero():  # after saving: the trained model is kept whatever happens here
        # the one rule over the pipeline's evidence code (a standalone run measures what a pipeline does)
        from csem.model.card import write_card
        from csem.pipeline.trust import train_verdict

        model.card["verdict"], rep = train_verdict(model, ts.records, ts.dev_records, ts.label_cols)
        if rep:
            model.card["judge_repeatability"] = rep
        if out_dir is not None:
            write_card(Path(out_dir), model.card)
    return model


def _card_entries(card: dict, ts: TrainingSet) -> None:
    """The training set's entries of a metric card: ``labels`` (several judges, judged pairs) and the
    decisions taken from the data (``training.data_notes``)."""
    if ts.card_labels is not None:
        card["labels"] = ts.card_labels
    if ts.notes:
        card.setdefault("training", {})["data_notes"] = list(ts.notes)


__all__ = ["LabelSpecError", "TrainingSet", "fit", "label_columns", "training_set"]
