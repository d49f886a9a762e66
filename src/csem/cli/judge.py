"""``csem judge``: judge a records file with G-Eval rubrics and print the pivot table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csem.cli import app, col_option, column_map, fail, parse_pairs


def default_cache() -> Path:
    from csem.assets import cache_dir

    return cache_dir() / "judgments.sqlite"


def parse_options(pairs: Optional[list[str]], option: str = "--judge-opt") -> dict[str, str]:
    """``key=value`` backend options (``--judge-opt base_url=http://...``, ``--generator-opt ...``)."""
    return parse_pairs(pairs, option, "base_url=http://127.0.0.1:8000/v1")


def run_outcome(*, total: int, judged: int, cached: int, failed: int, errors: list[str], resume: str = "") -> int:
    """The exit code of a judging run, with its ``csem: error:`` line when it is not 0: 0 when nothing
    failed; 1 when the backend answered nothing (no judgment made now or found in the cache: an
    unreachable judge); 3 (partial) when some judgments failed (backend errors, e.g. a prompt longer
    than the context) and the others were kept."""
    if not failed:
        return 0
    why = "; ".join(errors) if errors else "backend errors"
    if judged + cached == 0:
        fail(f"no judgment made: the backend answered none of the {total} requests ({why})", 1)
        return 1
    fail(f"{failed} of {total} judgments failed (written as missing): {why}. "
         f"Re-run the same command to judge only what is missing{resume}.", 3)
    return 3


def run_judging(records, rubric, judge, *, out, mode, n, temperature, max_tokens, cache, no_cache, group_by,
                judge_opt, min_mass, progress, console, title=None) -> int:
    """Shared by ``csem judge`` and ``csem example``: judge, write, print pivot + summary; exit code.
    Errors propagate to the one mapping of :mod:`csem.cli` (an authentication failure: 1)."""
    from rich.markup import escape

    from csem.data.records import check_output_path, write_records
    from csem.judge import judge_records
    from csem.judge.pivot import pivot_table

    if out is not None:
        check_output_path(out)  # before any work
    rows, summary = judge_records(records, rubric, judge, mode=mode, n=n, temperature=temperature,
                                  max_tokens=max_tokens, min_mass=min_mass,
                                  cache=None if no_cache else (cache or default_cache()),
                                  progress=progress, backend_options=parse_options(judge_opt))
    if out is not None:
        write_records(rows, out)
        console.print(f"wrote {len(rows)} rows to {escape(str(out))}", soft_wrap=True)
    gb = group_by if any(r.get(group_by) is not None for r in rows) else "all"
    console.print(pivot_table(rows, group_by=gb, title=title))
    console.print(escape(str(summary)), soft_wrap=True)
    where = "" if no_cache else f" (finished judgments are cached in {cache or default_cache()})"
    return run_outcome(total=summary.total, judged=summary.judged, cached=summary.cached, failed=summary.failed,
                       errors=summary.errors, resume=where)


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
    col: Optional[list[str]] = col_option(),
    group_by: str = typer.Option("system_id", "--group-by", help="column naming the candidate set (pivot columns)"),
    judge_opt: Optional[list[str]] = typer.Option(None, "--judge-opt", help="backend option KEY=VALUE (repeatable), "
                                                  "e.g. base_url=..., concurrency=8, n_ctx=8192"),
    list_rubrics_: bool = typer.Option(False, "--list-rubrics", help="list the built-in rubrics (rating and pairwise) and exit"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="progress bar with ETA on stderr"),
) -> None:
    """Judge every record with every rubric aspect; write judge.<aspect> columns; print the pivot table."""
    from rich.console import Console

    from csem.data.records import check_output_path, read_records
    from csem.rubrics import list_rubrics, load_rubric, load_rubrics

    console = Console()
    if list_rubrics_:
        from rich.table import Table

        from csem.rubrics.pairwise import list_pairwise_rubrics, load_pairwise_rubric

        t = Table(title="built-in rubrics (rating: csem judge / csem annotate; pairwise: csem annotate --compare)")
        t.add_column("id", no_wrap=True)
        for c in ("kind", "aspects", "scale", "source", "reference"):
            t.add_column(c, overflow="fold")
        yes = {True: "yes", False: "no"}
        for rid in list_rubrics():
            r = load_rubric(rid)
            t.add_row(rid, "rating", ",".join(r.aspect_names), f"{r.scale.min}-{r.scale.max}{r.unit}",
                      yes[r.uses_source], yes[r.uses_reference])
        for rid in list_pairwise_rubrics():
            pr = load_pairwise_rubric(rid)
            t.add_row(rid, "pairwise", pr.aspect, " or ".join(pr.choices), yes[pr.uses_source], yes[pr.uses_reference])
        # piped or captured: whole rows, one line each (rich would fold them at 80 columns)
        (console if console.is_terminal else Console(width=160)).print(t)
        raise typer.Exit(0)
    if data is None:
        raise fail("--data is required (or use --list-rubrics)")
    if out is not None:
        check_output_path(out)  # before any work
    columns = {k: v for k, v in (("source", source_col), ("candidate", candidate_col), ("reference", reference_col)) if v}
    columns.update(column_map(col))
    rubrics = load_rubrics(rubric)
    need = ["candidate"] + (["source"] if any(r.uses_source for r in rubrics) else [])
    records = read_records(data, columns=columns, required=need)
    if not records:
        raise fail(f"{data}: no rows to judge")
    code = run_judging(records, rubrics, judge_uri, out=out, mode=mode, n=n, temperature=temperature,
                       max_tokens=max_tokens, cache=cache, no_cache=no_cache, group_by=group_by, judge_opt=judge_opt,
                       min_mass=min_mass, progress=progress, console=console)
    raise typer.Exit(code)
