"""``csem serve``: an HTTP scoring endpoint over a student (or any metric) for other processes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csem.cli import app, fail


@app.command()
def serve(
    model: Optional[str] = typer.Option(None, "--model", help="student folder (DIR or DIR#aspect+aspect)"),
    metric: Optional[str] = typer.Option(None, "--metric", help="any metric instead of --model: "
                                         "judge:RUBRIC@URI or a baseline"),
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(8000, help="port"),
    max_batch: int = typer.Option(256, help="most records scored in one model call (requests are batched)"),
    max_wait_ms: float = typer.Option(2.0, help="how long a request waits for others to batch with (ms)"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="SQLite cache for a judge metric"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
) -> None:
    """Serve POST /score and GET /health (FastAPI + uvicorn); runs until interrupted."""
    import torch

    from csem.apply.metrics import load_metric
    from csem.apply.server import serve as run

    if threads:
        torch.set_num_threads(threads)
    if (model is None) == (metric is None):
        raise fail("give exactly one of --model DIR or --metric SPEC")
    spec = model or metric
    if model is not None and not Path(model.partition("#")[0]).is_dir():
        raise fail(f"{model}: no such model folder")
    m = load_metric(spec, judge_cache=judge_cache)
    typer.echo(f"serving {m.name} ({', '.join(m.columns)}) on http://{host}:{port} (POST /score, GET /health)",
               err=True)
    run(m, host=host, port=port, max_batch=max_batch, max_wait_ms=max_wait_ms)
