"""``csem score``: score a file with a trained evaluation model (adds ``metric.<name>.<aspect>`` columns)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import app, fail


@app.command()
def score(
    model: Path = typer.Option(..., "--model", help="model folder written by `csem train`"),
    data: Path = typer.Option(..., "--data", help="records to score (JSONL/CSV/Parquet)"),
    out: Path = typer.Option(..., "--out", help="output file; every input column is kept"),
    name: Optional[str] = typer.Option(None, help="metric name in the columns (default: the model's)"),
    batch_size: int = typer.Option(64, help="sequences per encoder call"),
    mc_dropout: int = typer.Option(0, help="MC-dropout samples of the heads (adds .std columns)"),
    precision: str = typer.Option("auto", help="auto | fp32 | bf16 | fp16"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    col: Optional[List[str]] = typer.Option(None, "--col", help="column mapping FIELD=COLUMN"),
) -> None:
    """Score (source, candidate, reference) records with a learned metric; scores on the label scale."""
    import torch

    from csem.data.records import RecordError, parse_column_map, read_records, write_records
    from csem.model import EvaluationModel, ModelFolderError

    if threads:
        torch.set_num_threads(threads)
    try:
        records = read_records(data, columns=parse_column_map(col or []), required=("candidate",))
        m = EvaluationModel.load(model)
        rows = m.score_records(records, name=name, batch_size=batch_size, mc_dropout=mc_dropout, precision=precision)
    except (RecordError, ModelFolderError, FileNotFoundError, ValueError) as exc:
        raise fail(exc) from None
    write_records(rows, out)
    cols = ", ".join(f"metric.{name or m.config.name}.{a}" for a in m.aspects)
    typer.echo(f"wrote {out}: {len(rows)} records scored ({cols})")
