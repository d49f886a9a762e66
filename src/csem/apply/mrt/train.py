"""MRT orchestration: [`train_mrt`][csem.apply.mrt.train.train_mrt] (sources, reward, generator, Lightning trainer, resume,
checkpoints) and [`log_summary`][csem.apply.mrt.train.log_summary] of its per-step log."""

from __future__ import annotations

import csv
import json
import logging
import math
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from csem.apply.mrt.config import MRTConfig
from csem.apply.mrt.generator import load_generator, save_generator
from csem.apply.mrt.module import hf_checkpoint_callback, lightning_module_class
from csem.apply.mrt.rewards import RewardCache, metric_reward, reward_identity
from csem.data.jsonio import write_json
from csem.errors import InputError


@dataclass
class MRTResult:
    """``final``: the transformers folder of the trained generator; ``log``: the per-step CSV;
    ``steps``: optimiser steps done; ``reward_hits``/``reward_misses``: reward cache use;
    ``seconds``: wall time of this call; ``resumed_from``: the Lightning checkpoint or None."""

    final: Path
    log: Path
    steps: int
    reward_hits: int
    reward_misses: int
    seconds: float
    resumed_from: str | None


def log_summary(log: str | Path) -> dict:
    """What a ``train_log.csv`` of [`train_mrt`][csem.apply.mrt.train.train_mrt] says, as the first and last quarter of its steps.

    Returns:
        ``{"steps": rows, "quarter": steps per quarter (at least 1), "reward_first", "reward_last",
        "mle_first", "mle_last", "length_first", "length_last"}``: means of ``reward_mean``,
        ``mle_loss`` and ``sample_length`` over the first and the last quarter of the logged steps;
        None where no step in the quarter logged that value (no reward with ``lam = 0``, no MLE loss
        with ``lam = 1`` or without references) or the log has no rows.
    """
    with Path(log).open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    q = max(1, len(rows) // 4)
    out: dict[str, Any] = {"steps": len(rows), "quarter": q}
    for key, col in (("reward", "reward_mean"), ("mle", "mle_loss"), ("length", "sample_length")):
        for part, chunk in (("first", rows[:q]), ("last", rows[-q:] if rows else [])):
            vals = [float(r[col]) for r in chunk if r.get(col) not in (None, "")]
            out[f"{key}_{part}"] = sum(vals) / len(vals) if vals else None
    return out


def train_mrt(generator: str | tuple[Any, Any], sources: Sequence[Mapping[str, Any]], reward: Callable | Any,
              out_dir: str | Path, config: MRTConfig | None = None, *, resume: bool = True,
              progress: bool = False) -> MRTResult:
    """Fine-tune a causal generator with Eq. 12 (MRT + MLE) under a metric's reward.

    Args:
        generator: a URI (``hf:PATH``, ``smollm2``) or a loaded ``(model, tokenizer)``.
        sources: records with ``source``, an id (``doc_id`` or ``id``) and, for the MLE term,
            ``reference``.
        reward: a loaded [`csem.apply.metrics.Metric`][] (its columns mixed by ``config.weights``)
            or a function ``records -> list[float | None]``.
        out_dir: run folder: ``final/``, ``checkpoint-<step>/``, ``lightning/last.ckpt``,
            ``train_log.csv``, ``rewards.jsonl``, ``mrt_config.json``.
        config: [`MRTConfig`][csem.apply.mrt.MRTConfig].
        resume: continue from ``lightning/last.ckpt`` when it exists (False: start over).

    Returns:
        [`MRTResult`][csem.apply.mrt.train.MRTResult].

    Raises:
        ValueError: no sources, a source without text or id, ``lam < 1`` and no source has a
            reference... (the MLE term is then skipped, not an error), bad reward weights.
    """
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    cfg = config or MRTConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    srcs = []
    for i, s in enumerate(sources):
        sid = s.get("doc_id") if s.get("doc_id") is not None else s.get("id")
        if sid is None or not isinstance(s.get("source"), str) or not s["source"].strip():
            raise InputError(f"source {i + 1}: needs an id ('doc_id' or 'id') and a non-empty 'source'")
        srcs.append(dict(s, doc_id=str(sid)))
    if not srcs:
        raise InputError("MRT needs at least one source")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    fn = reward if not hasattr(reward, "columns") else metric_reward(reward, cfg.weights)
    last = out / "lightning" / "last.ckpt"
    resume_from = str(last) if resume and last.exists() else None
    if resume_from is None:  # a fresh run: no log rows or checkpoints of an earlier one
        for p in (out / "train_log.csv", out / "rewards.jsonl" if not resume else out / "_none"):
            p.unlink(missing_ok=True)
        shutil.rmtree(out / "lightning", ignore_errors=True)
    namespace = json.dumps([reward_identity(reward), cfg.weights, cfg.reward_scale], sort_keys=True)
    cache = RewardCache(fn, out / "rewards.jsonl", namespace)
    net, tok = load_generator(generator) if isinstance(generator, str) else generator
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    write_json(out / "mrt_config.json", {"generator": generator if isinstance(generator, str) else
                                         getattr(net.config, "_name_or_path", "model"), **cfg.model_dump()})
    L.seed_everything(cfg.seed, verbose=False)
    module = lightning_module_class()(net, tok, srcs, cache, cfg, out / "train_log.csv")
    net.train()
    ckpt_dir = out / "lightning"
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    trainer = L.Trainer(
        accelerator=cfg.accelerator, devices=cfg.devices, precision=cfg.precision, max_steps=cfg.max_steps,
        max_epochs=-1, accumulate_grad_batches=cfg.accumulate, gradient_clip_val=cfg.gradient_clip or None,
        logger=False, enable_progress_bar=progress, enable_model_summary=False, num_sanity_val_steps=0,
        callbacks=[ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=0,
                                   every_n_train_steps=cfg.checkpoint_every),
                   hf_checkpoint_callback(out, tok, cfg.checkpoint_every, cfg.keep_checkpoints)],
    )
    # the data loader only counts micro-batches: step t's sources come from batch_for_step(t)
    loader = torch.utils.data.DataLoader(list(range(max(1, math.ceil(len(srcs) / cfg.batch_size)) * cfg.accumulate)),
                                         batch_size=1, collate_fn=lambda b: b[0])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
        trainer.fit(module, train_dataloaders=loader, ckpt_path=resume_from)
    final = save_generator(net, tok, out / "final")
    return MRTResult(final, out / "train_log.csv", trainer.global_step, cache.hits, cache.misses,
                     time.perf_counter() - t0, resume_from)
