"""``csem rerank``, ``csem tune-weights`` and ``csem mbr``: choose one candidate per source from N-best lists."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import app, col_option, column_map, fail
from csem.errors import InputError

METRIC_HELP = ("metric(s), comma-separated: a student folder (DIR or DIR#aspect+aspect), "
               "judge:RUBRIC@URI, a baseline (rouge1 rouge2 rougeL rougeLsum bleu chrf bertscore) "
               "or a score column already in the file (judge.coherence)")


def _read(path: Path, col: Optional[List[str]]) -> list[dict]:
    from csem.data.records import RecordError, read_records

    records = read_records(path, columns=column_map(col), required=())
    if not records:
        raise InputError(f"{path}: no rows")
    for line, r in enumerate(records, 1):  # a null candidate (a generator that wrote nothing) is empty text,
        if "candidate" not in r:  # which scoring puts at the scale's floor; a missing column is bad input
            raise RecordError(path, line, "candidate", "required field 'candidate' is missing "
                              "(map a column with --col candidate=COLUMN)")
        if r["candidate"] is None:
            r["candidate"] = ""
    return records


def _weights_arg(weights: Optional[str]):
    """``--weights``: numbers, ``col=w`` pairs, or the JSON file written by ``csem tune-weights``;
    ``(weights, normalize of the file or None, the file or None)``.

    Raises:
        FileNotFoundError: a ``.json`` path that does not exist. ValueError: a bad file (see
        [`csem.apply.tune.load_weights_file`][]).
    """
    if weights and (Path(weights).is_file() or weights.strip().lower().endswith(".json")):
        from csem.apply.tune import load_weights_file

        w, norm = load_weights_file(weights)
        return w, norm, Path(weights)
    return weights, None, None


def _default_scores_path(out: Path) -> Path:
    return out.with_name(out.stem + ".scores" + out.suffix)


@app.command()
def rerank(
    data: Path = typer.Option(..., "--data", help="N-best lists: records grouped by doc_id (JSONL/CSV/Parquet)"),
    metric: str = typer.Option(..., "--metric", help=METRIC_HELP),
    out: Path = typer.Option(..., "--out", help="chosen candidate per source, with every score"),
    weights: Optional[str] = typer.Option(None, "--weights", help="one weight per score column (w1,w2 or "
                                          "column=w), or the JSON of `csem tune-weights`; default 1 each"),
    normalize: Optional[str] = typer.Option(None, "--normalize", help="none | zscore (per source, per column, "
                                            "before weighting); default: the weights file's, else none"),
    scores: Optional[Path] = typer.Option(None, "--scores", help="every candidate with every score "
                                          "(default: OUT with .scores before the suffix)"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="SQLite cache for judge metrics"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = col_option(),
    shortlist: Optional[int] = typer.Option(None, "--shortlist", help="two-stage: the metric (one score column) "
                                            "keeps its top K of each source, the --judge picks among them"),
    judge_uri: Optional[str] = typer.Option(None, "--judge", help="two-stage: the judge's backend URI"),
    rubric: Optional[str] = typer.Option(None, "--rubric", help="two-stage: the judge's rubric (one aspect)"),
    judge_opt: Optional[List[str]] = typer.Option(None, "--judge-opt", help="two-stage: backend option KEY=VALUE"),
) -> None:
    """Rerank N-best lists: argmax of one metric (CSEM Eq. 7) or of a weighted sum (Eq. 8); with
    --shortlist, two-stage: the metric shortlists, the judge picks."""
    import torch

    from csem.apply.reranking import rerank_scored, score_specs
    from csem.data.records import check_output_path, write_records

    if threads:
        torch.set_num_threads(threads)
    scores_path = scores or _default_scores_path(out)
    check_output_path(out)  # before any work
    check_output_path(scores_path)
    w, norm_file, wfile = _weights_arg(weights)
    if wfile is None and w is not None:
        from csem.apply.reranking import parse_weights

        parts = [p.strip() for p in w.split(",") if p.strip()]  # NaN, inf, non-numbers: before any work
        parse_weights(w, [p.split("=", 1)[0].strip() if "=" in p else f"weight {i + 1}" for i, p in enumerate(parts)])
    if shortlist is not None and (not judge_uri or not rubric or weights):
        raise fail("--shortlist needs --judge URI and --rubric ID, and takes no --weights")
    records = _read(data, col)
    rows, columns = score_specs(records, metric, judge_cache=judge_cache)
    if shortlist is not None:
        raise typer.Exit(_two_stage(rows, columns, shortlist, judge_uri, rubric, judge_cache, judge_opt, out,
                                    scores_path))
    if wfile is not None:
        from csem.apply.tune import check_weights_cover

        check_weights_cover(wfile, w, columns)
    res = rerank_scored(rows, columns, w, normalize or norm_file or "none")
    write_records(res.chosen, out)
    write_records(res.scored, scores_path)
    wtxt = ", ".join(f"{c}={x:g}" for c, x in zip(res.columns, res.weights))
    typer.echo(f"wrote {out}: {len(res.chosen)} sources, one candidate each ({wtxt}; normalize {res.normalize}); "
               f"every score in {scores_path}")
    if res.no_choice:
        typer.echo(f"csem: error: {len(res.no_choice)} source(s) had no candidate with every score: "
                   f"{', '.join(res.no_choice[:5])}", err=True)
        raise typer.Exit(3 if res.chosen else 1)


def _two_stage(rows, columns, k, judge_uri, rubric, judge_cache, judge_opt, out, scores_path) -> int:
    """``csem rerank --shortlist K``: [`csem.apply.cascade.rerank_two_stage`][]; writes the choices and
    every candidate, prints the judge calls spent and what the judge changed; the exit code as
    ``csem judge``'s."""
    from csem.apply.cascade import rerank_two_stage
    from csem.cli.judge import default_cache, parse_options, run_outcome
    from csem.data.records import write_records

    if len(columns) != 1:
        raise fail(f"--shortlist ranks by one score column; --metric gave {len(columns)}: {', '.join(columns)}")
    cache = judge_cache or default_cache()
    res = rerank_two_stage(rows, columns[0], k, judge=judge_uri, rubric=rubric, cache=cache,
                           backend_options=parse_options(judge_opt))
    write_records(res.chosen, out)
    write_records(res.scored, scores_path)
    r, s = res.report, res.summary
    f = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    typer.echo(f"wrote {out}: {len(res.chosen)} sources; the judge scored {r['judge_calls']} of {r['judge_calls_all']} "
               f"candidates ({100 * r['share_of_calls']:.0f}% of the calls of judging all; shortlist {k} by "
               f"{columns[0]}); {r['judge_column']}: pick {f(r['judge_of_pick'])}, the student's own pick "
               f"{f(r['judge_of_student_pick'])}, the judge's best of every candidate {f(r['judge_best'])}; the judge "
               f"changed {r['changed']} choice(s); every candidate in {scores_path}")
    return run_outcome(total=s.total, judged=s.judged, cached=s.cached, failed=s.failed, errors=s.errors,
                       resume=f" (finished judgments are cached in {cache})")


@app.command("tune-weights")
def tune_weights(
    dev: Path = typer.Option(..., "--dev", help="dev N-best lists (with references for the objective)"),
    metric: str = typer.Option(..., "--metric", help=METRIC_HELP + "; each score column gets a weight"),
    objective: str = typer.Option(..., "--objective", help="what to maximise: a reference-based metric "
                                  "(bleu, chrf, rouge1 ..., a reference-based student, judge:RUBRIC@URI) or a "
                                  "score column; several columns are averaged"),
    out: Optional[Path] = typer.Option(None, "--out", help="weights JSON (for `csem rerank --weights`)"),
    normalize: str = typer.Option("none", "--normalize", help="none | zscore (per source, per column)"),
    restarts: int = typer.Option(5, help="MERT starting points (the first: all ones)"),
    directions: int = typer.Option(2, help="random directions per MERT iteration besides the axes"),
    seed: int = typer.Option(0, help="seed of the starts and directions"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="SQLite cache for judge metrics"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """Tune the Eq. 8 weights with Och's MERT on dev N-best lists; compared with random search."""
    import torch
    from rich.console import Console
    from rich.table import Table

    from csem.apply.tune import tune_weights_report

    if threads:
        torch.set_num_threads(threads)
    if out is not None and (out.is_dir() or out.suffix.lower() != ".json"):
        raise fail(f"{out}: the weights file must be a .json file path")
    records = _read(dev, col)
    report = tune_weights_report(records, metric, objective, normalize=normalize, restarts=restarts,
                                 directions=directions, seed=seed, judge_cache=judge_cache)
    console = Console()
    t = Table(title=f"dev objective: mean {report['objective']} of the chosen candidate "
                    f"({report['sources']} sources, {report['candidates']} candidates)")
    for c in ("selection", "dev objective", "evaluations", "weights"):
        t.add_column(c, justify="left" if c in ("selection", "weights") else "right")
    for row in report["table"]:
        t.add_row(row["selection"], f"{row['value']:.4f}", str(row.get("evaluations") or ""),
                  ", ".join(f"{x:+.3f}" for x in row["weights"]) if row.get("weights") else "")
    console.print(t)
    console.print(f"columns: {', '.join(report['columns'])}")
    if out:
        from csem.data.jsonio import write_json

        write_json(out, report)  # the one JSON writer: atomic, NaN as null
        typer.echo(f"wrote {out}")


@app.command()
def mbr(
    data: Path = typer.Option(..., "--data", help="N-best lists: records grouped by doc_id"),
    utility: str = typer.Option("chrf", "--utility", help="chrf, another reference-based baseline, or a "
                                "reference-based student folder (heads averaged)"),
    out: Path = typer.Option(..., "--out", help="chosen candidate per source"),
    scores: Optional[Path] = typer.Option(None, "--scores", help="every candidate with mbr.score"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """Minimum Bayes risk selection: the candidate with the highest mean utility against the others."""
    import torch

    from csem.apply.mbr import mbr_select
    from csem.apply.metrics import load_metric
    from csem.data.records import check_output_path, write_records

    if threads:
        torch.set_num_threads(threads)
    scores_path = scores or _default_scores_path(out)
    check_output_path(out)
    check_output_path(scores_path)
    records = _read(data, col)
    res = mbr_select(records, load_metric(utility))
    write_records(res.chosen, out)
    write_records(res.scored, scores_path)
    typer.echo(f"wrote {out}: {len(res.chosen)} sources (MBR, utility {res.utility}); every score in {scores_path}")
