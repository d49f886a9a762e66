"""Baselines on SummEval: ROUGE-1/2/Lsum, BLEU, chrF, BERTScore, length and extractiveness x 4 aspects x 3 levels.

1600 SummEval summaries (100 documents x 16 systems), human target = the mean of the 3 experts,
candidate = the tokenised summary, 11 untokenised references. ROUGE as SummEval computed it (Perl
ROUGE-1.5.5 ``-m -f A``): Porter stemming, F1 averaged over the references; the papers' ROUGE-L is the
summary-level LCS, ``rougeLsum``. BLEU and chrF: sacrebleu sentence scores, all references.
BERTScore: F1, all-MiniLM-L6-v2 layer 6, best of the references, no rescaling. Length and
extractiveness: the trivial reference-free baselines (no reference, nothing fitted). Kendall = tau-b.
CIs: percentile bootstrap over documents, 1000 resamples, seed 0. Also the ROUGE summary-level
Spearman against the published figures (G-Eval Table 1 / CSEM Table V) and each metric's time.
``quick``: 4 documents, 20 resamples, no BERTScore.
"""

from __future__ import annotations

import time

from benchmarks.suite import ASPECTS, machine, markdown_table, summeval

PUBLISHED = {  # summary-level Spearman, G-Eval Table 1 (= UniEval Table 2, CSEM Table V)
    "rouge1": (0.167, 0.160, 0.115, 0.326),
    "rouge2": (0.184, 0.187, 0.159, 0.290),
    "rougeLsum": (0.128, 0.115, 0.105, 0.311),
}
SEED = 0


def run(quick: bool = False) -> dict:
    """Score SummEval with every baseline and correlate with the experts (``quick``: 4 documents)."""
    from csem.baselines import bertscore, bleu, chrf, extractiveness, length, rouge_scores
    from csem.meta import LEVELS, METHODS, evaluate

    recs = summeval(slice(None, 4) if quick else None)
    bootstrap = 20 if quick else 1000
    timings: dict[str, float] = {}
    t = time.perf_counter()
    rs = rouge_scores(recs, ("rouge1", "rouge2", "rougeLsum"), reduce="mean", use_stemmer=True)
    timings["rouge1+rouge2+rougeLsum (one pass)"] = time.perf_counter() - t
    for name in ("rouge1", "rouge2", "rougeLsum"):
        for r, v in zip(recs, rs[name]):
            r[f"metric.{name}"] = v
    fns = {"bleu": bleu, "chrf": chrf, "length": length, "extractiveness": extractiveness}
    if not quick:
        fns["bertscore"] = bertscore
    for name, fn in fns.items():
        t = time.perf_counter()
        vals = fn(recs)
        timings[name] = time.perf_counter() - t
        for r, v in zip(recs, vals):
            r[f"metric.{name}"] = v
    metrics = [f"metric.{m}" for m in ("rouge1", "rouge2", "rougeLsum", *fns)]
    t = time.perf_counter()
    df = evaluate(recs, metrics, [f"human.{a}" for a in ASPECTS], levels=LEVELS, methods=METHODS,
                  bootstrap=bootstrap, seed=SEED)
    timings["meta-evaluation"] = time.perf_counter() - t
    return {"n_records": len(recs), "n_docs": len({r["doc_id"] for r in recs}), "bootstrap": bootstrap, "seed": SEED,
            "kendall": "tau-b", "timings_s": timings, "machine": machine(), "rows": df.to_dict(orient="records")}


def report(results: dict) -> str:
    """The Markdown report: summary-level Spearman with CIs, the published comparison, every level, timings."""
    import pandas as pd

    from csem.meta import METHODS, correlation_table
    from csem.report import to_markdown

    df = pd.DataFrame(results["rows"])
    n = results["n_records"]
    md = ["# Baselines on SummEval: correlation with expert judgments", "",
          f"{n} summaries, expert means; bootstrap CIs over documents: {results['bootstrap']} resamples, seed "
          f"{results['seed']}, 95% percentile. Kendall = tau-b.", ""]
    summ = df[(df.level == "summary") & (df.method == "spearman")]
    comparison = []
    for m, pub in PUBLISHED.items():
        for a, p in zip(ASPECTS, pub):
            got = summ[(summ.metric == m) & (summ.aspect == a)]
            if len(got):
                v = float(got.value.iloc[0])
                comparison.append({"metric": m, "aspect": a, "measured": v, "published": p, "diff": f"{v - p:+.3f}"})
    for lv in ("summary", "system", "dataset"):
        if lv not in set(df.level):
            continue
        p = correlation_table(df, lv)
        lo, hi = correlation_table(df, lv, value="ci_low"), correlation_table(df, lv, value="ci_high")
        title = {"summary": "Summary level (per document, averaged)", "system": "System level",
                 "dataset": "Dataset level"}[lv]
        md += [f"## {title}", "", to_markdown(p), ""]
        if lv == "summary":
            for meth in METHODS[:1]:
                cols = [c for c in p.columns if c[1] == meth and c[0] != "average"]
                md += [f"Summary-level {meth} with 95% CI:", "", to_markdown(p[cols], low=lo[cols], high=hi[cols]), ""]
    if comparison:
        md += ["## ROUGE vs the published summary-level Spearman (G-Eval Table 1 / CSEM Table V)", "",
               markdown_table(comparison, ["metric", "aspect", "measured", "published", "diff"], align="llrrr"), ""]
    timing_rows = [{"step": k, "seconds": v, "records/s": None if k.startswith("meta") else n / max(v, 1e-9)}
                   for k, v in results["timings_s"].items()]
    md += ["## Time", "", markdown_table(timing_rows, ["step", "seconds", "records/s"], digits=1, missing="",
                                         align="lrr"), "", f"Machine: {results.get('machine', 'not recorded')}."]
    return "\n".join(md)
