"""Whether to trust the run's student: the curve and verdict stages of ``csem run``.

* [`run_curve`][csem.pipeline.trust.run_curve] (the ``curve`` stage, ``curve.json``): the train stage's recipe as one student
  (``members`` 1) on nested shares of the training sources (``curve.shares``; a seeded order of the
  sources, the first ``share`` of it, so each share holds the one before), each scored on the held-out
  sources; the point at 100 % with the train stage's seed is the train stage's own student (or, for a seed
  ensemble, its member of that seed), not trained again. Per aspect a log-linear fit of the summary-level
  Spearman against the training labels ([`csem.meta.curve.log_fit`][]), the expected gain per doubling
  with its 95% interval, and the labels at which the fit comes within 0.05 of the judge's attenuation
  bound ``sqrt(r)`` (with ``annotate.repeatability``).
* [`run_verdict`][csem.pipeline.trust.run_verdict] (the ``verdict`` stage, ``verdict.json`` and ``gate.json``): the evidence of the
  rule ([`csem.report.verdict`][]): the student's agreement and interval (``meta.json``), the trivial
  baselines (``baselines.json``) and a paired bootstrap of the student minus the best of them, the judge's
  repeatability, the curve; and the acceptability gate's count of the real candidates it floors
  ([`csem.model.acceptability.gate_audit`][]). Both go into the model's metric card as well.
* [`train_verdict`][csem.pipeline.trust.train_verdict]: the same evidence ([`held_out_evidence`][csem.pipeline.trust.held_out_evidence])
  and rule for a standalone ``csem train`` / [`csem.train`][csem.api.train], measured on its dev records of
  sources absent from the training data, into the metric card it writes.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from csem.data.jsonio import write_json
from csem.pipeline.agreement import (BOOTSTRAP, agreement_table, aspect_of, baseline_rows, baseline_scores,
                                     student_col)
from csem.pipeline.folder import SCORED

#: the curve's target: within this much of sqrt(r)
TARGET_MARGIN = 0.05
#: a share of the training sources with fewer labelled rows than this (csem train's minimum) is skipped
MIN_ROWS = 8


def _row(rows: list[dict], aspect: str, scorer: str, level: str) -> dict:
    return next((r for r in rows if r["aspect"] == aspect and r["scorer"] == scorer and r["target"] == "judge"
                 and r["level"] == level), {})


def _curve_point(p, recs: list[dict], share_docs: set, seed: int, full: bool, test: list[dict]) -> list[dict]:
    """The held-out agreement rows of one student of the curve."""
    from csem.model import EvaluationModel

    own, members = p.train_seed(), int(p.cfg.train.model.get("members", 1))
    if full and 0 <= seed - own < members:  # the train stage's student (or its member of this seed)
        model = EvaluationModel.load(p.run_dir / "model")
        model = model.member(seed - own) if members > 1 else model
        return agreement_table(model.predict(test).records, p.label_cols())
    sub = [r for r in recs if r["split"] != "train" or r["doc_id"] in share_docs]
    with tempfile.TemporaryDirectory(dir=p.run_dir, prefix=f"curve{seed}.") as tmp:
        p._fit(sub, Path(tmp) / "model", seed=seed, members=1)
        model = EvaluationModel.load(Path(tmp) / "model")
        return agreement_table(model.predict(test).records, p.label_cols())


def run_curve(p) -> dict:
    """The curve stage of pipeline ``p`` (see the module docstring); writes ``curve.json``: ``{"shares",
    "seeds", "points": [{"share", "sources", "labels", "seed", "aspect", "spearman", "dataset"}], "fits":
    {aspect: fit | None}, "skipped": [shares with fewer than MIN_ROWS labels]}``. Returns its summary (points, seconds per point)."""
    from csem.meta.curve import labels_to, log_fit

    c = p.cfg.curve
    recs, _ = p.labelled()
    labels = p.label_cols()
    order = sorted({r["doc_id"] for r in recs if r["split"] == "train"})
    random.Random(c.seed).shuffle(order)
    test = [r for r in recs if r["split"] == "test"]
    seeds = c.seeds or [p.train_seed()]
    points, seconds, skipped = [], [], []
    for share in c.shares:
        k = max(1, round(share * len(order)))
        docs = set(order[:k])
        counts = {col: sum(1 for r in recs if r["split"] == "train" and r["doc_id"] in docs and r.get(col) is not None)
                  for col in labels}
        if k < len(order) and min(counts.values(), default=0) < MIN_ROWS:  # too few labels to train on
            skipped.append({"share": share, "sources": k, "labels": min(counts.values(), default=0)})
            continue
        for seed in seeds:
            t0 = time.perf_counter()
            rows = _curve_point(p, recs, docs, seed, k == len(order), test)
            seconds.append(round(time.perf_counter() - t0, 2))
            for col in labels:
                a = aspect_of(col)
                points.append({"share": share, "sources": k, "labels": counts[col], "seed": seed, "aspect": a,
                               "spearman": _row(rows, a, "student", "summary").get("spearman"),
                               "dataset": _row(rows, a, "student", "dataset").get("spearman")})
    rep = p.repeatability() or {}
    fits: dict[str, Any] = {}
    for col in labels:
        a = aspect_of(col)
        try:
            fit = log_fit([(pt["labels"], pt["spearman"]) for pt in points if pt["aspect"] == a])
        except ValueError:  # fewer than 2 label counts with a defined figure
            fits[a] = None
            continue
        root = ((rep.get("columns") or {}).get(col) or {}).get("summary", {}).get("sqrt_r")
        fit["target"] = None if root is None else root - TARGET_MARGIN
        fit["labels_to_target"] = None if root is None else labels_to(fit, root - TARGET_MARGIN)
        fits[a] = fit
    write_json(p.run_dir / "curve.json", {"shares": c.shares, "seeds": seeds, "points": points, "fits": fits,
                                          "skipped": skipped})
    return {"points": len(points), "skipped": len(skipped), "seconds_per_point": seconds}


def _paired_diff(test: list[dict], aspect: str, label: str, baseline: list) -> list[float] | None:
    """95% paired-bootstrap interval over sources of the student's summary-level Spearman minus a
    baseline's (None when undefined)."""
    from csem.meta import paired_test

    scol = student_col(test, aspect)
    rows = [{"doc_id": r.get("doc_id"), "a": r.get(scol), "b": baseline[i], "y": r.get(label)} for i, r in enumerate(test)]
    try:
        res = paired_test(rows, "a", "b", "y", level="summary", method="spearman", n=BOOTSTRAP, seed=0)
    except (ValueError, KeyError):
        return None
    return None if math.isnan(res.ci_low) or math.isnan(res.ci_high) else [res.ci_low, res.ci_high]


def _aspect_evidence(label: str, meta: list[dict], base: list[dict], test: list[dict], scores: dict,
                     rep: dict, fits: dict):
    """The [`csem.report.verdict.AspectEvidence`][] of one label column: the student's rows of ``meta``
    (`csem.pipeline.agreement.agreement_table` on the scored held-out records ``test``), the baselines'
    summary-level rows of ``base`` (`csem.pipeline.agreement.baseline_rows`) and the paired interval
    against the best of them (its ``scores``, `csem.pipeline.agreement.baseline_scores`), the
    repeatability report ``rep`` (``{"columns": {label: ...}}``) and the curve ``fits`` (``{aspect: fit}``)."""
    from csem.report.verdict import AspectEvidence, best_baseline

    a = aspect_of(label)
    st, sd = _row(meta, a, "student", "summary"), _row(meta, a, "student", "dataset")
    bl = {r["scorer"]: r["spearman"] for r in base if r["aspect"] == a and r["level"] == "summary"}
    name, _ = best_baseline(bl)
    diff = _paired_diff(test, a, label, scores[name][label]) if name in scores else None
    r = ((rep.get("columns") or {}).get(label) or {}).get("summary") or {}
    return AspectEvidence(aspect=a, student=st.get("spearman"), student_ci=st.get("spearman_ci"),
                          n_sources=st.get("n_groups"), student_dataset=sd.get("spearman"), baselines=bl,
                          diff_ci=diff, r=r.get("r"), r_ci=r.get("ci"), curve=fits.get(a))


def verdict_evidence(p) -> list:
    """The [`csem.report.verdict.AspectEvidence`][] of every label column of pipeline ``p``."""
    meta = json.loads((p.run_dir / "meta.json").read_text())
    base = p.baseline_rows()
    rep = p.repeatability() or {}
    curve_path = p.run_dir / "curve.json"
    curve = json.loads(curve_path.read_text()) if curve_path.exists() and p.cfg.curve is not None else {}
    rows = p.folder.rows(SCORED)
    test = [r for r in rows if r.get("split") == "test"]
    train = [r for r in rows if r.get("split") == "train"]
    labels = p.label_cols()
    scores = baseline_scores(train, test, labels)
    return [_aspect_evidence(label, meta, base, test, scores, rep, curve.get("fits") or {}) for label in labels]


def held_out_evidence(train: list[dict], test: list[dict], label_cols: list[str],
                      repeatability: dict | None = None) -> list:
    """The [`csem.report.verdict.AspectEvidence`][] of every label column from records alone, measured as a
    ``csem run`` measures them (`verdict_evidence`): the student's agreement with its 95% interval over
    ``BOOTSTRAP`` resampled sources, the trivial baselines and the paired interval against the best; no
    learning curve.

    Args:
        train: the training records (the system prior and the overlap fit learn from them).
        test: the held-out records scored by the student (``metric.<name>.<aspect>``), with ``doc_id``.
        label_cols: the judge's columns.
        repeatability: ``{"columns": {label: [`csem.meta.repeatability.column_repeatability`][]}}``, or None
            (not measured).

    Returns:
        One `AspectEvidence` per label column.

    Raises:
        MissingInputError: a label column without a student column in ``test``.
    """
    meta = agreement_table(test, label_cols, bootstrap=BOOTSTRAP)
    base = baseline_rows(train, test, label_cols)
    scores = baseline_scores(train, test, label_cols)
    return [_aspect_evidence(label, meta, base, test, scores, repeatability or {}, {}) for label in label_cols]


def _held_out(train: list[dict], dev: list[dict] | None, label_cols: list[str]) -> tuple[list[dict], str]:
    """The dev records that are held-out labelled sources (a ``doc_id`` not among the training records',
    a label) and a line on what was left out or, when none is left, why."""
    if not dev:
        return [], ("no dev records were given (`csem train --dev FILE`, `csem.train(dev=...)`), so the student "
                    "was never compared with its judge on sources it did not learn from: whether it beats the trivial "
                    "baselines (length, extractiveness, the system prior, the overlap fit) is unknown. Give labelled "
                    "candidates of other sources as the dev set, or train in a `csem run` pipeline, which holds "
                    "sources out.")
    seen = {r.get("doc_id") for r in train if r.get("doc_id") is not None}
    labelled = [r for r in dev if any(r.get(c) is not None for c in label_cols)]
    grouped = [r for r in labelled if r.get("doc_id") is not None]
    held = [r for r in grouped if r["doc_id"] not in seen]
    why = ("none of the dev records carries a label (" + ", ".join(label_cols) + ")" if not labelled else
           "the dev records carry no doc_id, so the candidates of one source cannot be told apart (the rule reads "
           "how well the student ranks them)" if not grouped else
           "every dev source (doc_id) also appears in the training data" if not held else "")
    if why:
        return [], why + "; give labelled candidates of sources not in the training data as the dev set."
    left = len(dev) - len(held)
    note = (f"; {left} dev records without a label, a doc_id, or of a training source left out" if left else "")
    if not seen:
        note += "; the training records carry no doc_id, so whether the dev sources are held out is not checked"
    return held, note


def train_verdict(model, train: list[dict], dev: list[dict] | None, label_cols: list[str]) -> tuple[dict, dict | None]:
    """The verdict of a standalone ``csem train`` / [`csem.train`][csem.api.train] on its dev records: the
    rule of [`csem.report.verdict`][] (``where="train"``) on `held_out_evidence` of the dev records of
    sources absent from the training data, scored by ``model``.

    Args:
        model: the trained [`csem.model.EvaluationModel`][].
        train, dev: the training and dev records as trained on (dev None: none given).
        label_cols: the judge's columns.

    Returns:
        ``(verdict, repeatability)``: the metric card's ``verdict`` entry (``status``, ``headline``, ``text``,
        ``source``, ``aspects``; without held-out labelled sources ``status`` None, the headline
        `csem.report.verdict.NO_VERDICT` and the reason in ``text``) and its ``judge_repeatability``
        entry (None where the records carry no ``.repeat`` scores).
    """
    from csem.data.columns import parse_column
    from csem.errors import MissingInputError
    from csem.report.verdict import NO_VERDICT, verdict

    held, note = _held_out(train, dev, label_cols)
    if not held:
        return ({"status": None, "headline": NO_VERDICT, "text": note[0].upper() + note[1:],
                 "source": "csem train"}, _repeat_report(train, dev or [], label_cols))
    # the student's own column only: a metric column the dev file already has is left out of its copy
    plain = [{k: v for k, v in r.items() if getattr(parse_column(k), "kind", None) != "metric"} for r in held]
    test = model.predict(plain).records
    rep = _repeat_report(train, dev, label_cols)
    names = _head_names(label_cols)  # several judges, one head each: each head against its own judge
    try:
        evidence = held_out_evidence(_renamed(train, names), _renamed(test, names), list(names.values()),
                                     {"columns": {names[c]: f for c, f in (rep or {}).get("columns", {}).items()}})
    except MissingInputError as exc:  # a label column without a student head of its aspect
        return {"status": None, "headline": NO_VERDICT, "text": f"{exc}.", "source": "csem train"}, rep
    v = verdict(evidence, where="train")
    sources = len({r["doc_id"] for r in held})
    entry = {"status": v["status"], "headline": v["headline"], "text": v["text"], "aspects": v["aspects"],
             "source": f"csem train's dev records: {len(held)} candidates of {sources} sources not in the training "
                       f"data; they also chose the best epoch, which flatters the student a little{note}"}
    return entry, rep


def _head_names(label_cols: list[str]) -> dict[str, str]:
    """The name the verdict reads each label column under: itself, except a judge's own head of an aspect
    (``judge.quality@a`` under ``combine="heads"``), which becomes an aspect of its own, ``judge.quality-a``,
    so that each head is read against its own judge."""
    from csem.data.columns import format_column, parse_column

    out = {}
    for col in label_cols:
        c = parse_column(col)
        out[col] = col if c is None or c.tag is None else format_column(c.kind, f"{c.aspect}-{c.tag}")
    return out


def _renamed(records: list[dict], names: dict[str, str]) -> list[dict]:
    """Copies of ``records`` with each label column, and the student's head of it
    (``metric.<name>.<aspect>@<tag>``), also under its `_head_names` name; ``records`` itself when no
    name changes."""
    from csem.data.columns import format_column, parse_column

    moved = {c: n for c, n in names.items() if c != n}
    if not moved:
        return records
    heads = {(c.aspect, c.tag): parse_column(n).aspect for c, n in ((parse_column(k), n) for k, n in moved.items())}
    out = []
    for r in records:
        r = dict(r)
        for k in list(r):
            c = parse_column(k)
            if k in moved:
                r[moved[k]] = r[k]
            elif c is not None and c.kind == "metric" and c.side is None and (c.aspect, c.tag) in heads:
                r[format_column("metric", heads[(c.aspect, c.tag)], name=c.name)] = r[k]
        out.append(r)
    return out


def _repeat_report(train: list[dict], dev: list[dict], label_cols: list[str]) -> dict | None:
    """The judge's repeatability from the records' ``<label>.repeat`` scores (`csem annotate --repeatability`)
    in the layout of the card's ``judge_repeatability``, or None where no record carries one."""
    from csem.data.columns import parse_column
    from csem.meta.repeatability import column_repeatability

    both = [*train, *dev]
    cols, sources, cands = {}, set(), 0
    for label in label_cols:
        c = parse_column(label)
        again = str(c.with_side("repeat")) if c is not None else f"{label}.repeat"
        twice = [r for r in both if r.get(again) is not None]
        if twice:
            cols[label] = column_repeatability(both, label, again)
            sources |= {r.get("doc_id") for r in twice}
            cands = max(cands, len(twice))
    if not cols:
        return None
    return {"rendering": "the records' judge.<aspect>.repeat scores", "sources": len(sources), "candidates": cands,
            "columns": cols}


def run_gate_audit(p) -> dict:
    """The acceptability gate on this run's real candidates ([`csem.model.acceptability.gate_audit`][]);
    ``{}`` for a student without a gate."""
    from csem.model import EvaluationModel
    from csem.model.acceptability import gate_audit

    model = EvaluationModel.load(p.run_dir / "model")
    rows = p.folder.rows(SCORED)
    scales = p.scales()
    cols = {}
    for label in p.label_cols():
        a = aspect_of(label)
        lo, hi = scales.get(label, (1.0, 5.0))
        cols[a] = (label, student_col(rows, a), (lo, hi))
    return gate_audit(model.members, rows, model.config.mode, cols)


def run_verdict(p) -> dict:
    """The verdict stage of pipeline ``p``: writes ``verdict.json`` ([`csem.report.verdict.verdict`][] of
    [`verdict_evidence`][csem.pipeline.trust.verdict_evidence]) and ``gate.json`` ([`run_gate_audit`][csem.pipeline.trust.run_gate_audit]),
    and adds them and the judge's repeatability to ``model/metric_card.json`` (and ``.md``)."""
    from csem.model.card import write_card
    from csem.report.verdict import verdict

    v = verdict(verdict_evidence(p))
    gate = run_gate_audit(p)
    write_json(p.run_dir / "verdict.json", v)
    write_json(p.run_dir / "gate.json", gate)
    card_path = p.run_dir / "model" / "metric_card.json"
    card = json.loads(card_path.read_text())
    card["verdict"] = {"status": v["status"], "headline": v["headline"], "text": v["text"],
                       "source": "held-out sources of this csem run (verdict.json)"}
    rep = p.repeatability()
    if rep:
        card["judge_repeatability"] = {"rendering": rep["rendering"], "sources": len(rep["sources"]),
                                       "candidates": rep["candidates"], "columns": rep["columns"]}
    if gate:
        card["gate_audit"] = {a: g["all"] for a, g in gate.items()}
    write_card(p.run_dir / "model", card)
    return {"status": v["status"], "gated": {a: g["all"]["gated"] for a, g in gate.items()},
            "floored": {a: g["all"]["floored"] for a, g in gate.items()}}


def trust_lines(p) -> list[str]:
    """The run's answer to "should I trust the student?" in a few lines for the terminal: the judge's
    repeatability with its interval, the curve's fit, the gate's count and the verdict (empty before the
    verdict stage ran)."""
    path = p.run_dir / "verdict.json"
    if not path.exists():
        return []
    v = json.loads(path.read_text())
    lines = []
    for col, f in ((p.repeatability() or {}).get("columns") or {}).items():
        s = f["summary"]
        ci = "" if not s.get("ci") else f" (95% CI {s['ci'][0]:.2f} to {s['ci'][1]:.2f})"
        r = "n/a" if s["r"] is None else f"{s['r']:.3f}"
        root = "n/a" if s.get("sqrt_r") is None else f"{s['sqrt_r']:.3f}"
        lines.append(f"judge's repeatability, {col}: r = {r}{ci} over {s['n_sources']} sources; sqrt(r) = {root}")
    curve_path = p.run_dir / "curve.json"
    fits = (json.loads(curve_path.read_text()).get("fits") or {}) if curve_path.exists() else {}
    for a, f in fits.items():
        if f:
            ci = "" if not f.get("gain_ci") else f" (95% CI {f['gain_ci'][0]:+.3f} to {f['gain_ci'][1]:+.3f})"
            need = "" if f.get("labels_to_target") is None else f"; within 0.05 of sqrt(r) at ~{f['labels_to_target']:,.0f} labels"
            lines.append(f"learning curve, {a}: {f['gain_per_doubling']:+.3f} per doubling of the labels{ci}, "
                         f"{f['trend']}{need}")
    gate_path = p.run_dir / "gate.json"
    for a, g in (json.loads(gate_path.read_text()) if gate_path.exists() else {}).items():
        h, t = g["held-out"], g["training"]
        lines.append(f"acceptability gate, {a}: floored {h['floored']} of {h['candidates']} held-out and "
                     f"{t['floored']} of {t['candidates']} training candidates ({h['floored_above_median'] + t['floored_above_median']} "
                     "of them rated above the judge's median)")
    lines.append(f"verdict: {v['headline']}")
    return lines
