"""Typed configuration of the learned evaluation model (``ModelConfig``) and its training (``TrainConfig``).

Defaults: the recipe chosen by cross-validation on the training documents of the SummEval GPT-4
distillation benchmark (600 judge-labelled rows; ``research/student_summeval_stages/student_cv.md``,
``bench_student_summeval.py``), with documents held out (grouped 3-fold) and with systems held
out (3 folds of 4 systems): a bi-encoder (CSEM Eq. 10 / Eq. 9 features, COMET's estimator) whose
top 2 encoder layers are fine-tuned over cached lower-layer states, sources cut to 256 tokens, the
``overlap`` lexical features into each head (input and a linear term started at the
least-squares fit), MSE on min-max-normalised ratings (Eq. 11) plus the same-source ranking loss
(Eq. 3), encoder lr 1e-3, head lr 1e-3, head ``[512]``, batches of 12 rows, 1 epoch, labels only:
contrast pretraining on rule-made pairs (``contrast_per_record``) is an option, not the default, since
two of the three cross-validations on training data that compared it lost with it (see
``TrainConfig.contrast_epochs``). The richer
``lexical`` set (``feature_set="lexical"``, with lr 1e-4) wins with documents held out (0.448 vs
0.426 held-out Spearman with the GPT-4 labels) but loses with systems held out (0.237 vs 0.304):
it learns the 12 systems' output styles, so it is an option, not the default. The
paper's and COMET's settings (Wang et al. Sec. V-A: lr 1e-5, up to 10 epochs, MSE; Rei et al.
2020: head lr 3e-5, frozen warm-up 0.3 epochs, head ``[3072, 1024]``, whole encoder trained) are
tuned for tens of thousands of rows:
``ModelConfig(loss="mse", hidden_sizes=[3072, 1024], source_max_length=None, overlap_features=False)``
and ``TrainConfig(lr=1e-5, head_lr=3e-5, batch_size=32, max_epochs=10, frozen_epochs=0.3, train_layers=None)``
restore them. Kept from COMET: layer-wise learning-rate decay 0.95, Tanh, dropout 0.1.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from csem.errors import InputError

MODES = ("ref-free", "ref-based", "fluency", "fluency-ref")

#: csem's precision names (``csem train`` and ``csem score`` alike) and what they mean in training
#: (Lightning's strings, which are accepted as they are too). Scoring autocasts to the same dtype.
PRECISIONS = {"fp32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}
Mode = Literal["ref-free", "ref-based", "fluency", "fluency-ref"]
Pooling = Literal["cls", "mean", "layerwise-mix"]
Loss = Literal["mse", "ce", "pairwise", "mse+pairwise"]
Architecture = Literal["bi-encoder", "unified"]


class LabelSpec(BaseModel):
    """One rated aspect: the label column it was trained on and the rating scale.

    Attributes:
        aspect: short name used in output columns (``metric.<name>.<aspect>``), e.g. ``coherence``.
        column: the training label column, e.g. ``judge.coherence``.
        min, max: the rating scale (e.g. 1 and 5); scores are returned on this scale.
    """

    model_config = ConfigDict(extra="forbid")
    aspect: str
    column: str
    min: float
    max: float

    @model_validator(mode="after")
    def _range(self) -> "LabelSpec":
        if not (math.isfinite(self.min) and math.isfinite(self.max)) or self.max <= self.min:
            raise InputError(f"label range of '{self.column}' must satisfy min < max, got [{self.min}, {self.max}]")
        return self


#: the ModelConfig fields that decide the shape or meaning of a student's weights (with the outputs per
#: aspect, ``n_classes``): a warm start needs them equal (`ModelConfig.architecture_differences`)
ARCHITECTURE_FIELDS = ("encoder", "encoder_kind", "pooling", "mode", "architecture", "hidden_sizes", "activation",
                       "overlap_features", "feature_set", "feature_hidden")


class ModelConfig(BaseModel):
    """Architecture of an evaluation model (saved as ``config.json`` in the model folder).

    Attributes:
        name: metric name; scores are written to ``metric.<name>.<aspect>``.
        encoder: transformers AutoModel folder or hub id, or ``minilm`` / ``mpnet`` (packaged, offline).
        pooling: ``cls`` (the paper's [CLS] vector), ``mean`` (masked mean of the last layer) or
            ``layerwise-mix`` (COMET's softmax-weighted mix of all layers, then masked mean).
        mode: ``ref-free`` (Eq. 10), ``ref-based`` (Eq. 9), ``fluency`` (candidate only) or
            ``fluency-ref`` (candidate and reference, no source); see `csem.model.features`.
        architecture: ``bi-encoder`` (the paper's estimator, COMET: each text embedded on its own,
            a source shared by many candidates embedded once, features of Eq. 9/10 into the head)
            or ``unified`` (a cross-encoder, COMET's UnifiedMetric / COMET-Kiwi, BLEURT, UniEval:
            candidate, reference and source joined into one input sequence whose pooled embedding
            goes into the head; every candidate re-reads its source, so scoring is slower).
        source_max_length: bi-encoder only: tokens kept of the source (None: ``max_length``);
            sources are truncated at the end (news leads come first).
        ref_aggregation: with several references, score against each and take the ``max`` or
            ``mean`` of the per-reference scores (for ``ce``: the distribution with the highest
            expected value, or the mean distribution).
        max_length: tokens kept per text (longer texts are truncated), 8..encoder limit.
        hidden_sizes, activation, dropout: the feed-forward head (one head per aspect).
        loss: ``mse`` (Eq. 11, default), ``ce`` (cross-entropy over star classes, score = expected
            value, Sec. VI-G), ``pairwise`` (ranking loss over same-source pairs, Eq. 3; scores are
            then relative, not on the label scale) or ``mse+pairwise`` (Eq. 11 plus
            ``pairwise_weight`` times Eq. 3: on the label scale, and ranks the candidates of a
            source even when the judge's ratings of them differ only slightly).
        pairwise_weight: weight of the ranking term in ``mse+pairwise``.
        overlap_features: lexical overlap features (novel n-gram shares of the candidate against
            the source and/or reference, self-repetition, length;
            `csem.model.features.overlap_features`), what pooled embeddings cannot count,
            enter each head twice: appended to its input and through a linear term added to its
            output (wide & deep, Cheng et al. 2016) that training starts at the least-squares fit
            of the training labels on these features.
            Default on (cross-validated on SummEval: 0.406 vs 0.347 held-out Spearman with the
            GPT-4 labels for the ``overlap`` set); folders saved before the option existed load
            with it off.
        feature_set: which lexical features (with ``overlap_features`` on): ``overlap`` (the 5-8
            novelty/repetition/length scalars of `csem.model.features.overlap_features`, a
            linear output term), ``novelty`` (the same without the length: 4-7 scalars, a linear
            term) or ``lexical`` (`csem.model.features.lexical_features`:
            those plus extractive fragments, source positions and surface form, 28 scalars
            ref-free; standardised with the training rows' means and deviations, and the output
            term is a small MLP of ``feature_hidden`` units pre-fitted on the features alone before
            the whole model trains). Default ``overlap``: ``lexical`` wins in cross-validation
            with documents held out (0.448 vs 0.426 held-out Spearman with the GPT-4 labels) and
            loses with systems held out (0.237 vs 0.304), i.e. it learns systems' styles; use it
            where the systems to be scored are those of the training data. ``novelty`` wins the
            SummEval cross-validation with systems held out (0.446 vs 0.417, 3 seeds) and loses the
            teacher pool's (0.260 vs 0.340, whose judge follows length): for students that will
            score systems their training data lacks (research/student_contrast/student_novelty.md,
            teacher_pool_cv_novelty.md). Folders saved before the option existed load as ``overlap``.
        feature_hidden: hidden units of the ``lexical`` set's output MLP.
        acceptability_gate: after training, fit the acceptability gate
            (`csem.model.acceptability`: a classifier per aspect of real vs rule-made degenerate
            texts: a few words, one word x 100, cut mid-sentence, words shuffled, another source's
            candidate, the source copied for relevance); a text it rejects has its score pulled
            towards the scale's minimum, an accepted one keeps its score. On by default for the
            ``mse`` and ``mse+pairwise`` losses (ignored for the others); folders saved before the
            option existed load without it.
        members: a seed ensemble (deep ensembles, Lakshminarayanan et al. 2017; the seed averaging
            of COMET's and BLEURT's reported figures, shipped as one model): this many students
            trained alike on the same rows with seeds ``seed``, ``seed + 1``, ...; the model's score
            is the mean of the members' scores (each on the label scale, gated alike). Training
            takes ``members`` times as long as one student; scoring runs the encoder layers the
            members share (those ``TrainConfig.train_layers`` leaves frozen) once per text and each
            member's top layers on the result: an ensemble of 5 scores in about 2.3x the time of one
            member with ``train_layers=2`` and about 1.35x with ``train_layers=1`` (the main job's
            recipe, ``research/ensemble_depth/``). 1 (default): one student. At
            9,583 teacher labels five default students reached 0.486 +- 0.029 summary-level
            Spearman with their teacher and the mean of their scores 0.534
            (``research/teacher_scale/teacher_scale_ensemble.md``). Folders saved before the option
            existed load as one student.
        labels: the aspects and their scales.
    """

    model_config = ConfigDict(extra="forbid")
    name: str = "csem"
    encoder: str = "minilm"
    encoder_kind: str = "hf"
    pooling: Pooling = "mean"
    mode: Mode = "ref-free"
    architecture: Architecture = "bi-encoder"
    ref_aggregation: Literal["max", "mean"] = "max"
    max_length: int = Field(512, ge=8, le=8192)
    source_max_length: int | None = Field(256, ge=8, le=8192)
    hidden_sizes: list[int] = Field(default_factory=lambda: [512])
    activation: Literal["tanh", "relu", "gelu", "sigmoid"] = "tanh"
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    loss: Loss = "mse+pairwise"
    pairwise_weight: float = Field(1.0, ge=0.0)
    overlap_features: bool = True
    feature_set: Literal["overlap", "novelty", "lexical"] = "overlap"
    feature_hidden: int = Field(64, ge=1)
    acceptability_gate: bool = True
    members: int = Field(1, ge=1, le=64)
    labels: list[LabelSpec] = Field(default_factory=list)

    @field_validator("hidden_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if any(h <= 0 for h in v):
            raise InputError(f"hidden sizes must be positive, got {v}")
        return v

    def architecture_differences(self, other: "ModelConfig") -> list[str]:
        """``"field: mine vs other's"`` for each field that decides the shape or meaning of the weights
        (encoder, pooling, mode, architecture, head, lexical features, outputs per aspect): empty when
        ``other``'s trained weights can start this model (`csem.model.module.EvaluationModule.warm_start`)."""
        out = [f"{f}: {getattr(self, f)!r} vs {getattr(other, f)!r}" for f in ARCHITECTURE_FIELDS
               if getattr(self, f) != getattr(other, f)]
        if self.n_classes != other.n_classes:
            out.append(f"outputs per aspect (loss {self.loss!r} vs {other.loss!r}): {self.n_classes} vs {other.n_classes}")
        return out

    @property
    def aspects(self) -> list[str]:
        return [s.aspect for s in self.labels]

    @property
    def n_classes(self) -> int:
        """Star classes for the ``ce`` loss (integer steps over the scale; 1 otherwise)."""
        if self.loss != "ce":
            return 1
        spans = {round(s.max - s.min) for s in self.labels}
        if len(spans) != 1:
            raise InputError("the 'ce' loss needs every aspect on the same integer scale")
        return spans.pop() + 1

    @model_validator(mode="after")
    def _ce_scale(self) -> "ModelConfig":
        if self.loss == "ce":
            for s in self.labels:
                if abs((s.max - s.min) - round(s.max - s.min)) > 1e-9:
                    raise InputError(f"the 'ce' loss needs an integer star scale; '{s.column}' spans [{s.min}, {s.max}]")
        return self


class TrainConfig(BaseModel):
    """Optimisation settings (not needed to load or score).

    Attributes:
        lr: encoder learning rate (cross-validated: 1e-3 for the top 2 layers with the ``overlap``
            features, 1e-4 with the pre-fitted ``lexical`` ones; paper: 1e-5 for the whole encoder);
            head_lr: head learning rate (cross-validated 1e-3; 1e-4 with ``lexical``; COMET: 3e-5).
        batch_size: samples per step (cross-validated: 12, one SummEval article's candidates;
            paper: 32); batches are built from whole source groups so that each distinct
            source/reference in a batch is encoded once.
        max_epochs: upper bound (cross-validated: 1 on 600 rows; paper: 10); patience: epochs without dev improvement before
            early stopping (needs a dev set).
        frozen_epochs: encoder frozen for this many (fractional) epochs first (COMET: 0.3);
            frozen-phase embeddings are cached, so extra frozen epochs cost almost nothing.
        layerwise_decay: encoder layer ``l`` of ``L`` gets ``lr * decay**(L - l)`` (COMET 0.95).
        train_layers: fine-tune only the top ``N`` encoder layers (None: all). The lower layers
            stay frozen and each distinct text's token states after them are computed once and
            cached, so an epoch runs only the top ``N`` layers forward and backward.
        weight_decay: AdamW weight decay. gradient_clip: max gradient norm (0 = off).
        seed: seeds Python, NumPy and torch; training is deterministic on CPU.
        precision: ``auto`` (bf16 mixed precision on a GPU that supports it, fp16 mixed on other
            GPUs, fp32 on CPU), ``fp32`` | ``bf16`` | ``fp16`` (`PRECISIONS`, the names
            ``csem score`` takes too) or any Lightning precision string (``bf16-mixed``, ``32-true``). accelerator/devices/num_nodes/strategy: passed
            to ``lightning.Trainer`` (multi-GPU/multi-node through Lightning's DDP).
        num_threads: torch CPU threads (None: leave torch's default).
        monitor: dev statistic used for checkpoint selection and early stopping, mean over aspects
            of ``kendall`` | ``spearman`` | ``pearson`` against the labels.
        min_rows: fewer labelled training rows than this is an error.
        feature_prefit_steps, feature_prefit_lr: with ``ModelConfig.feature_set = "lexical"``, the
            output MLP of the lexical features is first fitted alone on all training rows (full
            batch, AdamW, the model's loss) for this many steps at this learning rate; 0 skips it.
        contrast_epochs: with contrast pairs (``fit(contrast=...)``, or made from the training rows by
            ``contrast_per_record``; `csem.model.contrast`), epochs of pretraining on the pairs alone
            (ranking loss, Eq. 3) before the labels; 0 = none. Contrast pairs are off by default
            (``contrast_per_record=0``): with ``contrast_per_record=1`` and these settings (at most 400
            pairs, 1 epoch, mixed in with weight 0.5, 8 pairs per batch) the student won the
            cross-validation with systems held out on SummEval's training documents (0.448 vs 0.376
            held-out Spearman with the GPT-4 labels, one seed; ``research/student_contrast/student_contrast.md``)
            but lost the grouped cross-validations on the main job's training articles (0.211 vs 0.303,
            3 seeds; ``main_job_recipe.md``) and on 1,800 of the teacher pool's training candidates
            (0.133 +- 0.058 vs 0.316 +- 0.033, 3 seeds x 2 folds by source; ``teacher_pool_cv.md``).
            For students that will score systems their training data lacks, the recipe
            ``feature_set="novelty"``, ``contrast_per_record=10``, ``contrast_max_pairs=3000`` won
            SummEval's cross-validation with systems held out (``student_large_contrast.md``).
        contrast_mix: weight of the contrast ranking loss added to every label-training step (one
            batch of pairs per step, cycling; rehearsal, so fine-tuning does not forget what the
            pairs taught); 0 = off.
        contrast_per_record: with no contrast pairs given, make this many pairs per training record and
            aspect from the training records themselves (`csem.model.contrast.auto_pairs`, no LLM
            call); 0 = no contrast pairs unless given. contrast_max_pairs: at most this many of those
            made pairs (a seeded random subset; None = all): pretraining costs about one label epoch per
            ~150 pairs, so the cap bounds its time on large training sets.
        contrast_pairs_per_batch: pairs per contrast batch. contrast_lr: encoder learning rate while
            pretraining (None: ``lr``); the heads use ``head_lr``.
        init: a saved student (model folder) whose weights this one starts from instead of the bare
            encoder: fine-tuning a pretrained metric (COMET's ``load_from_checkpoint``); its
            architecture must match (`ModelConfig.architecture_differences`), its heads start the
            aspects of the same name, or every aspect when it has one
            (`csem.model.module.EvaluationModule.warm_start`). None (default): the bare encoder.
            With ``train_layers`` only the top layers of the initial encoder train on; a lower-layer
            cache is shared only between runs with the same ``init``.
    """

    model_config = ConfigDict(extra="forbid")
    lr: float = Field(1e-3, gt=0)
    head_lr: float = Field(1e-3, gt=0)
    batch_size: int = Field(12, ge=1)
    max_epochs: int = Field(1, ge=1)
    patience: int = Field(3, ge=1)
    frozen_epochs: float = Field(0.0, ge=0)
    layerwise_decay: float = Field(0.95, gt=0, le=1)
    train_layers: int | None = Field(2, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    gradient_clip: float = Field(1.0, ge=0)
    seed: int = 12
    precision: str = "auto"
    accelerator: str = "auto"
    devices: int | str = "auto"
    num_nodes: int = Field(1, ge=1)
    strategy: str = "auto"
    num_threads: int | None = Field(None, ge=1)
    monitor: Literal["kendall", "spearman", "pearson"] = "kendall"
    min_rows: int = Field(8, ge=2)
    progress: bool = False
    feature_prefit_steps: int = Field(300, ge=0)
    feature_prefit_lr: float = Field(3e-3, gt=0)
    contrast_epochs: int = Field(1, ge=0)
    contrast_mix: float = Field(0.5, ge=0)
    contrast_per_record: int = Field(0, ge=0)
    contrast_max_pairs: int | None = Field(400, ge=1)
    contrast_pairs_per_batch: int = Field(8, ge=1)
    contrast_lr: float | None = Field(None, gt=0)
    init: str | None = None


# ---- the training config file (``csem train --config``, ``--set``, ``--print-config``) ----------------

#: the sections of a training config file and the config each one fills
SECTIONS = {"model": ModelConfig, "train": TrainConfig}
#: fields a config file does not set: ``labels`` comes from the data's label columns at training time
DERIVED_FIELDS = {"model": ("labels",)}


def default_sections() -> dict[str, dict]:
    """The defaults of every settable field, ``{"model": {...}, "train": {...}}`` (what
    ``csem train --print-config`` writes)."""
    return {name: cls().model_dump(exclude=set(DERIVED_FIELDS.get(name, ()))) for name, cls in SECTIONS.items()}


def dump_config(sections: dict[str, dict]) -> str:
    """A training config as YAML, ``model:`` then ``train:``, fields in declaration order."""
    import yaml

    return yaml.safe_dump({k: sections.get(k, {}) for k in SECTIONS}, sort_keys=False, default_flow_style=False)


def read_config_file(path: str | Path) -> dict[str, dict]:
    """The sections of a training config file (YAML with top-level ``model:`` and ``train:``, each
    optional, each a mapping of fields of `ModelConfig` /
    `TrainConfig`); the values are checked by `build_configs`.

    Raises:
        InputError: the file cannot be read or parsed, is not a mapping, has another top-level key, or
            names a field its section lacks (each named with the file and, where YAML knows it, the line).
        FileNotFoundError: no such file.
    """
    import yaml

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: a training config is a mapping with the sections 'model:' and 'train:'")
    out: dict[str, dict] = {}
    for section, fields in data.items():
        where = f"{path}, line {_line_of(text, str(section))}"
        if section not in SECTIONS:
            raise InputError(f"{where}: unknown section '{section}' (a training config has 'model:' and 'train:')")
        if fields is None:
            continue
        if not isinstance(fields, dict):
            raise InputError(f"{where}: section '{section}' must be a mapping of field: value")
        for name in fields:
            _check_field(section, str(name), f"{path}, line {_line_of(text, str(name))}")
        out[section] = dict(fields)
        try:  # a bad value is named with its line here; build_configs checks the merged settings again
            SECTIONS[section].model_validate(out[section])
        except ValidationError as exc:
            e = exc.errors()[0]
            field = ".".join(str(x) for x in e["loc"])
            line = f", line {_line_of(text, str(e['loc'][0]))}" if e["loc"] else ""
            what = f"{section}.{field} = {e.get('input')!r}" if field else section
            raise InputError(f"{path}{line}: {what}: {e['msg']}") from None
    return out


def _line_of(text: str, key: str) -> int:
    """The line (1-based) of the mapping key ``key``: a top-level key first, else a key of a section;
    block or flow style (``train: {lr: 1}``); 0: not found."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return 0
    if not isinstance(root, yaml.MappingNode):
        return 0
    inner = [pair for _, v in root.value if isinstance(v, yaml.MappingNode) for pair in v.value]
    for k, _ in root.value + inner:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k.start_mark.line + 1  # YAML marks count lines from 0
    return 0


def _check_field(section: str, name: str, where: str) -> None:
    fields = SECTIONS[section].model_fields
    if name not in fields or name in DERIVED_FIELDS.get(section, ()):
        why = " (set from the label columns)" if name in fields else ""
        raise InputError(f"{where}: '{section}.{name}' is not a setting{why}; the fields of '{section}' are "
                         + ", ".join(f for f in fields if f not in DERIVED_FIELDS.get(section, ())))


def apply_overrides(sections: dict[str, dict], overrides: list[str] | tuple[str, ...]) -> dict[str, dict]:
    """``sections`` with each ``section.field=value`` of ``overrides`` applied, in order (the value is
    read as YAML: ``1e-4``, ``[512, 256]``, ``null``, ``true``); a copy.

    Raises:
        InputError: an override without ``=``, an unknown section or field (named).
    """
    import yaml

    out = {k: dict(v) for k, v in sections.items()}
    for item in overrides:
        key, eq, raw = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not eq or not dot or not name:
            raise InputError(f"--set '{item}': write SECTION.FIELD=VALUE, e.g. --set train.lr=1e-4")
        if section not in SECTIONS:
            raise InputError(f"--set '{item}': unknown section '{section}' (model or train)")
        _check_field(section, name, f"--set '{item}'")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        _check_value(section, name, value, f"--set '{item}'")
        out.setdefault(section, {})[name] = value
    return out


def _check_value(section: str, name: str, value: Any, where: str) -> None:
    """Raise `InputError` naming ``where`` when pydantic rejects ``value`` for ``section.name`` (checked
    with the other fields at their defaults; `build_configs` checks the merged settings again)."""
    try:
        SECTIONS[section].model_validate({name: value})
    except ValidationError as exc:
        for e in exc.errors():
            if e["loc"] and str(e["loc"][0]) == name:
                raise InputError(f"{where}: {section}.{name} = {value!r}: {e['msg']}") from None


def build_configs(sections: dict[str, dict], where: str = "training config") -> tuple[ModelConfig, TrainConfig]:
    """The `ModelConfig` and `TrainConfig` of a
    training config's sections (fields left out take their defaults).

    Raises:
        InputError: a value pydantic rejects, one line naming ``section.field``, the value and why.
    """
    built = []
    for section, cls in SECTIONS.items():
        try:
            built.append(cls.model_validate(sections.get(section, {})))
        except ValidationError as exc:
            e = exc.errors()[0]
            field = ".".join(str(x) for x in e["loc"])
            what = f"{section}.{field} = {e.get('input')!r}" if field else section
            raise InputError(f"{where}: {what}: {e['msg']}") from None
    return built[0], built[1]
