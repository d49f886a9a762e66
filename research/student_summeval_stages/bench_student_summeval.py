"""Distil published GPT-4 ratings of SummEval into small students, honestly (issue 13).

Data: SummEval's 12 abstractive systems x 100 documents rated 1-5 by gpt-4-0314 (``rts``, Shen et
al. 2023), with the expert means (``human.<aspect>``). Documents sorted by ``doc_id``: 0-49
train, 50-99 test. Every figure is summary-level (per document over its systems, averaged)
Spearman and Kendall tau-b with the expert means.

Stages (``--stages``, default all, in this order; each writes its figures as it finishes and
``--resume`` keeps the stages an earlier run finished):
  speed       seconds per training epoch on the 600 training rows (MiniLM, ref-free, 512-token
              sources), whole encoder fine-tuned (the old way) against the default recipe,
              measured side by side in this run
  cv          grouped k-fold cross-validation over the TRAINING documents only: each recipe's
              held-out correlation with the GPT-4 labels (the choice criterion) and with the
              experts, per epoch; the system prior inside the same folds; results/student_cv.*
  syscv       cross-validation with SYSTEMS held out, still on the training documents only (3 folds
              of 4 systems: train on the other 8 systems' rows, score the held-out systems' rows of
              the same documents): what document folds cannot see, a recipe that learns the 12
              systems' styles rather than quality; a recipe that loses to REFERENCE here is not chosen
  baselines   the teacher, the system prior (each summary scored by its system's mean GPT-4
              rating over the training documents), ROUGE-1, BERTScore (standard split)
  students    the recipes trained on all training documents for their cross-validated number of
              epochs, scored on the test documents (and the expert-label ceiling)
  disjoint    the system-disjoint split: 6 systems (seeded) for training, the other 6 for testing
  curve       learning curve of the default recipe over the number of training documents
  limits      what limits a text-only student on the standard split: how far knowing each system's mean
              quality goes (the systems' mean EXPERT ratings on the training documents), how well the
              system can be told from the summary's text alone (a classifier of the 12 systems on the
              lexical features, trained on the training documents: accuracy on the test documents, and
              the system prior read through its prediction), and the training documents the
              learning curves would need to reach the prior (log-linear fit)
  throughput  scoring speed on test summaries: bi-encoder, unified cross-encoder, and
              unbabel-comet 2.2.7 on the same MiniLM folder in its own venv (comet_speed.py)

Run:  python benchmarks/bench_student_summeval.py [--stages cv,baselines,...] [--resume] [--quick]
Out:  benchmarks/results/student_summeval.{json,md} and student_cv.{json,md}
"""

from __future__ import annotations

from harness import CACHE, log, parser, setup, summeval_llm_ratings, write_results
from student_stages import STAGES as _STAGES
from student_stages.common import (EXTRACTIVE, LEXICAL_MLP, OVERLAP_LS, PRIOR, RECIPES, REFERENCE, TEACHER, TIE,
                                   Bench, configs, cv_epochs, lexical_baselines, log_fit, recipe, row_of, split_docs,
                                   disjoint_systems, student_name, system_prior, train_student,
                                   update_verdict)
from student_stages.cv import choose
from student_stages.render import render, render_cv

#: the stages in run order (``--stages``); the functions are ``student_stages.STAGES``
STAGES = tuple(_STAGES)

# re-exported for scripts that import this one (bench_student_contrast.py: ``import bench_student_summeval as S``)
__all__ = ["CACHE", "EXTRACTIVE", "LEXICAL_MLP", "OVERLAP_LS", "PRIOR", "RECIPES", "REFERENCE", "STAGES", "TEACHER",
           "TIE", "Bench", "choose", "configs", "cv_epochs", "disjoint_systems", "lexical_baselines", "log_fit", "main", "recipe", "render",
           "render_cv", "row_of", "split_docs", "student_name", "system_prior", "train_student", "update_verdict",
           "write_results"]


def main() -> int:
    ap = parser(__doc__, out="student_summeval", threads=2, seed=12, quick=True)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--resume", action="store_true", help="keep what an earlier run finished")
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--hidden", type=int, nargs="+", default=[512])
    ap.add_argument("--epochs", type=int, default=8, help="cross-validation: epochs per recipe (best one chosen)")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--recipes", default="", help="RECIPES to cross-validate, separated by ; (default: all)")
    ap.add_argument("--students", default="", help="recipes to train on all training docs, separated by ; (default: all cross-validated)")
    ap.add_argument("--ceiling", action="store_true", help="also the expert-label ceiling (chosen recipe)")
    ap.add_argument("--variants", default="ref-based,mpnet",
                    help="students: the chosen recipe also ref-based and/or with another encoder (comma list)")
    ap.add_argument("--curve", default="10,25,50")
    ap.add_argument("--speed-steps", type=int, default=0,
                    help="speed: optimiser steps timed for whole-encoder variants (0: the whole epoch)")
    ap.add_argument("--speed-records", type=int, default=120, help="throughput: test summaries scored")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-comet", action="store_true")
    args = ap.parse_args()
    setup(args)
    recs = summeval_llm_ratings(args.data_dir, judge="gpt-4-0314", method="rts")
    train, test = split_docs(recs, 0, 50), split_docs(recs, 50, 100)
    if args.quick:
        train, test = split_docs(recs, 0, 6), split_docs(recs, 50, 53)
        args.epochs, args.folds, args.curve, args.speed_records, args.repeats = 1, 2, "3", 12, 1
        args.no_comet = True
    b = Bench(args)
    b.data["meta"].update(train_rows=len(train), test_rows=len(test))
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    for s in stages:
        if s not in STAGES:
            raise SystemExit(f"unknown stage '{s}'; choose from {', '.join(STAGES)}")
    for s in STAGES:
        if s not in stages:
            continue
        log(f"stage {s}")
        _STAGES[s](b, train, test)
        update_verdict(b)
        b.save()
    log(f"wrote {b.path.with_suffix('.md')} and {b.cv_path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
