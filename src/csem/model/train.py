"""The steps of training one student with Lightning's Trainer, run by `csem.model.fit.fit` (the one
training entry; nothing else calls them).

`train_student` checks the data first (`csem.model.validation`: clear errors before any
training), seeds everything and runs the named steps:

1. **set-up** (`prepare_run`): the configs with the data's label specs, the
   `EvaluationModule`, the frozen lower layers, the lexical
   features' output term, and the run's state (`RunState`: rows, dev rows, judged pairs, the
   lower layers' token-state cache, the validation history). Nothing of a run is kept on the module.
2. **warm start** (`warm_start`): the weights of a trained student (``TrainConfig.init``).
3. **contrast stage** (`contrast_stage`): rule-made (better, worse) pairs ranked first (UniEval /
   BLEURT-style pretraining), and kept for rehearsal during the label stage.
4. **label stage** (`label_stage`): the labels (or judged pairs) with source-grouped batches
   (`csem.model.batching`), per-epoch dev validation (Kendall/Spearman/Pearson with the labels and
   with ``human.*`` scores), the best weights kept in memory, early stopping after ``patience`` epochs
   without improvement.
5. **finish** (`finish`): the best weights restored, the acceptability gate fitted, the metric card.

A seed ensemble (``ModelConfig.members`` > 1, `train_ensemble`) runs these steps once per member.
Every stage's Lightning Trainer comes from `make_trainer` (CPU, one or several GPUs, several nodes;
bf16/fp16 mixed precision where the device supports it).
"""

from __future__ import annotations

import copy
import logging
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping

from csem.errors import InputError
from csem.model.config import PRECISIONS, ModelConfig, TrainConfig
from csem.model.evaluation_model import EvaluationModel
from csem.model.validation import check_dev_data, check_training_data

log = logging.getLogger("csem.model")


def _precision(tc: TrainConfig) -> str:
    """Lightning's precision string for ``tc.precision`` (csem's names mapped, Lightning's kept)."""
    if tc.precision != "auto":
        return PRECISIONS.get(tc.precision, tc.precision)
    if torch.cuda.is_available() and tc.accelerator in ("auto", "gpu", "cuda"):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


def is_global_zero() -> bool:
    """True unless this process is a non-zero rank of an initialised torch.distributed group (DDP)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    # Lightning's DDP launcher starts the other ranks as copies of the command with these set
    return int(os.environ.get("NODE_RANK", 0) or 0) == 0 and int(os.environ.get("LOCAL_RANK", 0) or 0) == 0


@dataclass
class Rehearsal:
    """The contrast pairs mixed into every label step (``TrainConfig.contrast_mix``): an endless
    iterator of pair batches, their preference table and the weight of their loss."""

    batches: Iterator[Any]
    table: Any
    weight: float


@dataclass
class RunState:
    """What one training run holds besides the student's weights (passed to each stage, never kept on
    the module).

    Attributes:
        records: the training rows. dev_records: the dev rows, or None.
        preferences: judged pairs (`csem.model.pairs.PreferenceTable`) the label stage trains on
            instead of label columns, or None.
        lower_cache: token states of the frozen lower encoder layers by text (``train_layers``); a
            caller's dict is shared between runs (cross-validation folds).
        history: one dev report per validation. rehearsal: the contrast pairs of the label stage.
        contrast: the metric card's ``contrast`` entry once the contrast stage ran.
    """

    records: list[dict]
    dev_records: list[dict] | None
    preferences: Any = None
    lower_cache: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    rehearsal: Rehearsal | None = None
    contrast: dict | None = None


class StageTask(L.LightningModule):
    """The LightningModule a stage's Trainer fits: the student as a submodule, the run's state, and the
    training and validation steps (loss, optimiser with separate encoder/head learning rates and
    layer-wise decay, frozen warm-up, dev correlations).

    Args:
        student: the `EvaluationModule` being trained.
        run: the run's state. train_config: this stage's optimisation settings.
        pairs: the preference table of this stage's objective (contrast pairs, judged pairs), or None:
            the labels (with ``run.rehearsal`` mixed in).
        frozen_steps: optimiser steps with the encoder frozen first.
        phase: the stage's name in the per-epoch log line.
    """

    def __init__(self, student: Any, run: RunState, train_config: TrainConfig, *, pairs: Any = None,
                 frozen_steps: int = 0, phase: str = "") -> None:
        super().__init__()
        self.student = student
        self.run = run
        self.tc = train_config
        self.pairs = pairs
        self.frozen_steps = frozen_steps
        self.phase = phase
        self._val_scores: dict[str, list[float]] = {}
        self._epoch_t0 = time.perf_counter()

    def forward(self, batch: Any) -> Any:
        return self.student(batch, self.run.lower_cache)

    def loss(self, batch: Any) -> torch.Tensor:
        score, logp = self(batch)
        if self.pairs is not None:  # contrast or judged pairs, Eq. 3
            return self.pairs.loss(score, batch.ids)
        loss = self.student._rating_loss(score, logp, batch)
        rehearsal = self.run.rehearsal
        if rehearsal is not None:  # rehearsal of the contrast pairs (TrainConfig.contrast_mix)
            cb = next(rehearsal.batches).to(self.device)
            cscore, _ = self(cb)
            loss = loss + rehearsal.weight * rehearsal.table.loss(cscore, cb.ids)
        return loss

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        student = self.student
        if self.global_step < self.frozen_steps:
            if not student._frozen:
                student.freeze_encoder()
            student.encoder.eval()  # Lightning switches the whole module to train mode every epoch
        elif student._frozen:
            student.unfreeze_encoder()

    def on_train_epoch_start(self) -> None:
        self._epoch_t0 = time.perf_counter()

    def on_train_epoch_end(self) -> None:
        log.info("%sepoch %d: %d steps so far, %.0f s, encoder %s", self.phase, self.current_epoch,
                 self.global_step, time.perf_counter() - self._epoch_t0,
                 "frozen" if self.student._frozen else "trained")

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train_loss", loss, batch_size=len(batch.ids), prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        tc, student = self.tc, self.student
        groups = student.encoder.layer_groups()
        n = len(groups)
        params = [{"params": g, "lr": tc.lr * tc.layerwise_decay ** (n - 1 - i)} for i, g in enumerate(groups)]
        if student.split_layer:  # frozen lower layers: leave them out of the optimiser
            params = [{**g, "params": [p for p in g["params"] if p.requires_grad]} for g in params]
            params = [g for g in params if g["params"]]
        params.append({"params": list(student.heads.parameters()), "lr": tc.head_lr})
        if student.overlap_heads is not None:
            params.append({"params": list(student.overlap_heads.parameters()), "lr": tc.head_lr})
        return torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay)

    def on_validation_epoch_start(self) -> None:
        self._val_scores = {}

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        score, _ = self(batch)
        raw = self.student.denormalise(score.float()).cpu()
        for i, rid in enumerate(batch.ids):
            self._val_scores[rid] = raw[i].tolist()

    def on_validation_epoch_end(self) -> None:
        if not self.run.dev_records or self.trainer.sanity_checking:
            return
        from csem.model.validation import dev_correlations

        report = dev_correlations(self._val_scores, self.run.dev_records, self.student.config.labels)
        monitor = report["mean"][self.tc.monitor]
        report["epoch"] = int(self.current_epoch)
        report["global_step"] = int(self.global_step)
        self.run.history.append(report)
        log.info("epoch %d dev (%s level) vs labels: %s", self.current_epoch, report["level"],
                 ", ".join(f"{k} {v:.3f}" for k, v in report["mean"].items()))
        self.log("val_monitor", -1.0 if math.isnan(monitor) else monitor, prog_bar=True)
        for key, value in report["mean"].items():
            self.log(f"val_{key}", -1.0 if value is None or math.isnan(value) else value)


class KeepBest(Callback):
    """Lightning callback: copy the student's weights whenever the dev monitor improves (kept in memory)."""

    def __init__(self) -> None:
        self.best = -math.inf
        self.state: dict | None = None
        self.report: dict | None = None

    def on_validation_end(self, trainer: Any, pl_module: StageTask) -> None:
        if trainer.sanity_checking or not pl_module.run.history:
            return
        value = float(trainer.callback_metrics.get("val_monitor", torch.tensor(-1.0)))
        if value > self.best:
            self.best = value
            self.state = {k: v.detach().cpu().clone() for k, v in pl_module.student.state_dict().items()}
            self.report = copy.deepcopy(pl_module.run.history[-1])


def make_trainer(tc: TrainConfig, max_epochs: int, callbacks: Sequence[Any] = (), validate: bool = True) -> L.Trainer:
    """Trainer set-up shared by every stage: devices, precision, determinism, no logger or checkpoint
    files (the best weights are kept in memory), csem's own output instead of Lightning's tips."""
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return L.Trainer(
        accelerator=tc.accelerator, devices=tc.devices, num_nodes=tc.num_nodes, strategy=tc.strategy,
        precision=_precision(tc), max_epochs=max_epochs, gradient_clip_val=tc.gradient_clip or None,
        deterministic=True, logger=False, enable_checkpointing=False, enable_progress_bar=tc.progress,
        enable_model_summary=False, num_sanity_val_steps=0, use_distributed_sampler=False,
        callbacks=list(callbacks), log_every_n_steps=1, **({} if validate else {"limit_val_batches": 0}),
    )


def run_trainer(trainer: L.Trainer, task: StageTask, loader: Any, val_loader: Any = None) -> None:
    """``trainer.fit`` without the warnings that do not concern csem's set-up."""
    with warnings.catch_warnings():
        for message in (".*does not have many workers.*", ".*Total length of `DataLoader` across ranks.*",
                        ".*`validation_step` but have no `val_dataloader`.*", ".*LeafSpec.*is deprecated.*",
                        # the frozen encoder is kept in eval mode on purpose (no dropout while cached)
                        ".*module\\(s\\) in eval mode at the start of training.*"):
            warnings.filterwarnings("ignore", message=message)
        trainer.fit(task, train_dataloaders=loader, val_dataloaders=val_loader)


def train_student(
    records: Sequence[Mapping[str, Any]],
    label_cols: Sequence[str],
    mode: str,
    config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    dev_records: Sequence[Mapping[str, Any]] | None = None,
    *,
    label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    provenance: Mapping[str, Any] | None = None,
    preferences: Any = None,
    lower_cache: dict | None = None,
    contrast: Sequence[Mapping[str, Any]] | None = None,
    contrast_where: str = "contrast pairs",
    init: "EvaluationModel | str | Path | None" = None,
    where: str = "training data",
) -> EvaluationModel:
    """Train one student (or a seed ensemble) on prepared rows; `csem.model.fit.fit` calls it.

    Args:
        records: training records (``source``, ``candidate``, ``reference`` as the mode needs, and the
            label columns).
        label_cols: the label columns, one head each over one shared encoder.
        mode: ``ref-free`` | ``ref-based`` | ``fluency`` | ``fluency-ref`` (overrides ``config.mode``).
        config, train_config: architecture and optimisation (None: their defaults).
        dev_records: dev set for per-epoch validation, best-checkpoint selection and early stopping.
        label_range: the declared rating scale, e.g. ``(1, 5)`` (or per column); None infers it.
        provenance: ``judge``, ``rubric``, ``notes`` for the metric card.
        preferences: a `csem.model.pairs.PreferenceTable` of judged pairs of ``records`` by id:
            the label stage ranks them (Eq. 3) instead of fitting label columns.
        lower_cache: with ``train_layers``, a dict shared by several runs with the same encoder,
            architecture, lengths and ``train_layers`` (cross-validation folds, `csem.model.cv`).
        contrast: rule-made (better, worse) pair rows for the contrast stage (`contrast_stage`).
        contrast_where: the pairs' file, named in errors.
        init: a trained student (or its folder) to start from; None: ``train_config.init``.
        where: the training data's name in errors (its file).

    Returns:
        The trained `EvaluationModel` (best dev epoch when a dev set is
        given, else the last).

    Raises:
        TrainingDataError: bad training/dev data (before training starts). InputError: a bad setting.
    """
    tc = train_config or TrainConfig()
    start = _initial(init if init is not None else tc.init)
    options = dict(label_range=label_range, provenance=provenance, preferences=preferences,
                   lower_cache=lower_cache, contrast=contrast, contrast_where=contrast_where, where=where)
    if config is not None and config.members > 1:  # a seed ensemble: one student per seed, one folder
        return train_ensemble(records, label_cols, mode, config, tc, dev_records, start=start, **options)
    config, module, run = prepare_run(records, label_cols, mode, config, tc, dev_records, label_range=label_range,
                                      preferences=preferences, lower_cache=lower_cache, where=where)
    builder = _builder(module, config, tc)
    if config.overlap_features:  # the lexical output term starts at a fit of the features alone
        module.init_overlap_heads(builder(run.records))
    started = warm_start(module, start, _where(init, tc)) if start is not None else None
    if contrast is None and tc.contrast_per_record and preferences is None:
        from csem.model.contrast import auto_pairs

        contrast = auto_pairs(run.records, config.labels, tc.contrast_per_record, seed=tc.seed,
                              max_pairs=tc.contrast_max_pairs) or None
    if contrast:
        contrast_stage(module, run, tc, builder, contrast, contrast_where, shared_cache=lower_cache is not None)
    trainer, keep = label_stage(module, run, tc, builder)
    return finish(module, run, config, tc, trainer, keep, provenance=provenance or {},
                  label_range_declared=label_range is not None,
                  init={"from": _where(init, tc), "aspects": started, "model": start} if start is not None else None)


def train_ensemble(records: Sequence[Mapping[str, Any]], label_cols: Sequence[str], mode: str, config: ModelConfig,
                   tc: TrainConfig, dev_records: Sequence[Mapping[str, Any]] | None, *,
                   start: EvaluationModel | None, **options: Any) -> EvaluationModel:
    """A seed ensemble (``config.members`` = k): k students with seeds ``tc.seed`` ... ``+ k - 1``, one
    after the other, each exactly the student that seed alone gives, as one model whose scores are the
    members' mean (`EvaluationModel.ensemble`); member ``i``
    starts from member ``i`` (cyclically) of an initial ensemble."""
    seeds = [tc.seed + i for i in range(config.members)]
    students = [train_student(records, label_cols, mode, config.model_copy(update={"members": 1}),
                              tc.model_copy(update={"seed": seed}), dev_records,
                              init=None if start is None else start.member(i % len(start.members)), **options)
                for i, seed in enumerate(seeds)]
    return EvaluationModel.ensemble(students, seeds=seeds)


def prepare_run(records: Sequence[Mapping[str, Any]], label_cols: Sequence[str], mode: str,
                config: ModelConfig | None, tc: TrainConfig, dev_records: Sequence[Mapping[str, Any]] | None, *,
                label_range: Any, preferences: Any, lower_cache: dict | None,
                where: str = "training data") -> tuple[ModelConfig, Any, RunState]:
    """Set-up: check the data (label specs from it), seed everything, build the module and the run's
    state; with ``tc.train_layers`` freeze the lower encoder layers (their token states go to
    ``run.lower_cache``, the caller's ``lower_cache`` when given)."""
    from csem.model.module import EvaluationModule

    config = (config or ModelConfig()).model_copy(update={"mode": mode})
    if preferences is not None:  # comparison data: the pairs are the labels (scores are relative)
        specs = preferences.check(records, mode)
        config = config.model_copy(update={"loss": "pairwise"})
    else:
        specs = check_training_data(records, list(label_cols), mode, label_range=label_range, min_rows=tc.min_rows,
                                    where=where)
    config = ModelConfig.model_validate({**config.model_dump(), "labels": [s.model_dump() for s in specs]})
    if dev_records is not None:
        check_dev_data(dev_records, specs, mode)
    if tc.num_threads:
        torch.set_num_threads(tc.num_threads)
    L.seed_everything(tc.seed, workers=True, verbose=False)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    module = EvaluationModule(config, tc)
    run = RunState(list(records), list(dev_records) if dev_records else None, preferences)
    if tc.train_layers is not None:
        n_layers = module.encoder.n_layers
        if not 0 <= tc.train_layers <= n_layers:
            raise InputError(f"train_layers must be between 0 and the encoder's {n_layers} layers, "
                             f"got {tc.train_layers}")
        if tc.train_layers < n_layers:
            module.freeze_lower(n_layers - tc.train_layers)
            if lower_cache is not None:
                run.lower_cache = lower_cache
    return config, module, run


def _builder(module: Any, config: ModelConfig, tc: TrainConfig) -> Any:
    from csem.model.batching import BatchBuilder

    return BatchBuilder(module.encoder, config.mode, config.max_length, config.labels, share=True,
                        chunk_size=max(8, tc.batch_size), architecture=config.architecture,
                        source_max_length=config.source_max_length,
                        overlap=config.overlap_features and config.feature_set)


def warm_start(module: Any, start: EvaluationModel, where: str) -> dict[str, str]:
    """Warm start: copy a trained student's encoder and heads
    (`EvaluationModule.warm_start`); returns the
    aspect mapping for the card.

    Raises:
        InputError: the architectures differ (the message names the initial model).
    """
    try:
        return module.warm_start(start.module)
    except ValueError as exc:  # name the initial model: the architecture check is warm_start's
        raise InputError(f"{where}: {exc}") from None


def contrast_stage(module: Any, run: RunState, tc: TrainConfig, builder: Any, contrast: Sequence[Mapping[str, Any]],
                   where: str, shared_cache: bool = False) -> None:
    """Contrast stage: ``tc.contrast_epochs`` epochs of the pairs' ranking loss alone (Eq. 3 on the
    head of each pair's aspect; its own Trainer, same precision and devices, encoder learning rate
    ``tc.contrast_lr`` or ``tc.lr``), then, with ``tc.contrast_mix`` > 0, the pairs kept in
    ``run.rehearsal`` for the label stage. Records the card's ``contrast`` entry in ``run.contrast``."""
    from csem.model.contrast import PairBatchSampler, contrast_training

    recs, table = contrast_training(contrast, module.config.labels, where=where)
    sampler = PairBatchSampler(recs, tc.contrast_pairs_per_batch, seed=tc.seed)
    loader = torch.utils.data.DataLoader(recs, batch_sampler=sampler, collate_fn=builder, num_workers=0)
    if shared_cache:
        # a shared cache (cross-validation folds) would hold states of the pairs' texts computed in other
        # runs' chunks: the float rounding of their padding then steers training differently from run to
        # run; with contrast pairs the run keeps a private cache (same result every time)
        run.lower_cache = {}
    seconds = 0.0
    if tc.contrast_epochs:
        t0 = time.perf_counter()
        stage_tc = tc.model_copy(update={"lr": tc.contrast_lr}) if tc.contrast_lr is not None else tc
        task = StageTask(module, run, stage_tc, pairs=table, phase="contrast pretraining ")
        run_trainer(make_trainer(tc, tc.contrast_epochs, validate=False), task, loader)
        seconds = time.perf_counter() - t0
        log.info("contrast pretraining: %d pairs, %d epochs, %.0f s", len(recs) // 2, tc.contrast_epochs, seconds)
        if not shared_cache and not tc.contrast_mix:
            run.lower_cache.clear()  # the pairs' token states are not needed again
    if tc.contrast_mix > 0:
        run.rehearsal = Rehearsal(_cycle(loader), table, tc.contrast_mix)
    run.contrast = {"pairs": len(recs) // 2, "epochs": tc.contrast_epochs, "mix": tc.contrast_mix,
                    "seconds": round(seconds, 1), "perturbations": _count(contrast, "perturbation")}


def label_stage(module: Any, run: RunState, tc: TrainConfig, builder: Any) -> tuple[L.Trainer, KeepBest | None]:
    """Label stage: ``tc.max_epochs`` epochs on the labels (or ``run.preferences``) in source-grouped
    batches, the encoder frozen for ``tc.frozen_epochs`` first; with dev rows, validation after each
    epoch, the best weights kept (`KeepBest`) and early stopping. Returns the Trainer (epochs run)
    and the best-weights keeper (None without dev rows)."""
    from csem.model.batching import GroupedBatchSampler

    mode = module.config.mode
    sampler = GroupedBatchSampler(run.records, tc.batch_size, mode, shuffle=True, seed=tc.seed)
    loader = torch.utils.data.DataLoader(run.records, batch_sampler=sampler, collate_fn=builder, num_workers=0)
    task = StageTask(module, run, tc, pairs=run.preferences,
                     frozen_steps=int(math.ceil(tc.frozen_epochs * len(sampler))))
    val_loader, keep, callbacks = None, None, []
    if run.dev_records:
        dev_sampler = GroupedBatchSampler(run.dev_records, tc.batch_size, mode, shuffle=False, shard=False)
        val_loader = torch.utils.data.DataLoader(run.dev_records, batch_sampler=dev_sampler, collate_fn=builder,
                                                 num_workers=0)
        keep = KeepBest()
        callbacks = [keep, EarlyStopping(monitor="val_monitor", mode="max", patience=tc.patience,
                                         check_finite=False)]
    trainer = make_trainer(tc, tc.max_epochs, callbacks)
    run_trainer(trainer, task, loader, val_loader)
    run.rehearsal = None
    return trainer, keep


def finish(module: Any, run: RunState, config: ModelConfig, tc: TrainConfig, trainer: L.Trainer,
           keep: KeepBest | None, *, provenance: Mapping[str, Any], label_range_declared: bool,
           init: dict | None) -> EvaluationModel:
    """The whole encoder back in use, the best dev weights restored, the metric card, and the
    acceptability gate fitted on texts made from the training rows."""
    from csem.model.card import build_card

    module.release_lower()
    if module._frozen:
        module.unfreeze_encoder()
    module.encoder.requires_grad_(True)
    best_report = None
    if keep is not None and keep.state is not None:
        module.load_state_dict(keep.state)
        best_report = keep.report
    module.cpu().eval()
    card = build_card(config, tc, train_records=run.records, dev_records=run.dev_records, validation=best_report,
                      history=run.history, judge=provenance.get("judge"), rubric=provenance.get("rubric"),
                      notes=provenance.get("notes"), label_range_declared=label_range_declared,
                      epochs_run=trainer.current_epoch)
    if init is not None:
        start = init["model"]
        card["init"] = {"from": init["from"], "aspects": init["aspects"],
                        "distilled_from": start.card.get("distilled_from"),
                        "n_records": (start.card.get("training") or {}).get("n_records")}
    if run.contrast is not None:
        card["contrast"] = run.contrast
    if module.gate is not None:  # the acceptability gate learns from texts made from the training rows
        from csem.model.acceptability import fit_gate

        card["acceptability"] = fit_gate(module.gate, run.records, config.mode, seed=tc.seed)
    return EvaluationModel(module, card)


def _initial(ref: "EvaluationModel | str | Path | None") -> EvaluationModel | None:
    """The initial model of a warm start: a loaded model as it is, a folder or ``package:NAME``
    (`csem.model.pretrained.resolve`) loaded."""
    if ref is None or isinstance(ref, EvaluationModel):
        return ref
    from csem.model.pretrained import resolve

    return EvaluationModel.load(resolve(str(ref)))


def _where(init: Any, tc: TrainConfig) -> str:
    """How the card and errors name the initial model."""
    if init is None or (isinstance(init, EvaluationModel) and tc.init):  # a seed ensemble's member: tc names it
        return str(tc.init)
    return "a model passed to train()" if isinstance(init, EvaluationModel) else str(init)


def _count(rows: Sequence[Mapping[str, Any]], field: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        key = str(r.get(field) or "unnamed")
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _cycle(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader
