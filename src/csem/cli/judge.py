"""``csem judge``: judge a records file with G-Eval rubrics and print the pivot table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csem.cli import app, fail


def default_cache() -> Path:
    from csem.assets import cache_dir

    return cache_dir() / "judgments.sqlite"


def parse_options(pairs: Optional[list[str]], option: str = "--judge-opt") -> dict[str, str]:
    """``key=value`` backend options (``--judge-opt base_url=http://...``, ``--generator-opt ...``)."""
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise typer.BadParameter(f"'{p}' must look like KEY=VALUE, e.g. base_url=http://127.0.0.1:8000/v1",
                                     param_hint=option)
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def run_judging(records, rubric, judge, *, out, mode, n, temperature, max_tokens, cache, no_cache, group_by,
                judge_opt, min_mass, progress, console, title=None) -> int:
    """Shared by ``csem judge`` and ``csem example``: judge, write, print pivot + summary; exit code."""
    from rich.markup import escape

    from csem.data.records import write_records
    from csem.judge import judge_records
    from csem.llm import BackendError
    from csem.judge.pivot import pivot_table
    from csem.rubrics import RubricError

    try:
        rows, summary = judge_records(records, rubric, judge, mode=mode, n=n, temperature=temperature,
                                      max_tokens=max_tokens, min_mass=min_mass,
                                      cache=None if no_cache else (cache or default_cache()),
                                      progress=progress, backend_options=parse_options(judge_opt))
    except BackendError as exc:
        fail(exc)
        return 1
    except (RubricError, ValueError, TypeError) as exc:
        fail(exc)
        return 2
    if out is not None:
        write_records(rows, out)
        console.print(f"wrote {len(rows)} rows to {escape(str(out))}", soft_wrap=True)
    gb = group_by if any(r.get(group_by) is not None for r in rows) else "all"
    console.print(pivot_table(rows, group_by=gb, title=title))
    console.print(escape(str(summary)), soft_wrap=True)
    if summary.failed:
        where = "" if no_cache else f" (finished judgments are cached in {cache or default_cache()})"
        fail(f"{summary.failed} judgments failed: {'; '.join(summary.errors)}. "
             f"Re-run the same command to judge only what is missing{where}.")
        return 3
    return 0


@app.command("judge")
def judge(
    data: Optional[Path] = typer.Option(None, "--data", help="records file (.jsonl, .csv, .tsv, .parquet)"),
    rubric: str = typer.Option("geval/summeval-coherence", "--rubric",
                               help="rubric ids or .yaml/.toml files, comma-separated; 'geval/' = all four G-Eval ones"),
    judge_uri: str = typer.Option("local", "--judge", help="backend URI: local | llama-cpp:PATH|smollm2|qwen-0.5b | "
                                  "openai:MODEL"),
    out: Optional[Path] = typer.Option(None, "--out", help="output records file (every input column kept)"),
    mode: str = typer.Option("probs", "--mode", help="probs | sample | parse"),
    n: int = typer.Option(20, "--n", help="samples per judgment in sample mode (G-Eval: 20)"),
    temperature: float = typer.Option(1.0, "--temperature", help="sampling temperature in sample mode"),
    max_tokens: int = typer.Option(10, "--max-tokens", help="answer length limit for sample/parse"),
    min_mass: float = typer.Option(0.0, "--min-mass", help="probs: missing below this valid-score probability mass"),
    cache: Optional[Path] = typer.Option(None, "--cache", help="SQLite judgment cache (default ~/.cache/csem/judgments.sqlite)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="do not read or write the cache"),
    source_col: Optional[str] = typer.Option(None, "--source-col", help="column holding the source"),
    candidate_col: Optional[str] = typer.Option(None, "--candidate-col", help="column holding the candidate"),
    reference_col: Optional[str] = typer.Option(None, "--reference-col", help="column holding the reference(s)"),
    col: Optional[list[str]] = typer.Option(None, "--col", help="column mapping FIELD=COLUMN (repeatable; as in "
                                            "the other commands, e.g. --col source=article)"),
    group_by: str = typer.Option("system_id", "--group-by", help="column naming the candidate set (pivot columns)"),
    judge_opt: Optional[list[str]] = typer.Option(None, "--judge-opt", help="backend option KEY=VALUE (repeatable), "
                                                  "e.g. base_url=..., concurrency=8, n_ctx=8192"),
    list_rubrics_: bool = typer.Option(False, "--list-rubrics", help="list the built-in rubrics and exit"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="progress bar with ETA on stderr"),
) -> None:
    """Judge every record with every rubric aspect; write judge.<aspect> columns; print the pivot table."""
    from rich.console import Console

    from csem.data.records import RecordError, read_records
    from csem.rubrics import RubricError, list_rubrics, load_rubric

    console = Console()
    if list_rubrics_:
        from rich.table import Table

        t = Table(title="built-in rubrics")
        t.add_column("id", no_wrap=True)
        for c in ("aspects", "scale", "source", "reference"):
            t.add_column(c, overflow="fold")
        for rid in list_rubrics():
            r = load_rubric(rid)
            t.add_row(rid, ",".join(r.aspect_names), f"{r.scale.min}-{r.scale.max}{r.unit}",
                      "yes" if r.uses_source else "no", "yes" if r.uses_reference else "no")
        console.print(t)
        raise typer.Exit(0)
    if data is None:
        raise fail("--data is required (or use --list-rubrics)")
    from csem.data.records import parse_column_map

    columns = {k: v for k, v in (("source", source_col), ("candidate", candidate_col), ("reference", reference_col)) if v}
    try:
        columns.update(parse_column_map(col or []))
        from csem.rubrics import load_rubrics

        rubrics = load_rubrics(rubric)
        need = ["candidate"] + (["source"] if any(r.uses_source for r in rubrics) else [])
        records = read_records(data, columns=columns, required=need)
    except (RecordError, RubricError, FileNotFoundError) as exc:
        raise fail(exc) from None
    if not records:
        raise fail(f"{data}: no rows to judge")
    code = run_judging(records, rubrics, judge_uri, out=out, mode=mode, n=n, temperature=temperature,
                       max_tokens=max_tokens, cache=cache, no_cache=no_cache, group_by=group_by, judge_opt=judge_opt,
                       min_mass=min_mass, progress=progress, console=console)
    raise typer.Exit(code)
