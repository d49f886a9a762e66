"""Rating vs comparison at one judge budget, and 1-5 stars vs a 0-100 scale, with the local judge.

The CSEM paper compares rating with comparison ranking (Sec. VI-F, Fig. 6) and stars with a
continuous 0-100 scale (Sec. VI-E, Fig. 5b). Here, on SummEval coherence, the local judge
(Qwen2.5-Coder-1.5B-Instruct through llama.cpp, ``probs`` mode) annotates the 16 systems' summaries
of the first ``--docs`` training documents (sorted doc_id) three ways, with the same criteria:

* stars: ``csem/summ-coherence-ref-free`` (1-5), one call per summary;
* 0-100: ``csem-100/summ-coherence-ref-free``, one call per summary (exact multi-token
  probabilities on llama.cpp: "100" is three tokens for Qwen's tokenizer);
* comparison: ``pairwise/summ-coherence-ref-free``, ``--pairs-per-source`` pairs per article
  (``--strategy balanced``: a random perfect matching, so each summary is compared once), each
  judged in both orders, so it costs as many judge calls as one rating pass (``2 x pairs =
  summaries``).

For each: the judge's summary-level Spearman / Kendall tau-b with the expert means on the judged
documents (comparison: each summary's mean preference over its pairs), and a student trained on
those labels only (frozen MiniLM, head-only, a ranking loss: the ratings' pairs for stars and
0-100, the judged pairs themselves, Eq. 3, for comparison; one per ``--seeds``, mean and sd)
tested on documents 50-99 against the experts, beside the system prior (each test summary scored by
its system's mean training label), and, as the paper's Fig. 6a also does, against the judge's own
star ratings of the first ``--judge-test-docs`` test documents.

Run:  nice -n 10 python benchmarks/bench_annotation_variants.py --docs 16 --judge-test-docs 8 --threads 1
Out:  benchmarks/results/annotation_variants.json and .md; judgments cached in
      benchmarks/.cache/annotation_variants.sqlite (a re-run resumes).
"""

from __future__ import annotations

import time
from pathlib import Path

from harness import CACHE, Results, fmt, log, machine, parser, previous_results, setup, summary_row, summeval

RUBRICS = {"stars": "csem/summ-coherence-ref-free", "0-100": "csem-100/summ-coherence-ref-free",
           "comparison": "pairwise/summ-coherence-ref-free"}


def corr(records, col, gold="human.coherence") -> dict:
    """Summary-level Spearman / Kendall tau-b of ``col`` with ``gold`` (harness.summary_row, the one evaluator)."""
    return summary_row(records, col, gold)


def f(c):
    if c is None:
        return "n/a"
    sd = f" (sd {c['sd_spearman']:.3f})" if c.get("sd_spearman") is not None else ""
    return f"{fmt(c.get('spearman'))} / {fmt(c.get('kendall'))}{sd}"


def mean_over_seeds(runs: list[dict]) -> dict:
    """Spearman / Kendall averaged over seeds, with the seeds' population sd of the Spearman."""
    import statistics

    return {"spearman": statistics.fmean(r["spearman"] for r in runs),
            "kendall": statistics.fmean(r["kendall"] for r in runs),
            "sd_spearman": statistics.pstdev([r["spearman"] for r in runs]) if len(runs) > 1 else None,
            "per_seed": [r["spearman"] for r in runs]}


def render_md(d: dict) -> str:
    m = d["meta"]
    lines = ["# Rating vs comparison, stars vs 0-100 (local judge, SummEval coherence)", "",
             f"Run {m['started']} on {m['machine']}"
             + (" — QUICK MODE (not the benchmark)" if str(m.get("args", {}).get("quick")) == "True" else "")
             + f"; judge {m['judge']} ({m['threads']} thread(s), probs mode); "
             f"judged documents: the first {m['docs']} training documents (sorted doc_id), 16 systems each; "
             f"students tested on documents 50-99 ({m['n_test']} summaries). Summary-level Spearman / Kendall "
             "tau-b with the expert means.", "",
             "| annotation | judge calls | s per call | judge vs experts (judged docs) | student vs experts (docs 50-99) "
             "| system prior (docs 50-99) | student vs judge stars (test docs) | system prior vs judge stars |",
             "|---|---|---|---|---|---|---|---|"]
    for name, e in d["variants"].items():
        lines.append(f"| {name} | {e.get('calls', '')} | {fmt(e.get('s_per_call'), 2)} | {f(e.get('judge'))} | "
                     f"{f(e.get('student'))} | {f(e.get('prior'))} | {f(e.get('student_vs_judge'))} | "
                     f"{f(e.get('prior_vs_judge'))} |")
    if d.get("extra"):
        lines += ["", "| check | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in d["extra"].items()]
    if m.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in m["notes"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = parser(__doc__, out="annotation_variants", threads=1, seed=None, quick=True)
    ap.add_argument("--docs", type=int, default=6, help="judged training documents (first N, sorted doc_id)")
    ap.add_argument("--pairs-per-source", type=int, default=8, help="comparison pairs per article (2 calls each)")
    ap.add_argument("--strategy", default="balanced", help="comparison pair strategy (csem.judge.comparison)")
    ap.add_argument("--judge-test-docs", type=int, default=8,
                    help="the judge's stars on the first N test documents: the students' agreement with the judge")
    ap.add_argument("--seeds", default="12,13,14", help="student seeds (one student each; mean and sd)")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--cache", type=Path, default=CACHE / "annotation_variants.sqlite")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--no-students", action="store_true")
    ap.add_argument("--test-docs", type=int, default=50, help="students: test on documents 50 .. 50+N-1")
    ap.add_argument("--only", default="stars,0-100,comparison", help="annotations to run, in order")
    args = ap.parse_args()
    setup(args)
    if args.quick:  # a smoke run: one judged and one test document, 4 pairs (the fewest a student takes), one seed, one epoch
        args.docs, args.judge_test_docs, args.test_docs, args.pairs_per_source = 1, 1, 1, 4
        args.seeds, args.epochs = args.seeds.split(",")[0], 1
    from csem.baselines import system_prior
    from csem.judge import judge_records
    from csem.judge.comparison import compare_records, preference_scores
    from csem.llm import get_model
    from csem.meta.correlation import correlate
    from csem.model import ModelConfig, TrainConfig, fit

    recs = summeval(args.data_dir)
    docs = sorted({r["doc_id"] for r in recs})
    judged_docs = set(docs[: args.docs])
    test_docs = set(docs[50:50 + args.test_docs])
    keep = ("id", "doc_id", "system_id", "source", "candidate", "human.coherence")
    judged = [{k: r[k] for k in keep} for r in recs if r["doc_id"] in judged_docs]
    judged.sort(key=lambda r: (r["doc_id"], r["system_id"]))
    test = [{k: r[k] for k in keep} for r in recs if r["doc_id"] in test_docs]
    out = Path(args.out)
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    prev = previous_results(out)  # a re-run keeps the variants it does not redo
    data = {"meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(), "threads": args.threads,
                     "judge": args.judge, "docs": args.docs, "n_judged": len(judged), "n_test": len(test),
                     "args": {k: str(v) for k, v in vars(args).items()}, "notes": []},
            "variants": {k: v for k, v in prev.get("variants", {}).items()}, "extra": prev.get("extra", {})}
    notes = data["meta"]["notes"]
    judge_test = sorted(test, key=lambda r: (r["doc_id"], r["system_id"]))
    judge_test = [r for r in judge_test if r["doc_id"] in set(docs[50:50 + args.judge_test_docs])]
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    notes += [
        f"Budget: stars and 0-100 judge each of the {len(judged)} summaries once; comparison judges "
        f"{args.pairs_per_source} pairs per article ({args.strategy} strategy) in both orders = "
        f"{2 * args.pairs_per_source * args.docs} calls; a summary's comparison score is its mean preference over "
        "the pairs it is in (summaries in no pair are left out of the judge correlation and of training).",
        f"Students: MiniLM, encoder frozen (head-only, {args.epochs} epochs, head [1024], head lr 3e-4, max_length "
        f"512, seeds {args.seeds}: mean over seeds, sd of the Spearman in brackets); stars and 0-100: loss 'pairwise' (ranking loss over the ratings' pairs within an article, "
        "the main job's recipe); comparison: Eq. 3 on the judged pairs with the averaged preference as soft "
        "target (csem train --pairs).",
        f"Student vs judge stars: each student's summary-level correlation with the judge's own 1-5 star ratings "
        f"(probability-weighted) of the {len(judge_test)} summaries of the first {args.judge_test_docs} test "
        "documents (the paper's Fig. 6a reports both measures); the judge's stars there vs the experts: "
        "'judge stars on test docs' below.",
        "Scale: a handful of articles judged by a 1.5B judge; a difference of less than ~0.1 between rows is "
        "within the noise of so few documents (the judge reaches 0.16 on coherence over 20 documents).",
    ]

    save = Results(out, data, render_md).save

    model = get_model(args.judge, n_threads=args.threads)
    labelled: dict[str, list[dict]] = {}
    pair_rows = None
    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        t0 = time.perf_counter()
        e = data["variants"].setdefault(name, {})
        if name in ("stars", "0-100"):
            rows, s = judge_records(judged, RUBRICS[name], model, cache=args.cache, progress=True)
            labelled[name] = rows
            e["calls"] = s.total
            e["missing"] = s.n_missing
            e["mean_mass"] = sum(r.get("judge.coherence.mass") or 0 for r in rows) / len(rows)
            e["judge"] = corr(rows, "judge.coherence")
            e["label_std_within_article"] = _within_std(rows, "judge.coherence")
            log(f"{name}: {s}")
        else:
            pair_rows, s = compare_records(judged, RUBRICS[name], model, strategy=args.strategy,
                                           per_source=args.pairs_per_source, seed=0, cache=args.cache, progress=True)
            e["calls"] = s.calls
            e["missing"] = sum(s.missing.values())
            e["position_bias"] = s.position_bias
            scores = preference_scores(pair_rows, "judge.coherence")
            rows = [dict(r, **{"judge.coherence": scores.get(r["id"])}) for r in judged]
            labelled[name] = rows
            e["judge"] = corr(rows, "judge.coherence")
            e["summaries_in_a_pair"] = sum(1 for r in rows if r["judge.coherence"] is not None)
            log(f"{name}: {s}")
        e["seconds"] = time.perf_counter() - t0
        # seconds per computed call from the cache's recorded latencies would need the keys; use wall time of
        # calls computed now when any, else keep an earlier run's figure
        new = s.judged
        if new:
            e["s_per_call"] = e["seconds"] / new
            e["calls_timed"] = new
        elif "s_per_call" not in e:
            e["s_per_call"] = float("nan")
        save()

    if "stars" in labelled and "0-100" in labelled:
        a = [r["judge.coherence"] for r in labelled["stars"]]
        b = [r["judge.coherence"] for r in labelled["0-100"]]
        g = [r["doc_id"] for r in labelled["stars"]]
        data["extra"]["stars vs 0-100, summary-level Spearman between the two judge scores"] = \
            f"{correlate(a, b, level='summary', method='spearman', groups=g).value:.3f}"
        data["extra"]["stars vs 0-100, dataset-level Spearman"] = \
            f"{correlate(a, b, level='dataset', method='spearman').value:.3f}"
    if pair_rows is not None:
        pb = data["variants"]["comparison"].get("position_bias")
        data["extra"]["comparison: mean P(first shown is better) over all judged orders"] = \
            "n/a" if pb is None else f"{pb:.3f}"
        ab = [r["order_ab.coherence"] for r in pair_rows if r.get("order_ab.coherence") is not None and
              r.get("order_ba.coherence") is not None]
        ba = [1 - r["order_ba.coherence"] for r in pair_rows if r.get("order_ab.coherence") is not None and
              r.get("order_ba.coherence") is not None]
        agree = sum(1 for x, y in zip(ab, ba) if (x > 0.5) == (y > 0.5))
        data["extra"]["comparison: pairs whose two orders agree on the winner"] = f"{agree} of {len(ab)}"
    save()

    judge_stars = None
    if judge_test:
        rows, s = judge_records(judge_test, RUBRICS["stars"], model, cache=args.cache, progress=True)
        judge_stars = {r["id"]: r.get("judge.coherence") for r in rows}
        data["extra"][f"judge stars on test docs ({len(rows)} summaries of {args.judge_test_docs} documents) vs "
                      "experts"] = f(corr(rows, "judge.coherence"))
        log(f"test-document stars: {s}")
        save()
    if args.no_students:
        print(render_md(data))
        return 0
    for name, rows in labelled.items():
        e = data["variants"][name]
        # the system prior: each test summary scored by its system's mean label on the judged documents
        prior = system_prior(rows, test, "judge.coherence")["judge.coherence"]
        e["prior"] = corr([dict(r, p=p) for r, p in zip(test, prior)], "p")
        if judge_stars:
            e["prior_vs_judge"] = corr([dict(r, p=p, j=judge_stars[r["id"]])
                                        for r, p in zip(test, prior) if r["id"] in judge_stars], "p", gold="j")
        cfg = ModelConfig(name="student", encoder="minilm", mode="ref-free", max_length=512, hidden_sizes=[1024],
                          loss="pairwise")
        vs_experts, vs_judge = [], []
        t0 = time.perf_counter()
        for seed in seeds:
            tc = TrainConfig(num_threads=args.threads, seed=seed, max_epochs=args.epochs, frozen_epochs=args.epochs,
                             head_lr=3e-4)
            if name == "comparison":
                m = fit([r for r in pair_rows if r.get("judge.coherence") is not None], "judge.coherence",
                        "ref-free", config=cfg, train_config=tc, pairs=True)
            else:
                m = fit([r for r in rows if r.get("judge.coherence") is not None], "judge.coherence", "ref-free",
                        config=cfg, train_config=tc, label_range=(1, 5) if name == "stars" else (0, 100))
            scored = m.predict(test, name="student", batch_size=32).records
            vs_experts.append(corr(scored, "metric.student.coherence"))
            if judge_stars:
                sj = [dict(r, **{"judge.stars": judge_stars.get(r["id"])}) for r in scored if r["id"] in judge_stars]
                vs_judge.append(corr(sj, "metric.student.coherence", gold="judge.stars"))
        e["student"] = mean_over_seeds(vs_experts)
        if vs_judge:
            e["student_vs_judge"] = mean_over_seeds(vs_judge)
        e["student_train_s"] = (time.perf_counter() - t0) / len(seeds)
        log(f"{name}: student {e['student']} vs judge {e.get('student_vs_judge')} prior {e['prior']}")
        save()
    print(render_md(data))
    return 0


def _within_std(rows, col):
    import statistics

    by: dict[str, list[float]] = {}
    for r in rows:
        if r.get(col) is not None:
            by.setdefault(r["doc_id"], []).append(r[col])
    sds = [statistics.pstdev(v) for v in by.values() if len(v) > 1]
    return sum(sds) / len(sds) if sds else None


if __name__ == "__main__":
    raise SystemExit(main())
