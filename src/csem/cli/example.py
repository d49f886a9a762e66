"""``csem example``: the G-Eval example on the embedded judge (one article, a good and a poor summary,
the four G-Eval SummEval aspects, pivot table of mean scores)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csem.cli import app

GEVAL_RUBRICS = ["geval/summeval-coherence", "geval/summeval-consistency", "geval/summeval-fluency",
                 "geval/summeval-relevance"]


@app.command("example")
def example(
    judge_uri: str = typer.Option("local", "--judge", help="backend URI (default: the embedded Qwen2.5-1.5B judge)"),
    mode: str = typer.Option("probs", "--mode", help="probs | sample | parse"),
    n: int = typer.Option(20, "--n", help="samples in sample mode"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the judged records here"),
    cache: Optional[Path] = typer.Option(None, "--cache", help="SQLite judgment cache (default ~/.cache/csem/judgments.sqlite)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="do not read or write the cache"),
    judge_opt: Optional[list[str]] = typer.Option(None, "--judge-opt", help="backend option KEY=VALUE (repeatable)"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Run the G-Eval example and print the pivot table (aspects x candidate set, mean scores)."""
    from rich.console import Console

    from csem.cli.judge import run_judging
    from csem.judge.example_data import example_records

    console = Console()
    code = run_judging(example_records(), GEVAL_RUBRICS, judge_uri, out=out, mode=mode, n=n, temperature=1.0,
                       max_tokens=10, cache=cache, no_cache=no_cache, group_by="system_id", judge_opt=judge_opt,
                       min_mass=0.0, progress=progress, console=console,
                       title=f"G-Eval example ({judge_uri}, {mode}): mean score by summary")
    raise typer.Exit(code)
