"""``csem collect``: sample candidates for every source (CSEM stage i)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Literal, Optional

import typer
from rich.console import Console

from csem.cli import app, col_option, column_map
from csem.cli.judge import parse_options
from csem.collect.sampler import GeneratorSpec, collect_candidates
from csem.data.records import check_output_path, read_records, write_records
from csem.errors import InputError
from csem.llm import GenerateConfig


@app.command()
def collect(
    sources: Path = typer.Option(..., "--sources", help="JSONL/CSV/Parquet with id (or doc_id), source, optional reference"),
    generator: List[str] = typer.Option(..., "--generator", help="generator URI, repeatable: local, llama-cpp:PATH|smollm2|qwen-0.5b, openai:MODEL, hf:MODEL; NAME=URI sets the system id"),
    num_samples: int = typer.Option(4, "--num-samples", "-J", help="candidates per source per generator"),
    out: Path = typer.Option(..., "--out", help="candidate file to write (.jsonl/.csv/.parquet)"),
    task: str = typer.Option("summarize", help="task prompt name (summarize, translate-en-de, restyle-formal, respond) or a template with {source}"),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="top-k sampling (default 50, the paper's; 0 = off)"),
    top_p: Optional[float] = typer.Option(None, "--top-p", help="nucleus sampling in (0, 1] (default 1 = off)"),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="sampling temperature (default 1)"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="new tokens per candidate (default 64)"),
    num_beams: Optional[int] = typer.Option(None, "--num-beams", help="beam search with this many beams (hf: only)"),
    num_beam_groups: Optional[int] = typer.Option(None, "--num-beam-groups", help="diverse beam search groups (hf: only)"),
    diversity_penalty: Optional[float] = typer.Option(None, "--diversity-penalty", help="diverse beam search penalty"),
    generator_opt: Optional[List[str]] = typer.Option(None, "--generator-opt", help="backend option KEY=VALUE for "
                                                      "every generator (repeatable), e.g. base_url=..., concurrency=4"),
    seed: int = typer.Option(0),
    no_reference: bool = typer.Option(False, "--no-reference", help="do not add the reference as a candidate"),
    keep: Literal["all", "one"] = typer.Option("all", help="all | one (one random candidate per source, "
                                                            "CSEM Sec. IV-B)"),
    duplicates: Literal["drop", "keep"] = typer.Option("drop", help="drop | keep duplicate candidates of a source"),
    empty: Literal["drop", "keep"] = typer.Option("drop", help="drop | keep empty candidates"),
    truncated: Literal["keep", "trim", "drop"] = typer.Option(
        "keep", help="keep | trim | drop candidates cut at --max-tokens (trim: back to the last complete sentence; "
                     "one without a complete sentence is kept as generated and flagged, collect.flag = truncated)"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """Sample J candidates per source from each generator (top-k 50 by default), add the reference,
    and write one candidate per row with its provenance. Samples are requested concurrently, as many
    as the backend's concurrency option allows. Interrupted runs resume."""
    check_output_path(out)  # before any work
    specs = []
    for g in generator:
        name, _, uri = g.partition("=") if "=" in g.split(":", 1)[0] else ("", "", g)
        specs.append(GeneratorSpec(uri=uri, num_samples=num_samples, name=name or None,
                                   options=parse_options(generator_opt, "--generator-opt")))
    recs = read_records(sources, columns=column_map(col), required=("source",))
    if not recs:
        raise InputError(f"{sources}: no sources to collect candidates for")
    decoding = GenerateConfig(top_k=top_k, top_p=top_p, temperature=temperature, max_tokens=max_tokens,
                              num_beams=num_beams, num_beam_groups=num_beam_groups, diversity_penalty=diversity_penalty)
    partial = out.with_name(out.name + ".partial.jsonl")
    cands, summary = collect_candidates(recs, specs, task=task, decoding=decoding, seed=seed,
                                        include_reference=not no_reference, keep=keep, duplicates=duplicates,
                                        empty=empty, truncated=truncated, partial_path=partial)
    write_records(cands, out)
    partial.unlink(missing_ok=True)  # every sample is in `out` now; the partial file only serves a resume
    Console().print(f"wrote {len(cands)} candidates to {out}: generated {summary.generated}, resumed {summary.resumed}, "
                    f"references {summary.references}, empty {summary.empty}, duplicates {summary.duplicates}, "
                    f"cut at max_tokens {summary.truncated} (trimmed {summary.trimmed}, kept cut {summary.kept_cut}), "
                    f"dropped {summary.dropped}, "
                    f"{summary.seconds:.1f} s; per system {summary.per_system}")
