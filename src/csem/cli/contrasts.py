"""``csem contrasts``: synthetic contrast pairs (no LLM) for pretraining a student with ``csem train --pairs``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import app, col_option, column_map
from csem.errors import InputError


@app.command("contrasts")
def contrasts(
    data: Path = typer.Option(..., "--data", help="records (JSONL/CSV/TSV/Parquet) with source and candidate; "
                              "optional id, doc_id, system_id, reference"),
    out: Path = typer.Option(..., "--out", help="pairs file to write (.jsonl/.csv/.parquet), readable by "
                             "`csem train --pairs`; a summary goes to <out stem>.summary.json beside it"),
    aspects: str = typer.Option(",".join(("coherence", "consistency", "fluency", "relevance")), "--aspects",
                                help="aspects, comma separated"),
    per_record: int = typer.Option(3, "--per-record", help="pairs per record and aspect"),
    seed: int = typer.Option(0, "--seed"),
    degenerate_weight: float = typer.Option(0.5, "--degenerate-weight", help="draw weight of the degenerate "
                                            "texts together, against 1 per perturbation of the aspect (0: none)"),
    max_degenerate: int = typer.Option(1, "--max-degenerate", help="most degenerate pairs per record and aspect"),
    with_empty: bool = typer.Option(False, "--with-empty", help="also empty and whitespace candidates "
                                    "(`csem train --pairs` rejects them; for sanity checks)"),
    references: bool = typer.Option(False, "--references", help="also perturb each source's references (as "
                                    "further candidates, system 'reference')"),
    soft: bool = typer.Option(False, "--soft", help="preference 0.5 + 0.5 * severity instead of 1.0"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """Write within-source preference pairs (the candidate vs a rule-made worse copy) per aspect."""
    from csem.data.contrasts import make_pairs, perturbations, summarize
    from csem.data.jsonio import write_json
    from csem.data.records import check_output_path, read_records, write_records

    names = [a.strip() for a in aspects.split(",") if a.strip()]
    if not names:
        raise typer.BadParameter("give at least one aspect", param_hint="--aspects")
    if per_record < 1:
        raise typer.BadParameter(f"must be >= 1, got {per_record}", param_hint="--per-record")
    for a in names:
        perturbations(a)  # ValueError (exit 2) for an unknown aspect, before any work
    check_output_path(out)
    summary_path = out.with_name(out.name.split(".")[0] + ".summary.json")
    records = read_records(data, columns=column_map(col), required=("source", "candidate"))
    pairs = make_pairs(records, aspects=names, per_record=per_record, seed=seed, include_empty=with_empty,
                       degenerate_weight=degenerate_weight, max_degenerate=max_degenerate,
                       references=references, soft=soft)
    if not pairs:
        raise InputError(f"{data}: no record gave a contrast pair (texts too short to perturb?)")
    write_records(pairs, out)
    counts = summarize(pairs)
    write_json(summary_path, {"data": str(data), "records": len(records), "pairs": len(pairs), "seed": seed,
                              "per_record": per_record, "aspects": names, "references": references,
                              "with_empty": with_empty, "soft": soft, "degenerate_weight": degenerate_weight,
                              "max_degenerate": max_degenerate, "counts": counts})
    typer.echo(f"{len(pairs)} pairs from {len(records)} records -> {out} (summary: {summary_path})")
    for a, c in counts.items():
        typer.echo(f"  {a}: {sum(c.values())} ({', '.join(f'{k} {v}' for k, v in c.items())})")
    label_cols = ",".join(f"judge.{a}" for a in names)
    typer.echo(f"train on them: csem train --pairs --data {out} --label-col {label_cols} --out MODEL")
