"""``csem mrt``: fine-tune a causal generator with minimum risk training mixed with MLE (CSEM Eq. 12)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import app, col_option, column_map, fail


@app.command()
def mrt(
    generator: str = typer.Option(..., "--generator", help="hf:FOLDER, hf:FILE.gguf or smollm2 (the packaged "
                                  "SmolLM2-135M-Instruct, converted once to fp32 and cached)"),
    sources: Path = typer.Option(..., "--sources", help="sources (id or doc_id, source, optional reference)"),
    metric: str = typer.Option(..., "--metric", help="the reward: a student folder (DIR or DIR#aspect+aspect), "
                               "judge:RUBRIC@URI, or a reference-based baseline"),
    out: Path = typer.Option(..., "--out", help="run folder: final/, checkpoint-<step>/, train_log.csv, ..."),
    weights: Optional[str] = typer.Option(None, "--weights", help="column=w pairs mixing the metric's columns "
                                          "(default: their mean)"),
    lam: float = typer.Option(0.7, "--lambda", help="Eq. 12: weight of L_MRT (1 - lambda on L_MLE); 0 = MLE only"),
    alpha: float = typer.Option(5e-3, help="Eq. 6: Q = P^alpha renormalised over the samples"),
    samples: int = typer.Option(5, "--samples", help="S: top-k samples per source"),
    top_k: int = typer.Option(50, help="top-k sampling"),
    max_steps: int = typer.Option(20, help="optimiser steps"),
    batch_size: int = typer.Option(2, help="sources per step"),
    accumulate: int = typer.Option(1, help="gradient accumulation steps"),
    lr: float = typer.Option(1e-5, help="AdamW learning rate"),
    max_new_tokens: int = typer.Option(64, help="sample length cap (tokens)"),
    max_source_tokens: int = typer.Option(384, help="source tokens kept in the prompt"),
    task: str = typer.Option("summarize", help="task prompt name or template with {source}"),
    checkpoint_every: int = typer.Option(10, help="steps between checkpoints"),
    seed: int = typer.Option(0),
    precision: str = typer.Option("32-true", help="Lightning precision (32-true, bf16-mixed, ...)"),
    accelerator: str = typer.Option("cpu", help="Lightning accelerator (cpu, gpu, auto)"),
    devices: str = typer.Option("1", help="Lightning devices"),
    fresh: bool = typer.Option(False, "--fresh", help="start over instead of resuming OUT/lightning/last.ckpt"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="SQLite cache for a judge reward"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """MRT (Shen et al. 2016) + MLE with a metric as the reward; resumable, seeded, logged per step."""
    from csem.apply.metrics import load_metric
    from csem.apply.mrt import MRTConfig, train_mrt
    from csem.apply.reranking import parse_weights
    from csem.data.records import check_output_path, read_records

    check_output_path(out, kind="folder")
    srcs = read_records(sources, columns=column_map(col), required=("source",))
    if not srcs:
        raise fail(f"{sources}: no sources")
    reward = load_metric(metric, judge_cache=judge_cache)
    w = dict(zip(reward.columns, parse_weights(weights, reward.columns).tolist())) if weights else None
    cfg = MRTConfig(lam=lam, alpha=alpha, num_samples=samples, top_k=top_k, max_steps=max_steps,
                    batch_size=batch_size, accumulate=accumulate, lr=lr, max_new_tokens=max_new_tokens,
                    max_source_tokens=max_source_tokens, task=task, checkpoint_every=checkpoint_every,
                    seed=seed, precision=precision, accelerator=accelerator,
                    devices=int(devices) if devices.isdigit() else devices, threads=threads, weights=w)
    res = train_mrt(generator, srcs, reward, out, cfg, resume=not fresh, progress=True)
    typer.echo(f"wrote {res.final}: {res.steps} steps in {res.seconds:.1f} s"
               + (f" (resumed from {res.resumed_from})" if res.resumed_from else "")
               + f"; per-step log {res.log}; rewards computed {res.reward_misses}, reused {res.reward_hits}")
