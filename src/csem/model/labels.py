"""Labels from several judges: read them (wide or long), normalise each judge, combine them.

The CSEM paper (Wang et al., Sec. IV-C) trains on ratings of two LLM annotators at once (ChatGPT
and text-davinci-003) and sees the student lose against ChatGPT alone (SummEval Spearman 0.397 vs
0.442), which it attributes to the judges' different rating scales. This module makes the choice
explicit:

* **Where the labels are.** *Wide*: several label columns for one aspect in the same row, joined
  with ``+`` in a label specification: ``judge.coherence@gpt-4+judge.coherence@chatgpt`` (one item
  per aspect, items separated by commas). *Long*: one row per (candidate, judge) with a judge-name
  column; `pivot_long` turns it into wide rows, one per candidate (rows are matched on
  ``source``, ``candidate`` and ``reference`` text; the judge column's values become the
  ``@<judge>`` suffix of the label columns).
* **Normalisation per judge** (`normalise_values`), over the rows given (the training
  set): ``none``; ``zscore`` ``(y - mean) / std`` (population std); ``rank`` the average rank
  mapped onto [0, 1] (``(rank - 1) / (n - 1)``, ties share their mean rank; scipy.stats.rankdata).
  Each is a monotone map per judge, so a single judge's ranking is unchanged; what changes is how
  several judges weigh in a mean.
* **Combination** (`prepare_labels`): ``mean`` writes one column per aspect, the mean of
  the judges that rated the row (a judge that did not is skipped, not counted as 0); ``heads``
  keeps one label column per judge, so the student learns one head per judge over a shared encoder
  and the score of the aspect is the mean of its heads (`ensemble_scores`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from csem.data.columns import parse_column
from csem.errors import InputError

NORMALISATIONS = ("none", "zscore", "rank")
COMBINATIONS = ("mean", "heads")


class LabelSpecError(InputError):
    """A label specification or multi-judge file cannot be used; the message names what and where."""


def parse_label_spec(spec: str | Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    """``"a+b,c"`` -> ``[["a", "b"], ["c"]]``: one list of judge columns per aspect.

    A specification already parsed (a list of column lists, what this function returns) is returned as
    it is, so callers parse the user's text once and pass the groups on.

    Raises:
        LabelSpecError: an empty item or a column named twice.
    """
    if not isinstance(spec, str) and spec and all(isinstance(g, (list, tuple)) for g in spec):
        return [list(g) for g in spec]
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    groups = []
    for item in items:
        cols = [c.strip() for c in str(item).split("+")]
        if not item.strip() or any(not c for c in cols):
            raise LabelSpecError(f"empty label column in '{spec}' (use COL or COL1+COL2, comma separated)")
        groups.append(cols)
    flat = [c for g in groups for c in g]
    dup = sorted({c for c in flat if flat.count(c) > 1})
    if dup:
        raise LabelSpecError(f"label column(s) {dup} named twice in '{spec}'")
    return groups


def judge_column(col: str, judge: str | None) -> str:
    """``col`` tagged with ``judge`` through the column grammar (`csem.data.columns`):
    ``judge.coherence`` + ``gpt-4`` -> ``judge.coherence@gpt-4``; ``judge=None`` drops the tag
    (``judge.coherence@gpt-4`` -> ``judge.coherence``); a tagged column keeps its tag before the
    judge's (``judge.coherence@x`` + ``y`` -> ``judge.coherence@x@y``). A column outside the grammar
    (``rating``) has no tag: it is its own name, with ``@<judge>`` appended."""
    c = parse_column(col)
    if c is not None and c.is_score:
        return str(c.with_tag(None if judge is None else f"{c.tag}@{judge}" if c.tag else judge))
    return col if judge is None else f"{col}@{judge}"


def combined_name(cols: Sequence[str]) -> str:
    """Name of the combined column of one aspect: the judges' common column without its ``@`` tag
    (``judge.coherence@gpt-4`` + ``judge.coherence@chatgpt`` -> ``judge.coherence``), else the
    first column tagged ``@mean``."""
    bases = {judge_column(c, None) for c in cols}
    if len(bases) == 1 and len(cols) > 1:
        return bases.pop()
    if len(cols) == 1:
        return cols[0]
    return judge_column(judge_column(cols[0], None), "mean")


def _key(r: Mapping[str, Any]) -> tuple:
    ref = r.get("reference")
    return (r.get("source"), r.get("candidate"), tuple(ref) if isinstance(ref, list) else ref)


def pivot_long(records: Sequence[Mapping[str, Any]], judge_col: str, label_cols: Sequence[str],
               where: str = "training data") -> tuple[list[dict], list[list[str]], list[str]]:
    """Long multi-judge rows -> one wide row per candidate.

    Args:
        records: rows with ``judge_col`` (the judge's name) and the ``label_cols``.
        judge_col: the column naming the judge of each row (e.g. ``judge_name``).
        label_cols: the label columns (one per aspect, e.g. ``judge.coherence``).

    Returns:
        ``(rows, groups, judges)``: rows keyed by (source, candidate, reference) in order of first
        appearance, with ``<label_col>@<judge>`` columns (the other columns of the first row of the
        candidate are kept; ``id`` is that row's id); ``groups[k]`` lists the judge columns of
        ``label_cols[k]``; ``judges`` the judge names, in order of first appearance.

    Raises:
        LabelSpecError: a row without a judge name, or one judge rating one candidate twice (names
        the record ids).
    """
    rows: dict[tuple, dict] = {}
    judges: list[str] = []
    seen: dict[tuple, str] = {}
    for r in records:
        name = r.get(judge_col)
        if name is None or str(name).strip() == "":
            raise LabelSpecError(f"{where}: record '{r.get('id')}' has no judge name in column '{judge_col}'")
        name = str(name).strip()
        if name not in judges:
            judges.append(name)
        k = _key(r)
        if (k, name) in seen:
            raise LabelSpecError(f"{where}: judge '{name}' rates the same candidate twice (records "
                                 f"'{seen[(k, name)]}' and '{r.get('id')}')")
        seen[(k, name)] = str(r.get("id"))
        row = rows.get(k)
        if row is None:
            row = rows[k] = {c: v for c, v in r.items() if c not in label_cols and c != judge_col}
        for col in label_cols:
            if r.get(col) is not None:
                row[judge_column(col, name)] = r[col]
    groups = [[judge_column(col, j) for j in judges] for col in label_cols]
    return list(rows.values()), groups, judges


def normalise_values(values: Sequence[float | None], method: str) -> list[float | None]:
    """One judge's labels normalised (None stays None).

    Args:
        values: the judge's labels over the rows (None where it gave none).
        method: ``none`` | ``zscore`` (mean 0, population std 1) | ``rank`` (average ranks mapped
            onto [0, 1]).

    Raises:
        LabelSpecError: unknown method, or ``zscore`` of a constant column.
    """
    if method not in NORMALISATIONS:
        raise LabelSpecError(f"unknown normalisation '{method}'; choose from {', '.join(NORMALISATIONS)}")
    present = [(i, float(v)) for i, v in enumerate(values) if v is not None and not math.isnan(float(v))]
    out: list[float | None] = [None] * len(values)
    if method == "none" or not present:
        for i, v in present:
            out[i] = v
        return out
    xs = [v for _, v in present]
    if method == "zscore":
        mean = sum(xs) / len(xs)
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
        if std == 0:
            raise LabelSpecError("cannot z-score a constant label column")
        for i, v in present:
            out[i] = (v - mean) / std
        return out
    from scipy.stats import rankdata

    ranks = rankdata(xs, method="average")
    n = len(xs)
    for (i, _), rk in zip(present, ranks):
        out[i] = float((rk - 1) / (n - 1)) if n > 1 else 0.5
    return out


@dataclass
class PreparedLabels:
    """What `prepare_labels` produced.

    Attributes:
        records: copies of the input rows with the training label columns.
        label_cols: the columns to train on (one per aspect for ``mean``, one per judge for ``heads``).
        label_range: the scale to declare for them (None: let training infer it from the data).
        ensembles: ``heads`` only: aspect column -> its judge columns (the aspect's score is the mean
            of their heads on the normalised scale, `ensemble_scores`).
        info: per judge column: rows rated, and the statistics used (mean/std for ``zscore``).
    """

    records: list[dict]
    label_cols: list[str]
    label_range: tuple[float, float] | dict[str, tuple[float, float]] | None
    ensembles: dict[str, list[str]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def prepare_labels(records: Sequence[Mapping[str, Any]], groups: Sequence[Sequence[str]], *,
                   normalise: str = "none", combine: str = "mean",
                   label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
                   where: str = "training data") -> PreparedLabels:
    """Normalise each judge's column, then combine the judges of each aspect.

    Args:
        records: wide rows (see `pivot_long` for long files).
        groups: per aspect, its judge columns (`parse_label_spec`); a group of one is a
            single judge.
        normalise: ``none`` | ``zscore`` | ``rank`` (per judge column, over ``records``).
        combine: ``mean`` (one column per aspect) | ``heads`` (one head per judge column).
        label_range: the judges' declared scale (for ``none``): one ``(min, max)`` or per column.

    Returns:
        `PreparedLabels`. Scales: ``none`` keeps the declared range (judges of one aspect
        must then share it); ``rank`` declares [0, 1]; ``zscore`` leaves the range to be inferred.

    Raises:
        LabelSpecError: unknown method, a column absent from every row, judges of one aspect on
        different declared scales with ``normalise=none`` and ``combine=mean``.
    """
    if combine not in COMBINATIONS:
        raise LabelSpecError(f"unknown combination '{combine}'; choose from {', '.join(COMBINATIONS)}")
    if normalise not in NORMALISATIONS:
        raise LabelSpecError(f"unknown normalisation '{normalise}'; choose from {', '.join(NORMALISATIONS)}")
    rows = [dict(r) for r in records]
    present = set().union(*(r.keys() for r in rows)) if rows else set()
    info: dict[str, Any] = {}
    for g in groups:
        for col in g:
            if col not in present:
                raise LabelSpecError(f"{where}: label column '{col}' not found")
            vals = [r.get(col) for r in rows]
            try:
                normed = normalise_values(vals, normalise)
            except LabelSpecError as exc:
                raise LabelSpecError(f"{where}: column '{col}': {exc}") from None
            xs = [float(v) for v in vals if v is not None]
            entry: dict[str, Any] = {"rows": len(xs)}
            if xs and normalise == "zscore":
                m = sum(xs) / len(xs)
                entry.update(mean=m, std=math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)))
            info[col] = entry
            for r, v in zip(rows, normed):
                r[col] = v

    def declared(col: str) -> tuple[float, float] | None:
        if label_range is None:
            return None
        if isinstance(label_range, Mapping):
            rng = label_range.get(col)
            return None if rng is None else (float(rng[0]), float(rng[1]))
        return (float(label_range[0]), float(label_range[1]))

    def range_for(cols: Sequence[str]) -> tuple[float, float] | None:
        if normalise == "rank":
            return (0.0, 1.0)
        if normalise == "zscore":
            return None
        rngs = {declared(c) for c in cols}
        if len(rngs) > 1:
            raise LabelSpecError(f"{where}: judges {list(cols)} have different declared scales {sorted(rngs, key=str)}; "
                                 "normalise them (--normalise zscore or rank) or train separate heads (--combine heads)")
        return rngs.pop()

    ranges: dict[str, tuple[float, float]] = {}
    ensembles: dict[str, list[str]] = {}
    if combine == "mean":
        label_cols = []
        for g in groups:
            name = combined_name(g)
            rng = range_for(g)
            for r in rows:
                vs = [float(r[c]) for c in g if r.get(c) is not None]
                r[name] = sum(vs) / len(vs) if vs else None
            label_cols.append(name)
            if rng is not None:
                ranges[name] = rng
    else:
        label_cols = [c for g in groups for c in g]
        for g in groups:
            for c in g:
                rng = range_for([c])
                if rng is not None:
                    ranges[c] = rng
            if len(g) > 1:
                ensembles[combined_name(g)] = list(g)
    out_range: Any = None
    if ranges and len(ranges) == len(label_cols):
        out_range = ranges
    elif ranges:  # some inferred (zscore): pass only the declared ones
        out_range = ranges
    return PreparedLabels(rows, label_cols, out_range, ensembles, info)


def ensemble_scores(records: Sequence[Mapping[str, Any]], ensembles: Mapping[str, Sequence[str]],
                    scales: Mapping[str, tuple[float, float]], prefix: str) -> list[dict]:
    """Add the separate-heads score of each aspect: the mean of its heads, each mapped to [0, 1].

    Args:
        records: scored rows with ``<prefix>.<head aspect>`` columns.
        ensembles: aspect -> head aspects (e.g. ``{"coherence": ["coherence@gpt-4", ...]}``).
        scales: head aspect -> its label scale ``(min, max)``.
        prefix: the metric prefix, e.g. ``metric.csem``.

    Returns:
        Copies of ``records`` with ``<prefix>.<aspect>`` in [0, 1] (None when no head scored the row).
    """
    out = []
    for r in records:
        row = dict(r)
        for aspect, heads in ensembles.items():
            row[f"{prefix}.{aspect}"] = ensemble_value({h: r.get(f"{prefix}.{h}") for h in heads}, heads, scales)
        out.append(row)
    return out


def ensemble_value(head_scores: Mapping[str, float | None], heads: Sequence[str],
                   scales: Mapping[str, tuple[float, float]]) -> float | None:
    """The separate-heads score of one aspect for one record: the mean over ``heads`` of
    ``(score - min) / (max - min)`` (each head mapped to [0, 1] by its scale); heads without a score
    (None or absent) are skipped; None when no head scored. Used by `ensemble_scores` and the
    student's scoring path (`csem.model.scoring`)."""
    vs = []
    for h in heads:
        v = head_scores.get(h)
        if v is not None:
            lo, hi = scales[h]
            vs.append((float(v) - lo) / (hi - lo))
    return sum(vs) / len(vs) if vs else None
