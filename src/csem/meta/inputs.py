"""Inputs of a meta-evaluation: human-judgment data (a file or a dataset name) and prediction
files joined onto it by ``id``."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from csem.data.columns import parse_column, score_columns
from csem.data.records import RecordError, read_records
from csem.errors import InputError

PREDICTION_KINDS = ("metric", "judge")  # score columns a prediction file contributes


def load_data(spec: str | Path, *, path: str | Path | None = None, **options) -> list[dict]:
    """Records with ``human.*`` columns from a file or a dataset name.

    Args:
        spec: a JSONL/CSV/TSV/Parquet file of csem records, or a dataset name of
            [`csem.data.datasets.load_dataset`][] (``summeval``, ``topical_chat``, ``newsroom``,
            ``realsumm``, ``qags``, ``wmt21-mqm``, ``wmt23-da``, ...).
        path: local copy of the named dataset (default: under ``default_data_dir()``).
        options: keyword arguments of the named dataset's loader (e.g. ``judge``, ``method``).

    Raises:
        ValueError: neither an existing file nor a known dataset name; the file has no
            ``human.*`` column.
        RecordError: a malformed file (file, line and field named).
    """
    from csem.data.datasets import dataset_names, load_dataset

    p = Path(spec)
    if p.is_file():
        if options:
            raise InputError(f"loader options {sorted(options)} only apply to a dataset name, not to the file {p}")
        recs = read_records(p, required=())
        if not score_columns(recs, ("human",)):
            raise InputError(f"{p}: no 'human.<aspect>' column; meta-evaluation needs human scores")
        return recs
    names = {n.lower().replace("_", "-") for n in dataset_names()}
    if str(spec).lower().replace("_", "-") in names:
        try:
            return load_dataset(str(spec), path, **options)
        except TypeError as exc:  # an option the loader does not take
            raise InputError(f"dataset '{spec}': {exc}") from exc
    if p.is_dir():
        raise RecordError(p, None, None, "is a directory, not a records file (.jsonl, .csv, .tsv or .parquet) "
                          f"or a dataset name; datasets: {dataset_names()}")
    raise InputError(f"--data '{spec}' is neither a file nor a dataset name; datasets: {dataset_names()}")


def _tagged(column: str, stem: str) -> str:
    """``judge.coherence`` -> ``judge.coherence@<stem>`` (a tag already there is kept: ``@gpt4@<stem>``)."""
    c = parse_column(column)
    return str(c.with_tag(f"{c.tag}@{stem}" if c.tag else stem))


def join_predictions(records: list[dict], pred_files: Sequence[str | Path]) -> list[str]:
    """Join the ``metric.*``/``judge.*`` score columns (not their side fields) of prediction files
    onto ``records`` by ``id`` (in place).

    A column already present (in the data or an earlier file) is renamed ``<column>@<file stem>``
    so that nothing is overwritten. A prediction file may cover a subset of the records (the
    others get None, counted as missing).

    Returns:
        The score columns added, in file order.

    Raises:
        RecordError: a prediction id does not occur in the data (the message lists up to 10),
            or a file has no score column or no ``id`` column.
    """
    by_id = {str(r.get("id")): r for r in records}
    added: list[str] = []
    for f in pred_files:
        f = Path(f)
        preds = read_records(f, required=())
        cols = score_columns(preds, PREDICTION_KINDS)
        if not cols:
            raise RecordError(f, None, None, "no 'metric.<name>' or 'judge.<aspect>' column to evaluate")
        if any("id" not in r or r.get("id") is None for r in preds):
            raise RecordError(f, None, "id", "every prediction row needs the 'id' of its data record")
        unknown = [str(r["id"]) for r in preds if str(r["id"]) not in by_id]
        if unknown:
            raise RecordError(f, None, "id", f"{len(unknown)} id(s) not in the data, e.g. {unknown[:10]}; "
                              f"data ids look like {list(by_id)[:3]}")
        taken = {k for r in records for k in r} | set(added)
        rename = {c: (_tagged(c, f.stem) if c in taken else c) for c in cols}
        for r in records:
            for c in cols:
                r.setdefault(rename[c], None)
        for p in preds:
            target = by_id[str(p["id"])]
            for c in cols:
                target[rename[c]] = p.get(c)
        added.extend(rename[c] for c in cols)
    return added
