"""The score stage's cascade: the student as a filter that knows when to ask the judge.

With a ``score:`` section ([`ScoreConfig`][csem.pipeline.config.ScoreConfig]) the score stage
scores every candidate with the student, then sends ``score.defer`` (a share) or
``score.defer_budget`` (a number) of the records it is least sure of to the judge through
[`csem.model.EvaluationModel.predict`][] with deferral ([`csem.apply.cascade`][]), and writes to
``scored.jsonl``, per aspect:

* ``metric.<name>.<aspect>@student``: the student's own score (as a run without the option writes it
  untagged);
* ``metric.<name>.<aspect>``: the combined score, the judge's (placed on the student's spread) on the
  deferred rows, the student's elsewhere;
* ``metric.<name>.<aspect>.provenance``: ``student`` or ``judge``, which of the two gave that row.

The judge's own columns (``judge.<aspect>`` and its side fields) stay the annotate stage's labels:
the cascade's judgments never overwrite them. With the annotate stage's judge, rubrics, mode and
generation settings (the defaults) every deferred judgment is already in the run's judge cache, so
the cascade makes no new judge call; the stage's summary counts them (``judged``: new, ``cached``).

**No circular figure.** The records are those the judge labelled, and meta-eval measures the student
against those labels; the combined column copies the judge's labels on the deferred rows, so its
agreement with them would measure the judge against itself. Every agreement figure of the run
therefore reads the student's own column (`csem.pipeline.agreement.student_col`); meta-eval,
curve, verdict, seeds, rerank and the report's plots are what they are without the option. The
combined column is measured only against targets that are not the judged labels
(`cascade_rows`): ``human.<aspect>`` where the records carry it, and ``judge.<aspect>.repeat``,
the judge's second rendering of the rubric (``annotate.repeatability``), on the held-out sources,
beside the student's own score and the judge's labels on the same rows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from csem.data.columns import format_column, parse_column
from csem.errors import MissingInputError
from csem.pipeline.agreement import aspect_of, scorer_rows, student_col

if TYPE_CHECKING:  # pragma: no cover
    from csem.pipeline.runner import Pipeline

#: the targets the combined column is measured against: name -> column of an aspect
TARGETS = {"human": lambda a: format_column("human", a),
           "judge repeat": lambda a: format_column("judge", a, side="repeat")}


def resolve(p: Pipeline) -> dict:
    """The score section with its defaults filled in: what fingerprints the score stage (the section
    itself was checked against the train, annotate and compare sections when the file was read,
    [`PipelineConfig`][csem.pipeline.config.PipelineConfig]).

    Returns:
        ``{"score": the section's own settings, "judge", "rubrics", "mode", "generation":
        {"n", "temperature"}, "rescale"}``; ``options`` (default the annotate stage's) only when
        given, as the annotate stage fingerprints them. ``rescale`` is True also where the pipeline
        knows its student learnt this judge's scores of these rubrics on their own scale (the
        annotate stage's; ``PipelineConfig.score_is_own``), whatever ids its metric card lists.
    """
    s, a = p.cfg.score, p.cfg.annotate
    options = a.options if s.options is None else s.options
    out = {"score": s.model_dump(exclude={"judge", "rubrics", "options"}), "judge": s.judge or a.judge,
           "rubrics": p._rubrics(s.rubrics), "mode": a.mode, "generation": {"n": a.n, "temperature": a.temperature},
           "rescale": s.rescale or p.cfg.score_is_own()}
    if options:
        out["options"] = options
    return out


def score_deferred(p: Pipeline, model: Any, records: list[dict], student: Any) -> tuple[list[dict], dict]:
    """Run the cascade over the score stage's records.

    Args:
        p: the pipeline (its ``score`` section set). model: the train stage's student.
        records: the annotate stage's records with ``split``, in file order.
        student: the student's own `Prediction` of ``records`` (the score stage's one pass; the
            cascade starts from it instead of scoring them again).

    Returns:
        ``(rows, summary)``: the rows of ``scored.jsonl`` (the records with the student's, the
        combined and the provenance columns; their ``judge.*`` columns as annotated) and the
        cascade's summary (rule, amount asked, rows deferred overall and on the held-out sources,
        judge calls asked, made, cached and failed, how the judge's score was placed).

    Raises:
        csem.apply.cascade.CascadeError: a rubric aspect the student does not score, or as
            [`csem.apply.cascade.predict_deferred`][].
    """
    s, how = p.cfg.score, resolve(p)
    t0 = time.perf_counter()
    from csem.apply.cascade import predict_deferred

    pred = predict_deferred(model, records, student, defer=s.defer, defer_budget=s.defer_budget, defer_by=s.defer_by,
                            judge=how["judge"], rubric=how["rubrics"], judge_cache=p.run_dir / "judge_cache.sqlite",
                            judge_options=how.get("options"), judge_mode=how["mode"],
                            judge_generation=how["generation"], judge_rescale=how["rescale"],
                            judge_calibration=s.calibration, seed=s.seed, progress=p.progress)
    rows = [_keep_labels(out, rec) for out, rec in zip(pred.records, records)]
    rep, js = pred.cascade, pred.cascade.summary
    held_out = [i for i, r in enumerate(records) if r.get("split") == "test"]
    summary = {"rule": rep.rule, "defer": s.defer, "defer_budget": s.defer_budget, "judge": how["judge"],
               "rubrics": rep.rubrics, "rows": rep.rows, "held_out_rows": len(held_out),
               "deferred": {rid: len(v) for rid, v in rep.deferred.items()},
               "share_deferred": {rid: (len(v) / rep.rows if rep.rows else 0.0) for rid, v in rep.deferred.items()},
               "held_out_deferred": {rid: len(set(v) & set(held_out)) for rid, v in rep.deferred.items()},
               "from_judge": {c: sum(v == "judge" for v in src) for c, src in (pred.source or {}).items()},
               "judge_calls": rep.judge_calls, "judged": js.judged, "cached": js.cached, "failed": js.failed,
               "missing": sum(js.missing.values()), "errors": list(js.errors), "scale": rep.scale,
               "calibration": s.calibration, "seconds": round(time.perf_counter() - t0, 3)}
    return rows, summary


def _keep_labels(out: dict, rec: dict) -> dict:
    """A cascade's output row with the record's own ``judge.*`` columns: the judge's labels are the
    annotate stage's, whatever the cascade judged (another judge or rubric must not replace them)."""
    row = {k: v for k, v in out.items() if not k.startswith("judge.") or k in rec}
    row.update({k: v for k, v in rec.items() if k.startswith("judge.")})
    return row


def combined_col(records: list[dict], aspect: str) -> str:
    """The cascade's combined column of an aspect: the untagged ``metric.<name>.<aspect>`` beside a
    ``metric.<name>.<aspect>@student`` column.

    Raises:
        MissingInputError: ``records`` carry no cascade's columns for ``aspect``.
    """
    own = parse_column(student_col(records, aspect))
    if own.tag is None:
        raise MissingInputError(f"no cascade columns for {aspect} in the scored records (no "
                                f"metric.<name>.{aspect}@student): the score stage ran without deferral")
    return str(own.with_tag(None))


def cascade_rows(records: list[dict], label_cols: list[str], *, human_cols: list[str] = (), bootstrap: int = 0,
                 seed: int = 0) -> list[dict]:
    """The combined column's agreement with the targets that are not the judged labels.

    Per aspect and target (``human``: ``human.<aspect>``; ``judge repeat``: ``judge.<aspect>.repeat``;
    a target the records do not carry gives no row), on the records that carry the target: rows of
    `csem.pipeline.agreement.agreement_table`'s layout for the scorers ``cascade``
    (the combined column), ``student`` (the student's own score) and ``judge`` (the judge's labels,
    what judging every row gives), each with ``rows_judged``: how many of those records the cascade
    deferred to the judge.

    Args:
        records: scored records (the held-out sources', for a figure the student did not train on).
        label_cols: the judge's label columns (``judge.<aspect>``). human_cols: ``human.<aspect>``
            columns declared in the pipeline file. bootstrap, seed: as `agreement_table`.

    Returns:
        The rows (empty without any target).
    """
    rows = []
    for label in label_cols:
        aspect = aspect_of(label)
        own, comb = student_col(records, aspect), combined_col(records, aspect)
        prov = str(parse_column(comb).with_side("provenance"))
        for target, column in TARGETS.items():
            tcol = column(aspect)
            if not (tcol in human_cols or any(r.get(tcol) is not None for r in records)):
                continue
            sub = [r for r in records if r.get(tcol) is not None and r.get(own) is not None]
            judged = sum(1 for r in sub if r.get(prov) == "judge")
            y, groups = [r[tcol] for r in sub], [r.get("doc_id") for r in sub]
            for scorer, col in (("cascade", comb), ("student", own), ("judge", label)):
                got = scorer_rows(aspect, scorer, target, [r.get(col) for r in sub], y, groups, bootstrap=bootstrap,
                                  seed=seed)
                rows += [{**r, "rows_judged": judged} for r in got]
    return rows



def cascade_lines(p: Pipeline) -> list[str]:
    """What ``csem run`` prints about the score stage's cascade (empty without a ``score`` section or
    before the score stage ran): the records deferred, the judge calls, and per aspect and target the
    summary-level Spearman of the combined column beside the student's own on the same held-out rows."""
    c = p.state.data.get("score", {}).get("summary", {}).get("cascade") if p.cfg.score is not None else None
    if not c:
        return []
    deferred = ", ".join(f"{n} of {c['rows']} records to {r}" for r, n in c["deferred"].items())
    lines = [f"cascade: {deferred} ({c['rule']} rule); judgments {c['judged']} new, {c['cached']} from the run's "
             f"judge cache, {c['failed']} failed -> {p.run_dir / 'scored.jsonl'}"]
    rows = p.state.data.get("meta_eval", {}).get("summary", {}).get("cascade") or []
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    by = {(r["aspect"], r["target"], r["scorer"]): r for r in rows if r["level"] == "summary"}
    for (aspect, target, scorer), r in by.items():
        if scorer == "cascade":
            own = by.get((aspect, target, "student"), {})
            lines.append(f"cascade, {aspect} vs {target} (held-out, summary-level Spearman): {fmt(r['spearman'])}, the "
                         f"student alone {fmt(own.get('spearman'))}, over {r['n_pairs']} candidates, "
                         f"{r['rows_judged']} judged")
    if not rows:
        lines.append("cascade: no human rating or judge repeat label to measure the combined column against "
                     "(never against the judge's own labels)")
    return lines
