"""Minimum error rate training (Och 2003) of the Eq. 8 reranking weights, and random search.

Objective: on dev N-best lists with per-candidate gains ``g`` (a reference-based score of each
candidate: BLEU, chrF, ROUGE, a reference-based student, or the judge), the mean over sources of
the gain of the candidate chosen by ``argmax_i f_i . w`` ([`objective`][csem.apply.tune.objective]). It is piecewise
constant in ``w``, so gradient methods do not apply.

Line search (Och 2003, Sec. 6; Macherey et al. 2008 call it the upper envelope): along
``w + gamma * d`` each candidate's model score is a line ``a_i + gamma * b_i`` with
``a = F w``, ``b = F d``. The chosen candidate as a function of ``gamma`` is the upper envelope of
the lines, computed exactly per source ([`envelope`][csem.apply.tune.envelope]); merging every source's breakpoints
gives the objective on every interval of the real line, so the best ``gamma`` is found exactly
([`line_search`][csem.apply.tune.line_search]), not on a grid. The search ([`mert`][csem.apply.tune.mert]) repeats line searches along the
coordinate axes and a few random directions from the current point, moves along the best one,
until no direction improves; then restarts from random points (seeded) and keeps the best. The
result is normalised to unit L1 norm (the argmax does not change under positive scaling).

[`random_search`][csem.apply.tune.random_search] evaluates random weight vectors at the same budget, counted in objective
evaluations (MERT's line search counts one evaluation per interval it scores).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from csem.apply.reranking import argmax_choice
from csem.errors import InputError


def clean_lists(features: Sequence[np.ndarray], gains: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Drop candidates with a missing feature or gain, and lists left empty.

    Returns:
        (features, gains, number of candidates dropped).
    """
    fs, gs, dropped = [], [], 0
    for f, g in zip(features, gains):
        f, g = np.asarray(f, dtype=float), np.asarray(g, dtype=float)
        ok = ~(np.isnan(f).any(axis=1) | np.isnan(g))
        dropped += int((~ok).sum())
        if ok.any():
            fs.append(f[ok])
            gs.append(g[ok])
    return fs, gs, dropped


def objective(features: Sequence[np.ndarray], gains: Sequence[np.ndarray], weights: np.ndarray) -> float:
    """Mean over sources of ``gains[s][argmax_i features[s][i] @ weights]`` (first index on ties).

    Args:
        features: per source an ``[n_s, K]`` array (no NaN; see [`clean_lists`][csem.apply.tune.clean_lists]).
        gains: per source an ``[n_s]`` array.
        weights: ``[K]``.
    """
    w = np.asarray(weights, dtype=float)
    return float(np.mean([g[argmax_choice(f, w)] for f, g in zip(features, gains)]))


def envelope(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Upper envelope of the lines ``a_i + gamma * b_i`` over ``gamma`` in (-inf, inf).

    Returns:
        ``(breakpoints, owners)``: strictly increasing ``gamma`` values ``t_1 < ... < t_m`` and
        ``m + 1`` line indices: ``owners[0]`` is the argmax on ``(-inf, t_1)``, ``owners[j]`` on
        ``(t_j, t_{j+1})``, ``owners[m]`` on ``(t_m, inf)``. Inside an interval the argmax is
        unique up to identical lines, and then the first index (the tie rule of the argmax).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(a)
    # at gamma -> -inf: smallest slope, then largest intercept, then first index
    order = np.lexsort((np.arange(n), -a, b))
    cur = int(order[0])
    owners, points = [cur], []
    g_cur = -math.inf
    while True:
        steeper = np.nonzero(b > b[cur])[0]
        if not len(steeper):
            break
        cross = (a[cur] - a[steeper]) / (b[steeper] - b[cur])
        # lines that overtake at or after the current point (numerically: not before it)
        ok = cross >= g_cur - 1e-12 * max(1.0, abs(g_cur)) if math.isfinite(g_cur) else np.ones(len(cross), bool)
        if not ok.any():
            break
        steeper, cross = steeper[ok], cross[ok]
        t = cross.min()
        at_t = steeper[np.isclose(cross, t, rtol=1e-12, atol=1e-12)]
        # just after t the steepest of the lines crossing at t wins; among equal lines the first index
        best_b = b[at_t].max()
        cand = at_t[b[at_t] == best_b]
        cand = cand[a[cand] == a[cand].max()] if len(cand) > 1 else cand
        nxt = int(cand.min())
        if points and math.isclose(t, points[-1], rel_tol=1e-12, abs_tol=1e-12):
            owners[-1] = nxt  # several lines cross at one point: only the last owner has an interval
        else:
            points.append(float(t))
            owners.append(nxt)
        cur, g_cur = nxt, t
    return np.asarray(points, dtype=float), np.asarray(owners, dtype=int)


_objective = objective  # tune_weights_report's parameter of the same name shadows it


@dataclass
class LineSearchResult:
    """Best step along a direction: ``gamma``, the objective there, and ``intervals`` scored."""

    gamma: float
    value: float
    intervals: int


def line_search(features: Sequence[np.ndarray], gains: Sequence[np.ndarray], w: np.ndarray, d: np.ndarray) -> LineSearchResult:
    """Exact maximiser of ``objective(w + gamma * d)`` over ``gamma`` (Och 2003).

    The objective is constant between the merged breakpoints of every source's upper envelope;
    the best interval is chosen (ties: the one containing or nearest to ``gamma = 0``, so a
    direction that gains nothing does not move the weights) and ``gamma`` is its midpoint (for an
    unbounded interval, one unit beyond its finite end; 0 when it contains 0).
    """
    w, d = np.asarray(w, dtype=float), np.asarray(d, dtype=float)
    n_src = len(features)
    base = 0.0
    events: list[tuple[float, float]] = []
    for f, g in zip(features, gains):
        pts, own = envelope(f @ w, f @ d)
        base += g[own[0]]
        for t, prev, nxt in zip(pts, own[:-1], own[1:]):
            if g[nxt] != g[prev]:
                events.append((float(t), float(g[nxt] - g[prev])))
    if not events:
        return LineSearchResult(0.0, base / n_src, 1)
    events.sort()
    ts = np.array([t for t, _ in events])
    # merge coincident breakpoints (equal up to float rounding: the same crossing seen from two sources
    # must not leave a sliver of an interval whose midpoint is decided by rounding noise)
    new_group = np.concatenate([[True], np.diff(ts) > 1e-9 * np.maximum(1.0, np.abs(ts[1:]))])
    inv = np.cumsum(new_group) - 1
    uniq = ts[new_group]
    deltas = np.zeros(len(uniq))
    np.add.at(deltas, inv, [dv for _, dv in events])
    values = (base + np.concatenate([[0.0], np.cumsum(deltas)])) / n_src  # value on interval j
    lows = np.concatenate([[-math.inf], uniq])
    highs = np.concatenate([uniq, [math.inf]])
    best = values.max()
    cands = np.nonzero(np.isclose(values, best, rtol=0, atol=1e-12))[0]

    def dist(j: int) -> float:
        lo, hi = lows[j], highs[j]
        return 0.0 if lo < 0 < hi else min(abs(lo), abs(hi))

    j = int(min(cands, key=dist))
    lo, hi = lows[j], highs[j]
    if lo < 0 < hi:
        gamma = 0.0
    elif math.isinf(lo):
        gamma = hi - 1.0
    elif math.isinf(hi):
        gamma = lo + 1.0
    else:
        gamma = (lo + hi) / 2
    return LineSearchResult(float(gamma), float(values[j]), len(values))


@dataclass
class TuneResult:
    """Outcome of [`mert`][csem.apply.tune.mert] or [`random_search`][csem.apply.tune.random_search].

    Attributes:
        weights: the best weights (unit L1 norm); value: the dev objective there.
        start_value: the objective at the start weights. evaluations: objective evaluations
        (intervals for MERT). line_searches: MERT line searches (0 for random search).
        seconds: wall time. history: (evaluations so far, best value so far) after each step.
    """

    method: str
    weights: list[float]
    value: float
    start_value: float
    evaluations: int
    line_searches: int
    seconds: float
    history: list[tuple[int, float]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _normalise(w: np.ndarray) -> np.ndarray:
    s = np.abs(w).sum()
    return w / s if s > 0 else w


def _random_unit(rng: np.random.Generator, k: int) -> np.ndarray:
    v = rng.standard_normal(k)
    return v / (np.linalg.norm(v) or 1.0)


def mert(features: Sequence[np.ndarray], gains: Sequence[np.ndarray], *, start: Sequence[float] | None = None,
         restarts: int = 5, random_directions: int = 2, max_iterations: int = 50, seed: int = 0,
         tol: float = 1e-9) -> TuneResult:
    """Och's MERT over the weights of ``K`` features.

    Args:
        features, gains: dev N-best lists (per source ``[n_s, K]`` and ``[n_s]``, no NaN).
        start: first starting point (default: all ones); the other ``restarts - 1`` starts are
            drawn uniformly from ``[-1, 1]^K``.
        restarts: starting points in all (>= 1).
        random_directions: random unit directions tried per iteration besides the K axes.
        max_iterations: most moves per start; tol: smallest improvement that counts.
        seed: seeds the starts and directions (same seed, same result).

    Returns:
        [`TuneResult`][csem.apply.tune.TuneResult] (method ``mert``).

    Raises:
        ValueError: no N-best lists, or ``restarts < 1``.
    """
    if not features:
        raise InputError("MERT needs at least one dev N-best list with scores")
    if restarts < 1:
        raise InputError("restarts must be >= 1")
    t0 = time.perf_counter()
    k = features[0].shape[1]
    rng = np.random.default_rng(seed)
    w0 = np.ones(k) if start is None else np.asarray(start, dtype=float)
    start_value = objective(features, gains, w0)
    best_w, best_v = _normalise(w0.copy()), start_value
    evals, searches, history = 1, 0, [(1, start_value)]
    for r in range(restarts):
        w = w0.copy() if r == 0 else rng.uniform(-1, 1, k)
        v = objective(features, gains, w)
        evals += 1
        for _ in range(max_iterations):
            dirs = [np.eye(k)[i] for i in range(k)] + [_random_unit(rng, k) for _ in range(random_directions)]
            step = None
            for d in dirs:
                res = line_search(features, gains, w, d)
                searches += 1
                evals += res.intervals
                if res.value > v + tol and (step is None or res.value > step[0]):
                    step = (res.value, d, res.gamma)
            if step is None:
                break
            v, d, gamma = step
            w = _normalise(w + gamma * d)
            if v > best_v + tol:
                best_w, best_v = w.copy(), v
            history.append((evals, best_v))
        if v > best_v + tol:
            best_w, best_v = _normalise(w.copy()), v
        history.append((evals, best_v))
    return TuneResult("mert", [float(x) for x in best_w], float(best_v), float(start_value), evals, searches,
                      time.perf_counter() - t0, history)


def random_search(features: Sequence[np.ndarray], gains: Sequence[np.ndarray], *, budget: int,
                  start: Sequence[float] | None = None, seed: int = 0) -> TuneResult:
    """Best of ``budget`` weight vectors: the start (default all ones) and ``budget - 1`` random
    unit vectors (Gaussian directions: every sign pattern, as MERT may reach).

    Returns:
        [`TuneResult`][csem.apply.tune.TuneResult] (method ``random``).
    """
    if not features:
        raise InputError("random search needs at least one dev N-best list with scores")
    t0 = time.perf_counter()
    k = features[0].shape[1]
    rng = np.random.default_rng(seed)
    w0 = np.ones(k) if start is None else np.asarray(start, dtype=float)
    start_value = objective(features, gains, w0)
    best_w, best_v = _normalise(w0), start_value
    history = [(1, start_value)]
    for i in range(1, max(1, budget)):
        w = _random_unit(rng, k)
        v = objective(features, gains, w)
        if v > best_v:
            best_w, best_v = _normalise(w), v
        if (i + 1) % max(1, budget // 50) == 0 or i == budget - 1:
            history.append((i + 1, best_v))
    return TuneResult("random", [float(x) for x in best_w], float(best_v), float(start_value), max(1, budget), 0,
                      time.perf_counter() - t0, history)


def load_weights_file(path: str | Path) -> tuple[dict[str, float], str | None]:
    """The weights of a JSON file written by ``csem tune-weights`` ([`tune_weights_report`][csem.apply.tune.tune_weights_report]):
    ``({column: weight}, normalize or None)``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not such a file (no ``columns``/``weights``, or not JSON), a different number of
            columns and weights, a weight that is not a finite number (NaN, null, infinite).
    """
    from csem.apply.reranking import check_finite

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such weights file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        columns, weights = list(data["columns"]), list(data["weights"])
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a weights file written by `csem tune-weights` ({exc})") from exc
    if len(columns) != len(weights):
        raise InputError(f"{path}: {len(weights)} weight(s) for {len(columns)} column(s) {columns}")
    try:
        values = [float(w) for w in weights]
    except (TypeError, ValueError):
        raise InputError(f"{path}: weights must be numbers, got {weights}") from None
    check_finite(values, columns, f"{path}")
    return dict(zip(columns, values)), data.get("normalize")


def check_weights_cover(path: str | Path, weights: dict[str, float], columns: list[str]) -> None:
    """A weights file must weigh every score column being reranked: a column it does not name would
    silently get weight 0 (a column it names that no metric writes is refused by
    [`csem.apply.reranking.parse_weights`][]).

    Raises:
        ValueError: names the file and the columns without a weight.
    """
    missing = [c for c in columns if c not in weights]
    if missing:
        raise InputError(f"{path}: no weight for score column(s) {missing}; the file weighs {list(weights)} "
                         "(tune the weights for these metrics with `csem tune-weights`)")


def objective_gains(records: Sequence[dict], objective: str, *, judge_cache=None) -> tuple[list[dict], str]:
    """Per-candidate gains for the tuning objective: the mean of the objective metric's columns
    (or an existing score column). Returns (records with a ``tune.gain`` column, objective name)."""
    from csem.apply.reranking import score_specs

    rows, cols = score_specs(records, objective, judge_cache=judge_cache)
    for r in rows:
        vals = [r.get(c) for c in cols]
        r["tune.gain"] = None if any(v is None for v in vals) else float(np.mean([float(v) for v in vals]))
    return rows, objective if len(cols) == 1 and cols[0] == objective else f"{objective} ({', '.join(cols)})"


def tune_weights_report(records: Sequence[dict], metrics: str | Sequence, objective: str, *, normalize: str = "none",
                        restarts: int = 5, directions: int = 2, seed: int = 0, judge_cache=None) -> dict:
    """Everything ``csem tune-weights`` reports, as a JSON-able dict.

    Scores the dev N-best lists with ``metrics`` (the features) and ``objective`` (the gains), runs
    [`mert`][csem.apply.tune.mert], [`random_search`][csem.apply.tune.random_search] at MERT's budget of objective evaluations and at its
    number of line searches, and lists for context the start point (all weights 1), each single
    column (Eq. 7) and the oracle (best gain per source).

    Returns:
        ``{"columns", "weights" (MERT's), "normalize", "objective", "value", "sources",
        "candidates", "dropped", "mert", "random", "random_line_budget", "table": [...]}``.

    Raises:
        ValueError: no dev list with scores, or the scoring errors of the metrics.
    """
    from csem.apply.reranking import build_nbest, score_specs

    rows, columns = score_specs(records, metrics, judge_cache=judge_cache)
    rows, obj_name = objective_gains(rows, objective, judge_cache=judge_cache)
    if "tune.gain" in columns:
        raise InputError("the objective cannot also be a feature")
    nb = build_nbest(rows, columns, normalize)
    gains = [np.array([np.nan if rows[i]["tune.gain"] is None else rows[i]["tune.gain"] for i in idx], dtype=float)
             for idx in nb.index]
    feats, gs, dropped = clean_lists(nb.features, gains)
    if not feats:
        raise InputError("no dev N-best list has a candidate with every score and an objective value")
    m = mert(feats, gs, restarts=restarts, random_directions=directions, seed=seed)
    rs = random_search(feats, gs, budget=m.evaluations, seed=seed)
    rs_lines = random_search(feats, gs, budget=max(1, m.line_searches), seed=seed)
    k = len(columns)
    table = [{"selection": "all weights 1 (start)", "value": m.start_value, "weights": [1.0] * k}]
    for j, c in enumerate(columns):
        w = np.eye(k)[j]
        table.append({"selection": f"{c} only (Eq. 7)", "value": _objective(feats, gs, w), "weights": w.tolist()})
    table += [
        {"selection": f"random search ({rs_lines.evaluations} points = MERT's line searches)",
         "value": rs_lines.value, "evaluations": rs_lines.evaluations, "weights": rs_lines.weights},
        {"selection": f"random search ({rs.evaluations} points = MERT's evaluations)", "value": rs.value,
         "evaluations": rs.evaluations, "weights": rs.weights},
        {"selection": f"MERT ({m.line_searches} line searches, {restarts} starts)", "value": m.value,
         "evaluations": m.evaluations, "weights": m.weights},
        {"selection": "oracle (best candidate per source)", "value": float(np.mean([g.max() for g in gs]))},
    ]
    return {"columns": columns, "weights": m.weights, "normalize": normalize, "objective": obj_name,
            "value": m.value, "sources": len(feats), "candidates": int(sum(len(g) for g in gs)), "dropped": dropped,
            "mert": m.as_dict(), "random": rs.as_dict(), "random_line_budget": rs_lines.as_dict(), "table": table}
