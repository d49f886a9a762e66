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
    token: Optional[str] = typer.Option(None, "--token", envvar="CSEM_SERVE_TOKEN", show_envvar=True,
                                        help="require 'Authorization: Bearer TOKEN' on POST /score "
                                        "(401 without it); prefer the environment variable"),
    max_body_mb: float = typer.Option(4.0, "--max-body-mb", help="largest request body in MiB (413 above)"),
    max_records: int = typer.Option(512, "--max-records", help="most records per request (413 above)"),
    max_text_chars: int = typer.Option(100_000, "--max-text-chars", help="longest text in characters (422 above)"),
    max_concurrency: int = typer.Option(64, "--max-concurrency", help="most requests in flight (503 above)"),
    max_batch: int = typer.Option(256, help="most records scored in one model call (requests are batched)"),
    max_wait_ms: float = typer.Option(2.0, help="how long a request waits for others to batch with (ms)"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="SQLite cache for a judge metric"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
) -> None:
    """Serve POST /score and GET /health (FastAPI + uvicorn); runs until interrupted.

    JSON bodies only (415 otherwise); records are validated as csem's file readers validate a file
    (422 naming the record and field); limits on body size, records and text length (413/422).
    """
    if (model is None) == (metric is None):  # usage errors before torch is imported (seconds)
        raise fail("give exactly one of --model DIR or --metric SPEC")
    if model is not None and not Path(model.partition("#")[0]).is_dir():
        raise fail(f"{model}: no such model folder")
    import torch

    from csem.apply.metrics import load_metric
    from csem.apply.server import ServerLimits, public_name
    from csem.apply.server import serve as run

    if threads:
        torch.set_num_threads(threads)
    limits = ServerLimits(max_body_bytes=int(max_body_mb * 1024 * 1024), max_records=max_records,
                          max_text_chars=max_text_chars, max_concurrency=max_concurrency)
    spec = model or metric
    m = load_metric(spec, judge_cache=judge_cache)
    typer.echo(f"serving {public_name(m)} ({', '.join(m.columns)}) on http://{host}:{port} (POST /score, "
               f"GET /health){'; bearer token required' if token else ''}", err=True)
    run(m, host=host, port=port, max_batch=max_batch, max_wait_ms=max_wait_ms, limits=limits, token=token or None)
