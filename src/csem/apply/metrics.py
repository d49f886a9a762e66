"""One shape for every metric the apply layer uses: a learned student, the LLM judge, a baseline.

A [`Metric`][csem.apply.metrics.Metric] is loaded once and then scores many batches of records;
its result is keyed by score column (``metric.<name>.<aspect>``, ``judge.<aspect>``,
``metric.<baseline>``), one value per record in input order (``None`` where the metric gave no
score, e.g. an unparseable judge answer): the ``scores`` of a student's
[`csem.model.prediction.Prediction`][]. Reranking, MBR, MRT rewards, the TRL reward and the server
call ``score``; for a student that is [`csem.model.EvaluationModel.predict`][], the one scoring method.

Metric specifications (CLI ``--metric`` and [`load_metric`][csem.apply.metrics.load_metric]):

=====================================  =============================================================
``DIR``                                a student folder written by ``csem train`` (every head)
``DIR#coherence+relevance``            the same, only the named heads
``judge:RUBRIC[+RUBRIC]@URI``          the G-Eval judge, e.g. ``judge:geval/summeval-coherence@local``
``rouge1`` ``rouge2`` ``rougeL``       reference-based baselines of [`csem.baselines`][]
``rougeLsum`` ``bleu`` ``chrf``
``bertscore``
=====================================  =============================================================
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from csem.errors import InputError

Scores = dict[str, list["float | None"]]


@runtime_checkable
class Metric(Protocol):
    """A loaded metric.

    Attributes:
        name: the specification it was loaded from (for logs and reports).
        columns: the score columns it writes, in a fixed order.
        needs_reference: whether every record needs a ``reference``.
    """

    name: str
    columns: list[str]
    needs_reference: bool

    def score(self, records: Sequence[Mapping[str, Any]]) -> Scores:
        """``{column: one float or None per record}`` for ``records`` (input order)."""
        ...


class StudentMetric:
    """A trained evaluation model ([`csem.model.EvaluationModel`][]) as a [`Metric`][csem.apply.metrics.Metric]:
    a thin wrapper over [`EvaluationModel.predict`][csem.model.EvaluationModel.predict], the one
    scoring method, with the aspects, name and settings fixed once.

    Args:
        model: the model folder or a loaded [`csem.model.EvaluationModel`][].
        aspects: output aspects to keep (default: `csem.model.scoring.default_aspects`: each
            ensemble aspect of a multi-judge student, every other head), e.g. ``["coherence"]`` or
            a single judge's head ``["coherence@gpt-4"]``.
        batch_size, precision: passed to ``predict``.
        name: metric name in the columns (default: the model's ``config.name``).
        degenerate: ``floor`` (an empty, whitespace or NUL-containing candidate scores each
            scale's minimum) | ``error`` (raises `csem.model.scoring.DegenerateTextError`).

    Attributes:
        scales: column -> its scale ``(min, max)`` (the label range in the metric card; ``(0, 1)``
            for an ensemble aspect). fingerprint: sha256 of the model's config and weights
            (`csem.model.scoring.model_fingerprint`), computed on first use. last: the last
            [`csem.model.prediction.Prediction`][] (std, hash).

    Raises:
        csem.model.ModelFolderError: the folder is not a model folder.
        ValueError: an aspect the model does not score.
    """

    def __init__(self, model: Any, aspects: Sequence[str] | None = None, *, batch_size: int = 64,
                 precision: str = "auto", name: str | None = None, degenerate: str = "floor"):
        from csem.data.columns import metric_column
        from csem.model import EvaluationModel
        from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE
        from csem.model.scoring import DEGENERATE_MODES, check_aspects

        self.model = model if isinstance(model, EvaluationModel) else EvaluationModel.load(model)
        self.aspects = check_aspects(self.model, aspects, where=f"model {model}")
        if degenerate not in DEGENERATE_MODES:
            raise InputError(f"unknown degenerate-text handling '{degenerate}'; choose from {DEGENERATE_MODES}")
        self.metric_name = name or self.model.config.name
        self.name = str(model) if not isinstance(model, EvaluationModel) else self.metric_name
        self.columns = [metric_column(self.metric_name, a) for a in self.aspects]
        scales = self.model.output_aspects
        self.scales = {c: scales[a] for c, a in zip(self.columns, self.aspects)}
        self.mode = self.model.config.mode
        self.needs_reference = bool(NEEDS_REFERENCE[self.mode])
        self.needs_source = bool(NEEDS_SOURCE[self.mode])
        self.batch_size, self.precision, self.degenerate = batch_size, precision, degenerate
        self.last = None
        self._lock = threading.Lock()  # one model, several threads (the server): one call at a time

    @property
    def fingerprint(self) -> str:
        from csem.model.scoring import model_fingerprint

        return model_fingerprint(self.model)

    def predict(self, records: Sequence[Mapping[str, Any]]) -> Any:
        """[`EvaluationModel.predict`][csem.model.EvaluationModel.predict] with this metric's settings."""
        with self._lock:
            self.last = self.model.predict(records, aspects=self.aspects, name=self.metric_name,
                                           batch_size=self.batch_size, precision=self.precision,
                                           degenerate=self.degenerate)
            return self.last

    def score(self, records: Sequence[Mapping[str, Any]]) -> Scores:
        """``{column: one float per record}`` (input order): the prediction's ``scores``. Raises as
        ``predict`` (ValueError for a missing/empty source or reference the mode needs)."""
        return dict(self.predict(records).scores)


class JudgeMetric:
    """The G-Eval judge ([`csem.judge.judge_records`][]) as a metric: one column per aspect.

    Args:
        judge: backend URI (``local``, ``llama-cpp:PATH``, ``openai:MODEL``).
        rubrics: rubric ids or paths.
        cache: SQLite cache file (recommended: reranking and MERT re-score the same candidates).
        options: further keyword arguments of `judge_records` (``mode``, ``n`` ...).

    A degenerate candidate (empty, whitespace only, or holding a NUL character:
    `csem.model.scoring.degenerate_reason`) is never sent to the judge: it gets the minimum of
    each rubric's scale, as a student's scoring path gives it (``scales``: column -> ``(min, max)``).
    """

    def __init__(self, judge: str, rubrics: Sequence[str], *, cache: str | Path | None = None, **options: Any):
        from csem.judge.runner import rubric_columns
        from csem.rubrics import load_rubrics

        self.judge, self.rubric_ids = judge, list(rubrics)
        self.rubrics = load_rubrics(",".join(self.rubric_ids))
        cols = rubric_columns(self.rubrics)
        self.columns = [str(c) for c in cols.values()]
        by_id = {r.id: r for r in self.rubrics}
        self.scales = {str(c): (float(by_id[rid].scale.min), float(by_id[rid].scale.max)) for (rid, _), c in cols.items()}
        self.name = f"judge:{'+'.join(self.rubric_ids)}@{judge}"
        self.needs_reference = any(getattr(r, "uses_reference", False) for r in self.rubrics)
        self.cache, self.options = cache, {"progress": False, **options}
        self.last_summary = None

    def score(self, records: Sequence[Mapping[str, Any]]) -> Scores:
        from csem.judge import judge_records

        from csem.model.scoring import degenerate_reason

        out: Scores = {c: [self.scales[c][0]] * len(records) for c in self.columns}
        todo = [i for i, r in enumerate(records) if not degenerate_reason(r.get("candidate"))]
        if not todo:
            return out
        recs = [dict(records[i], id=str(records[i].get("id", i))) for i in todo]
        rows, self.last_summary = judge_records(recs, self.rubrics, self.judge, cache=self.cache, **self.options)
        for i, row in zip(todo, rows):
            for c in self.columns:
                out[c][i] = row.get(c)
        return out


class BaselineMetric:
    """A reference-based baseline of [`csem.baselines`][] (ROUGE, BLEU, chrF, BERTScore).

    Raises:
        ValueError: unknown baseline name.
    """

    def __init__(self, name: str, *, multi_ref: str = "max"):
        from csem.baselines import BASELINES

        if name not in BASELINES:
            raise InputError(f"unknown metric '{name}': not a baseline ({', '.join(BASELINES)}), "
                             "a judge ('judge:RUBRIC@URI') or an existing student folder")
        self.name, self.multi_ref = name, multi_ref
        from csem.data.columns import metric_column

        self.columns = [metric_column(name)]
        self.needs_reference = True

    def score(self, records: Sequence[Mapping[str, Any]]) -> Scores:
        from csem.baselines import BASELINES, rouge_scores

        if not records:
            return {self.columns[0]: []}
        if self.name.startswith("rouge"):
            values = rouge_scores(records, (self.name,), reduce=self.multi_ref)[self.name]
        else:
            values = BASELINES[self.name](records)
        return {self.columns[0]: [float(v) for v in values]}


def load_metric(spec: Any, *, judge_cache: str | Path | None = None, **options: Any) -> Metric:
    """Load a metric from its specification (see the module docstring); a loaded
    [`csem.model.EvaluationModel`][] (what [`csem.load_metric`][csem.api.load_metric] and [`csem.train`][csem.api.train] return)
    becomes a [`StudentMetric`][csem.apply.metrics.StudentMetric]; a [`Metric`][csem.apply.metrics.Metric] passes through.

    Args:
        spec: ``DIR[#aspect+aspect]`` | ``judge:RUBRIC[+RUBRIC]@URI`` | a baseline name.
        judge_cache: SQLite cache for a judge metric.
        options: for a student, [`StudentMetric`][csem.apply.metrics.StudentMetric] keyword arguments; for a judge,
            [`csem.judge.judge_records`][] options.

    Raises:
        ValueError: an unknown name, a malformed judge spec, or a folder that is not a model.
    """
    if not isinstance(spec, (str, Path)):
        from csem.model import EvaluationModel

        return StudentMetric(spec, **options) if isinstance(spec, EvaluationModel) else spec
    spec = str(spec).strip()
    if spec.startswith("judge:"):
        body = spec[len("judge:"):]
        if "@" not in body:
            raise InputError(f"judge metric '{spec}': write judge:RUBRIC[+RUBRIC]@URI, "
                             "e.g. judge:geval/summeval-coherence@local")
        rubrics, uri = body.rsplit("@", 1)
        return JudgeMetric(uri, [r for r in rubrics.split("+") if r], cache=judge_cache, **options)
    path, _, aspects = spec.partition("#")
    if Path(path).expanduser().is_dir():
        from csem.model import ModelFolderError

        try:
            return StudentMetric(Path(path).expanduser(), [a for a in aspects.split("+") if a] or None, **options)
        except ModelFolderError as exc:
            raise InputError(str(exc)) from exc
    return BaselineMetric(spec)


def load_metrics(specs: str | Sequence[str | Metric], **options: Any) -> list[Metric]:
    """Several metrics: a comma-separated string or a list of specifications (see [`load_metric`][csem.apply.metrics.load_metric])."""
    items = [s for s in specs.split(",")] if isinstance(specs, str) else list(specs)
    return [load_metric(s, **options) for s in items if not (isinstance(s, str) and not s.strip())]


def score_all(metrics: Sequence[Metric], records: Sequence[Mapping[str, Any]]) -> Scores:
    """Every column of every metric over ``records``; raises ValueError when two metrics share a column
    or a reference-based metric meets a record without a reference (naming the record)."""
    from csem.data.records import references_of

    out: Scores = {}
    for m in metrics:
        if m.needs_reference:
            for i, r in enumerate(records):
                if not references_of(r):
                    raise InputError(f"metric '{m.name}' is reference-based: record "
                                     f"'{r.get('id', i)}' has no 'reference'")
        for col, values in m.score(records).items():
            if col in out:
                raise InputError(f"two metrics write the column '{col}'")
            out[col] = values
    return out
