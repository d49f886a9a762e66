"""Typed configuration of a CSEM pipeline file (``csem run PIPELINE.yaml``).

A pipeline chains the paper's three stages and the checks after them::

    collect -> annotate [-> compare] -> train -> score -> meta-eval [-> seeds] [-> rerank] [-> mrt] -> report

With a ``compare`` section the judge also compares pairs of candidates of each training source
(comparison ranking, CSEM Sec. VI-F) and the student learns from those pairs (Eq. 3) instead of
from the ratings; the ratings of the annotate stage still choose ``adjacent`` pairs and are what
the student is measured against on the held-out sources.

With a ``rerank`` section the trained student (or any metric ``csem rerank`` takes) picks one
candidate per held-out source from the collect stage's N-best lists (CSEM Eq. 7/8; see
`csem.pipeline.rerank`).

With a ``score`` section the score stage sends the records the student is least sure of to the
judge and writes the combined column beside the student's own (a cascade; see
`csem.pipeline.cascade`); what meta-eval and the later stages measure stays the student's own score.

With an ``mrt`` section a generator is fine-tuned with minimum risk training mixed with MLE (CSEM
Eq. 12), the trained student as the reward, on the training sources (see `csem.pipeline.mrt`).

Relative paths in the file are resolved against the file's folder; ``package:NAME`` names a file
shipped in ``csem/pipeline/examples``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from csem.apply.cascade import CALIBRATIONS, RULES
from csem.collect.sampler import GeneratorSpec
from csem.errors import InputError
from csem.judge.cost import Prices
from csem.llm import GenerateConfig

STAGES = ("collect", "annotate", "compare", "train", "score", "meta_eval", "curve", "seeds", "rerank", "mrt", "verdict",
          "report")
EXAMPLES_DIR = Path(__file__).parent / "examples"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourcesConfig(_Strict):
    path: str
    columns: dict[str, str] = Field(default_factory=dict)  # {csem_field: file_column}
    limit: int | None = Field(None, ge=1)


class SplitConfig(_Strict):
    """Held-out sources for evaluating the student (split by source, never by candidate)."""

    test_fraction: float = Field(0.25, gt=0, lt=1)
    dev_fraction: float = Field(0.15, ge=0, lt=1)  # of the training sources: model selection
    seed: int = 0
    test_ids: list[str] | None = None  # explicit held-out source ids (overrides the fraction)


class CollectConfig(_Strict):
    generators: list[GeneratorSpec]
    task: str = "summarize"
    decoding: GenerateConfig = Field(default_factory=GenerateConfig)  # over collect's DEFAULT_DECODING (top-k 50)
    include_reference: bool = True
    keep: Literal["all", "one"] = "all"
    duplicates: Literal["drop", "keep"] = "drop"
    empty: Literal["drop", "keep"] = "drop"
    # samples cut at max_tokens: keep as generated, trim to the last complete sentence, or drop
    truncated: Literal["keep", "trim", "drop"] = "keep"
    seed: int = 0


class AnnotateConfig(_Strict):
    judge: str = "local"
    rubrics: list[str]
    mode: Literal["probs", "sample", "parse"] = "probs"
    n: int = Field(20, ge=1)
    temperature: float = Field(1.0, ge=0)
    options: dict = Field(default_factory=dict)  # backend options (as --judge-opt): base_url, n_ctx, ...
    # the judge's repeatability (csem.judge.repeat): this share of the sources judged again under a second
    # rendering of each rubric (its paraphrase; sample mode: new samples; or repeat_rubrics, one per rubric)
    repeatability: float = Field(0.0, ge=0, le=1)
    repeat_rubrics: list[str] | None = None
    repeat_seed: int = 0
    # the requests as batch jobs (csem annotate --batch; an openai: judge), state in labelled.jsonl.batch/;
    # prices: {input, output} US dollars per million tokens (csem.judge.cost.Prices). Neither changes a
    # judgment, so neither is part of the stage's fingerprint (ANNOTATE_TRANSPORT_FIELDS)
    batch: bool = False
    prices: Prices | None = None


#: annotate settings added after run folders existed: left out of the annotate fingerprint at their default
ANNOTATE_FIELDS_ADDED = ("repeatability", "repeat_rubrics", "repeat_seed")
#: annotate settings of how the judge is reached and priced, never of what it judges: not fingerprinted
ANNOTATE_TRANSPORT_FIELDS = ("batch", "prices")


class CurveConfig(_Strict):
    """The curve stage: the student's learning curve on this run's own labels.

    The train stage's recipe (one student, not an ensemble: ``train.model.members`` is set to 1) trained
    on nested shares of the training sources (``shares``, each a superset of the one before: a seeded
    order of the sources, its first ``share``), with ``seeds`` (default: the train stage's seed), each
    scored on the held-out sources; a log-linear fit of agreement against training labels, its slope
    (the expected gain per doubling of the labels) with a 95% interval, and the labels at which the fit
    comes within 0.05 of the judge's attenuation bound ``sqrt(r)`` ([`csem.meta.curve`][]).
    """

    shares: list[float] = Field(default_factory=lambda: [0.25, 0.5, 1.0], min_length=2)
    seeds: list[int] | None = Field(None, min_length=1)
    seed: int = 0  # the order in which sources enter the nested shares

    @model_validator(mode="after")
    def _shares(self) -> "CurveConfig":
        if any(not 0 < s <= 1 for s in self.shares) or sorted(set(self.shares)) != list(self.shares):
            raise InputError(f"curve.shares must rise, each in (0, 1]: {self.shares}")
        return self


class CompareConfig(_Strict):
    """Comparison annotation of the training sources' candidates (``csem annotate --compare``).

    rubrics: pairwise rubric ids or files; default: the pairwise versions of ``annotate.rubrics``
    (``csem/summ-coherence-ref-free`` names ``pairwise/summ-coherence-ref-free``). pairs: ``all``
    pairs per source, ``random`` (``per_source`` pairs per source, seeded by ``seed``), ``balanced``
    (``per_source`` pairs in random perfect matchings, every candidate compared as often) or
    ``adjacent`` (neighbours after sorting by ``rating_col``, default the annotate stage's judge
    column when it wrote only one). mode: ``probs`` | ``parse``. judge, options: default the
    annotate stage's.
    """

    rubrics: list[str] | None = Field(None, min_length=1)
    pairs: Literal["all", "random", "balanced", "adjacent"] = "all"
    per_source: int | None = Field(None, ge=1)
    rating_col: str | None = None
    seed: int = 0
    mode: Literal["probs", "parse"] = "probs"
    judge: str | None = None
    options: dict | None = None

    @model_validator(mode="after")
    def _pairs(self) -> "CompareConfig":
        if self.pairs in ("random", "balanced") and self.per_source is None:
            raise InputError(f"compare.pairs '{self.pairs}' needs compare.per_source (pairs per source)")
        if self.pairs not in ("random", "balanced") and self.per_source is not None:
            raise InputError(f"compare.per_source goes with pairs 'random' or 'balanced', not '{self.pairs}'")
        return self


class TrainStageConfig(_Strict):
    encoder: str = "minilm"
    mode: Literal["ref-free", "ref-based"] = "ref-free"
    label_cols: list[str] | None = None  # default: every judge.<aspect> the annotate stage wrote
    model: dict = Field(default_factory=dict)  # csem.model.ModelConfig fields (pooling, loss, head...)
    options: dict = Field(default_factory=dict)  # csem.model.TrainConfig fields (lr, epochs...)
    # the seeds stage: one more student per seed on the same annotated data, and the spread (mean, sd,
    # min, max) of its agreement with the judge on the held-out sources; None: no seeds stage
    seeds: list[int] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _unique_seeds(self) -> "TrainStageConfig":
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise InputError(f"train.seeds repeats a seed: {self.seeds}")
        return self


def _weights_text_ok(text: str) -> bool:
    """``w1,w2`` or ``col=w,col=w`` (as ``csem rerank --weights``): every part a number."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        for p in parts:
            float(p.split("=", 1)[1] if "=" in p else p)
    except ValueError:
        return False
    return bool(parts)


class RerankConfig(_Strict):
    """The rerank stage (``csem rerank`` inside the pipeline; `csem.pipeline.rerank`).

    metrics: what scores the candidates, in order (the features of Eq. 8): ``student`` (the train
    stage's student, every head; the score stage's columns), ``student#coherence[+relevance]``
    (only those heads), or anything ``csem rerank --metric`` takes: a score column already in the
    records (``judge.coherence``), a baseline (``rouge1``, ``chrf``...), ``judge:RUBRIC@URI``, a
    student folder (relative to the pipeline file). weights: one number per score column, a
    ``{column: weight}`` mapping (others 0), ``"w1,w2"`` / ``"col=w"`` text, the JSON file written
    by ``csem tune-weights``, or ``mert``: tuned by MERT ([`csem.apply.tune`][]) on the training
    and dev sources' N-best lists to maximise the judge's score of the chosen candidate (mean of
    the student's judge columns), ``restarts`` and ``seed`` as ``csem tune-weights``; default 1
    each. normalize: ``none`` | ``zscore`` (per source, per column, before weighting); default
    the weights file's, else ``none``. sources: ``held-out`` (the test split, default) or ``all``.
    """

    metrics: list[str] = Field(default_factory=lambda: ["student"], min_length=1)
    weights: list[float] | dict[str, float] | str | None = None
    normalize: Literal["none", "zscore"] | None = None
    sources: Literal["held-out", "all"] = "held-out"
    restarts: int = Field(5, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> "RerankConfig":
        blank = [m for m in self.metrics if not m.strip()]
        if blank:
            raise InputError("rerank.metrics has an empty entry")
        w = self.weights
        if isinstance(w, str) and w != "mert" and not w.endswith(".json") and not _weights_text_ok(w):
            raise InputError(f"rerank.weights '{w}': write numbers (w1,w2), col=w pairs, a weights .json file "
                             "from `csem tune-weights`, or mert")
        if w == "mert" and self.sources == "all":
            raise InputError("rerank.weights 'mert' tunes on the training and dev sources; rerank.sources 'all' "
                             "would rerank the sources it was tuned on (use sources: held-out)")
        return self


class ScoreConfig(_Strict):
    """The score stage's cascade (``csem score --defer`` inside the pipeline; `csem.pipeline.cascade`).

    The student scores every candidate; ``defer`` (a share of the records, 0-1: ``floor(share * n +
    0.5)`` of them) or ``defer_budget`` (a number of records) of those it is least sure of, ranked by
    ``defer_by`` (``std``: the seed-ensemble members' deviation, needs ``train.model.members`` > 1;
    ``mc``: MC dropout; ``neighbours``: the nearest rival candidate of the same source; ``random``;
    default ``std`` for an ensemble, else ``mc``, as ``csem score``), go to the judge, and
    ``scored.jsonl`` gets the combined column beside the student's own (``@student``) and each row's
    provenance. judge, rubrics, options: default the annotate stage's (then every deferred judgment is
    in the run's judge cache). rescale: accept a judge or rubrics other than the annotate stage's (the
    rubric's scale mapped linearly onto the student's label range; ``csem score --judge-rescale``).
    calibration: ``fit`` | ``identity`` (``--judge-calibration``). seed: the ``random`` rule's
    permutation and the ``mc`` rule's dropout draws.
    """

    defer: float | None = Field(None, ge=0, le=1)
    defer_budget: int | None = Field(None, ge=0)
    defer_by: Literal[RULES] | None = None
    judge: str | None = None
    rubrics: list[str] | None = Field(None, min_length=1)
    options: dict | None = None
    rescale: bool = False
    calibration: Literal[CALIBRATIONS] = "fit"
    seed: int = 0

    @model_validator(mode="after")
    def _one_amount(self) -> "ScoreConfig":
        if (self.defer is None) == (self.defer_budget is None):
            raise InputError("score: give exactly one of defer (a share of the records to judge, 0-1) and "
                             "defer_budget (a number of records to judge)")
        if self.judge is not None and not self.judge.strip():
            raise InputError("score.judge is empty: leave it out to use the annotate stage's judge")
        return self


def student_spec(spec: str) -> tuple[str, list[str] | None]:
    """``NAME#a+b`` -> (``NAME``, ``[a, b]``); ``NAME`` -> (``NAME``, None: every head). A ``#`` with no
    aspect after it gives (``""``, None), which no caller accepts as a metric name."""
    name, sep, heads = spec.strip().partition("#")
    chosen = [a.strip() for a in heads.split("+") if a.strip()]
    if sep and not chosen:
        return "", None
    return name, (chosen if sep else None)


# the mrt section's own fields that are [`csem.apply.mrt.MRTConfig`][] fields (same names, same defaults)
MRT_FIELDS = ("max_steps", "batch_size", "num_samples", "alpha", "lam", "lr", "max_new_tokens", "max_source_tokens",
              "seed")


class MrtConfig(_Strict):
    """The mrt stage (``csem mrt`` inside the pipeline; `csem.pipeline.mrt`).

    generator: what is fine-tuned, as ``csem mrt --generator`` takes it: ``smollm2`` (the packaged
    SmolLM2-135M-Instruct), ``hf:FOLDER`` (a transformers causal LM; relative to the pipeline file)
    or ``hf:FILE.gguf``; required. metric: the reward, ``student`` (the train stage's student, the
    mean of every head) or ``student#coherence[+relevance]`` (the mean of those heads). sources:
    ``train`` (the training split's sources, default), ``train+dev`` or ``all``; each with its
    ``reference`` (from the sources file) for the MLE term when it has one. max_steps, batch_size,
    num_samples (S), alpha (Eq. 6), lam (Eq. 12's lambda), lr, max_new_tokens, max_source_tokens,
    seed: [`MRTConfig`][csem.apply.mrt.MRTConfig]'s fields, unset = its defaults (20 steps, 2 sources
    per step, S = 5, alpha 5e-3, lambda 0.7, lr 1e-5, 64 new tokens, 384 source tokens, seed 0), and
    its ranges. options: any other MRTConfig field (``top_k``, ``temperature``, ``accumulate``,
    ``checkpoint_every``, ``precision``, ``accelerator``, ``devices``, ``threads``, ``task``: default
    ``collect.task``).
    """

    generator: str = Field(min_length=1)
    metric: str = "student"
    sources: Literal["train", "train+dev", "all"] = "train"
    max_steps: int | None = None
    batch_size: int | None = None
    num_samples: int | None = None
    alpha: float | None = None
    lam: float | None = None
    lr: float | None = None
    max_new_tokens: int | None = None
    max_source_tokens: int | None = None
    seed: int | None = None
    options: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "MrtConfig":
        if not self.generator.strip():
            raise InputError("mrt.generator is empty: write smollm2, hf:FOLDER or hf:FILE.gguf")
        name, _ = student_spec(self.metric)
        if name != "student":
            raise InputError(f"mrt.metric '{self.metric}': write student (every head of the train stage's student) "
                             "or student#ASPECT[+ASPECT]")
        twice = [k for k in MRT_FIELDS if k in self.options]
        if twice:
            raise InputError(f"mrt.options.{twice[0]}: set it as mrt.{twice[0]}")
        self.mrt_config()  # MRTConfig's ranges, one home
        return self

    def mrt_config(self, **defaults):
        """The [`csem.apply.mrt.MRTConfig`][] of this section (``defaults``, e.g. ``task``, apply
        where ``options`` does not set them).

        Raises:
            ValueError: a value out of MRTConfig's range or an unknown option, one line naming the
                field (``mrt.max_steps: Input should be greater than or equal to 1``).
        """
        from csem.apply.mrt import MRTConfig

        values = {**defaults, **self.options,
                  **{k: getattr(self, k) for k in MRT_FIELDS if getattr(self, k) is not None}}
        try:
            return MRTConfig(**values)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                loc = ".".join(map(str, e["loc"]))
                problems.append(f"mrt.{loc if loc in MRT_FIELDS else 'options.' + loc}: {e['msg']}")
            raise InputError("; ".join(problems)) from None


class PipelineConfig(_Strict):
    """The whole pipeline file."""

    name: str
    sources: SourcesConfig
    split: SplitConfig = Field(default_factory=SplitConfig)
    collect: CollectConfig
    annotate: AnnotateConfig
    compare: CompareConfig | None = None  # comparison annotation: the student learns from judged pairs
    train: TrainStageConfig = Field(default_factory=TrainStageConfig)
    rerank: RerankConfig | None = None  # rerank the N-best lists with the student after training
    mrt: MrtConfig | None = None  # fine-tune a generator with MRT + MLE, the student as the reward
    score: ScoreConfig | None = None  # the cascade: the judge scores the records the student is least sure of
    curve: CurveConfig | None = Field(default_factory=CurveConfig)  # the learning curve; null: no curve stage
    human_cols: list[str] = Field(default_factory=list)  # human.<aspect> columns in the sources, if any

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        # the run folder is runs/<name>: one plain folder name, never a path out of runs/
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", v or "") or ".." in v:
            raise InputError(f"'{v}' is not a plain folder name (letters, digits, '.', '_', '-'; no '/', '\\' "
                             "or '..'; at most 100 characters): the run folder is runs/<name>")
        return v

    @model_validator(mode="after")
    def _check(self) -> "PipelineConfig":
        if not self.annotate.rubrics:
            raise InputError("annotate.rubrics must name at least one rubric")
        if self.score is not None:
            self._check_score()
        return self

    def _check_score(self) -> None:
        """The score section against the stages it draws on: ``defer_by: std`` needs a seed ensemble; a
        judge or rubric the student did not learn (or a student learnt from compared pairs) needs
        ``score.rescale``."""
        s = self.score
        if s.defer_by == "std" and int(self.train.model.get("members", 1)) < 2:
            raise InputError("score.defer_by 'std' reads the seed ensemble's deviation: set train.model.members > 1, "
                             "or defer by mc, neighbours or random")
        if not s.rescale and not self.score_is_own():
            why = ("the student learnt from compared pairs, on no rubric's scale" if self.compare is not None else
                   "the student learnt the annotate stage's judge and rubrics, whose scale another's need not share")
            raise InputError(f"score.judge / score.rubrics: {why}; set score.rescale: true to map the rubric's "
                             "scale linearly onto the student's label range, or leave them out")

    def score_is_own(self) -> bool:
        """Whether the score section's judge and rubrics (default the annotate stage's) are those the
        student learnt: the annotate stage's judge ([`csem.apply.cascade.same_judge`][]), rubrics among
        the annotate stage's, and no compare stage (whose student learns from pairs)."""
        from csem.apply.cascade import same_judge

        s = self.score
        return (s is not None and self.compare is None and same_judge(s.judge or self.annotate.judge, self.annotate.judge)
                and set(s.rubrics or self.annotate.rubrics) <= set(self.annotate.rubrics))


def resolve_path(value: str, base: Path) -> Path:
    """``package:NAME`` -> a shipped example file; a relative path -> against ``base``."""
    if value.startswith("package:"):
        return EXAMPLES_DIR / value.split(":", 1)[1]
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p)


def load_pipeline(path: str | Path) -> tuple[PipelineConfig, Path]:
    """Read and validate a pipeline YAML file.

    Returns:
        (config, folder of the file).

    Raises:
        FileNotFoundError: no such file.
        ValueError: invalid YAML or a field that is missing, unknown or out of range (the message
            lists each problem with its location in the file).
    """
    p = resolve_path(str(path), Path.cwd())
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such pipeline file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"{p}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{p}: a pipeline file must be a mapping with 'name', 'sources', 'collect', 'annotate'")
    try:
        return PipelineConfig.model_validate(data), p.parent
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"{p}: {problems}") from exc
