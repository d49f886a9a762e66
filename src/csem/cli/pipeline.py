"""``csem run PIPELINE.yaml``: collect -> annotate -> train -> score -> meta-eval [-> seeds] [-> rerank] [-> mrt] -> report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from csem.cli import app
from csem.cli.judge import batch_poll_option, dry_run_option, price_in_option, price_out_option
from csem.pipeline.runner import Pipeline, StageIncomplete


@app.command()
def run(
    pipeline: str = typer.Argument(..., help="pipeline YAML file, or package:NAME.yaml for a shipped example "
                                              "(summarization.yaml, translation.yaml, instruction-following.yaml)"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="run folder (default runs/<name>)"),
    from_stage: Optional[str] = typer.Option(None, "--from", help="force this stage and the later ones: collect, annotate, compare, train, score, meta-eval, seeds, rerank, mrt, report"),
    dry_run: bool = dry_run_option(),
    price_in: Optional[float] = price_in_option(),
    price_out: Optional[float] = price_out_option(),
    batch_poll: float = batch_poll_option(),
) -> None:
    """Run a CSEM pipeline; finished stages are skipped (content hash), a half-finished one resumes.
    A judging stage with failed judgments stops the run (exit 3, or 1 when the judge answered nothing);
    re-running the same command judges only what is missing."""
    from csem.cli.judge import run_outcome

    p = Pipeline.from_file(pipeline, run_dir)
    if batch_poll < 0:
        raise typer.BadParameter(f"--batch-poll must be >= 0 seconds, got {batch_poll}")
    p.batch_poll = batch_poll
    from csem.judge.cost import prices_from

    prices = prices_from(price_in, price_out)
    if prices is not None:  # over annotate.prices (prices never change what the stage judges)
        p.cfg.annotate.prices = prices
    if dry_run:  # the annotate stage's token count and cost; nothing is sent
        from rich.markup import escape

        Console().print(escape(str(p.estimate_annotate())), soft_wrap=True)
        raise typer.Exit(0)
    try:
        rows = p.run(from_stage=from_stage)
    except StageIncomplete as exc:
        s = exc.summary
        raise typer.Exit(run_outcome(total=s.get("total", s.get("calls", 0)), judged=s.get("judged", 0),
                                     cached=s.get("cached", 0), failed=s["failed"], errors=s.get("errors") or [],
                                     resume=f" (stage {exc.stage}; finished judgments are cached in "
                                            f"{p.run_dir / 'judge_cache.sqlite'}; later stages did not run)"))
    t = Table(title=f"agreement on held-out sources ({p.run_dir})", caption="summary level: per source, averaged; "
              "dataset level: pooled; Kendall tau-b")
    for c in ("aspect", "scorer vs", "level", "Spearman", "Kendall", "Pearson", "sources", "pairs"):
        t.add_column(c, no_wrap=True)
    fmt = lambda v: "" if v is None else f"{v:.3f}"  # noqa: E731
    for r in rows:
        t.add_row(r["aspect"], f"{r['scorer']} vs {r['target']}", r["level"], fmt(r.get("spearman")),
                  fmt(r.get("kendall")), fmt(r.get("pearson")), str(r.get("n_groups")), str(r.get("n_pairs")))
    import sys

    console = Console(width=None if sys.stdout.isatty() else 110)  # a log file gets the whole table
    console.print(t)
    base = p.baseline_rows()
    if base:
        b = Table(title="trivial baselines vs judge, held-out sources (the student should beat these)",
                  caption="length: words; extractiveness: share of trigrams found in the source; "
                          "system prior: the system's mean training label")
        for c in ("aspect", "baseline", "level", "Spearman", "Kendall", "sources", "pairs"):
            b.add_column(c, no_wrap=True)
        for r in base:
            if r["level"] == "summary":
                b.add_row(r["aspect"], r["scorer"], r["level"], fmt(r.get("spearman")), fmt(r.get("kendall")),
                          str(r.get("n_groups")), str(r.get("n_pairs")))
        console.print(b)
    spread = p.seed_spread()
    if spread:
        s = Table(title="spread over training seeds (student vs judge, held-out sources)",
                  caption="sd: sample standard deviation over seeds")
        for c in ("aspect", "scorer vs", "level", "", "mean", "sd", "min", "max", "seeds"):
            s.add_column(c, no_wrap=True)
        for r in spread:
            if r["method"] in ("spearman", "kendall"):
                s.add_row(r["aspect"], f"{r['scorer']} vs {r['target']}", r["level"], r["method"].capitalize(),
                          fmt(r["mean"]), fmt(r["sd"]), fmt(r["min"]), fmt(r["max"]), str(r["n_seeds"]))
        console.print(s)
    rr = p.state.data.get("rerank", {}).get("summary") if p.cfg.rerank is not None else None
    if rr:
        gains = "; ".join(f"{c} {g['chosen']:.3f} vs N-best mean {g['mean']:.3f} ({g['gain']:+.3f})"
                          for c, g in rr["gain"].items() if g["sources"])
        console.print(f"rerank: {rr['sources']} sources, judge score of the chosen candidate: {gains or 'none judged'} "
                      f"-> {p.run_dir / 'reranked.jsonl'}")
    from rich.markup import escape

    from csem.pipeline.cascade import cascade_lines

    for line in cascade_lines(p):  # the score stage's cascade: what it deferred, its figures
        console.print(escape(line), soft_wrap=True)
    m = p.state.data.get("mrt", {}).get("summary") if p.cfg.mrt is not None else None
    if m:
        fmt3 = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        console.print(f"mrt: {m['steps']} steps; mean reward {fmt3(m['reward_first'])} (first quarter) -> "
                      f"{fmt3(m['reward_last'])} (last); MLE loss {fmt3(m['mle_first'])} -> {fmt3(m['mle_last'])} "
                      f"-> {p.run_dir / m['folder']}")
    from csem.pipeline.trust import trust_lines

    for line in trust_lines(p):  # the judge's repeatability, the curve, the gate, the verdict
        console.print(escape(line), soft_wrap=True)
    console.print(f"report: {p.run_dir / 'report.md'} and {p.run_dir / 'report.html'}")
