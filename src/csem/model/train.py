"""Train a learned evaluation model on judge (or human) ratings with Lightning's Trainer.

:func:`train` checks the data first (:mod:`csem.model.validation`: clear errors before any
training), seeds everything, builds source-grouped batches (:mod:`csem.model.batching`), and runs
``lightning.Trainer`` (CPU, one or several GPUs, several nodes; bf16/fp16 mixed precision where the
device supports it). After each epoch it validates on the dev set (Kendall/Spearman/Pearson with
the labels and with ``human.*`` scores), keeps the best weights in memory, stops early after
``patience`` epochs without improvement, restores the best weights, and saves the model folder
with its metric card.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, WeightAveraging

from csem.errors import InputError
from csem.model.config import PRECISIONS, ModelConfig, TrainConfig
from csem.model.evaluation_model import EvaluationModel
from csem.model.validation import check_dev_data, check_training_data


def _precision(tc: TrainConfig) -> str:
    """Lightning's precision string for ``tc.precision`` (csem's names mapped, Lightning's kept)."""
    if tc.precision != "auto":
        return PRECISIONS.get(tc.precision, tc.precision)
    if torch.cuda.is_available() and tc.accelerator in ("auto", "gpu", "cuda"):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


class TailAveraging(WeightAveraging):
    """Lightning callback: the uniform average of the weights after each of the last ``share`` of the
    optimiser steps (``TrainConfig.average_tail``; tail / Polyak-Ruppert averaging, Polyak & Juditsky
    1992; SWA at a constant learning rate, Izmailov et al. 2018), copied into the model when training
    ends. Lightning's :class:`WeightAveraging` (``torch.optim.swa_utils.AveragedModel``, running mean)
    with three changes: the step the average starts at is ``floor((1 - share) * total steps)`` of the
    Trainer's estimated steps; csem's token-state caches and data handles stay out of the averaged copy;
    and before the first averaged step, validation and the end of training keep the current weights
    (Lightning's class would swap in, or return, the untrained copy)."""

    #: module attributes that are caches or data, not weights: never copied into the average
    _HELD = ("_lower_cache", "_cache", "contrast_batches", "contrast_table", "dev_records", "preferences",
             "_val_scores", "history")

    def __init__(self, share: float) -> None:
        super().__init__(use_buffers=True)
        if not 0 < share < 1:
            raise InputError(f"average_tail must be in (0, 1), got {share}")
        self.share = share
        self.start_step = 0

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        self.start_step = int(math.floor((1 - self.share) * trainer.estimated_stepping_batches))
        held = {k: pl_module.__dict__[k] for k in self._HELD if k in pl_module.__dict__}
        for k in held:
            pl_module.__dict__[k] = None
        try:
            super().setup(trainer, pl_module, stage)
        finally:
            pl_module.__dict__.update(held)

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        return step_idx is not None and step_idx >= self.start_step

    @property
    def averaged(self) -> int:
        """Number of weight snapshots in the average so far (0 before the tail starts)."""
        return 0 if self._average_model is None else int(self._average_model.n_averaged)

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.averaged:
            super().on_validation_epoch_start(trainer, pl_module)

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self.averaged:
            super().on_validation_epoch_end(trainer, pl_module)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.averaged:
            super().on_train_end(trainer, pl_module)

    def validated_state(self, pl_module: Any) -> dict:
        """The weights the last validation scored (the average once it has begun), as a CPU state dict."""
        module = self._average_model.module if self.averaged else pl_module
        return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


class KeepBest(Callback):
    """Lightning callback: copy the weights whenever the dev monitor improves (kept in memory); with a
    :class:`TailAveraging` callback, the weights validated (the average, once it has begun)."""

    def __init__(self, averaging: TailAveraging | None = None) -> None:
        self.best = -math.inf
        self.state: dict | None = None
        self.report: dict | None = None
        self.averaging = averaging

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking or not pl_module.history:
            return
        value = float(trainer.callback_metrics.get("val_monitor", torch.tensor(-1.0)))
        if value > self.best:
            self.best = value
            self.state = (self.averaging.validated_state(pl_module) if self.averaging is not None else
                          {k: v.detach().cpu().clone() for k, v in pl_module.state_dict().items()})
            self.report = copy.deepcopy(pl_module.history[-1])


def is_global_zero() -> bool:
    """True unless this process is a non-zero rank of an initialised torch.distributed group (DDP)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    # Lightning's DDP launcher starts the other ranks as copies of the command with these set
    return int(os.environ.get("NODE_RANK", 0) or 0) == 0 and int(os.environ.get("LOCAL_RANK", 0) or 0) == 0


def train(
    records: Sequence[Mapping[str, Any]],
    label_cols: Sequence[str] | str,
    mode: str = "ref-free",
    out_dir: str | Path | None = None,
    config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    dev_records: Sequence[Mapping[str, Any]] | None = None,
    *,
    label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    judge: str | None = None,
    rubric: str | None = None,
    notes: str | None = None,
    preferences: Any = None,
    lower_cache: dict | None = None,
    contrast: Sequence[Mapping[str, Any]] | None = None,
    contrast_where: str = "contrast pairs",
    init: "EvaluationModel | str | Path | None" = None,
) -> EvaluationModel:
    """Train an evaluation model on ``records`` and (if ``out_dir``) save it.

    Args:
        records: training records (``source``, ``candidate``, ``reference`` as the mode needs, and the
            label columns).
        label_cols: one column or several (``"judge.coherence,judge.relevance"`` or a list): one
            head per column over one shared encoder.
        mode: ``ref-free`` | ``ref-based`` | ``fluency`` | ``fluency-ref`` (overrides ``config.mode``).
        out_dir: model folder to write (None: only return the model).
        config: architecture (encoder, pooling, head, loss...); defaults to :class:`ModelConfig`.
        train_config: optimisation; defaults to :class:`TrainConfig` (paper + COMET defaults).
        dev_records: dev set for per-epoch validation, best-checkpoint selection and early stopping.
        label_range: the declared rating scale, e.g. ``(1, 5)`` (or per column); None infers it.
        judge, rubric, notes: provenance written to the metric card.
        lower_cache: with ``train_layers``, a dict shared by several ``train`` calls with the same
            encoder, architecture, lengths and ``train_layers`` (e.g. cross-validation folds, see
            :mod:`csem.model.cv`): the frozen lower layers' token states are computed once for all.
        preferences: a :class:`csem.model.preferences.PreferenceTable` (judged pairs of ``records``
            by id): train on the pairs with the ranking loss (Eq. 3) instead of on label columns;
            ``label_cols`` then name the preference columns (see
            :func:`csem.model.preferences.pairs_to_training`).
        contrast: rule-made (better, worse) pair rows (:mod:`csem.data.contrasts`, read by
            :func:`csem.model.contrast.contrast_training`): the model is first trained to rank them
            (``train_config.contrast_epochs`` epochs, ranking loss Eq. 3; UniEval/BLEURT-style
            pretraining), then on the labels, optionally with the pairs' loss mixed into every step
            (``train_config.contrast_mix``). Pairs of aspects the labels do not have are skipped.
        contrast_where: the pairs' file, named in errors (a row without a text: ``FILE: row K ...``).
        init: a trained student (or its folder) to start from; None: ``train_config.init`` (a folder,
            or ``package:NAME`` for a student shipped with csem), else the bare encoder. See
            :meth:`csem.model.module.EvaluationModule.warm_start`; a seed ensemble's member ``i``
            starts from member ``i`` (cyclically) of an initial ensemble.

    With ``config.members`` = k > 1 it trains a seed ensemble: k students with seeds
    ``train_config.seed`` ... ``+ k - 1``, one after the other, each exactly the student that seed
    alone gives, saved as one folder whose scores are the members' mean
    (:meth:`EvaluationModel.ensemble`); time and memory grow k-fold.

    Returns:
        The trained :class:`EvaluationModel` (best dev epoch when a dev set is given, else the last).

    Raises:
        TrainingDataError: bad training/dev data (before training starts).
    """
    from csem.model.batching import BatchBuilder, GroupedBatchSampler
    from csem.model.card import build_card
    from csem.model.module import EvaluationModule

    start = _initial(init if init is not None else (train_config.init if train_config else None))
    if config is not None and config.members > 1:  # a seed ensemble: one student per seed, one folder
        tc = train_config or TrainConfig()
        seeds = [tc.seed + i for i in range(config.members)]
        students = [train(records, label_cols, mode, config=config.model_copy(update={"members": 1}),
                          train_config=tc.model_copy(update={"seed": seed}), dev_records=dev_records,
                          label_range=label_range, judge=judge, rubric=rubric, notes=notes, preferences=preferences,
                          lower_cache=lower_cache, contrast=contrast, contrast_where=contrast_where,
                          init=None if start is None else start.member(i % len(start.members)))
                    for i, seed in enumerate(seeds)]
        model = EvaluationModel.ensemble(students, seeds=seeds)
        if out_dir is not None and is_global_zero():
            model.save(out_dir)
        return model
    cols = [c.strip() for c in label_cols.split(",")] if isinstance(label_cols, str) else list(label_cols)
    config = (config or ModelConfig()).model_copy(update={"mode": mode})
    tc = train_config or TrainConfig()
    if preferences is not None:  # comparison data: the pairs are the labels (scores are relative)
        specs = preferences.check(records, mode)
        config = config.model_copy(update={"loss": "pairwise"})
    else:
        specs = check_training_data(records, cols, mode, label_range=label_range, min_rows=tc.min_rows)
    config = ModelConfig.model_validate({**config.model_dump(), "labels": [s.model_dump() for s in specs]})
    if dev_records is not None:
        check_dev_data(dev_records, specs, mode)
    if tc.num_threads:
        torch.set_num_threads(tc.num_threads)
    L.seed_everything(tc.seed, workers=True, verbose=False)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    module = EvaluationModule(config, tc)
    module.dev_records = list(dev_records) if dev_records else None
    module.preferences = preferences
    recs = list(records)
    if tc.train_layers is not None:
        n_layers = module.encoder.n_layers
        if not 0 <= tc.train_layers <= n_layers:
            raise InputError(f"train_layers must be between 0 and the encoder's {n_layers} layers, got {tc.train_layers}")
        if tc.train_layers < n_layers:
            module.freeze_lower(n_layers - tc.train_layers)
            if lower_cache is not None:
                module._lower_cache = lower_cache
    builder = BatchBuilder(module.encoder, mode, config.max_length, config.labels, share=True,
                           chunk_size=max(8, tc.batch_size), architecture=config.architecture,
                           source_max_length=config.source_max_length,
                           overlap=config.overlap_features and config.feature_set)
    if config.overlap_features:  # the lexical output term starts at a fit of the features alone
        module.init_overlap_heads(builder(recs))
    started = None
    if start is not None:
        try:
            started = module.warm_start(start.module)
        except ValueError as exc:  # name the initial model: the architecture check is warm_start's
            raise InputError(f"{_where(init, tc)}: {exc}") from None
    contrast_loader = None
    if contrast is None and tc.contrast_per_record and preferences is None:
        from csem.model.contrast import auto_pairs

        contrast = auto_pairs(recs, config.labels, tc.contrast_per_record, seed=tc.seed,
                              max_pairs=tc.contrast_max_pairs) or None
    if contrast:
        if lower_cache is not None and module._lower_cache is lower_cache:
            # a shared cache (cross-validation folds) would hold states of the pairs' texts computed in
            # other runs' chunks: the float rounding of their padding then steers training differently
            # from run to run; with contrast pairs the run keeps a private cache (same result every time)
            module._lower_cache = {}
        contrast_loader = _contrast_loader(contrast, config, tc, builder, contrast_where)
        if tc.contrast_epochs:
            _pretrain_on_contrast(module, contrast_loader, tc)
            if lower_cache is None and not tc.contrast_mix:
                module._lower_cache.clear()  # the pairs' token states are not needed again
        if tc.contrast_mix > 0:
            module.contrast_batches = _cycle(contrast_loader)
            module.contrast_table = contrast_loader.table
            module.contrast_weight = tc.contrast_mix
    sampler = GroupedBatchSampler(recs, tc.batch_size, mode, shuffle=True, seed=tc.seed)
    loader = torch.utils.data.DataLoader(recs, batch_sampler=sampler, collate_fn=builder, num_workers=0)
    module.frozen_steps = int(math.ceil(tc.frozen_epochs * len(sampler)))
    val_loader = None
    callbacks: list[Any] = []
    keep = None
    averaging = TailAveraging(tc.average_tail) if tc.average_tail > 0 else None
    if averaging is not None:
        callbacks.append(averaging)
    if module.dev_records:
        dev_sampler = GroupedBatchSampler(module.dev_records, tc.batch_size, mode, shuffle=False, shard=False)
        val_loader = torch.utils.data.DataLoader(module.dev_records, batch_sampler=dev_sampler,
                                                 collate_fn=builder, num_workers=0)
        keep = KeepBest(averaging)
        callbacks += [keep, EarlyStopping(monitor="val_monitor", mode="max", patience=tc.patience,
                                          check_finite=False)]
    # Lightning's start-up tips and GPU/TPU availability lines are info logs: keep the CLI output ours
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    trainer = L.Trainer(
        accelerator=tc.accelerator, devices=tc.devices, num_nodes=tc.num_nodes, strategy=tc.strategy,
        precision=_precision(tc), max_epochs=tc.max_epochs, gradient_clip_val=tc.gradient_clip or None,
        deterministic=True, logger=False, enable_checkpointing=False, enable_progress_bar=tc.progress,
        enable_model_summary=False, num_sanity_val_steps=0, use_distributed_sampler=False,
        callbacks=callbacks, log_every_n_steps=1,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*Total length of `DataLoader` across ranks.*")
        warnings.filterwarnings("ignore", message=".*`validation_step` but have no `val_dataloader`.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
        # the frozen encoder is kept in eval mode on purpose (no dropout while its embeddings are cached)
        warnings.filterwarnings("ignore", message=".*module\\(s\\) in eval mode at the start of training.*")
        trainer.fit(module, train_dataloaders=loader, val_dataloaders=val_loader)
    module.contrast_batches = None
    if lower_cache is not None:
        module._lower_cache = {}  # the caller's cache stays filled for the next call
    module.release_lower()
    if module._frozen:
        module.unfreeze_encoder()
    module.encoder.requires_grad_(True)
    best_report = None
    if keep is not None and keep.state is not None:
        module.load_state_dict(keep.state)
        best_report = keep.report
    module.cpu().eval()
    card = build_card(config, tc, train_records=recs, dev_records=dev_records, validation=best_report,
                      history=module.history, judge=judge, rubric=rubric, notes=notes,
                      label_range_declared=label_range is not None, epochs_run=trainer.current_epoch)
    if start is not None:
        card["init"] = {"from": _where(init, tc), "aspects": started,
                        "distilled_from": start.card.get("distilled_from"),
                        "n_records": (start.card.get("training") or {}).get("n_records")}
    if contrast_loader is not None:
        card["contrast"] = {"pairs": len(contrast_loader.dataset) // 2, "epochs": tc.contrast_epochs,
                            "mix": tc.contrast_mix, "specificity": contrast_loader.table.specificity,
                            "seconds": round(getattr(module, "contrast_seconds", 0.0), 1),
                            "perturbations": _count(contrast, "perturbation")}
    if module.gate is not None:  # the acceptability gate learns from texts made from the training rows
        from csem.model.acceptability import fit_gate

        card["acceptability"] = fit_gate(module.gate, recs, mode, seed=tc.seed)
    model = EvaluationModel(module, card)
    if out_dir is not None and trainer.is_global_zero:  # under DDP only rank 0 writes the folder
        model.save(out_dir)
    return model


def _initial(ref: "EvaluationModel | str | Path | None") -> EvaluationModel | None:
    """The initial model of a warm start: a loaded model as it is, a folder or ``package:NAME``
    (:func:`csem.model.pretrained.resolve`) loaded."""
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


def _cycle(loader):
    while True:
        yield from loader


def _contrast_loader(contrast, config: ModelConfig, tc: TrainConfig, builder, where: str = "contrast pairs"):
    """A DataLoader of whole contrast pairs (:class:`csem.model.contrast.PairBatchSampler`); its
    ``dataset`` is the pair records and it carries the preference table as ``loader.table``."""
    from csem.model.contrast import PairBatchSampler, contrast_training

    recs, table = contrast_training(contrast, config.labels, where=where)
    table.specificity = tc.contrast_specificity
    sampler = PairBatchSampler(recs, tc.contrast_pairs_per_batch, seed=tc.seed)
    loader = torch.utils.data.DataLoader(recs, batch_sampler=sampler, collate_fn=builder, num_workers=0)
    loader.table = table
    return loader


def _pretrain_on_contrast(module, loader, tc: TrainConfig) -> None:
    """Contrast pretraining: ``tc.contrast_epochs`` epochs of the pairs' ranking loss alone (its own
    Lightning Trainer, same precision and devices), then the label training starts from there."""
    import time

    t0 = time.perf_counter()
    for name in ("lightning.pytorch", "lightning.fabric"):  # keep the CLI output ours (as in train)
        logging.getLogger(name).setLevel(logging.WARNING)
    module.preferences = loader.table
    module.contrast_phase = True
    saved_tc = module.train_config
    if tc.contrast_lr is not None:
        module.train_config = tc.model_copy(update={"lr": tc.contrast_lr})
    trainer = L.Trainer(
        accelerator=tc.accelerator, devices=tc.devices, num_nodes=tc.num_nodes, strategy=tc.strategy,
        precision=_precision(tc), max_epochs=tc.contrast_epochs, gradient_clip_val=tc.gradient_clip or None,
        deterministic=True, logger=False, enable_checkpointing=False, enable_progress_bar=tc.progress,
        enable_model_summary=False, num_sanity_val_steps=0, use_distributed_sampler=False, log_every_n_steps=1,
        limit_val_batches=0,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*module\\(s\\) in eval mode at the start of training.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
        warnings.filterwarnings("ignore", message=".*`validation_step` but have no `val_dataloader`.*")
        trainer.fit(module, train_dataloaders=loader)
    module.preferences = None
    module.contrast_phase = False
    module.train_config = saved_tc
    module.contrast_seconds = time.perf_counter() - t0
    logging.getLogger("csem.model").info("contrast pretraining: %d pairs, %d epochs, %.0f s",
                                         len(loader.dataset) // 2, tc.contrast_epochs, module.contrast_seconds)
