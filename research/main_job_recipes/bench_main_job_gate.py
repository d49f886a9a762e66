"""The main job's candidates cut at max_tokens, the judge and the student's acceptability gate (issue 24).

For each finished main-job run folder given (``csem run package:summarization.yaml --run-dir DIR``), side by
side in one run:

* how the judge rates the generated candidates that end mid-sentence (no final ``. ! ?``, optionally
  followed by closing quotes or brackets) against the complete ones: count and mean judge score per
  aspect (all 24 articles);
* the run's student (``DIR/model``) on the held-out test articles, summary-level Spearman with the judge
  per aspect, scored twice: as shipped, and with its acceptability gate switched off
  (:mod:`csem.model.acceptability`: an unfitted gate passes every score through), with the number of
  test candidates the gate lowers;
* the trivial baselines the run itself wrote on the same test articles (``DIR/baselines.json``: length,
  extractiveness, system prior).

Run:  python benchmarks/bench_main_job_gate.py --run-dirs /work/runs/mj_warm,/work/runs/mj_final
Out:  benchmarks/results/main_job_gate.{json,md}
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench_main_job_recipe import summary_spearman
from harness import fmt, log, machine, markdown_table, now, parser, setup, write_results

from csem.collect.sampler import SENTENCE_END as ENDS_SENTENCE  # trim_to_sentence's rule


def cut_vs_complete(records: list[dict], labels: list[str]) -> dict:
    """Generated candidates (not the references) split by whether they end a sentence: count and mean
    judge score per label."""
    gen = [r for r in records if r.get("system_id") != "reference"]
    groups = {"cut": [r for r in gen if not ENDS_SENTENCE.search(r["candidate"].rstrip())],
              "complete": [r for r in gen if ENDS_SENTENCE.search(r["candidate"].rstrip())]}
    return {g: {"n": len(rows), **{l: statistics.fmean(r[l] for r in rows) if rows else None for l in labels}}
            for g, rows in groups.items()}


def gate_on_off(run_dir: Path, test: list[dict], labels: list[str]) -> dict:
    """The run's student on ``test``: summary-level Spearman per label with the gate as shipped and
    switched off, and how many candidates the gate lowered (any aspect)."""
    from csem.model import EvaluationModel

    model = EvaluationModel.load(run_dir / "model")
    out: dict = {}
    scores = {}
    for setting in ("gate on", "gate off"):
        if setting == "gate off":
            for member in model.members:
                if member.gate is not None:
                    member.gate.fitted.zero_()
        cols = model.predict(test, name="student").scores
        scores[setting] = cols
        out[setting] = {}
        for label in labels:
            aspect = label.rsplit(".", 1)[-1]
            (col,) = [c for c in cols if c.endswith("." + aspect)]
            rows = [dict(r, **{col: v}) for r, v in zip(test, cols[col])]
            out[setting][label] = summary_spearman(rows, col, label)
    on, off = scores["gate on"], scores["gate off"]
    out["lowered"] = sum(any(on[c][i] < off[c][i] - 1e-9 for c in on) for i in range(len(test)))
    return out


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="main_job_gate", threads=2, seed=None)
    ap.add_argument("--run-dirs", required=True, help="finished main-job run folders, comma-separated")
    args = ap.parse_args()
    dirs = [Path(d) for d in args.run_dirs.split(",") if d]
    for d in dirs:
        missing = [n for n in ("labelled.jsonl", "scored.jsonl", "model", "baselines.json") if not (d / n).exists()]
        if missing:
            ap.error(f"{d}: not a finished main-job run folder (no {', '.join(missing)})")
    setup(args)
    res: dict = {"meta": {"date": now(), "machine": machine(), "threads": args.threads}, "runs": {}}
    md = ["# The main job's cut candidates, the judge and the acceptability gate (issue 24)", "",
          f"{res['meta']['date']}, {machine()}. Cut: a generated candidate that does not end a sentence. "
          "Student: summary-level Spearman with the judge on the held-out test articles.", ""]
    for d in dirs:
        labelled = [json.loads(line) for line in (d / "labelled.jsonl").read_text().splitlines() if line.strip()]
        scored = [json.loads(line) for line in (d / "scored.jsonl").read_text().splitlines() if line.strip()]
        labels = sorted(k for k in labelled[0] if k.startswith("judge.") and k.count(".") == 1)
        test = [r for r in scored if r.get("split") == "test"]
        run = {"cut_vs_complete": cut_vs_complete(labelled, labels), "student": gate_on_off(d, test, labels),
               "baselines": {f"{b['scorer']} / {b['aspect']}": b["spearman"]
                             for b in json.loads((d / "baselines.json").read_text())
                             if b.get("level") == "summary"},
               "test_candidates": len(test)}
        res["runs"][str(d)] = run
        log(f"{d}: {run['cut_vs_complete']}; student {run['student']}")
        cvc = run["cut_vs_complete"]
        md += [f"## `{d}`", "",
               markdown_table([[g, cvc[g]["n"], *[fmt(cvc[g][l]) for l in labels]] for g in ("cut", "complete")],
                              ["generated candidates", "n", *[f"mean {l}" for l in labels]]), "",
               markdown_table([[s, *[fmt(run["student"][s][l]) for l in labels]] for s in ("gate on", "gate off")]
                              + [[f"baseline: {scorer}", *[fmt(run["baselines"].get(f"{scorer} / {l.split('.', 1)[1]}"))
                                                           for l in labels]]
                                 for scorer in ("length", "extractiveness", "system prior")],
                              ["student on the test articles", *labels]), "",
               f"The gate lowered {run['student']['lowered']} of the {len(test)} test candidates.", ""]
    write_results(args.out, res, md)


if __name__ == "__main__":
    main()
