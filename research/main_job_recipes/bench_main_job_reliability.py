"""How well could any student agree with the main job's judge? Its parallel-form reliability (issue 24).

The main job (``csem run package:summarization.yaml``) judges every candidate with one wording per aspect
(``csem/summ-coherence-ref-free``, ``csem/summ-relevance-ref-free``) and asks the student to agree with
those scores on 6 held-out articles (target 0.5, summary-level Spearman). This benchmark judges the same
candidates again, with the same local judge, under a second wording of each aspect (G-Eval's SummEval
rubrics, ``geval/summeval-coherence`` and ``geval/summeval-relevance``; through ``csem annotate``, cached
and resumable) and reports, per aspect:

* **reliability** ``r``: summary-level Spearman (within each article, averaged over articles) between the
  two wordings, on the 6 test articles and on all 24, with a 95% interval over resampled articles
  (:func:`csem.meta.bootstrap_ci`);
* **ceiling** ``sqrt(r)``: by the correction for attenuation (Spearman 1904; Lord & Novick 1968, ch. 3) a
  score that follows only what the two wordings share correlates with one wording at most ``sqrt(r)``;
  more needs the wording's own noise (summary-level figures are means of per-article rank correlations,
  so the bound is approximate) — the figure ``bench_teacher_reliability.py`` gives for the teacher pool;
* the run's **student** and the candidate's length against each wording and against the two wordings'
  mean (a more reliable judge), on the test articles.

Run:  python benchmarks/bench_main_job_reliability.py --run-dir RUN [--form-out DIR]
      (RUN: a finished main-job folder; the second wording's labels go to --form-out, default RUN/form-geval)
Out:  benchmarks/results/main_job_reliability.{json,md}
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

from harness import fmt, log, machine, now, parser, setup, write_results

#: the second wording of each aspect the main job judges
SECOND = {"coherence": "geval/summeval-coherence", "relevance": "geval/summeval-relevance"}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judge_second_form(run_dir: Path, out_dir: Path) -> tuple[Path, float]:
    """Judge the run's candidates under :data:`SECOND` with the run's judge (``csem annotate``, cached
    beside ``out_dir``'s file, resumable); returns the labelled file and the seconds this call took."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "labelled.jsonl"
    cmd = ["csem", "annotate", "--data", str(run_dir / "candidates.jsonl"), "--rubric", ",".join(SECOND.values()),
           "--judge", "local", "--mode", "probs", "--out", str(out)]
    log("running: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        sys.exit(f"csem annotate exited {proc.returncode}; no figures written (re-run to resume)")
    return out, time.perf_counter() - t0


def summary(x: list, y: list, groups: list) -> dict:
    """Summary-level Spearman of ``x`` with ``y`` and its 95% interval over resampled articles."""
    from csem.meta import bootstrap_ci, correlate

    rho = correlate(x, y, level="summary", method="spearman", groups=groups)
    ci = bootstrap_ci(x, y, level="summary", method="spearman", groups=groups, n=1000, seed=0)
    ok = lambda v: None if v is None or math.isnan(v) else round(v, 4)  # noqa: E731
    return {"spearman": ok(rho.value), "ci": [ok(ci.low), ok(ci.high)], "articles": rho.n_groups,
            "skipped": rho.n_skipped, "pairs": rho.n_pairs}


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="main_job_reliability", seed=None)
    ap.add_argument("--run-dir", type=Path, required=True, help="a finished main-job run folder")
    ap.add_argument("--form-out", type=Path, default=None, help="where the second wording's labels go "
                    "(default RUN/form-geval)")
    args = ap.parse_args()
    setup(args)
    run = args.run_dir
    for name in ("candidates.jsonl", "labelled.jsonl", "scored.jsonl"):
        if not (run / name).is_file():
            sys.exit(f"{run}: no {name} (run the main job there first)")
    labelled, seconds = judge_second_form(run, args.form_out or run / "form-geval")
    second = {r["id"]: r for r in read_jsonl(labelled)}
    scored = read_jsonl(run / "scored.jsonl")
    from csem.pipeline.agreement import student_col

    res: dict = {"meta": {"date": now(), "machine": machine(), "run_dir": str(run), "second_form": SECOND,
                          "second_form_seconds": round(seconds, 1), "second_form_file": str(labelled)},
                 "aspects": {}}
    for aspect, rubric in SECOND.items():
        a_col = b_col = f"judge.{aspect}"  # the same column name, read from the two labelled files
        rows = [r for r in scored if r.get(a_col) is not None and second.get(r["id"], {}).get(b_col) is not None]
        missing = sum(1 for r in scored if second.get(r["id"], {}).get(b_col) is None)
        test = [r for r in rows if r.get("split") == "test"]
        s_col = student_col(scored, aspect)
        a = lambda rs: [r[a_col] for r in rs]  # noqa: E731
        b = lambda rs: [second[r["id"]][b_col] for r in rs]  # noqa: E731
        g = lambda rs: [r["doc_id"] for r in rs]  # noqa: E731
        mean = lambda rs: [(x + y) / 2 for x, y in zip(a(rs), b(rs))]  # noqa: E731
        length = lambda rs: [float(len(r["candidate"].split())) for r in rs]  # noqa: E731
        student = lambda rs: [r[s_col] for r in rs]  # noqa: E731
        rel_test, rel_all = summary(a(test), b(test), g(test)), summary(a(rows), b(rows), g(rows))
        res["aspects"][aspect] = {
            "first_form": f"the run's rubric (judge.{aspect})", "second_form": rubric, "missing": missing,
            "reliability": {"test": rel_test, "all": rel_all},
            "ceiling": {k: (round(math.sqrt(v["spearman"]), 4) if v["spearman"] and v["spearman"] > 0 else None)
                        for k, v in (("test", rel_test), ("all", rel_all))},
            "student": {"first": summary(student(test), a(test), g(test)),
                        "second": summary(student(test), b(test), g(test)),
                        "mean": summary(student(test), mean(test), g(test))},
            "length": {"first": summary(length(test), a(test), g(test)),
                       "second": summary(length(test), b(test), g(test))},
        }
        log(f"{aspect}: two wordings agree {fmt(rel_test['spearman'])} on the test articles, "
            f"{fmt(rel_all['spearman'])} on all; student vs the run's wording {fmt(res['aspects'][aspect]['student']['first']['spearman'])}")
    md = ["# The main job's judge: two wordings of each aspect (parallel-form reliability)", "",
          f"{now()}; {machine()}; run folder `{run}`; the second wording judged by `csem annotate` in "
          f"{seconds:.0f} s (0 s when cached). Summary-level Spearman (within each article, averaged), "
          "95% interval over 1,000 resamples of the articles.", "",
          "| aspect | two wordings, 6 test articles | two wordings, all 24 | ceiling sqrt(r), test / all | "
          "student vs run's wording | student vs second | student vs mean of both | length vs run's | length vs second |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    cell = lambda d: f"{fmt(d['spearman'])} ({fmt(d['ci'][0])} to {fmt(d['ci'][1])})"  # noqa: E731
    for aspect, d in res["aspects"].items():
        md.append(f"| {aspect} | {cell(d['reliability']['test'])} | {cell(d['reliability']['all'])} | "
                  f"{fmt(d['ceiling']['test'])} / {fmt(d['ceiling']['all'])} | {cell(d['student']['first'])} | "
                  f"{cell(d['student']['second'])} | {cell(d['student']['mean'])} | {cell(d['length']['first'])} | "
                  f"{cell(d['length']['second'])} |")
    write_results(args.out, res, md)
    log(f"wrote {args.out}.json / .md")


if __name__ == "__main__":
    main()
