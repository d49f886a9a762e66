"""N-best reranking by one metric (CSEM Eq. 7) or by a weighted sum of several (Eq. 8).

An N-best list is the set of csem records that share a source (``doc_id``; records without one
are grouped by their ``source`` text). For source ``x`` with candidates ``y_1..y_n`` and metric
columns ``m_1..m_K``:

* Eq. 7: ``y* = argmax_i m(x, y_i)``
* Eq. 8: ``y* = argmax_i sum_k w_k m_k(x, y_i)``, weights tuned on dev N-best lists by MERT
  ([`csem.apply.tune`][]).

Optional per-source normalisation (``normalize="zscore"``) replaces each metric's scores of one
N-best list by their z-scores within the list (mean 0, standard deviation 1; a constant column
becomes 0), so that weights do not depend on each metric's scale. Ties go to the first candidate
in input order. A candidate with a missing score (None/NaN) on any weighted column is never
chosen; a source whose candidates are all missing gets no choice (reported, not guessed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from csem.apply.metrics import Metric, Scores, score_all
from csem.data.columns import is_score_column
from csem.errors import InputError

NORMALIZATIONS = ("none", "zscore")


@dataclass
class NBest:
    """N-best lists as arrays.

    Attributes:
        keys: the source key of each list (``doc_id`` or the source text's position).
        index: for each list, the positions of its candidates in the record list.
        features: for each list, an ``[n_i, K]`` float array (NaN = missing).
        columns: the ``K`` feature column names.
    """

    keys: list[str]
    index: list[np.ndarray]
    features: list[np.ndarray]
    columns: list[str]


def group_sources(records: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[np.ndarray]]:
    """Group record positions by source, in order of first appearance.

    The key is ``doc_id`` when present, else the ``source`` text; a record with neither raises
    ValueError naming it."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        key = r.get("doc_id")
        if key is None:
            if not isinstance(r.get("source"), str):
                raise InputError(f"record '{r.get('id', i)}' has neither 'doc_id' nor 'source': "
                                 "cannot tell which N-best list it belongs to")
            key = "source:" + r["source"]
        groups.setdefault(str(key), []).append(i)
    return list(groups), [np.asarray(v, dtype=int) for v in groups.values()]


def _as_float(v: Any) -> float:
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def build_nbest(records: Sequence[Mapping[str, Any]], columns: Sequence[str], normalize: str = "none") -> NBest:
    """Arrays of the score ``columns`` of ``records`` per N-best list (see [`NBest`][csem.apply.reranking.NBest]).

    Raises:
        ValueError: unknown ``normalize``, or a column that no record has.
    """
    if normalize not in NORMALIZATIONS:
        raise InputError(f"unknown normalisation '{normalize}'; choose from {NORMALIZATIONS}")
    for c in columns:
        if not any(c in r for r in records):
            raise InputError(f"score column '{c}' is in none of the {len(records)} records")
    keys, index = group_sources(records)
    feats = []
    for idx in index:
        f = np.array([[_as_float(records[i].get(c)) for c in columns] for i in idx], dtype=float).reshape(len(idx), len(columns))
        if normalize == "zscore":
            f = zscore_within(f)
        feats.append(f)
    return NBest(keys, index, feats, list(columns))


def zscore_within(f: np.ndarray) -> np.ndarray:
    """Z-score each column of one N-best list's ``[n, K]`` scores (NaN ignored; constant -> 0)."""
    out = np.full_like(f, np.nan)
    for k in range(f.shape[1]):
        col = f[:, k]
        ok = ~np.isnan(col)
        if not ok.any():
            continue
        mu, sd = col[ok].mean(), col[ok].std()
        out[ok, k] = (col[ok] - mu) / sd if sd > 1e-12 else 0.0
    return out


def argmax_choice(features: np.ndarray, weights: np.ndarray) -> int:
    """Position of ``argmax_i features[i] @ weights`` (first on ties), or -1 when every candidate
    has a missing weighted feature. Features with weight 0 are ignored even when missing."""
    used = weights != 0
    f = features[:, used]
    total = f @ weights[used] if f.shape[1] else np.zeros(len(features))
    total = np.where(np.isnan(f).any(axis=1), -np.inf, total) if f.shape[1] else total
    if not len(total) or np.all(np.isneginf(total)):
        return -1
    return int(np.argmax(total))


@dataclass
class RerankResult:
    """What [`rerank`][csem.apply.reranking.rerank] did.

    Attributes:
        chosen: one record per source (the chosen candidate, with every score column and
            ``rerank.score``), in source order.
        scored: every input record with every score column, ``rerank.score`` and ``rerank.chosen``.
        columns: the feature columns; weights: their weights; normalize: the normalisation used.
        no_choice: source keys where every candidate had a missing score.
    """

    chosen: list[dict]
    scored: list[dict]
    columns: list[str]
    weights: list[float]
    normalize: str
    no_choice: list[str] = field(default_factory=list)


def check_finite(weights: Sequence[float], columns: Sequence[str], what: str = "weights") -> None:
    """Every weight is a finite number (a NaN weight would make every total NaN and choose nothing,
    an infinite one would make every total infinite).

    Raises:
        ValueError: names the column and the value.
    """
    bad = [(c, w) for c, w in zip(columns, weights) if not math.isfinite(float(w))]
    if bad:
        raise InputError(f"{what}: " + ", ".join(f"'{c}' has weight {w}" for c, w in bad)
                         + "; every weight must be a finite number")


def parse_weights(weights: str | Sequence[float] | Mapping[str, float] | None, columns: Sequence[str]) -> np.ndarray:
    """Weights for ``columns``: None -> 1 each (Eq. 7 for one column; the plain sum for several);
    a list in column order; ``"w1,w2"``; or ``{column: weight}`` / ``"col=w,col=w"`` (others 0).

    Raises:
        ValueError: wrong count, a non-number, a NaN or infinite weight, or a column name that is
        not a feature.
    """
    w = _parse_weights(weights, columns)
    check_finite(w.tolist(), columns)
    return w


def _parse_weights(weights: Any, columns: Sequence[str]) -> np.ndarray:
    if weights is None:
        return np.ones(len(columns))
    if isinstance(weights, str):
        parts = [p.strip() for p in weights.split(",") if p.strip()]
        if parts and all("=" in p for p in parts):
            weights = {p.split("=", 1)[0].strip(): p.split("=", 1)[1] for p in parts}
        else:
            weights = parts
    if isinstance(weights, Mapping):
        unknown = [k for k in weights if k not in columns]
        if unknown:
            raise InputError(f"weights name column(s) {unknown} that no metric writes; columns: {list(columns)}")
        try:
            return np.array([float(weights.get(c, 0.0)) for c in columns])
        except (TypeError, ValueError) as exc:
            raise InputError(f"weights must be numbers: {exc}") from exc
    try:
        w = np.array([float(x) for x in weights])
    except (TypeError, ValueError) as exc:
        raise InputError(f"weights must be numbers: {exc}") from exc
    if len(w) != len(columns):
        raise InputError(f"{len(w)} weight(s) for {len(columns)} score column(s) {list(columns)}")
    return w


def rerank_scored(records: Sequence[Mapping[str, Any]], columns: Sequence[str], weights: Any = None,
                  normalize: str = "none") -> RerankResult:
    """Rerank records that already carry the score ``columns`` (Eq. 7 / Eq. 8); see the module docstring."""
    w = parse_weights(weights, columns)
    nb = build_nbest(records, columns, normalize)
    scored = [dict(r) for r in records]
    chosen, none = [], []
    for key, idx, f in zip(nb.keys, nb.index, nb.features):
        used = w != 0
        total = f[:, used] @ w[used] if used.any() else np.zeros(len(idx))
        pick = argmax_choice(f, w)
        for j, i in enumerate(idx):
            scored[i]["rerank.score"] = None if np.isnan(total[j]) else float(total[j])
            scored[i]["rerank.chosen"] = j == pick
        if pick < 0:
            none.append(key)
        else:
            chosen.append(scored[idx[pick]])
    return RerankResult(chosen, scored, list(columns), [float(x) for x in w], normalize, none)


def rerank(records: Sequence[Mapping[str, Any]], metrics: Sequence[Metric], weights: Any = None,
           normalize: str = "none") -> RerankResult:
    """Score every candidate with ``metrics`` (each loaded once) and pick one per source.

    Args:
        records: N-best lists (csem records grouped by ``doc_id``).
        metrics: loaded metrics ([`csem.apply.metrics.load_metrics`][]); their columns, in order,
            are the features of Eq. 8.
        weights: see [`parse_weights`][csem.apply.reranking.parse_weights] (default 1 each).
        normalize: ``none`` or ``zscore`` (per source, per column, before weighting).

    Returns:
        [`RerankResult`][csem.apply.reranking.RerankResult].

    Raises:
        ValueError: bad weights, a reference-based metric without references, two metrics with
            the same column.
    """
    scores = score_all(metrics, records)
    rows = add_scores(records, scores)
    return rerank_scored(rows, list(scores), weights, normalize)


def add_scores(records: Sequence[Mapping[str, Any]], scores: Scores) -> list[dict]:
    """Copies of ``records`` with the score columns set (existing columns of the same name replaced)."""
    rows = [dict(r) for r in records]
    for col, values in scores.items():
        for row, v in zip(rows, values):
            row[col] = v
    return rows


def score_specs(records: Sequence[Mapping[str, Any]], specs: str | Sequence[Any], *,
                judge_cache: Any = None, **options: Any) -> tuple[list[dict], list[str]]:
    """Score ``records`` with metric specifications ([`csem.apply.metrics.load_metric`][]); a
    specification that names a score column already in the records (``judge.coherence``,
    ``metric.rouge1``) is used as it is, without re-scoring.

    Returns:
        (copies of the records with the score columns, the feature columns in order).
    """
    from csem.apply.metrics import load_metric

    items = [s.strip() for s in specs.split(",") if s.strip()] if isinstance(specs, str) else list(specs)
    rows = [dict(r) for r in records]
    columns: list[str] = []
    for spec in items:
        if isinstance(spec, str) and is_score_column(spec) and any(spec in r for r in records):
            cols = [spec]
        else:
            metric = load_metric(spec, judge_cache=judge_cache, **options)
            scores = score_all([metric], rows)
            rows = add_scores(rows, scores)
            cols = list(scores)
        for c in cols:
            if c in columns:
                raise InputError(f"two metrics write the column '{c}'")
            columns.append(c)
    return rows, columns
