"""A student that knows when to ask the judge: deferral rules, the combined score, two-stage reranking.

A cascade (selective prediction; LLM cascades such as FrugalGPT, Chen et al. 2023) lets the cheap
model answer where it is sure and sends the rest to the expensive one. In csem the student scores
every record; the records whose score it is least sure of are judged by the LLM judge, and the
combined column keeps the judge's score where there is one and the student's elsewhere, with the
provenance of each row (``"student"`` / ``"judge"``).

Deferral rules (`RULES`; each gives every record an *uncertainty*, and the records with the
highest uncertainty are deferred first; ties go to the earlier record in input order):

* ``std``: the seed-ensemble members' standard deviation of the record's score,
  ``u_i = sqrt(1/M * sum_m (s_im - mean_m s_im)^2)`` over the ``M`` members (population form):
  how much students trained alike with different seeds disagree (deep ensembles,
  Lakshminarayanan et al. 2017). Needs an ensemble (``ModelConfig.members`` > 1).
* ``mc``: the MC-dropout standard deviation of the record's score over ``T`` stochastic passes of
  the heads (Gal & Ghahramani 2016), the sample standard deviation ``u_i = std_t s_it``: how much
  the score moves when the heads' units are dropped at random. Works for any student.
* ``neighbours``: for ranking use, how close the record's score is to the nearest other
  candidate of the same source, ``u_i = -min_{j != i, src(j) = src(i)} |s_i - s_j|``: a record
  whose score nearly ties a rival's is the one whose rank within the source the student is least
  sure of. A record alone in its source never changes a ranking and is deferred last
  (``u_i = -inf``).
* ``random``: a seeded random order: the baseline every rule must beat.

The number of deferred records is ``floor(share * n + 0.5)`` for a share (so 20% of 10 rows is
exactly 2) or ``min(budget, n)`` for a budget of judge calls ([`deferral_count`][csem.apply.cascade.deferral_count]).

The judge's score replaces the student's on the student's scale, in two steps. The scale: a csem
student's training labels *are* the judge's scores on the rubric's scale, so when the metric card says
the labels came from this judge and rubric the map is the identity; otherwise [`judge_scale`][csem.apply.cascade.judge_scale]
refuses unless the caller asks for the rubric's scale to be mapped linearly onto the student's label
range ([`linear_map`][csem.apply.cascade.linear_map]). The spread (``calibration="fit"``, the default):
a student does not reproduce its judge's spread (regression shrinks, the pairwise loss stretches), so
the judged scores are mapped by the least-squares line of the student's score on the judge's over the
judged rows themselves, which carry both ([`fit_calibration`][csem.apply.cascade.fit_calibration]);
the line keeps the judge's order, so judging every row still ranks exactly as the judge.

Two-stage reranking ([`shortlist`][csem.apply.cascade.shortlist], [`two_stage_pick`][csem.apply.cascade.two_stage_pick]): the student keeps the top ``K``
candidates of each source's N-best list, the judge scores only those, and the judge's best of
the shortlist is chosen: ``K/N`` of the judge calls of judging every candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from csem.errors import InputError

RULES = ("std", "mc", "neighbours", "random")
#: where each row of a combined column came from
STUDENT, JUDGE = "student", "judge"


class CascadeError(InputError):
    """A cascade that cannot run as asked (unknown rule, no deviation for a deviation rule, a
    judge whose scale the student's card does not vouch for); the message says what to change."""


def deferral_count(n: int, *, share: float | None = None, budget: int | None = None) -> int:
    """How many of ``n`` records are judged.

    Args:
        n: records scored by the student (>= 0).
        share: fraction of the records to judge, in [0, 1]; ``floor(share * n + 0.5)`` records.
        budget: number of judge calls allowed (>= 0); ``min(budget, n)`` records.

    Returns:
        The number of records to defer, in ``[0, n]``.

    Raises:
        CascadeError: both or neither of ``share`` and ``budget``, or either out of range.
    """
    if (share is None) == (budget is None):
        raise CascadeError("give exactly one of a share of records to judge (defer) and a budget of judge "
                           "calls (defer_budget)")
    if share is not None:
        if not 0.0 <= float(share) <= 1.0 or math.isnan(float(share)):
            raise CascadeError(f"defer share {share}: must lie in [0, 1]")
        return min(n, int(math.floor(float(share) * n + 0.5)))
    if int(budget) < 0:
        raise CascadeError(f"defer budget {budget}: must be >= 0")
    return min(n, int(budget))


def neighbour_gap(scores: Sequence[float], groups: Sequence[Any]) -> np.ndarray:
    """The distance of each record's score to the nearest other score of its source.

    Args:
        scores: the student's score of each record (length ``n``).
        groups: the source key of each record (``doc_id``), same length.

    Returns:
        float array ``(n,)``: ``min_{j != i, groups[j] == groups[i]} |s_i - s_j|``; ``inf`` for a
        record alone in its source.
    """
    s = np.asarray(scores, dtype=float)
    if len(groups) != len(s):
        raise CascadeError(f"{len(s)} scores but {len(groups)} source keys")
    gap = np.full(len(s), np.inf)
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    for idx in members.values():
        if len(idx) < 2:
            continue
        ix = np.asarray(idx)
        order = ix[np.argsort(s[ix], kind="stable")]
        d = np.diff(s[order])  # gaps between neighbours in sorted order
        left = np.r_[np.inf, d]
        right = np.r_[d, np.inf]
        gap[order] = np.minimum(left, right)
    return gap


def uncertainty(rule: str, scores: Sequence[float], *, std: Sequence[float] | None = None,
                groups: Sequence[Any] | None = None, seed: int = 0) -> np.ndarray:
    """Each record's uncertainty under ``rule`` (higher = deferred first); formulas in the module
    docstring.

    Args:
        rule: one of `RULES`.
        scores: the student's scores (length ``n``).
        std: ``std`` and ``mc``: the deviation of each record's score (the members' or the MC-dropout
            standard deviation, on the score's scale).
        groups: ``neighbours``: each record's source key.
        seed: ``random``: the permutation's seed.

    Returns:
        float array ``(n,)``.

    Raises:
        CascadeError: unknown rule; a missing ``std`` or ``groups`` the rule needs; a deviation that
            is None or NaN.
    """
    n = len(scores)
    if rule in ("std", "mc"):
        if std is None:
            what = "a seed ensemble (ModelConfig.members > 1)" if rule == "std" else "MC-dropout samples"
            raise CascadeError(f"deferral rule '{rule}' needs each score's deviation: {what}")
        u = np.asarray([np.nan if v is None else v for v in std], dtype=float)
        if len(u) != n or np.isnan(u).any():
            raise CascadeError(f"deferral rule '{rule}': {int(np.isnan(u).sum())} of {n} records have no deviation")
        return u
    if rule == "neighbours":
        if groups is None:
            raise CascadeError("deferral rule 'neighbours' needs each record's source (doc_id or source text)")
        return -neighbour_gap(scores, groups)
    if rule == "random":
        return np.random.default_rng(seed).permutation(n).astype(float)
    raise CascadeError(f"unknown deferral rule '{rule}'; choose from {', '.join(RULES)}")


def choose(rule: str, scores: Sequence[float], *, share: float | None = None, budget: int | None = None,
           std: Sequence[float] | None = None, groups: Sequence[Any] | None = None, seed: int = 0) -> list[int]:
    """The records to judge: the [`deferral_count`][csem.apply.cascade.deferral_count] records of highest [`uncertainty`][csem.apply.cascade.uncertainty].

    Returns:
        Their positions, ascending.

    Raises:
        CascadeError: as [`deferral_count`][csem.apply.cascade.deferral_count] and [`uncertainty`][csem.apply.cascade.uncertainty].
    """
    k = deferral_count(len(scores), share=share, budget=budget)
    if k == 0:
        return []
    u = uncertainty(rule, scores, std=std, groups=groups, seed=seed)
    order = np.argsort(-u, kind="stable")  # highest first; ties: input order
    return sorted(int(i) for i in order[:k])


def combine(student: Sequence[float | None], judge: Mapping[int, float | None]) -> tuple[list[float | None], list[str]]:
    """The combined column: the judge's score where a deferred record has one, else the student's.

    Args:
        student: the student's score of each record.
        judge: position -> the judge's score on the student's scale (None: the judge gave none, e.g.
            a missing judgment; the student's score is kept and the row says ``student``).

    Returns:
        ``(scores, source)``: one score and one provenance (``"student"`` | ``"judge"``) per record.
    """
    scores, source = [], []
    for i, s in enumerate(student):
        j = judge.get(i)
        if j is not None and not (isinstance(j, float) and math.isnan(j)):
            scores.append(float(j))
            source.append(JUDGE)
        else:
            scores.append(s)
            source.append(STUDENT)
    return scores, source


def linear_map(src: tuple[float, float], dst: tuple[float, float]) -> Callable[[float], float]:
    """The affine map taking the scale ``src = (lo, hi)`` onto ``dst``: ``lo -> lo'``, ``hi -> hi'``.

    Raises:
        CascadeError: an empty ``src`` scale (``lo == hi``).
    """
    (a, b), (c, d) = src, dst
    if b == a:
        raise CascadeError(f"judge scale {src} is empty: cannot map it")
    return lambda x: c + (float(x) - a) * (d - c) / (b - a)


def same_judge(a: str, b: str) -> bool:
    """Whether two judge URIs name one judge: equal strings, or two in-process llama.cpp URIs
    (``local``, ``llama-cpp:ALIAS|PATH``) that resolve to the same GGUF file
    (``csem.assets.resolve_gguf``; ``local`` is ``llama-cpp:local``)."""
    if a == b:
        return True

    def gguf(uri: str) -> str | None:
        target = "local" if uri == "local" else (uri.split(":", 1)[1] if uri.startswith("llama-cpp:") else None)
        if not target:
            return None
        from csem.assets import resolve_gguf

        try:
            return str(resolve_gguf(target).resolve())
        except Exception:  # noqa: BLE001 - an unresolvable model is not the same judge
            return None

    pa = gguf(a)
    return pa is not None and pa == gguf(b)


def judge_scale(card: Mapping[str, Any], judge: str, rubric: str, *, rubric_scale: tuple[float, float],
                student_scale: tuple[float, float], rescale: bool = False) -> tuple[Callable[[float], float], str]:
    """How the judge's score is placed on the student's scale.

    The identity when the metric card says the student learned this judge's scores of this rubric
    (``distilled_from``: judge and rubric), or when the rubric's scale is the student's label range
    and ``rescale`` is given; with ``rescale`` and different scales, [`linear_map`][csem.apply.cascade.linear_map] of the
    rubric's scale onto the student's label range. Otherwise the judge's scale is not the
    student's, and mixing them would rank by scale, not quality: refused.

    Args:
        card: the student's metric card. judge: the judge URI asked for. rubric: the rubric id.
        rubric_scale: the rubric's ``(min, max)``. student_scale: the aspect's label range.
        rescale: accept a judge or rubric the card does not name.

    Returns:
        ``(map, how)``: the map, and a sentence for the output's provenance.

    Raises:
        CascadeError: the card names another judge or rubric (or none) and ``rescale`` is false.
    """
    learned = card.get("distilled_from") or {}
    rubrics = {r.strip() for r in str(learned.get("rubric") or "").split(",") if r.strip()}
    if same_judge(str(learned.get("judge") or ""), judge) and rubric in rubrics:
        return (lambda x: float(x)), f"identity: the student learned {judge}'s scores of {rubric}"
    if not rescale:
        raise CascadeError(f"the student's card says it learned judge '{learned.get('judge')}' on rubric(s) "
                           f"'{learned.get('rubric')}', not '{judge}' on '{rubric}': their scores need not share a "
                           "scale; judge with the student's own judge and rubric, or accept a linear map of the "
                           "rubric's scale onto the student's label range (rescale / --judge-rescale)")
    if tuple(map(float, rubric_scale)) == tuple(map(float, student_scale)):
        return (lambda x: float(x)), f"identity: rubric scale {rubric_scale} = the student's label range (rescale)"
    return linear_map(rubric_scale, student_scale), (f"linear map of the rubric scale {rubric_scale} onto the "
                                                     f"student's label range {student_scale} (rescale)")


def fit_calibration(judge: Mapping[int, float], student: Sequence[float | None]) -> tuple[float, float] | None:
    """The least-squares line ``student = a + b * judge`` over the records that have both scores.

    A student trained by regression (and the pairwise loss) spreads its scores differently from its
    judge: on the teacher pool the shipped student's scores have a standard deviation of ~0.8 on the
    1-5 scale where the judge's probability-weighted scores have ~0.15. A judged score put among
    student scores as it is lands near the middle of the student's spread whatever its rank, and the
    combined ranking gets worse before it gets better. The line maps the judge's score to the student
    score it goes with (the regression of the student on the judge), keeping the judge's order.

    Args:
        judge: position -> the judge's score (already on the student's scale by
            [`judge_scale`][csem.apply.cascade.judge_scale]). student: the student's score of every record.

    Returns:
        ``(a, b)``, or None with fewer than 3 pairs, a constant side, or a slope <= 0 (the line would
        reverse or erase the judge's order).
    """
    pairs = [(float(v), float(student[i])) for i, v in judge.items()
             if v is not None and student[i] is not None and not math.isnan(float(student[i]))]
    if len(pairs) < 3:
        return None
    x, y = np.array(pairs).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    b, a = np.polyfit(x, y, 1)
    return (float(a), float(b)) if b > 0 else None


def shortlist(scores: Sequence[float | None], groups: Sequence[Any], k: int) -> dict[Any, list[int]]:
    """The student's top ``k`` candidates of each source (ties: input order; a missing score is
    never shortlisted).

    Args:
        scores: the student's score of each record. groups: each record's source key. k: >= 1.

    Returns:
        source key -> the shortlisted positions, best first (all of a source's scored candidates
        when it has at most ``k``).

    Raises:
        CascadeError: ``k`` < 1.
    """
    if k < 1:
        raise CascadeError(f"shortlist size {k}: must be >= 1")
    by: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        s = scores[i]
        if s is not None and not math.isnan(float(s)):
            by.setdefault(g, []).append(i)
    return {g: sorted(idx, key=lambda i: (-float(scores[i]), i))[:k] for g, idx in by.items()}


def two_stage_pick(short: Mapping[Any, Sequence[int]], judge: Mapping[int, float | None]) -> dict[Any, int]:
    """Each source's pick: the judge's best of the student's shortlist (ties and missing judgments:
    the student's order decides, so a shortlist the judge could not score keeps the student's pick).

    Args:
        short: [`shortlist`][csem.apply.cascade.shortlist]'s output. judge: position -> the judge's score (None = missing).

    Returns:
        source key -> the chosen position.
    """
    out = {}
    for g, idx in short.items():
        if not idx:
            continue
        scored = [(float(judge[i]), -rank) for rank, i in enumerate(idx) if judge.get(i) is not None]
        if not scored:
            out[g] = idx[0]
            continue
        best = max(scored)
        out[g] = idx[-best[1]]
    return out



#: how a judged score is placed on the student's spread (``defer_to_judge(calibration=...)``)
CALIBRATIONS = ("fit", "identity")
#: MC-dropout samples drawn for ``defer_by="mc"`` when the caller asked for none
MC_SAMPLES = 10


@dataclass
class CascadeReport:
    """What a cascade did.

    Attributes:
        rule: the deferral rule. judge: the judge URI (redacted as the judge path redacts it).
        rubrics: rubric id -> the aspects it judged. rows: records scored by the student.
        deferred: rubric id -> positions of the records sent to the judge (ascending).
        scale: column -> how the judge's score was placed on the student's scale.
        judge_calls: judgments requested (deferred records x aspects).
        summary: the judge's [`csem.judge.JudgeSummary`][] (None on a dry run), whose ``failed`` and
            ``errors`` decide the exit code as for ``csem judge``.
        dry_run: True when nothing was judged (the counts of what would be).
        estimates: on a dry run, rubric id -> the judge's [`csem.judge.cost.Estimate`][] of its
            deferred records (judgments, cached, prompt tokens by the judge's own tokenizer).
    """

    rule: str
    judge: str
    rubrics: dict[str, list[str]]
    rows: int
    deferred: dict[str, list[int]]
    scale: dict[str, str]
    judge_calls: int
    summary: Any = None
    dry_run: bool = False
    estimates: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-able: counts and shares instead of positions."""
        return {"rule": self.rule, "judge": self.judge, "rubrics": self.rubrics, "rows": self.rows,
                "deferred": {k: len(v) for k, v in self.deferred.items()},
                "share_judged": {k: (len(v) / self.rows if self.rows else 0.0) for k, v in self.deferred.items()},
                "scale": self.scale, "judge_calls": self.judge_calls, "dry_run": self.dry_run,
                "summary": None if self.summary is None else str(self.summary),
                "estimates": {k: str(v) for k, v in self.estimates.items()}}


def _plan(model: Any, pred: Any, records: Sequence[Mapping[str, Any]], rubrics: Sequence[Any], *, rule: str,
          share: float | None, budget: int | None, seed: int) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    """Per rubric: the student columns it judges and the records deferred to it. A rubric with several
    aspects defers by its least certain aspect (the highest uncertainty of the record over them)."""
    from csem.data.columns import parse_column

    by_aspect = {parse_column(c).aspect: c for c in pred.columns}
    groups = [r.get("doc_id") if r.get("doc_id") is not None else r.get("source") for r in records]
    cols: dict[str, list[str]] = {}
    deferred: dict[str, list[int]] = {}
    for rub in rubrics:
        names = list(rub.aspect_names)
        unknown = [a for a in names if a not in by_aspect]
        if unknown:
            raise CascadeError(f"rubric '{rub.id}' judges {', '.join(unknown)}, which the student does not score "
                               f"(its aspects: {', '.join(sorted(a for a in by_aspect if a))})")
        cols[rub.id] = [by_aspect[a] for a in names]
        n = len(records)
        k = deferral_count(n, share=share, budget=budget)
        if k == 0:
            deferred[rub.id] = []
            continue
        us = [uncertainty(rule, pred.scores[c], std=(pred.std or {}).get(c), groups=groups, seed=seed)
              for c in cols[rub.id]]
        u = np.max(np.vstack(us), axis=0)
        deferred[rub.id] = sorted(int(i) for i in np.argsort(-u, kind="stable")[:k])
    return cols, deferred


def defer_to_judge(model: Any, records: Sequence[Mapping[str, Any]], pred: Any, *, judge: str, rubric: str | Sequence[str],
          share: float | None = None, budget: int | None = None, rule: str = "std", mode: str = "probs",
          cache: Any = None, rescale: bool = False, dry_run: bool = False, seed: int = 0, progress: bool = False,
          backend_options: Mapping[str, Any] | None = None, calibration: str = "fit",
          generation: Mapping[str, Any] | None = None) -> tuple[Any, CascadeReport]:
    """Send the student's least certain records to the judge and combine the two scores.

    Args:
        model: the [`csem.model.EvaluationModel`][] that made ``pred``.
        records: the records ``pred`` scored, in the same order.
        pred: the student's [`csem.model.prediction.Prediction`][] (with ``std`` for the ``std`` and
            ``mc`` rules).
        judge: judge backend URI (``local``, ``llama-cpp:...``, ``openai:MODEL``).
        rubric: rubric id(s) or file(s); each rubric's aspects must be aspects the student scores.
        share, budget: the share of records (0-1) or the number of records to judge, per rubric
            ([`deferral_count`][csem.apply.cascade.deferral_count]).
        rule: a deferral rule of ``RULES``.
        mode, cache, progress, backend_options: as [`csem.judge.judge_records`][] (the judge path
            of ``csem judge``: cached, resumable).
        rescale: accept a judge or rubric the student's card does not name
            ([`judge_scale`][csem.apply.cascade.judge_scale]).
        dry_run: choose the records and count the judgments; judge nothing.
        seed: the ``random`` rule's seed.
        generation: the judge's generation settings as [`csem.judge.judge_records`][] takes them
            (``n``, ``temperature``; default its own): those of the judgments the cache should answer.
        calibration: ``fit`` (default): after the scale map, the judge's scores are placed on the
            student's own spread by [`fit_calibration`][csem.apply.cascade.fit_calibration] over the
            judged rows (which carry both scores) | ``identity``: the scale map alone.

    Returns:
        ``(prediction, report)``: the combined [`Prediction`][csem.model.prediction.Prediction]
        (``scores``: the judge's score where it judged, the student's elsewhere; ``source``: per
        column and row ``"student"`` | ``"judge"``; ``records``: with ``metric.<name>.<aspect>``
        combined, ``metric.<name>.<aspect>@student`` the student's own score,
        ``metric.<name>.<aspect>.provenance``, and the judge's ``judge.<aspect>`` columns on the judged
        rows) and a [`CascadeReport`][csem.apply.cascade.CascadeReport]. On a dry run the prediction
        is the student's, unchanged.

    Raises:
        CascadeError: a bad share or budget, an unknown rule, a rule without the deviations it
            needs, a rubric aspect the student does not score, a judge whose scale the card does
            not vouch for (without ``rescale``). csem.rubrics.RubricError: an unknown rubric.
    """
    from csem.judge import judge_records
    from csem.rubrics import load_rubrics

    if calibration not in CALIBRATIONS:
        raise CascadeError(f"unknown calibration '{calibration}'; choose from {', '.join(CALIBRATIONS)}")
    rubrics = load_rubrics(rubric) if isinstance(rubric, str) else load_rubrics(list(rubric))
    cols, deferred = _plan(model, pred, records, rubrics, rule=rule, share=share, budget=budget, seed=seed)
    maps, how = {}, {}
    scales = model.output_aspects
    for rub in rubrics:
        for a, col in zip(rub.aspect_names, cols[rub.id]):
            maps[col], how[col] = judge_scale(model.card, judge, rub.id, rubric_scale=(rub.scale.min, rub.scale.max),
                                              student_scale=tuple(scales[a]), rescale=rescale)
    calls = sum(len(deferred[r.id]) * len(r.aspect_names) for r in rubrics)
    report = CascadeReport(rule=rule, judge=judge, rubrics={r.id: list(r.aspect_names) for r in rubrics},
                           rows=len(records), deferred=deferred, scale=how, judge_calls=calls, dry_run=dry_run)
    if dry_run:
        from csem.judge.runner import estimate_records

        report.estimates = {r.id: estimate_records([records[i] for i in deferred[r.id]], [r], judge, mode=mode,
                                                   cache=cache, backend_options=backend_options, **(generation or {}))
                            for r in rubrics if deferred[r.id]}
        return pred, report
    judged: dict[str, dict[int, float | None]] = {c: {} for c in pred.columns}
    extra: dict[int, dict] = {}
    summaries = []
    for rub in rubrics:
        idx = deferred[rub.id]
        if not idx:
            continue
        rows, summary = judge_records([records[i] for i in idx], [rub], judge, mode=mode, cache=cache,
                                      progress=progress, backend_options=backend_options, **(generation or {}))
        summaries.append(summary)
        for i, row in zip(idx, rows):
            extra.setdefault(i, {}).update({k: v for k, v in row.items() if k.startswith("judge.")})
            for a, col in zip(rub.aspect_names, cols[rub.id]):
                v = row.get(f"judge.{a}")
                judged[col][i] = None if v is None else maps[col](v)
    report.summary = _merge(summaries)
    if calibration == "fit":
        for col, got in judged.items():
            fitted = fit_calibration({i: v for i, v in got.items() if v is not None}, pred.scores[col])
            if fitted is not None:
                a, b = fitted
                judged[col] = {i: (None if v is None else a + b * v) for i, v in got.items()}
                how[col] += f"; then fitted on the {sum(v is not None for v in got.values())} judged rows: " \
                            f"student = {a:.4g} + {b:.4g} * judge"
            else:
                how[col] += "; too few judged rows (or no positive slope) to fit the calibration: the map alone"
    return _combined(model, records, pred, judged, extra), report



def predict_deferred(model: Any, records: Sequence[Mapping[str, Any]], pred: Any, *, defer: float | None,
                     defer_budget: int | None, defer_by: str | None, judge: str | None, rubric: Any,
                     mc_dropout: int = 0, judge_rescale: bool = False, judge_cache: Any = None,
                     judge_options: Mapping[str, Any] | None = None, judge_mode: str = "probs",
                     dry_run: bool = False, seed: int = 0, progress: bool = False, judge_calibration: str = "fit",
                     score_options: Mapping[str, Any] | None = None,
                     judge_generation: Mapping[str, Any] | None = None) -> Any:
    """The cascade behind ``EvaluationModel.predict(..., defer=...)``: the deviations the rule needs,
    then [`defer_to_judge`][csem.apply.cascade.defer_to_judge]; the returned prediction carries the
    [`CascadeReport`][csem.apply.cascade.CascadeReport] as ``.cascade``.

    The ``mc`` rule scores the records a second time with ``mc_dropout`` (or
    ``MC_SAMPLES``) MC-dropout samples under a fixed torch seed
    (``seed``) for the deviations only: the student's scores stay those of ``predict``, and a re-run
    defers the same records (so it resumes from the judge's cache). ``defer_by`` None: ``std`` for a seed ensemble,
    else ``mc``. ``judge_generation``: `defer_to_judge`'s ``generation``.

    Raises:
        CascadeError: no judge or rubric; as [`defer_to_judge`][csem.apply.cascade.defer_to_judge].
    """
    if not judge or not rubric:
        raise CascadeError("deferring to the judge needs a judge URI (judge=...) and rubric(s) (rubric=...)")
    rule = defer_by or ("std" if len(getattr(model, "members", [None])) > 1 else "mc")
    if rule == "mc":  # a seeded pass: the same records are deferred on every run (a re-run resumes)
        import torch

        opts = dict(score_options or {})
        opts["mc_dropout"] = mc_dropout or MC_SAMPLES
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mc = model.predict(records, **opts)
        pred = replace(pred, std=mc.std)
    elif rule == "std" and mc_dropout:
        raise CascadeError("deferral rule 'std' reads the seed-ensemble members' deviation; with MC dropout the "
                           "deviation is MC dropout's: use defer_by='mc' (--defer-by mc)")
    out, report = defer_to_judge(model, records, pred, judge=judge, rubric=rubric, share=defer, budget=defer_budget,
                        rule=rule, mode=judge_mode, cache=judge_cache, rescale=judge_rescale, dry_run=dry_run,
                        seed=seed, progress=progress, backend_options=judge_options, calibration=judge_calibration,
                        generation=judge_generation)
    out.cascade = report
    return out


def _merge(summaries: Sequence[Any]) -> Any:
    """One judge summary over several rubrics' runs (counts and tokens added)."""
    from csem.judge import JudgeSummary

    out = JudgeSummary()
    for s in summaries:
        for f in ("total", "judged", "cached", "failed", "prompt_tokens", "completion_tokens", "evaluated_tokens",
                  "seconds"):
            setattr(out, f, getattr(out, f) + getattr(s, f))
        for k, v in s.missing.items():
            out.missing[k] = out.missing.get(k, 0) + v
        out.errors += [e for e in s.errors if e not in out.errors][:5 - len(out.errors)]
        out.fallback = out.fallback or s.fallback
    return out


def _combined(model: Any, records: Sequence[Mapping[str, Any]], pred: Any, judged: Mapping[str, Mapping[int, Any]],
              extra: Mapping[int, Mapping[str, Any]]) -> Any:
    """The prediction with the combined columns, both scores and each row's provenance."""
    from csem.data.columns import format_column, parse_column
    from csem.model.prediction import system_scores

    scores, source, written = {}, {}, {}
    for col in pred.columns:
        scores[col], source[col] = combine(pred.scores[col], judged.get(col, {}))
        c = parse_column(col)
        written[format_column(c.kind, c.aspect, name=c.name, tag=STUDENT)] = list(pred.scores[col])
        written[format_column(c.kind, c.aspect, name=c.name, side="provenance")] = list(source[col])
    new = replace(pred, scores=scores, source=source, system_score=system_scores(scores))
    out = []
    for i, r in enumerate(pred.records):
        row = dict(r)
        row.update(extra.get(i, {}))
        for col in pred.columns:
            row[col] = scores[col][i]
        for col, vs in written.items():
            row[col] = vs[i]
        out.append(row)
    new.records = out
    return new



@dataclass
class TwoStageResult:
    """What [`rerank_two_stage`][csem.apply.cascade.rerank_two_stage] returns.

    Attributes:
        chosen: one record per source (the judge's best of the student's shortlist), with its scores.
        scored: every candidate, with the student's score, the judge's where it judged, and
            ``shortlisted`` (True / False).
        report: ``sources``, ``candidates``, ``shortlist`` (K), ``judge_calls`` (judgments asked),
            ``judge_calls_all`` (what judging every candidate costs), ``share_of_calls``,
            ``judge_of_pick`` / ``judge_of_student_pick`` (the judge's mean score of the pick and of
            the student's own first choice, over sources), ``judge_best`` (the judge's mean best over
            every candidate when the file already holds the judge's column for all of them, else
            None), ``changed`` (sources where the judge overruled the student).
        summary: the judge's [`csem.judge.JudgeSummary`][].
    """

    chosen: list[dict]
    scored: list[dict]
    report: dict
    summary: Any


def rerank_two_stage(records: Sequence[Mapping[str, Any]], student_col: str, k: int, *, judge: str, rubric: str,
                     mode: str = "probs", cache: Any = None, progress: bool = False,
                     backend_options: Mapping[str, Any] | None = None) -> TwoStageResult:
    """Two-stage reranking: the student shortlists the top ``k`` candidates of each source's N-best
    list ([`shortlist`][csem.apply.cascade.shortlist]), the judge scores only those (the judge path of
    ``csem judge``: cached, resumable), and the judge's best of the shortlist is chosen
    ([`two_stage_pick`][csem.apply.cascade.two_stage_pick]).

    Args:
        records: N-best lists (grouped by ``doc_id``, else by ``source`` text) with ``student_col``.
        student_col: the student's score column. k: the shortlist size (>= 1).
        judge, rubric: the judge URI and a one-aspect rubric. mode, cache, progress,
            backend_options: as [`csem.judge.judge_records`][].

    Returns:
        A [`TwoStageResult`][csem.apply.cascade.TwoStageResult].

    Raises:
        CascadeError: ``k`` < 1, a rubric with several aspects. ValueError: a record without
            ``doc_id`` or ``source``.
    """
    from csem.apply.reranking import group_sources
    from csem.judge import judge_records
    from csem.rubrics import load_rubrics

    (rub,) = load_rubrics(rubric)[:1]
    if len(rub.aspect_names) != 1:
        raise CascadeError(f"two-stage reranking takes a rubric with one aspect; '{rub.id}' has "
                           f"{', '.join(rub.aspect_names)}")
    jcol = f"judge.{rub.aspect_names[0]}"
    keys, index = group_sources(records)
    groups = [None] * len(records)
    for key, idx in zip(keys, index):
        for i in idx:
            groups[int(i)] = key
    student = [_num(r.get(student_col)) for r in records]
    short = shortlist(student, groups, k)
    todo = sorted(i for idx in short.values() for i in idx)
    rows, summary = judge_records([records[i] for i in todo], [rub], judge, mode=mode, cache=cache,
                                  progress=progress, backend_options=backend_options)
    judged = {i: row for i, row in zip(todo, rows)}
    picks = two_stage_pick(short, {i: judged[i].get(jcol) for i in todo})
    scored = []
    for i, r in enumerate(records):
        row = dict(judged.get(i, r))
        row["shortlisted"] = i in judged
        scored.append(row)
    chosen = [scored[picks[g]] for g in keys if g in picks]
    had_all = all(_num(r.get(jcol)) is not None for r in records)
    mean = lambda xs: (sum(xs) / len(xs)) if xs else None  # noqa: E731
    got = [g for g in keys if g in picks and _num(scored[picks[g]].get(jcol)) is not None]
    report = {"sources": len(keys), "candidates": len(records), "shortlist": k, "judge_calls": len(todo),
              "judge_calls_all": len(records), "share_of_calls": len(todo) / len(records) if records else 0.0,
              "judge_of_pick": mean([_num(scored[picks[g]][jcol]) for g in got]),
              "judge_of_student_pick": mean([v for v in (_num(scored[short[g][0]].get(jcol)) for g in got)
                                             if v is not None]),
              "judge_best": mean([max(_num(records[int(i)][jcol]) for i in idx) for idx in index]) if had_all else None,
              "changed": sum(1 for g in picks if picks[g] != short[g][0]), "judge_column": jcol}
    return TwoStageResult(chosen=chosen, scored=scored, report=report, summary=summary)


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


__all__ = ["CascadeError", "CascadeReport", "JUDGE", "MC_SAMPLES", "RULES", "STUDENT", "choose", "combine", "defer_to_judge",
           "deferral_count", "judge_scale",
           "fit_calibration", "linear_map", "neighbour_gap", "CALIBRATIONS", "predict_deferred", "rerank_two_stage", "same_judge", "shortlist",
           "TwoStageResult", "two_stage_pick", "uncertainty"]
