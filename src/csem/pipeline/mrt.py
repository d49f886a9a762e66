"""The mrt stage of ``csem run``: fine-tune a generator with MRT + MLE, the trained student as the reward.

With an ``mrt:`` section ([`csem.pipeline.config.MrtConfig`][]) the pipeline fine-tunes a causal
generator after the student is trained, with the apply layer's minimum risk training mixed with MLE
([`csem.apply.mrt.train_mrt`][], CSEM Eq. 5/6/12), exactly as ``csem mrt`` does: the reward is the
train stage's student loaded by [`csem.apply.metrics.load_metric`][] (``run/model#aspect+...``, the
mean of its heads), the sources are the training split's (with their references for the MLE term)::

    mrt:
      generator: smollm2          # required: smollm2 | hf:FOLDER (relative to the pipeline file) | hf:FILE.gguf
      metric: student             # student#coherence[+relevance]: only those heads
      sources: train              # train | train+dev | all
      max_steps: 20               # and batch_size, num_samples (S), alpha, lam, lr, max_new_tokens,
                                  # max_source_tokens, seed: MRTConfig's fields and defaults
      options: {accelerator: gpu, precision: bf16-mixed}   # any other MRTConfig field

Writes ``mrt/`` as ``csem mrt --out`` does: ``final/`` (the fine-tuned generator, a loadable
transformers folder: ``hf:RUN/mrt/final``), ``train_log.csv`` (one row per step), ``checkpoint-<step>/``,
``lightning/last.ckpt``, ``rewards.jsonl``, ``mrt_config.json``, and ``stage.json`` (the stage's
fingerprint). A killed stage resumes from ``lightning/last.ckpt`` through ``train_mrt``'s own resume
(the step's batches and sampling seeds are functions of the step, so it continues exactly), reusing
the rewards already computed; when the stage's fingerprint changed (its settings, the student, the
split) or the stage is forced (``--from``), the folder is cleared and training starts over. The
stage summary and the report give the steps done and, from ``train_log.csv``
([`csem.apply.mrt.log_summary`][]), the mean reward and MLE loss over the first and last quarter of
the steps.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Sequence

from csem.data.jsonio import write_json
from csem.errors import InputError
from csem.pipeline.config import MRT_FIELDS, resolve_path
from csem.pipeline.rerank import _named, student_heads

SPLITS = {"train": ("train",), "train+dev": ("train", "dev"), "all": ("train", "dev", "test")}
HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


def generator_uri(spec: str, base: Path) -> tuple[str, Path | None]:
    """The ``load_generator`` URI of ``mrt.generator`` and its local file or folder (None for the
    packaged ``smollm2`` or a Hugging Face hub id ``org/name``, read from the local cache).

    Raises:
        ValueError: neither an existing file or folder (relative to ``base``, the pipeline file's
            folder), nor a packaged generator, nor a hub id.
    """
    from csem.apply.mrt import resolve_generator

    body = spec[3:] if spec.startswith("hf:") else spec
    local = resolve_path(body, base)
    if body and local.exists():
        return f"hf:{local}", local
    try:
        packaged = Path(resolve_generator(spec)).exists()
    except (OSError, ValueError, ImportError):
        packaged = False
    if packaged or HUB_ID.fullmatch(body):
        return spec, None
    raise InputError(f"mrt.generator '{spec}': no such file or folder ({local}) and not a packaged generator; "
                     "write smollm2, hf:FOLDER (a transformers causal LM) or hf:FILE.gguf")


def mrt_sources(sources: Sequence[dict], split: dict[str, str], which: str) -> list[dict]:
    """The sources (``id``/``doc_id``, ``source``, ``reference`` when the file has one) whose split is
    one of ``which``'s (`SPLITS`); ``split`` maps doc_id -> train/dev/test."""
    keep = SPLITS[which]
    return [s for s in sources if split.get(s["doc_id"]) in keep]


def run_mrt(cfg, *, sources: Sequence[dict], student_dir: Path, label_cols: Sequence[str], generator: str,
            out_dir: Path, task: str, key: str, fresh: bool = False, progress: bool = False) -> dict:
    """Fine-tune ``generator`` on ``sources`` with ``cfg`` ([`MrtConfig`][csem.pipeline.config.MrtConfig]),
    rewarded by the student in ``student_dir``, into ``out_dir`` (``train_mrt``'s folder layout).

    ``key`` is the stage's fingerprint: a folder left by a run with the same key resumes (a killed
    stage), any other folder (or ``fresh``) is cleared first.

    Returns:
        the stage summary: ``generator``, ``metric``, ``reward_columns``, ``sources``, ``references``,
        ``settings`` (the MRTConfig values of `MRT_FIELDS` used), ``steps`` (optimiser steps done), ``logged_steps`` and ``quarter`` (steps per quarter of the
        log), ``reward_first``/``reward_last``, ``mle_first``/``mle_last``, ``length_first``/
        ``length_last`` (means over the first/last quarter of ``train_log.csv``; None where not
        logged), ``rewards_computed``, ``rewards_reused``, ``resumed_from``, ``seconds``, ``folder``.

    Raises:
        ValueError: one line naming the setting: ``mrt.metric`` (a head the student lacks),
            ``mrt.generator`` (cannot be loaded, not causal), ``mrt.sources`` (none), ``mrt`` (other
            ``train_mrt`` errors: bad reward weights, lambda 0 without references...).
    """
    from csem.apply.metrics import load_metric
    from csem.apply.mrt import load_generator, log_summary, train_mrt
    from csem.data.records import references_of

    heads = student_heads(cfg.metric, label_cols, "mrt.metric")
    if not sources:
        raise InputError(f"mrt.sources '{cfg.sources}': no sources in that split")
    mcfg = cfg.mrt_config(task=task)
    try:
        reward = load_metric(f"{student_dir}#{'+'.join(heads)}")
    except ValueError as exc:
        raise InputError(_named(f"mrt.metric '{cfg.metric}'", exc)) from exc
    try:
        net, tok = load_generator(generator)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise InputError(_named(f"mrt.generator '{cfg.generator}'", exc)) from exc

    out = Path(out_dir)
    marker = out / "stage.json"
    if out.exists():
        old = json.loads(marker.read_text()).get("fingerprint") if marker.exists() else None
        if fresh or old != key:
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(marker, {"fingerprint": key, "generator": cfg.generator, "metric": cfg.metric})
    try:
        res = train_mrt((net, tok), list(sources), reward, out, mcfg, resume=True, progress=progress)
    except ValueError as exc:
        raise InputError(_named("mrt", exc)) from exc
    log = log_summary(res.log)
    resumed = res.resumed_from
    summary: dict[str, Any] = {
        "generator": cfg.generator, "metric": cfg.metric, "reward_columns": list(reward.columns),
        "sources": len(sources), "references": sum(bool(references_of(s)) for s in sources),
        "settings": {k: getattr(mcfg, k) for k in MRT_FIELDS},
        "steps": res.steps, "logged_steps": log["steps"], "quarter": log["quarter"],
        **{k: log[k] for k in ("reward_first", "reward_last", "mle_first", "mle_last", "length_first", "length_last")},
        "rewards_computed": res.reward_misses, "rewards_reused": res.reward_hits,
        "resumed_from": None if resumed is None else str(Path(resumed).relative_to(out.parent)),
        "seconds": round(res.seconds, 3), "folder": str(res.final.relative_to(out.parent)),
    }
    return summary

