"""The verdict: can this student replace its judge, and would more labels help? One rule, in plain words.

Every figure the rule reads is measured in the run (documented with thresholds and wording in
``docs/guides/verdict.md``). Per aspect:

1. **The student** ``S``: its summary-level Spearman with the judge on the held-out sources (how well it
   ranks the candidates of one source), with the 95% interval over resampled sources.
2. **The best trivial baseline** ``B`` by name: the highest summary-level Spearman among length,
   extractiveness, the system prior and the overlap features' least-squares fit on the same sources.
   The student is *above* it when the 95% interval of ``S - B`` (paired bootstrap over sources,
   [`csem.meta.paired_test`][]) lies above 0, *below* when it lies below 0, else *level* ("not
   distinguishable"). Without a paired interval, ``S``'s own interval against ``B``'s figure decides.
3. **The judge's repeatability** ``r`` (its agreement with itself under a second rendering of the rubric,
   [`csem.meta.repeatability`][]) and the attenuation bound ``sqrt(r)``: the student is *near the ceiling*
   when ``S >= sqrt(r) - CEILING_MARGIN``.
4. **Within vs across sources**: when the dataset-level figure (all held-out candidates pooled) exceeds
   the summary-level one by more than ``POOLING_GAP``, the student tells sources apart better than it
   ranks the candidates of one source, and the verdict says so.
5. **The learning curve** ([`csem.meta.curve`][]): rising, flat, falling or unclear, the expected gain
   per doubling of the labels, and the labels at which the fit comes within ``TARGET_MARGIN`` of
   ``sqrt(r)``.

The status of an aspect, in order:

* ``do-not-use``: *below* the best baseline;
* ``not-yet``: *level* with it;
* ``replace``: *above* it and near the ceiling (needs ``r``);
* ``use-with-care``: *above* it, short of the ceiling or without a measured ``r``.

The run's status is its weakest aspect's. Wording: `STATUS_TEXT`.

The rule reads the same figures wherever it runs; ``where`` names what measured them and so what the verdict
says about a figure that is missing (`NOT_MEASURED`): ``run``, a ``csem run`` pipeline (its held-out split,
the annotate stage's repeatability, the curve stage), or ``train``, a standalone ``csem train`` /
[`csem.train`][csem.api.train] (its dev records, the records' own ``judge.<aspect>.repeat`` columns, no
learning curve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

#: near the ceiling: S >= sqrt(r) - CEILING_MARGIN
CEILING_MARGIN = 0.10
#: within vs across sources: dataset-level minus summary-level Spearman above this is worth a sentence
POOLING_GAP = 0.15
#: the curve's target: within TARGET_MARGIN of sqrt(r)
TARGET_MARGIN = 0.05
#: statuses from worst to best
STATUSES = ("do-not-use", "not-yet", "use-with-care", "replace")
STATUS_TEXT = {
    "do-not-use": "Do not use this student in place of the judge: a trivial baseline agrees with the judge better.",
    "not-yet": "Not yet a replacement for the judge: the student does no better than a trivial baseline.",
    "use-with-care": "Usable beside the judge, not yet a replacement: the student beats the trivial baselines but "
                     "stays short of what the judge's own repeatability allows (or that was not measured).",
    "replace": "The student can stand in for the judge on these data: it beats the trivial baselines and comes "
               "close to the judge's agreement with itself.",
}
#: the headline where nothing was held out to judge the student on (the reason goes into the text)
NO_VERDICT = "No verdict: no held-out labelled sources."
#: where the figures come from: a ``csem run`` pipeline or a standalone ``csem train``
WHERE = ("run", "train")
#: what the verdict says, by ``where``, about the judge's repeatability when it was not measured (``{aspect}``
#: is filled in) and about the learning curve when there is none (None: nothing)
NOT_MEASURED = {
    "run": {"repeatability": "The judge's repeatability was not measured (annotate.repeatability), so the ceiling "
                             "is unknown.",
            "curve": None},
    "train": {"repeatability": "The judge's repeatability was not measured: the records carry no judge.{aspect}.repeat "
                               "scores (`csem annotate --repeatability 0.2` writes them; train on that file), so the "
                               "ceiling is unknown.",
              "curve": "No learning curve: one `csem train` cannot tell whether more labels would help (the curve "
                       "stage of a `csem run` pipeline trains on nested shares of the sources and can)."},
}


@dataclass
class AspectEvidence:
    """What the rule reads for one aspect (every figure a summary-level Spearman unless named otherwise).

    Attributes:
        aspect: the aspect. student, student_ci: S and its 95% interval over sources. n_sources: held-out
            sources. student_dataset: the dataset-level (pooled) figure, or None.
        baselines: ``{name: summary-level Spearman}`` of the trivial baselines (None values ignored).
        diff_ci: the 95% paired-bootstrap interval of S minus the best baseline, or None.
        r, r_ci: the judge's repeatability and its interval, or None. curve: a [`csem.meta.curve.log_fit`][]
            result (with ``labels_to_target``), or None.
    """

    aspect: str
    student: float | None
    student_ci: list[float] | None = None
    n_sources: int | None = None
    student_dataset: float | None = None
    baselines: dict[str, float | None] = field(default_factory=dict)
    diff_ci: list[float] | None = None
    r: float | None = None
    r_ci: list[float] | None = None
    curve: dict | None = None


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _ci(ci) -> str:
    return "" if not ci else f" (95% CI {ci[0]:.2f} to {ci[1]:.2f})"


def best_baseline(baselines: Mapping[str, float | None]) -> tuple[str | None, float | None]:
    """``(name, figure)`` of the highest baseline (None, None without one)."""
    got = {k: v for k, v in baselines.items() if v is not None and not math.isnan(v)}
    if not got:
        return None, None
    name = max(got, key=got.get)
    return name, got[name]


def compare_to_baseline(e: AspectEvidence) -> str:
    """``above`` | ``level`` | ``below`` | ``unknown`` (no student figure or no baseline), see rule 2."""
    _, b = best_baseline(e.baselines)
    if e.student is None or b is None:
        return "unknown"
    if e.diff_ci is not None:
        lo, hi = e.diff_ci
    elif e.student_ci is not None:
        lo, hi = e.student_ci[0] - b, e.student_ci[1] - b
    else:
        lo = hi = e.student - b
    return "above" if lo > 0 else "below" if hi < 0 else "level"


def aspect_verdict(e: AspectEvidence, *, where: str = "run") -> dict[str, Any]:
    """The rule for one aspect: ``{"aspect", "status", "versus_baseline", "best_baseline", "sqrt_r",
    "near_ceiling", "sentences"}``; ``where`` (`WHERE`) picks the sentence for an unmeasured
    repeatability (`NOT_MEASURED`)."""
    name, b = best_baseline(e.baselines)
    versus = compare_to_baseline(e)
    sqrt_r = math.sqrt(e.r) if e.r is not None and e.r > 0 else None
    near = sqrt_r is not None and e.student is not None and e.student >= sqrt_r - CEILING_MARGIN
    if versus == "below":
        status = "do-not-use"
    elif versus in ("level", "unknown"):
        status = "not-yet"
    else:
        status = "replace" if near else "use-with-care"
    n = f", {e.n_sources} sources" if e.n_sources else ""
    s = []
    if name is None:
        s.append(f"{e.aspect}: the student ranks the candidates of one source at {_f(e.student)}{_ci(e.student_ci)}; "
                 "no trivial baseline could be computed.")
    else:
        how = {"above": "better than", "level": "about as well as", "below": "worse than",
               "unknown": "(undefined) against"}[versus]
        tail = {"above": "distinguishable", "level": "not distinguishable", "below": "distinguishable",
                "unknown": "not comparable"}[versus]
        s.append(f"{e.aspect}: the student ranks the candidates of one source {how} {name}, the best trivial "
                 f"baseline ({_f(e.student)} vs {_f(b)}{n}: {tail}).")
    if e.r is not None:
        s.append(f"The judge agrees with itself at {_f(e.r)}{_ci(e.r_ci)} on these sources, so about "
                 f"{_f(sqrt_r)} is the most a student can reach against it"
                 + ((f"; the student is within {CEILING_MARGIN:.2f} of it." if near else
                     f"; the student is more than {CEILING_MARGIN:.2f} below it.") if sqrt_r else "."))
    else:
        s.append(NOT_MEASURED[where]["repeatability"].format(aspect=e.aspect))
    if e.student_dataset is not None and e.student is not None and e.student_dataset - e.student > POOLING_GAP:
        s.append(f"Pooled over sources it reaches {_f(e.student_dataset)}: part of its agreement is telling sources "
                 "apart, not ranking one source's candidates.")
    s += _curve_sentences(e.curve, sqrt_r)
    return {"aspect": e.aspect, "status": status, "versus_baseline": versus, "best_baseline": name,
            "best_baseline_value": b, "student": e.student, "sqrt_r": sqrt_r, "near_ceiling": near, "sentences": s}


def _curve_sentences(curve: Mapping | None, sqrt_r: float | None) -> list[str]:
    if not curve:
        return []
    g, gci = curve.get("gain_per_doubling"), curve.get("gain_ci")
    per = f"{g:+.2f} per doubling" + (f", 95% CI {gci[0]:+.2f} to {gci[1]:+.2f}" if gci else "")
    out = {"rising": f"More labels are likely to help ({per}).",
           "flat": f"More labels of this kind are unlikely to help: the learning curve is flat ({per}).",
           "falling": f"The learning curve falls ({per}): more labels of this kind do not help.",
           "unclear": f"The learning curve cannot tell whether more labels help ({per})."}[curve.get("trend", "unclear")]
    sents = [out]
    need = curve.get("labels_to_target")
    if sqrt_r is not None and curve.get("trend") in ("rising", "unclear") and g is not None and g > 0:
        if need is not None:
            sents.append(f"The fit comes within {TARGET_MARGIN:.2f} of {_f(sqrt_r)} at about {need:,.0f} labels.")
        else:
            sents.append(f"The fit does not come within {TARGET_MARGIN:.2f} of {_f(sqrt_r)} within 100 times the "
                         "labels measured.")
    return sents


def verdict(evidence: list[AspectEvidence], *, where: str = "run") -> dict[str, Any]:
    """The verdict: ``{"status", "headline", "text", "aspects": [aspect verdicts], "where", "rule"}``; the
    status is the weakest aspect's, the headline its sentence of `STATUS_TEXT`, ``text`` every aspect's
    sentences, what was not measured (`NOT_MEASURED`) and the headline.

    Args:
        evidence: one `AspectEvidence` per aspect.
        where: ``run`` (a ``csem run`` pipeline) or ``train`` (a standalone ``csem train`` on its dev
            records): what the text says about a figure that is missing.

    Raises:
        ValueError: an unknown ``where``.
    """
    if where not in WHERE:
        raise ValueError(f"where must be one of {WHERE}, got {where!r}")
    rows = [aspect_verdict(e, where=where) for e in evidence]
    if not rows:
        return {"status": "not-yet", "headline": "No aspect could be judged.", "text": "", "aspects": [],
                "where": where}
    status = min((r["status"] for r in rows), key=STATUSES.index)
    curve = NOT_MEASURED[where]["curve"] if all(e.curve is None for e in evidence) else None
    text = " ".join([*(" ".join(r["sentences"]) for r in rows), *([curve] if curve else []), STATUS_TEXT[status]])
    return {"status": status, "headline": STATUS_TEXT[status], "text": text, "aspects": rows, "where": where,
            "rule": {"ceiling_margin": CEILING_MARGIN, "pooling_gap": POOLING_GAP, "target_margin": TARGET_MARGIN}}
