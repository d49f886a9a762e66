"""The CSEM loop on real sources (issue 5): SummEval articles -> candidates -> local judge -> student.

Training pool: for the training documents, the 16 SummEval systems' summaries plus J candidates
sampled from the local generator (top-k 50), all judged by the local judge (no human label is used
in training). Test: the 16 systems' summaries of the test documents, where expert scores exist.
Reported per aspect: summary-level Spearman and Kendall tau-b with the expert means of the student
and of the local judge itself on the same test documents; the judge's total time; the student's
scoring throughput.

The issue's full setting is ``--train-docs 0:50 --test-docs 50:100`` (by sorted doc_id). The judge
cache (``benchmarks/.cache/judge.sqlite``) is shared with ``bench_judge_summeval.py`` (same judge,
rubrics and prompts), so judgments made by either are reused, and an interrupted run resumes.

    python benchmarks/bench_pipeline_summeval.py --train-docs 0:50 --test-docs 50:100
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from csem.collect.sampler import DecodingConfig, GeneratorSpec, collect_candidates  # noqa: E402
from csem.data.datasets import load_summeval  # noqa: E402
from csem.judge import judge_records  # noqa: E402
from csem.meta.correlation import correlate  # noqa: E402
from csem.model import ModelConfig, TrainConfig, train  # noqa: E402

RUBRICS = {"coherence": "geval/summeval-coherence", "relevance": "geval/summeval-relevance",
           "consistency": "geval/summeval-consistency", "fluency": "geval/summeval-fluency"}


def _slice(s: str) -> slice:
    a, b = s.split(":")
    return slice(int(a), int(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-docs", default="0:50")
    ap.add_argument("--test-docs", default="50:100")
    ap.add_argument("--aspects", default="coherence,relevance")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--generator", default="local")
    ap.add_argument("--num-samples", type=int, default=1, help="J generated candidates per training document")
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--fine-tune", action="store_true", help="train the encoder too (default: frozen encoder)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: min(2, cores))")
    ap.add_argument("--cache", default=str(HERE / ".cache" / "judge.sqlite"))
    ap.add_argument("--out", default=str(HERE / "results" / "pipeline_summeval"))
    args = ap.parse_args()

    aspects = [a for a in args.aspects.split(",") if a]
    rubrics = [RUBRICS[a] for a in aspects]
    records = load_summeval()
    docs = sorted({r["doc_id"] for r in records})
    train_docs, test_docs = set(docs[_slice(args.train_docs)]), set(docs[_slice(args.test_docs)])
    assert not train_docs & test_docs, "train and test documents overlap"
    train_sys = [r for r in records if r["doc_id"] in train_docs]
    test_recs = [r for r in records if r["doc_id"] in test_docs]
    Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()

    # stage i: candidates from the local generator for the training documents
    sources = [{"id": d, "source": next(r["source"] for r in train_sys if r["doc_id"] == d)} for d in sorted(train_docs)]
    opts = {"n_threads": args.threads} if args.threads else {}
    from csem.collect.backend_generator import BackendGenerator

    gen, gsum = collect_candidates(sources, [GeneratorSpec(uri=args.generator, name="local-gen", num_samples=args.num_samples)],
                                   decoding=DecodingConfig(max_tokens=args.max_tokens), include_reference=False,
                                   partial_path=out.with_name(out.name + ".candidates.partial.jsonl"),
                                   open_fn=lambda uri: BackendGenerator(uri, **opts))
    print(f"collect: {gsum.as_dict()}", flush=True)

    # stage ii: the local judge on the training pool and on the test documents
    pool, s_train = judge_records(train_sys + gen, rubrics, args.judge, cache=args.cache, backend_options=opts)
    print(f"judge (train pool): {s_train.as_dict()}", flush=True)
    test_j, s_test = judge_records(test_recs, rubrics, args.judge, cache=args.cache, backend_options=opts)
    print(f"judge (test): {s_test.as_dict()}", flush=True)

    # stage iii: the student, trained on judge labels only; 20% of the training documents (judge
    # labels, no human score) held out as dev for checkpoint selection
    cols = [f"judge.{a}" for a in aspects]
    dev_docs = set(sorted(train_docs)[-max(1, round(0.2 * len(train_docs))):])
    tr = [r for r in pool if r["doc_id"] not in dev_docs]
    dv = [r for r in pool if r["doc_id"] in dev_docs]
    t0 = time.perf_counter()
    # frozen encoder (head-only training on cached embeddings, as in bench_student_summeval.py):
    # what a shared 2-core CPU allows; --fine-tune trains the encoder too (paper: lr 1e-5)
    frozen = 0.3 if args.fine_tune else args.epochs
    model = train(tr, cols, mode="ref-free",
                  config=ModelConfig(encoder=args.encoder, mode="ref-free", hidden_sizes=[1024]),
                  train_config=TrainConfig(max_epochs=args.epochs, frozen_epochs=frozen, head_lr=3e-4, patience=4,
                                           num_threads=2), dev_records=dv,
                  label_range={c: (1.0, 3.0) if c == "judge.fluency" else (1.0, 5.0) for c in cols},
                  judge=args.judge, rubric=",".join(rubrics), out_dir=HERE / ".cache" / "pipeline_summeval_model")
    train_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    scored = model.score_records(test_recs)
    score_s = time.perf_counter() - t0
    name = model.config.name
    result = {"train_docs": args.train_docs, "test_docs": args.test_docs, "n_train_docs": len(train_docs),
              "n_test_docs": len(test_docs), "train_rows": len(tr), "dev_rows": len(dv),
              "generated_candidates": len(gen), "judge": args.judge, "generator": args.generator,
              "encoder": args.encoder, "aspects": {}}
    jt = {r["id"]: r for r in test_j}
    for a in aspects:
        human = [r[f"human.{a}"] for r in test_recs]
        groups = [r["doc_id"] for r in test_recs]
        row = {}
        for who, vals in (("student", [r[f"metric.{name}.{a}"] for r in scored]),
                          ("judge", [jt[r["id"]].get(f"judge.{a}") for r in test_recs])):
            for m in ("spearman", "kendall"):
                c = correlate(vals, human, level="summary", method=m, groups=groups)
                row[f"{who}_{m}"] = round(c.value, 4)
                row[f"{who}_skipped"] = c.n_skipped
                row[f"{who}_missing"] = c.n_missing
        result["aspects"][a] = row
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
    out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    lines = [f"# CSEM loop on SummEval: train docs {args.train_docs}, test docs {args.test_docs} (sorted doc_id)", "",
             f"Judge `{args.judge}`, generator `{args.generator}` (J={args.num_samples}, top-k 50), student `{args.encoder}` ref-free, "
             f"{'fine-tuned' if args.fine_tune else 'frozen encoder'}, up to {args.epochs} epochs.",
             f"Training rows {len(tr)} (+{len(dv)} dev) = 16 systems + {len(gen)} generated candidates; test: {len(test_recs)} summaries.", "",
             "| aspect | student Spearman | student Kendall | judge Spearman | judge Kendall |", "|---|---|---|---|---|"]
    for a, r in result["aspects"].items():
        lines.append(f"| {a} | {r['student_spearman']:.3f} | {r['student_kendall']:.3f} | {r['judge_spearman']:.3f} | {r['judge_kendall']:.3f} |")
    lines += ["", f"Judge: {result['judgments_total']} judgments ({judged_now} made in this run in "
              f"{result['judge_seconds_this_run']} s, {result['judgments_from_cache']} from the cache). "
              f"Student: trained in {result['train_seconds']} s, scores {result['student_samples_per_second']} samples/s."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
