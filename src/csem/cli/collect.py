"""``csem collect``: sample candidates for every source (CSEM stage i)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from csem.cli import app
from csem.collect.sampler import DecodingConfig, GeneratorSpec, collect_candidates
from csem.data.records import parse_column_map, read_records, write_records


@app.command()
def collect(
    sources: Path = typer.Option(..., "--sources", help="JSONL/CSV/Parquet with id (or doc_id), source, optional reference"),
    generator: List[str] = typer.Option(..., "--generator", help="generator URI, repeatable: local, llama-cpp:PATH|smollm2|qwen-0.5b, openai:MODEL, hf:MODEL; NAME=URI sets the system id"),
    num_samples: int = typer.Option(4, "--num-samples", "-J", help="candidates per source per generator"),
    out: Path = typer.Option(..., "--out", help="candidate file to write (.jsonl/.csv/.parquet)"),
    task: str = typer.Option("summarize", help="task prompt name (summarize, translate-en-de, restyle-formal, respond) or a template with {source}"),
    strategy: str = typer.Option("top_k", help="top_k | top_p | beam | diverse_beam (beam needs hf:)"),
    top_k: int = typer.Option(50, "--top-k"),
    top_p: float = typer.Option(0.95, "--top-p"),
    temperature: float = typer.Option(1.0),
    max_tokens: int = typer.Option(64, "--max-tokens"),
    seed: int = typer.Option(0),
    no_reference: bool = typer.Option(False, "--no-reference", help="do not add the reference as a candidate"),
    keep: str = typer.Option("all", help="all | one (one random candidate per source, CSEM Sec. IV-B)"),
    duplicates: str = typer.Option("drop", help="drop | keep duplicate candidates of a source"),
    empty: str = typer.Option("drop", help="drop | keep empty candidates"),
    col: Optional[List[str]] = typer.Option(None, "--col", help="column mapping FIELD=COLUMN, e.g. source=article"),
) -> None:
    """Sample J candidates per source from each generator (top-k 50 by default), add the reference,
    and write one candidate per row with its provenance. Interrupted runs resume."""
    specs = []
    for g in generator:
        name, _, uri = g.partition("=") if "=" in g.split(":", 1)[0] else ("", "", g)
        specs.append(GeneratorSpec(uri=uri, num_samples=num_samples, name=name or None))
    recs = read_records(sources, columns=parse_column_map(col or []), required=("source",))
    decoding = DecodingConfig(strategy=strategy, top_k=top_k, top_p=top_p, temperature=temperature, max_tokens=max_tokens)
    partial = out.with_name(out.name + ".partial.jsonl")
    cands, summary = collect_candidates(recs, specs, task=task, decoding=decoding, seed=seed,
                                        include_reference=not no_reference, keep=keep, duplicates=duplicates,
                                        empty=empty, partial_path=partial)
    write_records(cands, out)
    partial.unlink(missing_ok=True)  # every sample is in `out` now; the partial file only serves a resume
    Console().print(f"wrote {len(cands)} candidates to {out}: generated {summary.generated}, resumed {summary.resumed}, "
                    f"references {summary.references}, empty {summary.empty}, duplicates {summary.duplicates}, "
                    f"dropped {summary.dropped}, {summary.seconds:.1f} s; per system {summary.per_system}")
