"""``csem score``: score a file with a trained evaluation model (adds ``metric.<name>.<aspect>`` columns)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import app, col_option, column_map, fail


@app.command()
def score(
    model: Path = typer.Option(..., "--model", help="model folder written by `csem train`"),
    data: Path = typer.Option(..., "--data", help="records to score (JSONL/CSV/Parquet)"),
    out: Path = typer.Option(..., "--out", help="output file; every input column is kept"),
    name: Optional[str] = typer.Option(None, help="metric name in the columns (default: the model's)"),
    batch_size: int = typer.Option(64, help="sequences per encoder call"),
    mc_dropout: int = typer.Option(0, help="MC-dropout samples of the heads (adds .std columns)"),
    precision: str = typer.Option("auto", help="auto | fp32 | bf16 | fp16 (as csem train; bf16-mixed, 32-true "
                                  "and 16-mixed are accepted too)"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """Score (source, candidate, reference) records with a learned metric; scores on the label scale."""
    import torch

    from csem.data.records import check_output_path, read_records, write_records
    from csem.model import EvaluationModel
    from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

    if threads:
        torch.set_num_threads(threads)
    check_output_path(out)  # before any work
    m = EvaluationModel.load(model)
    mode = m.config.mode
    # the texts the model's mode needs are required fields: a record without one is named by file, line, field
    need = ("candidate",) + (("source",) if NEEDS_SOURCE.get(mode) else ()) + (("reference",) if NEEDS_REFERENCE.get(mode) else ())
    records = read_records(data, columns=column_map(col), required=need)
    if not records:
        raise fail(f"{data}: no rows to score")
    rows = m.score_records(records, name=name, batch_size=batch_size, mc_dropout=mc_dropout, precision=precision)
    write_records(rows, out)
    cols = ", ".join(f"metric.{name or m.config.name}.{a}" for a in m.aspects)
    typer.echo(f"wrote {out}: {len(rows)} records scored ({cols})")
