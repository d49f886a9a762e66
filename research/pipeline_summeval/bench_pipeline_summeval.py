"""The CSEM loop on real sources (issue 5): SummEval articles -> candidates -> local judge -> student.

Training pool: for the training documents, the 16 SummEval systems' summaries plus J candidates
sampled from the local generator (top-k 50), all judged by the local judge (no human label is used
in training). Test: the 16 systems' summaries of the test documents, where expert scores exist.
Reported per aspect: summary-level Spearman and Kendall tau-b with the expert means of the student
and of the local judge itself on the same test documents; the judge's total time; the student's
scoring throughput.

The issue's full setting is ``--train-docs 0:50 --test-docs 50:100`` (by sorted doc_id). To fit a
CPU budget, ``--systems-per-doc K`` judges a seeded random subset of K systems per training document
(the paper keeps a random subset of candidates too, Sec. IV-B), and ``--judge-test-docs`` limits the
judge's own run to part of the test documents; the student is then reported on all test documents
and, beside the judge, on the judged ones. The judge
cache (``benchmarks/.cache/judge.sqlite``) is shared with ``bench_judge_summeval.py`` (same judge,
rubrics and prompts), so judgments made by either are reused, and an interrupted run resumes.

    python benchmarks/bench_pipeline_summeval.py --train-docs 0:50 --test-docs 50:100

``--quick`` runs the same code on 4 training and 2 test documents with SmolLM2 as generator and
judge (plumbing only; results in a temporary folder).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from harness import CACHE, doc_ids, doc_slice, log, markdown_table, parser, setup, summary_row, summeval, write_results

from csem.collect.sampler import GeneratorSpec, collect_candidates
from csem.judge import judge_records
from csem.model import ModelConfig, TrainConfig, fit

RUBRICS = {"coherence": "geval/summeval-coherence", "relevance": "geval/summeval-relevance",
           "consistency": "geval/summeval-consistency", "fluency": "geval/summeval-fluency"}


def main() -> None:
    ap = parser(__doc__, out="pipeline_summeval", threads=2, quick=True)
    ap.add_argument("--train-docs", default="0:50")
    ap.add_argument("--test-docs", default="50:100")
    ap.add_argument("--aspects", default="coherence,relevance")
    ap.add_argument("--systems-per-doc", type=int, default=16, help="systems judged per training document (seeded subset)")
    ap.add_argument("--judge-test-docs", default=None, help="slice of the sorted doc ids the judge runs on (default: --test-docs)")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--generator", default="local")
    ap.add_argument("--num-samples", type=int, default=1, help="J generated candidates per training document")
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--loss", default="pairwise", help="student loss: pairwise (the main job's choice) | mse | mse+pairwise")
    ap.add_argument("--dev-fraction", type=float, default=0.0,
                    help="training documents held out for best-epoch selection (default 0: fixed epochs)")
    ap.add_argument("--fine-tune", action="store_true", help="train the encoder too (default: frozen encoder)")
    ap.add_argument("--cache", default=str(CACHE / "judge.sqlite"))
    args = ap.parse_args()
    setup(args)
    if args.quick:  # plumbing only: the smallest models, 2 training and 2 test documents
        args.train_docs, args.test_docs, args.judge_test_docs, args.systems_per_doc = "0:4", "50:52", "50:51", 3
        args.aspects, args.epochs = "coherence", 2
        args.judge = args.generator = "llama-cpp:smollm2"
        args.max_tokens, args.cache = 24, str(args.out.parent / "judge.sqlite")

    aspects = [a for a in args.aspects.split(",") if a]
    rubrics = [RUBRICS[a] for a in aspects]
    records = summeval(args.data_dir)
    docs = doc_ids(records)
    train_docs, test_docs = set(docs[doc_slice(args.train_docs)]), set(docs[doc_slice(args.test_docs)])
    if train_docs & test_docs:
        raise SystemExit("train and test documents overlap")
    judged_test_docs = set(docs[doc_slice(args.judge_test_docs)]) if args.judge_test_docs else test_docs
    if not judged_test_docs <= test_docs:
        raise SystemExit("--judge-test-docs must lie inside --test-docs")
    rng = random.Random(args.seed)
    systems = sorted({r["system_id"] for r in records})
    keep_sys = {d: set(rng.sample(systems, min(args.systems_per_doc, len(systems)))) for d in sorted(train_docs)}
    train_sys = [r for r in records if r["doc_id"] in train_docs and r["system_id"] in keep_sys[r["doc_id"]]]
    test_recs = [r for r in records if r["doc_id"] in test_docs]
    Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()

    # stage i: candidates from the local generator for the training documents
    sources = [{"id": d, "source": next(r["source"] for r in train_sys if r["doc_id"] == d)} for d in sorted(train_docs)]
    opts = {"n_threads": args.threads}
    from csem.llm import GenerateConfig

    gen, gsum = collect_candidates(sources, [GeneratorSpec(uri=args.generator, name="local-gen", num_samples=args.num_samples, options=opts)],
                                   decoding=GenerateConfig(max_tokens=args.max_tokens), include_reference=False,
                                   partial_path=out.with_name(out.name + ".candidates.partial.jsonl"))
    log(f"collect: {gsum.as_dict()}")

    # stage ii: the local judge on the training pool and on the test documents
    pool, s_train = judge_records(train_sys + gen, rubrics, args.judge, cache=args.cache, backend_options=opts)
    log(f"judge (train pool): {s_train.as_dict()}")
    test_j, s_test = judge_records([r for r in test_recs if r["doc_id"] in judged_test_docs], rubrics, args.judge, cache=args.cache, backend_options=opts)
    log(f"judge (test): {s_test.as_dict()}")

    # stage iii: the student, trained on judge labels only (no human score); optionally a fraction of
    # the training documents held out as dev for best-epoch selection
    cols = [f"judge.{a}" for a in aspects]
    n_dev = round(args.dev_fraction * len(train_docs))
    dev_docs = set(sorted(train_docs)[len(train_docs) - n_dev:]) if n_dev else set()
    tr = [r for r in pool if r["doc_id"] not in dev_docs]
    dv = [r for r in pool if r["doc_id"] in dev_docs]
    t0 = time.perf_counter()
    # frozen encoder (head-only training on cached embeddings, as in bench_student_summeval.py):
    # what a shared 2-core CPU allows; --fine-tune trains the encoder too (paper: lr 1e-5)
    frozen = 0.3 if args.fine_tune else args.epochs
    model = fit(tr, cols, mode="ref-free",
                config=ModelConfig(encoder=args.encoder, mode="ref-free", hidden_sizes=[256], loss=args.loss),
                train_config=TrainConfig(max_epochs=args.epochs, frozen_epochs=frozen, head_lr=3e-4, batch_size=16,
                                         patience=4, num_threads=2), dev_records=dv or None,
                label_range={c: (1.0, 3.0) if c == "judge.fluency" else (1.0, 5.0) for c in cols},
                judge=args.judge, rubric=",".join(rubrics), out_dir=out.parent / ".cache" / "pipeline_summeval_model"
                if args.quick else CACHE / "pipeline_summeval_model")
    train_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    scored = model.predict(test_recs).records
    score_s = time.perf_counter() - t0
    name = model.config.name
    result = {"train_docs": args.train_docs, "test_docs": args.test_docs, "n_train_docs": len(train_docs),
              "n_test_docs": len(test_docs), "judge_test_docs": args.judge_test_docs or args.test_docs,
              "systems_per_train_doc": args.systems_per_doc, "train_rows": len(tr), "dev_rows": len(dv),
              "generated_candidates": len(gen), "judge": args.judge, "generator": args.generator,
              "encoder": args.encoder, "loss": args.loss, "aspects": {}}
    jt = {r["id"]: r for r in test_j}
    st = {r["id"]: r for r in scored}
    judged_recs = [r for r in test_recs if r["doc_id"] in judged_test_docs]

    def corr(recs, col_of, a):
        rows = [{"doc_id": r["doc_id"], "x": col_of(r), "h": r[f"human.{a}"]} for r in recs]
        c = summary_row(rows, "x", "h", digits=4)
        return {"spearman": c["spearman"], "kendall": c["kendall"], "skipped": c["n_skipped"], "missing": c["n_missing"]}

    for a in aspects:
        result["aspects"][a] = {
            "student_all_test": corr(test_recs, lambda r: st[r["id"]][f"metric.{name}.{a}"], a),
            "student_judged_docs": corr(judged_recs, lambda r: st[r["id"]][f"metric.{name}.{a}"], a),
            "judge_judged_docs": corr(judged_recs, lambda r: jt[r["id"]].get(f"judge.{a}"), a),
        }
    judged_now = s_train.judged + s_test.judged
    result.update({
        "judge_seconds_this_run": round(s_train.seconds + s_test.seconds, 1),
        "judgments_total": s_train.total + s_test.total, "judgments_made_this_run": judged_now,
        "judgments_from_cache": s_train.cached + s_test.cached,
        "judge_seconds_per_judgment_this_run": round((s_train.seconds + s_test.seconds) / judged_now, 3) if judged_now else None,
        "train_seconds": round(train_s, 1),
        "student_samples_per_second": round(len(test_recs) / score_s, 1),
        "wall_seconds": round(time.perf_counter() - t_all, 1),
    })
    jd = args.judge_test_docs or args.test_docs
    table = [[a, r["student_all_test"]["spearman"], r["student_all_test"]["kendall"],
              r["student_judged_docs"]["spearman"], r["judge_judged_docs"]["spearman"],
              r["student_judged_docs"]["kendall"], r["judge_judged_docs"]["kendall"]]
             for a, r in result["aspects"].items()]
    lines = [f"# CSEM loop on SummEval: train docs {args.train_docs}, test docs {args.test_docs} (sorted doc_id)"
             + (" (QUICK mode: not the benchmark)" if args.quick else ""), "",
             f"Judge `{args.judge}`, generator `{args.generator}` (J={args.num_samples}, top-k 50), student `{args.encoder}` ref-free, "
             f"{'fine-tuned' if args.fine_tune else 'frozen encoder'}, loss `{args.loss}`, "
             f"{'up to ' if dv else ''}{args.epochs} epochs{', best dev epoch' if dv else ''}.",
             f"Training rows {len(tr)} (+{len(dv)} dev) = {args.systems_per_doc} of the 16 systems per training document "
             f"+ {len(gen)} generated candidates; test: {len(test_recs)} summaries; the judge ran on test docs {jd}.", "",
             markdown_table(table, list("abcdefg"),
                            headers=["aspect", f"student Spearman (docs {args.test_docs})", "student Kendall",
                                     f"student Spearman (docs {jd})", f"judge Spearman (docs {jd})",
                                     f"student Kendall (docs {jd})", f"judge Kendall (docs {jd})"]),
             "", f"Judge: {result['judgments_total']} judgments ({judged_now} made in this run in "
             f"{result['judge_seconds_this_run']} s, {result['judgments_from_cache']} from the cache). "
             f"Student: trained in {result['train_seconds']} s, scores {result['student_samples_per_second']} samples/s."]
    write_results(out, result, lines)
    print("\n".join(lines))

if __name__ == "__main__":
    main()
