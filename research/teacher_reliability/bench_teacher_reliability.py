"""How well can any student track the teacher? Its parallel-form reliability on the teacher pool (issue 23).

The teacher pool (``benchmarks/data/teacher_pool``) holds one judge's scores of every candidate under one
wording of the aspect (the pool's rubric). A second *form* of the same aspect, another wording judged
by the same model (``FORM=... RUBRIC=... bash benchmarks/teacher_pool_judge.sh``; stored under
``forms/<NAME>/``), measures the same thing with different wording noise. This benchmark reads both on
the held-out test candidates and reports:

* **reliability**: the two forms' agreement (summary-level Spearman / Kendall within each source, as the
  scale benchmark reports the student, and dataset-level), overall and per dataset;
* **ceiling**: ``sqrt(r)``, where ``r`` is that agreement: by classical test theory (Spearman 1904, the
  correction for attenuation; Lord & Novick 1968, ch. 3) a score that follows only what the two
  wordings share, however well, correlates with one form at most ``sqrt(r)``; anything above it must
  reproduce the wording's own noise. Summary-level figures are means of per-source rank
  correlations, so the bound is approximate;
* the **students** of the scale benchmark's largest point (``csem train`` defaults on every training
  label of the pool's form, ``--seeds``) against the form they learned, the other form and the two
  forms' mean (a more reliable teacher);
* the trivial baselines of the scale benchmark (length, extractiveness, the overlap features fitted on
  the training labels) against each form, and each form's agreement with the datasets' human scores
  on the test candidates.

Run:  python benchmarks/bench_teacher_reliability.py --form geval-relevance [--seeds 12,13,14] [--threads 1]
      [--architecture unified --out benchmarks/results/teacher_reliability_unified]
Out:  benchmarks/results/teacher_reliability.{json,md}
"""

from __future__ import annotations

import json
import math
import statistics
import time

import bench_teacher_scale as ts
import teacher_pool as tp
from harness import fmt, log, machine, now, parser, setup, write_results

COL = "judge.relevance"  # the pool's column (its rubric's aspect)
OTHER = "form.other"  # the second form's score, on the same records
MEAN = "form.mean"  # the mean of the two forms


def with_form(test: list[dict], form: str) -> tuple[list[dict], int]:
    """The test records that the other form scored too, with its score under :data:`OTHER` and the two
    forms' mean under :data:`MEAN`; and how many test records it has not scored (or left missing)."""
    got = tp.judged(form)
    out, skipped = [], 0
    for r in test:
        j = got.get(r["id"])
        if j is None or j["score"] is None:
            skipped += 1
            continue
        out.append(dict(r, **{OTHER: float(j["score"]), MEAN: (r[COL] + float(j["score"])) / 2}))
    return out, skipped


def per_dataset(records: list[dict], metric: str, target: str) -> dict:
    """Summary-level Spearman per dataset (``None`` where it is undefined)."""
    out = {}
    for d in sorted({r["dataset"] for r in records}):
        c = ts.correlations([r for r in records if r["dataset"] == d], metric, target)
        out[d] = c["summary"]["spearman"]
    return out


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="teacher_reliability", threads=1, seed=None)
    ap.add_argument("--form", default="geval-relevance", help="the second form (forms/<NAME>/ of the pool)")
    ap.add_argument("--seeds", default="12,13,14", help="students' seeds ('' = no students)")
    ap.add_argument("--architecture", default=None, help="the students' architecture (ModelConfig.architecture; "
                    "default: csem train's): e.g. unified, the cross-encoder")
    args = ap.parse_args()
    setup(args)
    t_start = time.perf_counter()
    test, train, prov = ts.load(COL)
    form_prov_path = tp.form_dir(args.form) / "provenance.json"
    if not form_prov_path.exists():
        raise SystemExit(f"{form_prov_path}: no such form (judge it with FORM={args.form} "
                         "bash benchmarks/teacher_pool_judge.sh, then teacher_pool.py provenance --form ...)")
    form_prov = json.loads(form_prov_path.read_text())
    rows, skipped = with_form(test, args.form)
    if len(rows) < 100:
        raise SystemExit(f"form {args.form}: {len(rows)} test candidates scored; judge at least its chunks 0-10")
    log(f"form {args.form}: {len(rows)} of {len(test)} test candidates scored ({skipped} not)")

    res: dict = {"meta": {"date": now(), "machine": machine(), "threads": args.threads},
                 "forms": {"pool": {"judge": prov["judge"], "rubric": prov["rubric"]["id"], "column": COL},
                           args.form: {"judge": form_prov["judge"], "rubric": form_prov["rubric"]["id"]}},
                 "test_candidates": len(rows), "test_candidates_not_scored": skipped}
    agree = ts.correlations(rows, OTHER, COL)
    r = agree["summary"]["spearman"]
    res["reliability"] = {"all": agree, "by_dataset": per_dataset(rows, OTHER, COL)}
    res["ceiling"] = {"summary_spearman": math.sqrt(r) if r and r > 0 else 0.0,
                      "rule": "sqrt(parallel-form reliability), Spearman 1904 correction for attenuation"}
    log(f"reliability: summary-level Spearman {fmt(r)} -> ceiling {fmt(res['ceiling']['summary_spearman'])}")

    res["teacher_vs_human"] = {"pool": ts.teacher_vs_human(rows, COL), args.form: ts.teacher_vs_human(rows, OTHER),
                               "mean of the two forms": ts.teacher_vs_human(rows, MEAN)}
    targets = {"pool form (learned)": COL, f"{args.form} form": OTHER, "mean of the two forms": MEAN}
    # the trivial baselines against every target; the least-squares fit of the overlap features is
    # fitted on the pool form's training labels (what a student learns from) and scored once
    import numpy as np

    x_test = ts.features(rows)
    x_tr = np.c_[ts.features(train), np.ones(len(train))]
    w, *_ = np.linalg.lstsq(x_tr, np.array([t[COL] for t in train]), rcond=None)
    scored = [dict(x, **{"metric.ls": float(p)}) for x, p in zip(rows, np.c_[x_test, np.ones(len(rows))] @ w)]
    res["baselines"] = {}
    for tname, tcol in targets.items():
        b = {k: v["summary"]["spearman"] for k, v in ts.fixed_baselines(rows, tcol).items()
             if not k.startswith("overlap feature alone")}
        b["overlap features, least squares on the pool form's training labels"] = \
            ts.correlations(scored, "metric.ls", tcol)["summary"]["spearman"]
        res["baselines"][tname] = b
    write_results(args.out, res, report(res))

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    model_options = {"architecture": args.architecture} if args.architecture else {}
    res["students"] = {"labels": len(train), "recipe": "csem train defaults (as the scale benchmark's largest point)"
                       + (f", architecture {args.architecture}" if args.architecture else ""),
                       "model_options": model_options, "runs": []}
    lower_cache: dict = {}
    for seed in seeds:
        model, secs = ts.fit_student(train, COL, seed, args.threads, lower_cache, model_options=model_options)
        scores = ts.student_scores(model, rows)
        srows = [dict(x, **{"metric.student": s}) for x, s in zip(rows, scores)]
        run = {"seed": seed, "train_seconds": secs,
               "spearman": {tname: ts.correlations(srows, "metric.student", tcol)["summary"]["spearman"]
                            for tname, tcol in targets.items()},
               "by_dataset": {tname: per_dataset(srows, "metric.student", tcol) for tname, tcol in targets.items()}}
        res["students"]["runs"].append(run)
        log(f"student seed {seed} ({secs:.0f} s): " + ", ".join(f"{k} {fmt(v)}" for k, v in run["spearman"].items()))
        write_results(args.out, res, report(res))
    if seeds:
        res["students"]["mean"] = {t: statistics.fmean(r["spearman"][t] for r in res["students"]["runs"])
                                   for t in targets}
        res["students"]["sd"] = {t: (statistics.stdev(r["spearman"][t] for r in res["students"]["runs"])
                                     if len(seeds) > 1 else None) for t in targets}
    res["seconds"] = time.perf_counter() - t_start
    write_results(args.out, res, report(res))


def report(res: dict) -> list[str]:
    rel = res["reliability"]
    md = ["# The teacher's parallel-form reliability on the teacher pool (issue 23)", "",
          f"{res['meta']['date']}, {res['meta']['machine']}. Test candidates scored by both forms: "
          f"{res['test_candidates']} ({res['test_candidates_not_scored']} of the test pool not scored by the second form).",
          "",
          "| form | judge | rubric |", "| --- | --- | --- |"]
    md += [f"| {k} | {v['judge']} | {v['rubric']} |" for k, v in res["forms"].items()]
    md += ["", "## Reliability: the two forms' agreement on the same candidates", "",
           "| | summary-level Spearman | summary-level Kendall | dataset-level Spearman |", "| --- | --- | --- | --- |",
           f"| all | {fmt(rel['all']['summary']['spearman'])} | {fmt(rel['all']['summary']['kendall'])} | "
           f"{fmt(rel['all']['dataset']['spearman'])} |"]
    md += [f"| {d} | {fmt(v)} | | |" for d, v in rel["by_dataset"].items()]
    md += ["", f"Ceiling for a student that learns what the two wordings share: sqrt({fmt(rel['all']['summary']['spearman'])}) "
               f"= **{fmt(res['ceiling']['summary_spearman'])}** summary-level Spearman with either form "
               "(correction for attenuation; approximate for a mean of per-source rank correlations).", ""]
    st = res.get("students") or {}
    targets = list(res["baselines"])
    md += ["## Students and baselines against each form (summary-level Spearman, test candidates)", "",
           "| scorer | " + " | ".join(targets) + " |", "| --- |" + " --- |" * len(targets)]
    if st.get("runs"):
        sd = st.get("sd") or {}
        mean = st.get("mean") or {t: statistics.fmean(r["spearman"][t] for r in st["runs"]) for t in targets}
        arch = (st.get("model_options") or {}).get("architecture")
        md.append(f"| student{', ' + arch if arch else ''}, {st['labels']} pool-form labels ({len(st['runs'])} seeds) | "
                  + " | ".join(f"{fmt(mean[t])}" + (f" ± {fmt(sd[t])}" if sd.get(t) is not None else "")
                               for t in targets) + " |")
    names = list(next(iter(res["baselines"].values())))
    for n in names:
        md.append(f"| {n} | " + " | ".join(fmt(res["baselines"][t].get(n)) for t in targets) + " |")
    md += ["", "## Each form against the datasets' human scores (test candidates, summary level)", "",
           "| dataset | aspect | " + " | ".join(res["teacher_vs_human"]) + " |",
           "| --- | --- |" + " --- |" * len(res["teacher_vs_human"])]
    first = next(iter(res["teacher_vs_human"].values()))
    for d, v in first.items():
        for a in v["aspects"]:
            md.append(f"| {d} | {a} | " + " | ".join(
                fmt(res["teacher_vs_human"][f][d]["aspects"][a]["spearman"]) for f in res["teacher_vs_human"]) + " |")
    if "seconds" in res:
        md += ["", f"Total {res['seconds'] / 60:.1f} min."]
    return md


if __name__ == "__main__":
    main()
