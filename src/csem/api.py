"""The public Python API: one function per stage, as ``csem.judge(...)``, ``csem.train(...)``,
``csem.load_metric(path).predict(records)``.

Thin functions over the object API underneath ([`csem.judge`][], `csem.pipeline.annotate`,
[`csem.model.fit`][], [`csem.apply`][], [`csem.meta`][]); each imports what it needs when
called, so ``import csem`` loads neither torch nor llama.cpp. Wherever a function takes ``data``,
it accepts a list of records (dicts), a records file (JSONL, CSV/TSV, Parquet) or the name of a
human-judgment dataset ([`csem.data.datasets.dataset_names`][], e.g. ``"summeval"``).

    >>> import csem
    >>> labelled, summary = csem.judge("cands.jsonl", "geval/summeval-coherence", "local")
    >>> csem.annotate("cands.jsonl", "csem/summ-coherence-ref-free", "local", out="labelled.jsonl")
    >>> model = csem.train("labelled.jsonl", "judge.coherence", out_dir="my-metric")
    >>> result = csem.load_metric("my-metric").predict(new_records)
    >>> result.scores["metric.csem.coherence"], result.system_score, result.hash
    >>> table = csem.evaluate("summeval", humans=["human.coherence"])
    >>> chosen = csem.rerank(nbest, ["my-metric"]).chosen
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from csem.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from csem.apply.reranking import RerankResult
    from csem.judge.runner import JudgeSummary
    from csem.model import EvaluationModel


def read_data(data: Any, *, columns: Mapping[str, str] | None = None, required: Sequence[str] = ("candidate",),
              numeric: Sequence[str] = ()) -> list[dict]:
    """Records from ``data``: a list of dicts (copied), a records file, or a dataset name.

    Args:
        data: records, a path (JSONL, CSV/TSV, Parquet; read by [`csem.data.records.read_records`][]),
            a file shipped with csem (``package:new.jsonl``: [`csem.data.records.package_path`][])
            or a dataset name ([`csem.data.datasets.load_dataset`][], its documented columns).
        columns: ``{field: column}`` for a file whose columns have other names.
        required, numeric: as [`csem.data.records.read_records`][] (files only).

    Raises:
        FileNotFoundError: a string that is neither a file nor a dataset name.
        csem.data.records.RecordError: a malformed file (names file, line and field).
    """
    if isinstance(data, (str, Path)):
        from csem.data.records import package_path

        path = package_path(data).expanduser()
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
    """G-Eval judging: every record on every aspect of every rubric ([`csem.judge.judge_records`][]).

    Args:
        data: records, a records file or a dataset name ([`read_data`][csem.api.read_data]).
        rubric: rubric id(s) or file(s) (``"geval/"`` = every G-Eval aspect; a comma list or a list).
        judge: backend URI (``local``, ``llama-cpp:PATH``, ``openai:MODEL``).
        mode: ``probs`` | ``sample`` | ``parse``. cache: SQLite judgment cache (None: in memory).
        options: further [`csem.judge.judge_records`][] arguments (``n``, ``temperature``,
            ``backend_options``, ``batch``, ``prices`` ...).

    Returns:
        ``(records, summary)``: copies of the records with ``judge.<aspect>`` (the score on the
        rubric's scale, None when missing) and its side columns; the [`csem.judge.JudgeSummary`][].

    Raises:
        as [`csem.judge.judge_records`][] (unknown rubric, a refused API key, bad records).
    """
    from csem.judge import judge_records

    return judge_records(read_data(data), rubric, judge, mode=mode, cache=cache, progress=progress, **options)


def annotate(data: Any, rubric: str | Sequence[str], judge: str = "local", *, out: str | Path,
             compare: bool = False, pairs: str = "all", per_source: int | None = None,
             rating_col: str | None = None, mode: str = "probs", seed: int = 0, cache: str | Path | None = None,
             progress: bool = False, backend_options: Mapping[str, Any] | None = None, repeatability: float = 0.0,
             repeat_rubrics: str | Sequence[str] | None = None, repeat_seed: int = 0, batch: Any = None,
             prices: Any = None) -> dict:
    """CSEM stage ii, as ``csem annotate``: judge candidates and write the labelled file with its
    provenance ``<out>.judge.json`` (judge, mode, each column's rubric and scale), which
    [`train`][csem.api.train] reads for the label range and the metric card.

    Args:
        data: candidate records, a file or a dataset name ([`read_data`][csem.api.read_data]).
        rubric: rating rubric id(s) (or, with ``compare``, pairwise ones; a CSEM rating id names
            its pairwise twin).
        judge: backend URI. out: the labelled (or preference) file to write.
        compare: comparison ranking (`csem.pipeline.annotate.compare_file`): pairs of the
            candidates of each source, judged in both orders; ``pairs`` (``all`` | ``random`` |
            ``balanced`` | ``adjacent``), ``per_source``, ``rating_col``, ``seed`` choose them.
        mode, cache, progress, backend_options: as [`judge`][csem.api.judge].
        repeatability: share of the sources (0-1) judged a second time under a second rendering of each
            rubric (its paraphrase, or ``repeat_rubrics``: one second rubric id or file per rubric; in
            ``sample`` mode a second set of samples), into ``judge.<aspect>.repeat`` (never a training
            label); writes ``<out>.repeatability.json`` with the judge's repeatability and its attenuation
            bound ([`csem.judge.repeat`][]). repeat_seed: the draw of those sources.
        batch: ``True`` (batch jobs of an ``openai:`` judge, state in ``<out>.batch``) or a
            [`csem.judge.batch.BatchOptions`][] (no waiting, resubmitting, a vLLM request file, result
            files); while requests are pending the output is not written and the summary says so.
        prices: a [`csem.judge.cost.Prices`][] or ``{"input": usd, "output": usd}`` per million
            tokens: ``cost_usd`` in the summary and the provenance.

    Returns:
        The judge summary as a dict (total, judged, cached, failed, missing by reason, seconds; ``repeat``:
        the second pass's counts).

    Raises:
        ValueError: no records. as [`csem.judge.judge_records`][] otherwise.
    """
    from csem.pipeline.annotate import annotate_file, compare_file

    rubrics = [r for r in rubric.split(",") if r.strip()] if isinstance(rubric, str) else list(rubric)
    recs = read_data(data)
    if compare:
        return compare_file(recs, out, rubrics=rubrics, judge=judge, mode=mode, strategy=pairs,
                            per_source=per_source, rating_col=rating_col, seed=seed, cache=cache,
                            progress=progress, backend_options=backend_options)
    if isinstance(repeat_rubrics, str):
        repeat_rubrics = [r for r in repeat_rubrics.split(",") if r.strip()]
    if batch is True:
        from csem.judge.batch import BatchOptions

        batch = BatchOptions()
    if isinstance(prices, Mapping):
        from csem.judge.cost import Prices

        prices = Prices(**prices)
    return annotate_file(recs, out, rubrics=rubrics, judge=judge, mode=mode, cache=cache, progress=progress,
                         backend_options=backend_options, repeatability=repeatability,
                         repeat_rubrics=repeat_rubrics, repeat_seed=repeat_seed, batch=batch or None, prices=prices)


def train(data: Any, label_col: str | Sequence[str], *, out_dir: str | Path | None = None, mode: str | None = None,
          dev: Any = None, judge_col: str | None = None, normalise: str = "none", combine: str = "mean",
          pairs: bool = False, label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
          config: Any = None, train_config: Any = None, judge: str | None = None, rubric: str | None = None,
          **settings: Any) -> "EvaluationModel":
    """CSEM stage iii, as ``csem train``: train the student on labelled records
    ([`csem.model.fit.fit`][], the same path as the CLI and the pipeline).

    Args:
        data: labelled records, a labelled file (its ``<file>.judge.json`` from [`annotate`][csem.api.annotate] gives
            the label range, judge and rubric) or a dataset name.
        label_col: label column(s), comma separated, one head each; several judges of one aspect
            joined with ``+`` (``judge.coherence@gpt4+judge.coherence@chatgpt``).
        out_dir: the model folder to write (None: only return the model).
        mode: ``ref-free`` | ``ref-based`` | ``fluency`` | ``fluency-ref`` (None: ``config.mode``, else ``ref-free``).
        dev: dev records or file: per-epoch validation, best checkpoint, early stopping; its records of
            sources absent from ``data`` give the card's verdict.
        judge_col, normalise, combine, pairs, label_range, judge, rubric: as ``csem train``
            ([`csem.model.fit.training_set`][]).
        config, train_config: a [`csem.model.ModelConfig`][] / [`csem.model.TrainConfig`][].
        settings: single fields of either config (``encoder="minilm"``, ``max_epochs=1``, ``seed=13``);
            a name in neither raises TypeError.

    Returns:
        The trained [`csem.model.EvaluationModel`][] (``.card`` is its metric card; ``.card["verdict"]`` the
        verdict on the dev records of sources absent from the training data, or why there is none,
        [`csem.pipeline.trust.train_verdict`][]).

    Raises:
        TypeError: an unknown setting. csem.model.TrainingDataError: bad training data.
        csem.model.labels.LabelSpecError: a bad label specification.
    """
    from csem.model import ModelConfig, TrainConfig
    from csem.model.fit import fit
    from csem.model.labels import parse_label_spec

    model_fields = {k: v for k, v in settings.items() if k in ModelConfig.model_fields}
    train_fields = {k: v for k, v in settings.items() if k in TrainConfig.model_fields}
    unknown = sorted(set(settings) - set(model_fields) - set(train_fields))
    if unknown:
        raise TypeError(f"unknown training setting(s) {unknown}: not a field of ModelConfig or TrainConfig")
    # validated as a config file's settings are (one error naming the field)
    config = ModelConfig.model_validate({**(config or ModelConfig()).model_dump(), **model_fields})
    train_config = TrainConfig.model_validate({**(train_config or TrainConfig()).model_dump(), **train_fields})
    groups = parse_label_spec(label_col)  # parsed once, passed on to fit
    cols = [c for g in groups for c in g]
    numeric = () if pairs else cols
    required = () if pairs else ("candidate",)
    provenance = None
    if isinstance(data, (str, Path)) and Path(data).expanduser().exists():
        from csem.pipeline.annotate import read_provenance

        provenance = read_provenance(Path(data).expanduser())
    records = read_data(data, required=required, numeric=numeric)
    dev_records = read_data(dev, numeric=cols) if dev is not None else None
    where = str(data) if isinstance(data, (str, Path)) else "training data"
    return fit(records, groups, mode=mode or config.mode, out_dir=out_dir, config=config, train_config=train_config,
               dev_records=dev_records, judge_col=judge_col, normalise=normalise, combine=combine, pairs=pairs,
               label_range=label_range, provenance=provenance, judge=judge, rubric=rubric, where=where,
               dev_where=str(dev) if isinstance(dev, (str, Path)) else "dev data", verdict=True)


def load_metric(path: str | Path, *, device: str = "cpu") -> "EvaluationModel":
    """Load a trained student (a model folder), as COMET's ``load_from_checkpoint``: the same kind
    of object [`train`][csem.api.train] returns. Score with its one method,
    [`EvaluationModel.predict`][csem.model.EvaluationModel.predict] (records, a records file or
    a dataset name in; a [`csem.model.Prediction`][] with per-record scores, the system-level score
    and the settings hash out).

    Args:
        path: the model folder written by [`train`][csem.api.train] or ``csem train``.
        device: where to load it (``cpu``, ``cuda`` ...).

    Returns:
        The loaded [`csem.model.EvaluationModel`][].

    Raises:
        csem.model.ModelFolderError: not a model folder (a ``DIR#aspect`` suffix is not one:
            name aspects with ``predict(records, aspects=[...])``).
    """
    from csem.model import EvaluationModel

    return EvaluationModel.load(Path(path).expanduser(), device=device)


def evaluate(data: Any, metrics: Sequence[str] | None = None, humans: Sequence[str] | None = None, *,
             levels: Sequence[str] = ("summary", "system", "dataset"),
             methods: Sequence[str] = ("spearman", "kendall", "pearson"), bootstrap: int = 1000,
             seed: int | None = 0) -> "pd.DataFrame":
    """Meta-evaluation, as ``csem meta-eval``: correlate score columns with human judgments
    (`csem.meta.evaluate`).

    Args:
        data: records with ``human.<aspect>`` and score columns (a file, records or a dataset name).
        metrics: score columns (default: every ``metric.*`` and ``judge.*`` column present).
        humans: human columns (default: every ``human.*`` column present).
        levels: ``summary`` | ``system`` | ``dataset``. A level the records cannot support is
            skipped with a warning that names the missing field ([`supported_levels`][csem.api.supported_levels]):
            ``system`` without a ``system_id`` in every record, ``summary`` without a ``doc_id`` shared
            by two or more records.
        methods: ``spearman`` | ``kendall`` (tau-b) | ``kendall_c`` | ``pearson``.
        bootstrap: document resamples for the CIs (0: none).

    Returns:
        The long table of `csem.meta.evaluate` (one row per column, aspect, level, method,
        with ``value`` in [-1, 1] and its bootstrap interval); without rows when no requested level
        is supported.

    Raises:
        ValueError: nothing to correlate; an unknown level or method; as `csem.meta.evaluate` otherwise.
    """
    from csem.data.columns import score_columns
    from csem.meta import evaluate as meta_evaluate
    from csem.meta.inputs import PREDICTION_KINDS

    records = read_data(data, required=())
    metrics = list(metrics) if metrics else score_columns(records, PREDICTION_KINDS)
    humans = list(humans) if humans else score_columns(records, ("human",))
    if not metrics or not humans:
        raise InputError(f"nothing to correlate: score columns {metrics}, human columns {humans}")
    return meta_evaluate(records, metrics, humans, levels=supported_levels(records, levels), methods=methods,
                         bootstrap=bootstrap, seed=seed)


def supported_levels(records: Sequence[Mapping[str, Any]], levels: Sequence[str]) -> list[str]:
    """The ``levels`` the records can support; each other one is dropped with a warning naming the
    field it lacks.

    ``system`` needs a ``system_id`` in every record (per-system means); ``summary`` needs a
    ``doc_id`` shared by at least two records (it correlates within each document, so without one
    every value would be NaN); ``dataset`` (pooled) needs nothing.

    Raises:
        ValueError: an unknown level name.
    """
    import warnings

    from csem.meta.correlation import level_name

    out = []
    for level in (level_name(lv) for lv in levels):
        if level == "system" and any(r.get("system_id") is None for r in records):
            n = sum(r.get("system_id") is None for r in records)
            warnings.warn(f"system level skipped: {n} of {len(records)} records have no 'system_id' (the system "
                          "level correlates per-system means)", stacklevel=3)
            continue
        if level == "summary":
            docs = [r.get("doc_id") for r in records if r.get("doc_id") is not None]
            if len(docs) == len(set(docs)):
                why = "no record has a 'doc_id'" if not docs else "no 'doc_id' is shared by two or more records"
                warnings.warn(f"summary level skipped: {why} (the summary level correlates the candidates of "
                              "each document)", stacklevel=3)
                continue
        if level not in out:
            out.append(level)
    return out


def rerank(data: Any, metrics: Any, *, weights: Any = None, normalize: str = "none") -> "RerankResult":
    """Pick one candidate per source (records grouped by ``doc_id``): the argmax of one metric
    (CSEM Eq. 7) or of a weighted sum of score columns (Eq. 8) ([`csem.apply.rerank`][csem.apply.reranking.rerank]).

    Args:
        data: N-best lists: records, a file or a dataset name.
        metrics: metric specifications (a student folder ``DIR[#aspect]``, ``judge:RUBRIC@URI``, a
            baseline such as ``chrf``; a comma list or a list), loaded metrics, or students
            loaded by [`load_metric`][csem.api.load_metric] or trained by [`train`][csem.api.train]
            (scored through their ``predict``).
        weights: one per score column (a list or ``"w1,w2"``), or ``{column: w}`` (others 0);
            default 1 each ([`csem.apply.reranking.parse_weights`][]).
        normalize: ``none`` | ``zscore`` (per source and column, before weighting).

    Returns:
        [`csem.apply.reranking.RerankResult`][] (``chosen``: one record per source).

    Raises:
        ValueError: bad weights, an unknown metric, a reference-based metric without references.
    """
    from csem.apply.metrics import load_metrics
    from csem.apply.reranking import rerank as apply_rerank

    if isinstance(metrics, str):
        loaded = load_metrics(metrics)
    else:
        loaded = load_metrics(list(metrics) if isinstance(metrics, Sequence) else [metrics])
    return apply_rerank(read_data(data), loaded, weights=weights, normalize=normalize)


__all__ = ["annotate", "evaluate", "judge", "load_metric", "read_data", "rerank", "supported_levels", "train"]
