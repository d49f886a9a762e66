"""An initial student for the main job distilled from the main job's own judge (issue 24).

The main job's student starts from a shipped student (``train.options.init``). The first one,
``package:news-relevance-minilm``, learned a *different* judge (Qwen2.5-Coder-0.5B) on the teacher pool.
This script distils the main job's own judge instead: the local Qwen2.5-Coder-1.5B judge (``--judge
local``, as ``annotate.judge: local`` in ``package:summarization.yaml``) on the job's reference-free
relevance rubric (``csem/summ-relevance-ref-free``), probs mode, over existing news summaries:

* **Texts**: REALSumm training articles of csem's teacher pool (``benchmarks/data/teacher_pool``; the pool's
  test articles and every article that is also a SummEval article are left out, so SummEval stays clean
  for evaluation), whole articles in a seeded order until ``--size`` candidates (all of an article's
  summaries together, so the judge evaluates each article's prompt prefix once). Human scores are not read.
* **Judging**: ``csem annotate`` (cached beside ``--work``'s labelled file, resumable: a killed run
  re-judges only what is missing).
* **Training**: ``csem train`` with the teacher pool's cross-validated recipe (the top 2 encoder layers,
  3 epochs at lr 1e-4, overlap features, csem train's other defaults), seed ``--seed``.
* ``--ship NAME``: also saved base-relative as ``package:NAME`` (``src/csem/model/students/NAME``).

Run:  python benchmarks/main_job_init.py --work /work/init15 [--size 960] [--seed 12] [--ship NAME]
Out:  ``--work``/{cands.jsonl, labelled.jsonl, student/}; ``benchmarks/results/main_job_init.{json,md}``
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from harness import log, machine, now, parser, setup, write_results

import teacher_pool as tp

RUBRIC = "csem/summ-relevance-ref-free"
DATASET = "realsumm"


def select(size: int, seed: int = 0) -> list[dict]:
    """Candidates of whole REALSumm training articles of the pool (no test article, no SummEval article),
    articles in a ``seed``-shuffled order, until at least ``size`` candidates; records with ``id``,
    ``doc_id`` (the pool's source id), ``system_id``, ``source``, ``candidate``."""
    sources, cands = tp.load_pool()
    summeval = tp.articles_of("summeval", sources, cands)
    by: dict[str, list[dict]] = collections.defaultdict(list)
    for c in cands:
        if c["split"] == "train" and c["dataset"] == DATASET and sources[c["source_id"]]["article"] not in summeval:
            by[c["source_id"]].append(c)
    order = sorted(by)
    random.Random(seed).shuffle(order)
    out: list[dict] = []
    for sid in order:
        if len(out) >= size:
            break
        out += [{"id": c["id"], "doc_id": sid, "system_id": c["system_id"], "source": sources[sid]["text"],
                 "candidate": c["candidate"]} for c in by[sid]]
    return out


def run(cmd: list[str]) -> float:
    log("running: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} {cmd[1]} exited {proc.returncode} (re-run to resume)")
    return time.perf_counter() - t0


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="main_job_init", threads=2, seed=None)
    ap.add_argument("--work", type=Path, required=True, help="folder for the candidates, labels and student")
    ap.add_argument("--size", type=int, default=960, help="candidates to judge (whole articles)")
    ap.add_argument("--seed", type=int, default=12, help="training seed")
    ap.add_argument("--ship", default=None, help="also save it base-relative as package:NAME")
    args = ap.parse_args()
    setup(args)
    args.work.mkdir(parents=True, exist_ok=True)
    recs = select(args.size)
    cands = args.work / "cands.jsonl"
    cands.write_text("".join(json.dumps(r) + "\n" for r in recs))
    labelled, student = args.work / "labelled.jsonl", args.work / "student"
    judge_s = run(["csem", "annotate", "--data", str(cands), "--rubric", RUBRIC, "--judge", "local", "--mode", "probs",
                   "--out", str(labelled)])
    train_s = run(["csem", "train", "--data", str(labelled), "--label-col", "judge.relevance", "--mode", "ref-free",
                   "--epochs", "3", "--lr", "1e-4", "--head-lr", "1e-4", "--seed", str(args.seed),
                   "--threads", str(args.threads), "--out", str(student), "--name", "news-relevance-1.5b"])
    from csem.model import EvaluationModel

    model = EvaluationModel.load(student)
    model.card["notes"] = (f"Distilled from the main job's judge (local Qwen2.5-Coder-1.5B, {RUBRIC}, probs) on "
                           f"{len(recs)} existing summaries of {len({r['doc_id'] for r in recs})} REALSumm training "
                           "articles of csem's teacher pool (no SummEval article, no pool test article); "
                           "benchmarks/main_job_init.py. Recipe: top 2 layers, 3 epochs at lr 1e-4.")
    model.save(student)
    if args.ship:
        from csem.model.pretrained import PACKAGED

        model.save(PACKAGED / args.ship, base_relative=True)
    res = {"meta": {"date": now(), "machine": machine(), "threads": args.threads, "seed": args.seed,
                    "rubric": RUBRIC, "judge": "local (Qwen2.5-Coder-1.5B-Instruct GGUF)", "dataset": DATASET,
                    "candidates": len(recs), "articles": len({r["doc_id"] for r in recs}),
                    "annotate_seconds_this_call": round(judge_s, 1), "train_seconds": round(train_s, 1),
                    "student": str(student), "shipped": args.ship}}
    write_results(args.out, res, [f"# An initial student from the main job's judge", "",
                                  f"{now()}; {machine()}; {len(recs)} REALSumm summaries of "
                                  f"{res['meta']['articles']} training articles judged by the local 1.5B judge "
                                  f"({RUBRIC}, probs; this call {judge_s:.0f} s, 0 when cached); trained "
                                  f"(top 2 layers, 3 epochs at lr 1e-4, seed {args.seed}) in {train_s:.0f} s"
                                  + (f"; shipped as package:{args.ship}" if args.ship else "") + "."])
    log(f"wrote {student}")


if __name__ == "__main__":
    main()
