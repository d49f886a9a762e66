"""The public Python API: one function per stage, as ``csem.judge(...)``, ``csem.train(...)``,
``csem.load_metric(path).score(records)``.

Thin functions over the object API underneath (:mod:`csem.judge`, :mod:`csem.pipeline.annotate`,
:mod:`csem.model.fit`, :mod:`csem.apply`, :mod:`csem.meta`); each imports what it needs when
called, so ``import csem`` loads neither torch nor llama.cpp. Wherever a function takes ``data``,
it accepts a list of records (dicts), a records file (JSONL, CSV/TSV, Parquet) or the name of a
human-judgment dataset (:func:`csem.data.datasets.dataset_names`, e.g. ``"summeval"``).

    >>> import csem
    >>> labelled, summary = csem.judge("cands.jsonl", "geval/summeval-coherence", "local")  # doctest: +SKIP
    >>> csem.annotate("cands.jsonl", "csem/summ-coherence-ref-free", "local", out="labelled.jsonl")  # doctest: +SKIP
    >>> model = csem.train("labelled.jsonl", "judge.coherence", out_dir="my-metric")  # doctest: +SKIP
    >>> result = csem.load_metric("my-metric").score(new_records)  # doctest: +SKIP
    >>> result.scores["metric.csem.coherence"], result.system_score, result.hash  # doctest: +SKIP
    >>> table = csem.evaluate("summeval", humans=["human.coherence"])  # doctest: +SKIP
    >>> chosen = csem.rerank(nbest, ["my-metric"]).chosen  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from csem.apply.reranking import RerankResult
    from csem.judge.runner import JudgeSummary
    from csem.model import EvaluationModel


def read_data(data: Any, *, columns: Mapping[str, str] | None = None, required: Sequence[str] = ("candidate",),
              numeric: Sequence[str] = ()) -> list[dict]:
    """Records from ``data``: a list of dicts (copied), a records file, or a dataset name.

    Args:
        data: records, a path (JSONL, CSV/TSV, Parquet; read by :func:`csem.data.records.read_records`)
            or a dataset name (:func:`csem.data.datasets.load_dataset`, its documented columns).
        columns: ``{field: column}`` for a file whose columns have other names.
        required, numeric: as :func:`csem.data.records.read_records` (files only).

    Raises:
        FileNotFoundError: a string that is neither a file nor a dataset name.
        csem.data.records.RecordError: a malformed file (names file, line and field).
    """
    if isinstance(data, (str, Path)):
        path = Path(data).expanduser()
        if path.exists():
            from csem.data.records import read_records

            return read_records(path, columns=columns, required=required, numeric=numeric)
        from csem.data.datasets import dataset_names, load_dataset

        names = {n.replace("-", "_").lower() for n in dataset_names()}
        if isinstance(data, str) and data.replace("-", "_").lower() in names:
            return load_dataset(data)
        raise FileNotFoundError(f"{data}: no such records file, and not a dataset name ({', '.join(dataset_names())})")
    return [dict(r) for r in data]


def judge(data: Any, rubric: str | Sequence[str], judge: str = "local", *, mode: str = "probs",
          cache: str | Path | None = None, progress: bool = False, **options: Any) -> "tuple[list[dict], JudgeSummary]":
    """G-Eval judging: every record on every aspect of every rubric (:func:`csem.judge.judge_records`).

    Args:
        data: records, a records file or a dataset name (:func:`read_data`).
        rubric: rubric id(s) or file(s) (``"geval/"`` = every G-Eval aspect; a comma list or a list).
        judge: backend URI (``local``, ``llama-cpp:PATH``, ``openai:MODEL``).
        mode: ``probs`` | ``sample`` | ``parse``. cache: SQLite judgment cache (None: in memory).
        options: further :func:`csem.judge.judge_records` arguments (``n``, ``temperature``,
            ``backend_options`` ...).

    Returns:
        ``(records, summary)``: copies of the records with ``judge.<aspect>`` (the score on the
        rubric's scale, None when missing) and its side columns; the :class:`csem.judge.JudgeSummary`.

    Raises:
        as :func:`csem.judge.judge_records` (unknown rubric, a refused API key, bad records).
    """
    from csem.judge import judge_records

    return judge_records(read_data(data), rubric, judge, mode=mode, cache=cache, progress=progress, **options)


def annotate(data: Any, rubric: str | Sequence[str], judge: str = "local", *, out: str | Path,
             compare: bool = False, pairs: str = "all", per_source: int | None = None,
             rating_col: str | None = None, mode: str = "probs", seed: int = 0, cache: str | Path | None = None,
             progress: bool = False, backend_options: Mapping[str, Any] | None = None) -> dict:
    """CSEM stage ii, as ``csem annotate``: judge candidates and write the labelled file with its
    provenance ``<out>.judge.json`` (judge, mode, each column's rubric and scale), which
    :func:`train` reads for the label range and the metric card.

    Args:
        data: candidate records, a file or a dataset name (:func:`read_data`).
        rubric: rating rubric id(s) (or, with ``compare``, pairwise ones; a CSEM rating id names
            its pairwise twin).
        judge: backend URI. out: the labelled (or preference) file to write.
        compare: comparison ranking (:func:`csem.pipeline.annotate.compare_file`): pairs of the
            candidates of each source, judged in both orders; ``pairs`` (``all`` | ``random`` |
            ``balanced`` | ``adjacent``), ``per_source``, ``rating_col``, ``seed`` choose them.
        mode, cache, progress, backend_options: as :func:`judge`.

    Returns:
        The judge summary as a dict (total, judged, cached, failed, missing by reason, seconds).

    Raises:
        ValueError: no records. as :func:`csem.judge.judge_records` otherwise.
    """
    from csem.pipeline.annotate import annotate_file, compare_file

    rubrics = [r for r in rubric.split(",") if r.strip()] if isinstance(rubric, str) else list(rubric)
    recs = read_data(data)
    if compare:
        return compare_file(recs, out, rubrics=rubrics, judge=judge, mode=mode, strategy=pairs,
                            per_source=per_source, rating_col=rating_col, seed=seed, cache=cache,
                            progress=progress, backend_options=backend_options)
    return annotate_file(recs, out, rubrics=rubrics, judge=judge, mode=mode, cache=cache, progress=progress,
                         backend_options=backend_options)


def train(data: Any, label_col: str | Sequence[str], *, out_dir: str | Path | None = None, mode: str = "ref-free",
          dev: Any = None, judge_col: str | None = None, normalise: str = "none", combine: str = "mean",
          pairs: bool = False, label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
          config: Any = None, train_config: Any = None, judge: str | None = None, rubric: str | None = None,
          **settings: Any) -> "EvaluationModel":
    """CSEM stage iii, as ``csem train``: train the student on labelled records
    (:func:`csem.model.fit.fit`, the same path as the CLI and the pipeline).

    Args:
        data: labelled records, a labelled file (its ``<file>.judge.json`` from :func:`annotate` gives
            the label range, judge and rubric) or a dataset name.
        label_col: label column(s), comma separated, one head each; several judges of one aspect
            joined with ``+`` (``judge.coherence@gpt4+judge.coherence@chatgpt``).
        out_dir: the model folder to write (None: only return the model).
        mode: ``ref-free`` | ``ref-based`` | ``fluency`` | ``fluency-ref``.
        dev: dev records or file: per-epoch validation, best checkpoint, early stopping.
        judge_col, normalise, combine, pairs, label_range, judge, rubric: as ``csem train``
            (:func:`csem.model.fit.training_set`).
        config, train_config: a :class:`csem.model.ModelConfig` / :class:`csem.model.TrainConfig`.
        settings: single fields of either config (``encoder="minilm"``, ``max_epochs=1``, ``seed=13``);
            a name in neither raises TypeError.

    Returns:
        The trained :class:`csem.model.EvaluationModel` (``.card`` is its metric card).

    Raises:
        TypeError: an unknown setting. csem.model.TrainingDataError: bad training data.
        csem.model.labels.LabelSpecError: a bad label specification.
    """
    from csem.model import ModelConfig, TrainConfig
    from csem.model.fit import fit, label_columns

    model_fields = {k: v for k, v in settings.items() if k in ModelConfig.model_fields}
    train_fields = {k: v for k, v in settings.items() if k in TrainConfig.model_fields}
    unknown = sorted(set(settings) - set(model_fields) - set(train_fields))
    if unknown:
        raise TypeError(f"unknown training setting(s) {unknown}: not a field of ModelConfig or TrainConfig")
    config = (config or ModelConfig()).model_copy(update=model_fields) if model_fields else config
    train_config = (train_config or TrainConfig()).model_copy(update=train_fields) if train_fields else train_config
    cols = label_columns(label_col)
    numeric = () if pairs else cols
    required = () if pairs else ("candidate",)
    provenance = None
    if isinstance(data, (str, Path)) and Path(data).expanduser().exists():
        from csem.pipeline.annotate import read_provenance

        provenance = read_provenance(Path(data).expanduser())
    records = read_data(data, required=required, numeric=numeric)
    dev_records = read_data(dev, numeric=cols) if dev is not None else None
    where = str(data) if isinstance(data, (str, Path)) else "training data"
    return fit(records, label_col, mode=mode, out_dir=out_dir, config=config, train_config=train_config,
               dev_records=dev_records, judge_col=judge_col, normalise=normalise, combine=combine, pairs=pairs,
               label_range=label_range, provenance=provenance, judge=judge, rubric=rubric, where=where,
               dev_where=str(dev) if isinstance(dev, (str, Path)) else "dev data")


@dataclass
class MetricScores:
    """What :meth:`LearnedMetric.score` returns.

    Attributes:
        scores: ``{metric.<name>.<aspect>: one score per record}``, in input order; a head's score
            is on its label scale (not clipped), a multi-judge ensemble aspect's on [0, 1].
        system_score: per column, the mean of its scores over the records (COMET's system score),
            None when no record has one.
        hash: the settings hash (after bert_score's): what produced these numbers
            (:func:`csem.model.card.settings_hash`); equal hashes, equal scores.
        records: copies of the input records with the score columns added.
    """

    scores: dict[str, list[float | None]]
    system_score: dict[str, float | None]
    hash: str
    records: list[dict] = field(default_factory=list)


class LearnedMetric:
    """A trained student, loaded once (:func:`load_metric`); scores through the student's one
    scoring path (:class:`csem.apply.metrics.StudentMetric`, :mod:`csem.model.scoring`).

    Attributes:
        metric: the underlying :class:`csem.apply.metrics.StudentMetric` (what
            :func:`csem.apply.rerank`, MRT and the server use). model: the
            :class:`csem.model.EvaluationModel`. columns: the score columns. hash: the settings hash.
    """

    def __init__(self, metric: Any):
        self.metric = metric
        self.model = metric.model
        self.columns = list(metric.columns)
        self._hash: str | None = None

    @property
    def hash(self) -> str:
        """The settings hash (:func:`csem.model.card.settings_hash`), computed once."""
        if self._hash is None:
            from csem.model.card import settings_hash

            self._hash = settings_hash(self.model, self.metric.aspects, precision=self.metric.precision)
        return self._hash

    def score(self, data: Any) -> MetricScores:
        """Score records (or a file, or a dataset name): per-record scores, the system-level score
        (mean over records) and the settings hash.

        Raises:
            ValueError: a source or reference the model's mode needs is missing or empty (names the
                record and field).
        """
        records = read_data(data)
        cols = self.metric.score(records)
        system = {}
        for c, vs in cols.items():
            xs = [float(v) for v in vs if v is not None]
            system[c] = sum(xs) / len(xs) if xs else None
        from csem.model.scoring import add_columns

        return MetricScores(scores=dict(cols), system_score=system, hash=self.hash, records=add_columns(records, cols))

    def __repr__(self) -> str:
        return f"LearnedMetric({self.metric.name!r}, columns={self.columns})"


def load_metric(path: str | Path, *, aspects: Sequence[str] | None = None, batch_size: int = 64,
                precision: str = "auto") -> LearnedMetric:
    """Load a trained student (a model folder, ``DIR#coherence+relevance`` for some heads), as
    COMET's ``load_from_checkpoint``.

    Args:
        path: the model folder written by :func:`train` or ``csem train``.
        aspects: output aspects to score (default: each ensemble aspect of a multi-judge student,
            every other head).
        batch_size: records per forward pass. precision: ``auto`` | ``fp32`` | ``bf16`` | ``fp16``.

    Returns:
        A :class:`LearnedMetric`; ``.score(records)`` gives a :class:`MetricScores`.

    Raises:
        csem.model.ModelFolderError: not a model folder. ValueError: an aspect the model does not score.
    """
    from csem.apply.metrics import StudentMetric

    text = str(path)
    folder, _, heads = text.partition("#")
    if heads and aspects is None:
        aspects = [a for a in heads.split("+") if a]
    return LearnedMetric(StudentMetric(Path(folder).expanduser(), aspects, batch_size=batch_size,
                                       precision=precision))


def evaluate(data: Any, metrics: Sequence[str] | None = None, humans: Sequence[str] | None = None, *,
             levels: Sequence[str] = ("summary", "system", "dataset"),
             methods: Sequence[str] = ("spearman", "kendall", "pearson"), bootstrap: int = 1000,
             seed: int | None = 0) -> "pd.DataFrame":
    """Meta-evaluation, as ``csem meta-eval``: correlate score columns with human judgments
    (:func:`csem.meta.evaluate`).

    Args:
        data: records with ``human.<aspect>`` and score columns (a file, records or a dataset name).
        metrics: score columns (default: every ``metric.*`` and ``judge.*`` column present).
        humans: human columns (default: every ``human.*`` column present).
        levels: ``summary`` | ``system`` | ``dataset``. methods: ``spearman`` | ``kendall`` (tau-b)
            | ``kendall_c`` | ``pearson``. bootstrap: document resamples for the CIs (0: none).

    Returns:
        The long table of :func:`csem.meta.evaluate` (one row per column, aspect, level, method,
        with ``value`` in [-1, 1] and its bootstrap interval).

    Raises:
        ValueError: nothing to correlate; as :func:`csem.meta.evaluate` otherwise.
    """
    from csem.data.columns import score_columns
    from csem.meta import evaluate as meta_evaluate
    from csem.meta.inputs import PREDICTION_KINDS

    records = read_data(data, required=())
    metrics = list(metrics) if metrics else score_columns(records, PREDICTION_KINDS)
    humans = list(humans) if humans else score_columns(records, ("human",))
    if not metrics or not humans:
        raise ValueError(f"nothing to correlate: score columns {metrics}, human columns {humans}")
    return meta_evaluate(records, metrics, humans, levels=levels, methods=methods, bootstrap=bootstrap, seed=seed)


def rerank(data: Any, metrics: Any, *, weights: Any = None, normalize: str = "none") -> "RerankResult":
    """Pick one candidate per source (records grouped by ``doc_id``): the argmax of one metric
    (CSEM Eq. 7) or of a weighted sum of score columns (Eq. 8) (:func:`csem.apply.rerank`).

    Args:
        data: N-best lists: records, a file or a dataset name.
        metrics: metric specifications (a student folder ``DIR[#aspect]``, ``judge:RUBRIC@URI``, a
            baseline such as ``chrf``; a comma list or a list), loaded metrics, or
            :class:`LearnedMetric` objects.
        weights: one per score column (a list or ``"w1,w2"``), or ``{column: w}`` (others 0);
            default 1 each (:func:`csem.apply.reranking.parse_weights`).
        normalize: ``none`` | ``zscore`` (per source and column, before weighting).

    Returns:
        :class:`csem.apply.reranking.RerankResult` (``chosen``: one record per source).

    Raises:
        ValueError: bad weights, an unknown metric, a reference-based metric without references.
    """
    from csem.apply.metrics import load_metrics
    from csem.apply.reranking import rerank as apply_rerank

    if isinstance(metrics, str):
        loaded = load_metrics(metrics)
    else:
        items = [metrics] if isinstance(metrics, LearnedMetric) or not isinstance(metrics, Sequence) else metrics
        loaded = load_metrics([m.metric if isinstance(m, LearnedMetric) else m for m in items])
    return apply_rerank(read_data(data), loaded, weights=weights, normalize=normalize)


__all__ = ["LearnedMetric", "MetricScores", "annotate", "evaluate", "judge", "load_metric", "read_data",
           "rerank", "train"]
