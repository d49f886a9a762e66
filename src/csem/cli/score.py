"""``csem score``: score a file with a trained evaluation model (adds ``metric.<name>.<aspect>`` columns)
through the student's one scoring method, [`csem.model.EvaluationModel.predict`][]."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import PRECISION_HELP, app, col_option, column_map, fail


@app.command()
def score(
    model: Path = typer.Option(..., "--model", help="model folder written by `csem train`"),
    data: Path = typer.Option(..., "--data", help="records to score (JSONL/CSV/Parquet)"),
    out: Path = typer.Option(..., "--out", help="output file; every input column is kept"),
    name: Optional[str] = typer.Option(None, help="metric name in the columns (default: the model's)"),
    batch_size: int = typer.Option(64, help="sequences per encoder call"),
    mc_dropout: int = typer.Option(0, help="MC-dropout samples of the heads (adds .std columns)"),
    precision: str = typer.Option("auto", help=PRECISION_HELP),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = col_option(),
    engine: str = typer.Option("local", help="local (this process) | ray (Ray Data: a pool of --workers actors; "
                               "--data and --out are Parquet/JSONL, --out a folder of part files; pip install "
                               "'csem[ray]'; RAY_ADDRESS names a cluster, else a local Ray is started)"),
    workers: int = typer.Option(1, help="--engine ray: scoring actors (each loads the model once)"),
    cpus_per_worker: float = typer.Option(1.0, help="--engine ray: CPUs per actor (and its torch threads)"),
    gpus_per_worker: float = typer.Option(0.0, help="--engine ray: GPUs per actor"),
    records_per_batch: int = typer.Option(1024, help="--engine ray: records per actor call"),
    defer: Optional[float] = typer.Option(None, "--defer", help="cascade: judge this share (0-1) of the records, "
                                          "those the student is least sure of (--defer-by); needs --judge, --rubric"),
    defer_budget: Optional[int] = typer.Option(None, "--defer-budget", help="cascade: judge this many records "
                                               "(instead of --defer)"),
    defer_by: Optional[str] = typer.Option(None, "--defer-by", help="which records go to the judge: std (where "
                                           "the seed-ensemble members disagree most) | mc (where the score varies "
                                           "most over MC-dropout samples of the heads) | neighbours (where the score "
                                           "is closest to a rival candidate of the same source) | random (a random "
                                           "sample); default std for an ensemble, else mc"),
    judge_uri: Optional[str] = typer.Option(None, "--judge", help="cascade: the judge's backend URI"),
    rubric: Optional[str] = typer.Option(None, "--rubric", help="cascade: rubric ids, comma-separated (their "
                                         "aspects must be aspects of the student)"),
    judge_rescale: bool = typer.Option(False, "--judge-rescale", help="cascade: accept a judge or rubric the "
                                       "student's card does not name (the rubric's scale mapped linearly onto the "
                                       "student's label range)"),
    judge_calibration: str = typer.Option("fit", "--judge-calibration", help="cascade: fit (the judged scores "
                                          "mapped onto the student's spread by a line fitted on the judged rows) | "
                                          "identity"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="cascade: SQLite judgment cache "
                                               "(default ~/.cache/csem/judgments.sqlite); a re-run resumes from it"),
    judge_opt: Optional[List[str]] = typer.Option(None, "--judge-opt", help="cascade: backend option KEY=VALUE"),
    dry_run: bool = typer.Option(False, "--dry-run", help="cascade: count the judge calls and their prompt tokens; "
                                 "judge nothing, write nothing"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="cascade: the judge's progress bar with "
                                  "ETA on stderr"),
) -> None:
    """Score (source, candidate, reference) records with a learned metric.

    Each head's score lies inside its label scale (e.g. 1-5): a bounded, strictly increasing map
    keeps it there without changing any ranking (a student trained with the pairwise loss alone
    gives relative scores, on no scale). A multi-judge student (--combine heads) also gets each aspect's ensemble
    column on [0, 1]. An empty, whitespace-only or NUL-containing candidate is refused when the
    file is read.
    """
    import torch

    from csem.data.records import check_output_path, read_records, write_records
    from csem.model import EvaluationModel
    from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

    deferring = defer is not None or defer_budget is not None
    if deferring and engine != "local":
        raise fail("--defer/--defer-budget run with --engine local")
    if deferring and (not judge_uri or not rubric):
        raise fail("--defer/--defer-budget need --judge URI and --rubric ID[,ID...]")
    if engine == "ray":  # the same scoring path on a Ray cluster (csem.engines.ray; docs/guides/scale.md)
        score_with_ray(model, data, out, name=name, batch_size=batch_size, mc_dropout=mc_dropout,
                       precision=precision, threads=threads, col=col, workers=workers,
                       cpus_per_worker=cpus_per_worker, gpus_per_worker=gpus_per_worker,
                       records_per_batch=records_per_batch)
        return
    if engine != "local":
        raise fail(f"unknown --engine '{engine}'; choose local or ray")
    if threads:
        torch.set_num_threads(threads)
    if not dry_run:
        check_output_path(out)  # before any work
    m = EvaluationModel.load(model)
    mode = m.config.mode
    # the texts the model's mode needs are required fields: a record without one is named by file, line, field
    need = ("candidate",) + (("source",) if NEEDS_SOURCE.get(mode) else ()) + (("reference",) if NEEDS_REFERENCE.get(mode) else ())
    records = read_records(data, columns=column_map(col), required=need)
    if not records:
        raise fail(f"{data}: no rows to score")
    if deferring:
        from csem.cli.judge import default_cache, parse_options

        rule = defer_by or ("std" if m.config.members > 1 else "mc")
        typer.echo(f"scoring {len(records)} records, then judging those the student is least sure of ({rule} rule)",
                   err=True)
        pred = m.predict(records, name=name, batch_size=batch_size, precision=precision, mc_dropout=mc_dropout,
                         defer=defer, defer_budget=defer_budget, defer_by=rule, judge=judge_uri, rubric=rubric,
                         judge_rescale=judge_rescale, judge_calibration=judge_calibration,
                         judge_cache=judge_cache or default_cache(),
                         judge_options=parse_options(judge_opt), dry_run=dry_run, progress=progress)
        raise typer.Exit(deferred_outcome(pred, out, judge_cache or default_cache(), dry_run))
    pred = m.predict(records, name=name, batch_size=batch_size, mc_dropout=mc_dropout, precision=precision)
    write_records(pred.records, out)
    typer.echo(f"wrote {out}: {len(pred.records)} records scored ({', '.join(pred.columns)})")


def score_with_ray(model: Path, data: Path, out: Path, *, name: Optional[str], batch_size: int, mc_dropout: int,
                   precision: str, threads: Optional[int], col: Optional[List[str]], workers: int,
                   cpus_per_worker: float, gpus_per_worker: float, records_per_batch: int) -> None:
    """Run `csem score --engine ray`: the same scoring path on a pool of Ray actors
    ([`csem.engines.ray.score_files`][]; docs/guides/scale.md), and say what it wrote.

    The output folder and the input are checked before any work and before Ray is imported.

    Args:
        model: model folder written by `csem train`.
        data: records to score (Parquet/JSONL).
        out: output folder of part files.
        name: metric name in the columns (None: the model's).
        batch_size: sequences per encoder call.
        mc_dropout: MC-dropout samples of the heads (0: none).
        precision: inference precision (see `PRECISION_HELP`).
        threads: torch CPU threads of each actor, passed on to `score_files`.
        col: `--col` renames of the input columns.
        workers: scoring actors (each loads the model once).
        cpus_per_worker: CPUs per actor.
        gpus_per_worker: GPUs per actor.
        records_per_batch: records per actor call.

    Raises:
        typer.Exit: exit 2 (through `fail`) when Ray is not installed or `data` has no rows.
    """
    from csem.engines.files import check_input, check_output_folder

    check_output_folder(out)  # before any work, and before Ray is imported
    check_input(data)
    try:
        from csem.engines.ray import score_files
    except ImportError as exc:
        raise fail(exc)
    res = score_files(model, data, out, workers=workers, cpus_per_worker=cpus_per_worker,
                      gpus_per_worker=gpus_per_worker, records_per_batch=records_per_batch, name=name,
                      batch_size=batch_size, mc_dropout=mc_dropout, precision=precision, threads=threads,
                      columns=column_map(col))
    if not res["rows"]:
        raise fail(f"{data}: no rows to score")
    typer.echo(f"wrote {out}: {res['rows']} records scored ({', '.join(res['columns'])}) by {workers} Ray "
               f"worker(s), {res['format']} part files")


def deferred_outcome(pred, out: Path, cache: Path, dry_run: bool) -> int:
    """Write a cascade's output and say what it did; the exit code as ``csem judge``'s
    (`csem.cli.judge.run_outcome`): 0, 3 when some judgments failed (their rows keep the student's
    score and say so), 1 when the judge answered none."""
    from csem.cli.judge import run_outcome
    from csem.data.records import write_records

    rep = pred.cascade
    judged = {k: len(v) for k, v in rep.deferred.items()}
    if dry_run:
        typer.echo(f"dry run: {rep.rows} records; the judge would get {', '.join(f'{n} for {r}' for r, n in judged.items())} "
                   f"({rep.rule} rule)")
        for rid, est in rep.estimates.items():
            typer.echo(f"  {rid}: {est}")
        return 0
    write_records(pred.records, out)
    s = rep.summary
    from_judge = {c: sum(1 for v in src if v == "judge") for c, src in (pred.source or {}).items()}
    typer.echo(f"wrote {out}: {rep.rows} records; {', '.join(f'{c} from the judge on {n}' for c, n in from_judge.items())} "
               f"({rep.rule} rule; judgments: {s.judged} new, {s.cached} from the cache, {s.failed} failed)")
    return run_outcome(total=s.total, judged=s.judged, cached=s.cached, failed=s.failed, errors=s.errors,
                       resume=f" (finished judgments are cached in {cache})")
