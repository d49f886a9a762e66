"""``csem annotate``: judge collected candidates (CSEM stage ii) and write the labelled file."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from csem.cli import app, col_option, column_map, fail
from csem.cli.judge import (batch_file_option, batch_no_wait_option, batch_option, batch_outcome, batch_poll_option,
                            batch_resubmit_option, batch_results_option, batch_and_prices, dry_run_option,
                            parse_options, price_in_option, price_out_option, print_estimate, run_outcome)
from csem.data.records import check_output_path
from csem.pipeline.annotate import annotate_file


@app.command()
def annotate(
    data: Path = typer.Option(..., "--data", help="candidate file from `csem collect` (or any csem record file)"),
    rubric: str = typer.Option(..., "--rubric", help="rubric id(s) or file(s), comma separated (see `csem judge --list-rubrics`)"),
    out: Path = typer.Option(..., "--out", help="labelled file to write; `csem train` reads it"),
    judge: str = typer.Option("local", "--judge", help="judge URI: local, llama-cpp:PATH, openai:MODEL"),
    mode: str = typer.Option("probs", help="probs | sample | parse"),
    n: int = typer.Option(20, help="samples per judgment in sample mode"),
    temperature: float = typer.Option(1.0),
    cache: Optional[Path] = typer.Option(None, help="SQLite judgment cache (default: beside --out)"),
    col: Optional[List[str]] = col_option(),
    judge_opt: Optional[List[str]] = typer.Option(None, "--judge-opt",
                                                  help="backend option KEY=VALUE (base_url=..., api_key=..., n_threads=...)"),
    compare: bool = typer.Option(False, "--compare", help="comparison ranking: the judge compares pairs of "
                                 "candidates of a source (both orders) and --out gets one row per pair"),
    pairs: str = typer.Option("all", "--pairs", help="with --compare: all | random (--pairs-per-source) | "
                              "balanced (--pairs-per-source, every candidate compared as often as the others) | "
                              "adjacent (neighbours after a rating pass, --rating-col)"),
    pairs_per_source: Optional[int] = typer.Option(None, "--pairs-per-source", help="random/balanced pairs per source"),
    rating_col: Optional[str] = typer.Option(None, "--rating-col", help="adjacent pairs: the rating column"),
    seed: int = typer.Option(0, help="seed of the random pair choice"),
    repeatability: float = typer.Option(0.0, "--repeatability", min=0.0, max=1.0,
                                        help="share of the sources judged again under a second rendering of each "
                                             "rubric (its paraphrase; sample mode: new samples) -> judge.<aspect>.repeat "
                                             "and <out>.repeatability.json (the judge's repeatability)"),
    repeat_rubric: Optional[str] = typer.Option(None, "--repeat-rubric", help="with --repeatability: the second "
                                                "rendering as rubric file(s) or id(s), one per --rubric, comma separated"),
    repeat_seed: int = typer.Option(0, "--repeat-seed", help="seed of the draw of the re-judged sources"),
    batch: bool = batch_option(),
    batch_no_wait: bool = batch_no_wait_option(),
    batch_resubmit: bool = batch_resubmit_option(),
    batch_file: Optional[Path] = batch_file_option(),
    batch_results: Optional[List[Path]] = batch_results_option(),
    batch_poll: float = batch_poll_option(),
    dry_run: bool = dry_run_option(),
    price_in: Optional[float] = price_in_option(),
    price_out: Optional[float] = price_out_option(),
) -> None:
    """Annotate candidates with the LLM judge on one or several rubrics (single- or multi-aspect,
    reference-free or reference-based); cached, resumable, with a cost summary. With --compare, judge
    pairs of candidates instead, with the pairwise version of a CSEM rubric
    (csem/summ-coherence-ref-free or pairwise/summ-coherence-ref-free; one per aspect of every
    single-aspect CSEM rubric; a multi-aspect id such as csem/summ-multi-ref-free compares on each of
    its aspects, one judge call per aspect and order)."""
    check_output_path(out)  # before any work
    batching, prices = batch_and_prices(batch=batch, no_wait=batch_no_wait, resubmit=batch_resubmit, poll=batch_poll,
                                        batch_file=batch_file, batch_results=batch_results, price_in=price_in,
                                        price_out=price_out, state_dir=out.with_name(out.name + ".batch"))
    if (batching is not None or dry_run) and compare:
        raise fail("--batch, --batch-file, --batch-results and --dry-run judge ratings; not with --compare")
    if dry_run:
        from csem.data.records import read_records

        print_estimate(read_records(data, columns=column_map(col)), [r for r in rubric.split(",") if r], judge,
                       mode=mode, n=n, temperature=temperature, max_tokens=10, judge_opt=judge_opt, prices=prices,
                       cache=cache or out.with_name(out.name + ".judge_cache.sqlite"), console=Console())
        raise typer.Exit(0)
    if compare:
        from csem.pipeline.annotate import compare_file

        if mode not in ("probs", "parse"):
            raise fail(f"--compare takes --mode probs or parse, not '{mode}'")
        s = compare_file(data, out, rubrics=[r for r in rubric.split(",") if r], judge=judge, mode=mode,
                         strategy=pairs, per_source=pairs_per_source, rating_col=rating_col, seed=seed, cache=cache,
                         columns=column_map(col), backend_options=parse_options(judge_opt))
        bias = ", ".join(f"{a} {v:.3f}" for a, v in s["position_bias"].items() if v is not None) or "n/a"
        Console().print(f"wrote {out}: {s['pairs']} pairs, {s['calls']} judge calls ({s['judged']} new, "
                        f"{s['cached']} cached), missing {s['missing'] or 0}; mean P(first is better) {bias}; "
                        f"{s['seconds']:.1f} s")
        if s.get("fallback"):
            Console().print(f"note: {s['fallback']}")
        raise typer.Exit(run_outcome(total=s["calls"], judged=s["judged"], cached=s["cached"], failed=s["failed"],
                                     errors=s.get("errors") or []))
    s = annotate_file(data, out, rubrics=[r for r in rubric.split(",") if r], judge=judge, mode=mode, n=n,
                      temperature=temperature, cache=cache, columns=column_map(col),
                      backend_options=parse_options(judge_opt), repeatability=repeatability,
                      repeat_rubrics=[r for r in (repeat_rubric or "").split(",") if r] or None, repeat_seed=repeat_seed,
                      batch=batching, prices=prices)
    if batching is not None and batch_outcome(s, Console(), judge):
        raise typer.Exit(0)
    missing = sum(s["missing"].values()) if s["missing"] else 0
    Console().print(f"wrote {out}: {s['total']} judgments ({s['judged']} judged, {s['cached']} cached, "
                    f"{s['failed']} failed), missing {missing}"
                    + (f" ({'; '.join(f'{r} x{k}' for r, k in s['missing'].items())})" if missing else "")
                    + f", tokens {s['prompt_tokens']} prompt + {s['completion_tokens']} completion"
                    + (f", cost ${s['cost_usd']:.4f}" if s.get("cost_usd") is not None else "")
                    + f", {s['seconds']:.1f} s")
    if s.get("repeat"):
        from csem.pipeline.annotate import read_repeatability

        rep = read_repeatability(out) or {}
        for c, v in rep.get("columns", {}).items():
            lv = v["summary"]
            ci = f" (95% CI {lv['ci'][0]:.2f} to {lv['ci'][1]:.2f})" if lv.get("ci") else ""
            r = "n/a" if lv["r"] is None else f"{lv['r']:.3f}"
            root = "n/a" if lv.get("sqrt_r") is None else f"{lv['sqrt_r']:.3f}"
            Console().print(f"{c}: the judge agrees with itself ({rep['rendering']}, {rep['candidates']} candidates of "
                            f"{len(rep['sources'])} sources) at r = {r}{ci}, summary-level Spearman; sqrt(r) = {root}")
    raise typer.Exit(run_outcome(total=s["total"], judged=s["judged"], cached=s["cached"], failed=s["failed"],
                                 errors=s.get("errors") or []))
