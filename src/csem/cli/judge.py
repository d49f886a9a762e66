"""``csem judge``: judge a records file with G-Eval rubrics and print the pivot table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csem.cli import app, col_option, column_map, fail, parse_pairs
from csem.errors import InputError


def default_cache() -> Path:
    from csem.assets import cache_dir

    return cache_dir() / "judgments.sqlite"


def parse_options(pairs: Optional[list[str]], option: str = "--judge-opt") -> dict[str, str]:
    """``key=value`` backend options (``--judge-opt base_url=http://...``, ``--generator-opt ...``)."""
    return parse_pairs(pairs, option, "base_url=http://127.0.0.1:8000/v1")


def batch_option():
    return typer.Option(False, "--batch", help="send the requests not in the cache as batch jobs (openai: judges, "
                        "Azure too; half the price, results within 24 h); the batch ids are kept in <out>.batch/ and "
                        "the same command run again collects them")


def batch_no_wait_option():
    return typer.Option(False, "--batch-no-wait", help="with --batch: submit, print the batch ids and exit 0; run the "
                        "same command again to collect")


def batch_resubmit_option():
    return typer.Option(False, "--batch-resubmit", help="with --batch: send what is still missing after a failed, "
                        "expired or cancelled batch (or per-request errors) in a new batch")


def batch_file_option():
    return typer.Option(None, "--batch-file", help="only write the requests not in the cache to this batch request "
                        "file (OpenAI batch format, which `vllm run-batch -i` reads); nothing is sent")


def batch_results_option():
    return typer.Option(None, "--batch-results", help="read the results of a batch request file produced elsewhere "
                        "(`vllm run-batch -o FILE`) into the cache and the output (repeatable)")


def batch_poll_option():
    return typer.Option(30.0, "--batch-poll", help="seconds between two batch status requests")


def dry_run_option():
    return typer.Option(False, "--dry-run", help="count the prompt tokens of the judgments not in the cache with the "
                        "judge's tokenizer and price them; nothing is sent")


def price_in_option():
    return typer.Option(None, "--price-in", help="US dollars per million prompt tokens (the dry run's and the "
                        "summary's cost)")


def price_out_option():
    return typer.Option(None, "--price-out", help="US dollars per million completion tokens")


def batch_and_prices(*, batch: bool, no_wait: bool, resubmit: bool, batch_file: Optional[Path],
                     batch_results: Optional[list[Path]], poll: float, state_dir: Optional[Path],
                     price_in: Optional[float], price_out: Optional[float]):
    """``(BatchOptions or None, Prices or None)`` of the batch and price flags
    ([`csem.judge.batch.BatchOptions`][], [`csem.judge.cost.Prices`][]); None: synchronous, unpriced.

    Raises:
        InputError: flags that do not go together, ``--batch`` without a place for its state, one
            price without the other.
    """
    from csem.judge.cost import prices_from

    return batch_settings(batch=batch, no_wait=no_wait, resubmit=resubmit, batch_file=batch_file,
                          batch_results=batch_results, poll=poll, state_dir=state_dir), prices_from(price_in, price_out)


def batch_settings(*, batch: bool, no_wait: bool, resubmit: bool, batch_file: Optional[Path],
                   batch_results: Optional[list[Path]], poll: float, state_dir: Optional[Path]):
    """The [`csem.judge.batch.BatchOptions`][] of the batch flags, or None for synchronous judging.

    Raises:
        InputError: flags that do not go together, or ``--batch`` without a place for its state.
    """
    from csem.judge.batch import BatchOptions

    if poll < 0:
        raise InputError(f"--batch-poll must be >= 0 seconds, got {poll}")
    if (no_wait or resubmit) and not batch:
        raise InputError("--batch-no-wait and --batch-resubmit go with --batch")
    if sum(bool(x) for x in (batch, batch_file, batch_results)) > 1:
        raise InputError("choose one of --batch, --batch-file and --batch-results")
    if batch_file is not None:
        from csem.data.records import check_output_path

        check_output_path(batch_file)
        return BatchOptions(request_file=batch_file)
    if batch_results:
        missing = [str(p) for p in batch_results if not p.is_file()]
        if missing:
            raise InputError(f"{missing[0]}: no such batch result file")
        return BatchOptions(result_files=list(batch_results))
    if not batch:
        return None
    if state_dir is None:
        raise InputError("--batch needs --out: the batch ids are recorded beside it (<out>.batch/)")
    return BatchOptions(state_dir=state_dir, wait=not no_wait, resubmit=resubmit, poll=poll)


def print_estimate(records, rubric, judge, *, mode, n, temperature, max_tokens, cache, judge_opt, prices,
                   console) -> None:
    """``--dry-run``: print [`csem.judge.estimate_records`][]'s token count and cost; nothing is sent."""
    from rich.markup import escape

    from csem.judge.runner import estimate_records

    est = estimate_records(records, rubric, judge, mode=mode, n=n, temperature=temperature, max_tokens=max_tokens,
                           cache=cache, backend_options=parse_options(judge_opt), prices=prices)
    console.print(escape(str(est)), soft_wrap=True)


def batch_outcome(summary: dict, console, judge: str) -> bool:
    """Print what a batch run left for later (pending batches, a request file written); True when it
    left something (the command then exits 0 without writing its output)."""
    from rich.markup import escape

    files = summary.get("request_files") or []
    if files:
        model = judge.split(":", 1)[1] if ":" in judge else judge
        console.print(escape(f"wrote {summary['pending']} requests to {', '.join(files)} (nothing sent). Judge them "
                             f"offline, e.g. `vllm run-batch -i {files[0]} -o results.jsonl --model {model}`, then run "
                             "the same command with --batch-results results.jsonl instead of --batch-file"),
                      soft_wrap=True)
        return True
    if summary.get("pending"):
        ids = ", ".join(f"{b['id']} ({b['status']})" for b in summary.get("batches") or [] if b.get("id"))
        console.print(escape(f"{summary['pending']} judgments pending in batch jobs: {ids}. Run the same command "
                             "again to collect them (it waits for the batches; --batch-no-wait only checks)"),
                      soft_wrap=True)
        return True
    return False


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
                judge_opt, min_mass, progress, console, title=None, batch=None, prices=None, dry_run=False) -> int:
    """Shared by ``csem judge`` and ``csem example``: judge, write, print pivot + summary; exit code.
    ``batch`` ([`csem.judge.batch.BatchOptions`][]) sends the requests as batch jobs; ``dry_run``
    prints the token count and cost instead ([`csem.judge.estimate_records`][]).
    Errors propagate to the one mapping of `csem.cli` (an authentication failure: 1)."""
    from rich.markup import escape

    from csem.data.records import check_output_path, write_records
    from csem.judge import judge_records
    from csem.judge.pivot import pivot_table

    if out is not None:
        check_output_path(out)  # before any work
    store = None if no_cache else (cache or default_cache())
    if dry_run:
        print_estimate(records, rubric, judge, mode=mode, n=n, temperature=temperature, max_tokens=max_tokens,
                       cache=store, judge_opt=judge_opt, prices=prices, console=console)
        return 0
    rows, summary = judge_records(records, rubric, judge, mode=mode, n=n, temperature=temperature,
                                  max_tokens=max_tokens, min_mass=min_mass, cache=store,
                                  progress=progress, backend_options=parse_options(judge_opt), batch=batch,
                                  prices=prices)
    if batch is not None and batch_outcome(summary.as_dict(), console, judge if isinstance(judge, str) else ""):
        return 0
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
    batch: bool = batch_option(),
    batch_no_wait: bool = batch_no_wait_option(),
    batch_resubmit: bool = batch_resubmit_option(),
    batch_file: Optional[Path] = batch_file_option(),
    batch_results: Optional[list[Path]] = batch_results_option(),
    batch_poll: float = batch_poll_option(),
    dry_run: bool = dry_run_option(),
    price_in: Optional[float] = price_in_option(),
    price_out: Optional[float] = price_out_option(),
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
    batching, prices = batch_and_prices(batch=batch, no_wait=batch_no_wait, resubmit=batch_resubmit,
                                        batch_file=batch_file, batch_results=batch_results, poll=batch_poll,
                                        state_dir=None if out is None else out.with_name(out.name + ".batch"),
                                        price_in=price_in, price_out=price_out)
    columns = {k: v for k, v in (("source", source_col), ("candidate", candidate_col), ("reference", reference_col)) if v}
    columns.update(column_map(col))
    rubrics = load_rubrics(rubric)
    need = ["candidate"] + (["source"] if any(r.uses_source for r in rubrics) else [])
    records = read_records(data, columns=columns, required=need)
    if not records:
        raise fail(f"{data}: no rows to judge")
    code = run_judging(records, rubrics, judge_uri, out=out, mode=mode, n=n, temperature=temperature,
                       max_tokens=max_tokens, cache=cache, no_cache=no_cache, group_by=group_by, judge_opt=judge_opt,
                       min_mass=min_mass, progress=progress, console=console, batch=batching, prices=prices,
                       dry_run=dry_run)
    raise typer.Exit(code)
