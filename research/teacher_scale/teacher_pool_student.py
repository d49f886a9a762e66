"""A student distilled from the teacher pool, saved as a model folder: the starting point of a warm start
(``TrainConfig.init``, ``csem train --init``; issue 24: "the main job's student starts from the
pretrained point").

Data: the teacher pool (``benchmarks/data/teacher_pool/``; ``bench_teacher_scale.load``): the first
``--size`` judged training candidates (news summaries of SummEval, REALSumm, Newsroom and QAGS training
articles, judged by the pool's Qwen2.5-Coder-0.5B judge on the reference-free relevance rubric, 1-5,
probs mode). The pool's test articles are not trained on; the student's summary-level Spearman with
the teacher on them is reported beside length (the baseline a within-article figure must beat).

Run:  python benchmarks/teacher_pool_student.py --model-out /tmp/pool-student [--size 3876] [--extended
      --extension-form hf-bf16] [--recipe "top 2 layers, 3 epochs at lr 1e-4"] [--train-seed 12] [--ship NAME]
      [--exclude-dataset summeval]
Out:  the model folder (``--model-out``; with ``--ship NAME`` also the shipped ``package:NAME``) and ``benchmarks/results/teacher_pool_student.{json,md}``
"""

from __future__ import annotations

import json
import time

from harness import fmt, log, machine, now, parser, setup, write_results

import teacher_pool as tp
from bench_teacher_scale import correlations, fit_student, load, provenance_path, student_scores


def describe(model, prov: dict, train: list[dict], recipe: str) -> None:
    """Write the teacher and the training data into the student's metric card (what a warm start from
    it records as its origin)."""
    model.card["distilled_from"] = {**(model.card.get("distilled_from") or {}), "judge": prov["judge"],
                                    "rubric": prov["rubric"]["id"]}
    datasets = sorted({r["dataset"] for r in train})
    model.card["notes"] = (f"csem's teacher pool (benchmarks/data/teacher_pool): {len(train)} judged existing "
                           f"summaries of {len({r['doc_id'] for r in train})} training articles of "
                           f"{', '.join(datasets)}; the pool's test articles were not trained on. Recipe: {recipe}.")


def without_dataset(train: list[dict], dataset: str) -> tuple[list[dict], int]:
    """``(kept, left_out)``: ``train`` without the candidates whose source article (the pool's article
    key, which joins the same article across datasets) is an article of ``dataset``, in any split."""
    sources, cands = tp.load_pool(extended=True)
    banned = tp.articles_of(dataset, sources, cands)
    if not banned:
        raise SystemExit(f"--exclude-dataset: no candidate of dataset '{dataset}' in the pool")
    kept = [r for r in train if sources[r["doc_id"]]["article"] not in banned]
    return kept, len(train) - len(kept)


def main() -> None:
    ap = parser(__doc__, out="teacher_pool_student", threads=2)
    ap.add_argument("--model-out", required=True, help="model folder to write")
    ap.add_argument("--size", type=int, default=None, help="training labels (first in judging order; default all)")
    ap.add_argument("--extended", action="store_true", help="with the pool's rule-made extension candidates")
    ap.add_argument("--extension-form", default=None, help="the extension's labels from this form first (hf-bf16)")
    ap.add_argument("--recipe", default="top 2 layers, 3 epochs at lr 1e-4",
                    help="a recipe of bench_teacher_pool_cv.RECIPES")
    ap.add_argument("--train-seed", type=int, default=12)
    ap.add_argument("--exclude-dataset", default=None, help="leave out every training candidate whose article "
                    "is an article of this dataset (e.g. summeval: a start that has never seen SummEval's "
                    "articles or summaries, for the SummEval student benchmark)")
    ap.add_argument("--ship", default=None, help="also save it, base-relative (float16, only what training "
                    "changed), as the shipped student package:NAME (src/csem/model/students/NAME)")
    args = ap.parse_args()
    setup(args)
    from bench_teacher_pool_cv import RECIPES

    if args.recipe not in RECIPES:
        ap.error(f"unknown recipe '{args.recipe}' (known: {', '.join(RECIPES)})")
    prov = json.loads(provenance_path().read_text())
    col = f"judge.{prov['rubric']['aspect']}"
    test, train, prov = load(col, "", args.extended, args.extension_form)
    train = train[:args.size] if args.size else train
    excluded = 0
    if args.exclude_dataset:
        train, excluded = without_dataset(train, args.exclude_dataset)
        log(f"left out {excluded} training candidates on {args.exclude_dataset}'s articles")
    options = dict(RECIPES[args.recipe])
    model_options = options.pop("model", None)
    log(f"training on {len(train)} labels ({args.recipe}, seed {args.train_seed})")
    model, secs = fit_student(train, col, args.train_seed, args.threads, {}, options, model_options)
    describe(model, prov, train, args.recipe)
    model.save(args.model_out)
    if args.ship:
        from csem.model.pretrained import PACKAGED

        model.save(PACKAGED / args.ship, base_relative=True)
    rows = [dict(r, **{"metric.student": v, "metric.length": float(len(r["candidate"].split()))})
            for r, v in zip(test, student_scores(model, test))]
    student = correlations(rows, "metric.student", col)
    length = correlations(rows, "metric.length", col)
    res = {"meta": {"date": now(), "machine": machine(), "threads": args.threads, "seed": args.train_seed,
                    "recipe": args.recipe, "options": RECIPES[args.recipe], "labels": len(train),
                    "extended": args.extended, "extension_form": args.extension_form,
                    "excluded_dataset": args.exclude_dataset, "excluded_candidates": excluded,
                    "teacher": {"judge": prov["judge"], "rubric": prov["rubric"]["id"]},
                    "train_seconds": round(secs, 1), "model_out": args.model_out,
                    "sources": len({r["doc_id"] for r in train}),
                    "datasets": sorted({r["dataset"] for r in train})},
           "test": {"student": student, "length": length}}
    md = [f"# A student distilled from the teacher pool ({len(train)} labels)", "",
          f"{args.recipe}, seed {args.train_seed}; teacher {prov['judge']} / {prov['rubric']['id']}; "
          f"{len(train)} training labels on {res['meta']['sources']} training articles "
          f"({', '.join(res['meta']['datasets'])}); trained in {secs:.0f} s; {machine()}; {now()}.", "",
          "Test pool (articles never trained on), with the teacher:", "",
          "| scorer | summary Spearman | summary Kendall | dataset Spearman |", "| --- | --- | --- | --- |"]
    for name, c in (("student", student), ("length (words)", length)):
        md.append(f"| {name} | {fmt(c['summary']['spearman'])} | {fmt(c['summary']['kendall'])} | "
                  f"{fmt(c['dataset']['spearman'])} |")
    write_results(args.out, res, md)
    log(f"student {fmt(student['summary']['spearman'])}, length {fmt(length['summary']['spearman'])}; "
        f"wrote {args.model_out}")


if __name__ == "__main__":
    main()
