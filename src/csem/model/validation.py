"""Checks of training data before any training starts, and dev-set correlations during training.

`check_training_data` raises [`TrainingDataError`][csem.model.validation.TrainingDataError] (a ``ValueError``) naming the
column, record id and value for: missing label columns, non-numeric labels, labels outside the
declared range, constant labels, too few labelled rows, a mode needing sources/references that
records lack.

`dev_correlations` computes Kendall tau-b / Spearman / Pearson of the model's scores with the
labels and, where present, with ``human.<aspect>`` columns, through
[`csem.meta.correlation.correlations`][]: summary level (per ``doc_id``, averaged) when every dev
record has a ``doc_id``, dataset level otherwise.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from csem.data.columns import format_column, parse_column, score_columns
from csem.data.records import references_of
from csem.errors import InputError
from csem.meta.correlation import METHODS, correlations
from csem.model.config import LabelSpec
from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE


class TrainingDataError(InputError):
    """Training or dev data cannot be used; the message names what and where."""


def _short(column: str) -> str:
    c = parse_column(column)
    if c is None or c.side is not None:
        return column
    return (c.aspect or c.name or column) + (f"@{c.tag}" if c.tag else "")


def aspect_name(column: str, columns: Sequence[str]) -> str:
    """The head's aspect name of a label column, from the grammar of [`csem.data.columns`][]:
    ``judge.coherence`` -> ``coherence``, ``judge.coherence@gpt-4`` -> ``coherence@gpt-4`` (so the
    student writes ``metric.<name>.coherence@gpt-4``), a column outside the grammar is its own name;
    the full column with dots as ``_`` if two label columns would get the same name."""
    short = _short(column)
    clash = sum(1 for c in columns if _short(c) == short) > 1
    return column.replace(".", "_") if clash else short


def label_value(v: Any, where: str) -> float | None:
    """A label as a float; None when absent (None or NaN: the row teaches nothing for that column).

    Raises:
        TrainingDataError: ``"<where>: label 'x' is not a number"`` or ``... is infinite``.
    """
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TrainingDataError(f"{where}: label {v!r} is not a number") from None
    if math.isnan(f):
        return None
    if math.isinf(f):
        raise TrainingDataError(f"{where}: label {v!r} is infinite")
    return f


def label_counts(records: Sequence[Mapping[str, Any]], label_cols: Sequence[str]) -> dict:
    """How many rows carry a label: ``{"rows": n, "labelled": {column: k}, "unlabelled_rows": m}``
    where ``m`` counts rows with no label in any column (they teach nothing and are skipped).

    A label is present when it is not None and not NaN.
    """
    def has(v: Any) -> bool:
        return v is not None and not (isinstance(v, float) and math.isnan(v))

    return {"rows": len(records),
            "labelled": {c: sum(1 for r in records if has(r.get(c))) for c in label_cols},
            "unlabelled_rows": sum(1 for r in records if not any(has(r.get(c)) for c in label_cols))}


def describe_label_counts(counts: Mapping[str, Any]) -> str:
    """``14 of 16 rows labelled; 2 without a label skipped`` (per column when several differ)."""
    n, per = counts["rows"], counts["labelled"]
    if len(set(per.values())) <= 1:
        k = next(iter(per.values()), 0)
        text = f"{k} of {n} rows labelled"
    else:
        text = ", ".join(f"{c}: {k} of {n} rows labelled" for c, k in per.items())
    m = counts["unlabelled_rows"]
    return text + (f"; {m} without a label skipped" if m else "")


def _ids(rows: Sequence[Mapping[str, Any]], limit: int = 5) -> str:
    ids = [str(r.get("id")) for r in rows[:limit]]
    return ", ".join(ids) + (f" (and {len(rows) - limit} more)" if len(rows) > limit else "")


def check_training_data(
    records: Sequence[Mapping[str, Any]],
    label_cols: Sequence[str],
    mode: str,
    label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    min_rows: int = 8,
    where: str = "training data",
) -> list[LabelSpec]:
    """Validate records for training and return the aspects with their scales.

    Args:
        records: csem records (dicts).
        label_cols: label columns, e.g. ``["judge.coherence"]``.
        mode: feature mode (``ref-free`` needs sources; ``ref-based`` needs sources and references).
        label_range: the declared scale ``(min, max)`` for every column, or per column; None infers
            ``(floor(min label), ceil(max label))`` per column from the data.
        min_rows: fewest labelled rows per column.
        where: name of the data in messages (``training data``, ``dev data``, a file name).

    Returns:
        One [`LabelSpec`][csem.model.LabelSpec] per column (aspect name, column, min, max).

    Raises:
        TrainingDataError: see the module docstring.
    """
    if not label_cols:
        raise TrainingDataError("no label column given (e.g. --label-col judge.coherence)")
    if len(set(label_cols)) != len(label_cols):
        raise TrainingDataError(f"label columns repeat: {list(label_cols)}")
    if len(records) < min_rows:
        raise TrainingDataError(f"{where}: {len(records)} rows, fewer than the minimum of {min_rows}")
    present = set().union(*(r.keys() for r in records))
    missing = [c for c in label_cols if c not in present]
    if missing:
        score_cols = sorted(score_columns(records))
        raise TrainingDataError(f"{where}: label column(s) {missing} not found; score columns present: {score_cols}")
    no_cand = [r for r in records if not isinstance(r.get("candidate"), str) or not r["candidate"].strip()]
    if no_cand:
        raise TrainingDataError(f"{where}: {len(no_cand)} record(s) without a candidate text: ids {_ids(no_cand)}")
    if NEEDS_SOURCE[mode]:
        bad = [r for r in records if not isinstance(r.get("source"), str) or not r["source"].strip()]
        if bad:
            raise TrainingDataError(f"{where}: mode '{mode}' needs a source, missing in {len(bad)} record(s): "
                                    f"ids {_ids(bad)} (use --mode fluency to train without sources)")
    if NEEDS_REFERENCE[mode]:
        bad = [r for r in records if not references_of(r)]
        if bad:
            raise TrainingDataError(f"{where}: mode '{mode}' needs a reference, missing in {len(bad)} record(s): "
                                    f"ids {_ids(bad)} (use --mode ref-free to train without references)")
    specs = []
    for col in label_cols:
        vals = []
        for r in records:
            f = label_value(r.get(col), f"{where}: record '{r.get('id')}', column '{col}'")
            if f is not None:
                vals.append((f, r.get("id")))
        if len(vals) < min_rows:
            raise TrainingDataError(f"{where}: column '{col}' has {len(vals)} labelled rows, fewer than the "
                                    f"minimum of {min_rows}")
        lo_v = min(v for v, _ in vals)
        hi_v = max(v for v, _ in vals)
        if lo_v == hi_v:
            raise TrainingDataError(f"{where}: column '{col}' is constant ({lo_v}) over {len(vals)} rows; "
                                    "a constant label cannot teach a metric anything")
        rng = label_range.get(col) if isinstance(label_range, Mapping) else label_range
        if rng is None:
            lo, hi = float(math.floor(lo_v)), float(math.ceil(hi_v))
        else:
            lo, hi = float(rng[0]), float(rng[1])
            if not lo < hi:
                raise TrainingDataError(f"label range of '{col}' must have min < max, got {rng}")
            out = [(v, i) for v, i in vals if v < lo or v > hi]
            if out:
                ex = ", ".join(f"'{i}': {v}" for v, i in out[:5])
                raise TrainingDataError(f"{where}: column '{col}' has {len(out)} label(s) outside the declared "
                                        f"range [{lo}, {hi}]: {ex}")
        specs.append(LabelSpec(aspect=aspect_name(col, label_cols), column=col, min=lo, max=hi))
    return specs


def check_dev_data(records: Sequence[Mapping[str, Any]], specs: Sequence[LabelSpec], mode: str) -> None:
    """Dev records must carry the training label columns and the texts the mode needs.

    Raises:
        TrainingDataError: naming the column or record ids.
    """
    check_training_data(records, [s.column for s in specs], mode,
                        label_range={s.column: (s.min, s.max) for s in specs}, min_rows=2, where="dev data")


def _human_column(aspect: str) -> str:
    """The human column of a head's aspect (``coherence@gpt-4`` -> ``human.coherence``)."""
    try:
        return format_column("human", aspect.partition("@")[0])
    except ValueError:  # an aspect name outside the grammar has no human column
        return f"human.{aspect}"


def dev_correlations(scores: Mapping[str, Sequence[float]], records: Sequence[Mapping[str, Any]],
                     specs: Sequence[LabelSpec]) -> dict:
    """Correlations of dev scores with the labels and with ``human.<aspect>`` where present.

    Args:
        scores: record id -> one score per aspect (order of ``specs``).
        records: the dev records. specs: the aspects.

    Returns:
        ``{"level": "summary"|"dataset", "aspects": {aspect: {"label": {method: r},
        "human": {method: r} | None}}, "mean": {method: mean over aspects vs labels}}``;
        a value is NaN where it cannot be computed (constant side).
    """
    level = "summary" if all(r.get("doc_id") is not None for r in records) else "dataset"
    groups = [r.get("doc_id") for r in records] if level == "summary" else None
    out: dict = {"level": level, "aspects": {}}
    means: dict[str, list[float]] = {m: [] for m in METHODS}
    for k, spec in enumerate(specs):
        metric = [scores[str(r["id"])][k] if str(r["id"]) in scores else None for r in records]
        entry: dict = {}
        for target, col in (("label", spec.column), ("human", _human_column(spec.aspect))):
            gold = [r.get(col) for r in records]
            if all(g is None for g in gold):
                entry[target] = None
                continue
            values = correlations(metric, gold, levels=[level], methods=METHODS, groups=groups)
            entry[target] = {m: values[(level, m)].value for m in METHODS}
        for m in METHODS:
            means[m].append(entry["label"][m])
        out["aspects"][spec.aspect] = entry
    out["mean"] = {m: (float(sum(v) / len(v)) if v and not any(math.isnan(x) for x in v) else math.nan)
                   for m, v in means.items()}
    return out
