"""The G-Eval judge on SummEval: summary-level correlation with the experts, prefix reuse, probs vs sampling.

SummEval (Fabbri et al. 2021), documents 50..69 in sorted doc_id order x 16 systems; source = the
untokenised article, candidate = the system summary, human = the expert mean. Judge: ``local``
(Qwen2.5-Coder-1.5B-Instruct Q4_K_M through llama.cpp, CPU), the rubrics ``geval/summeval-<aspect>``.

Parts: ``reuse`` (seconds per judgment with and without KV prefix reuse on the same judgments, side by
side, and the largest score difference), ``sample`` (``probs`` vs G-Eval's ``sample``, n=20 at
temperature 1, on the first 2 documents' coherence: backend seconds from the judgment cache and both
correlations) and ``main`` (probs on every document and aspect: summary-level Spearman and Kendall
tau-b, per document and averaged). Judgments are cached in ``benchmarks/.cache/judge.sqlite``: a re-run
resumes. ``quick``: one document, two systems, coherence, n=2, no cache.
"""

from __future__ import annotations

import time

from benchmarks.suite import CACHE, fmt, log, machine, markdown_table, summary_row, summeval, threads

ASPECTS = ("coherence", "relevance", "consistency", "fluency")
JUDGE_FIELDS = ("id", "doc_id", "system_id", "source", "candidate")  # what the judge sees


def load_rows(docs: slice) -> list[dict]:
    """SummEval rows: the fields the judge sees and the expert means (``human.<aspect>``)."""
    return [{k: r[k] for k in JUDGE_FIELDS} | {f"human.{a}": r[f"human.{a}"] for a in ASPECTS}
            for r in summeval(docs)]


def corr(rows: list[dict], aspect: str) -> dict:
    """Summary-level Spearman and Kendall tau-b of ``judge.<aspect>`` with the experts (4 digits)."""
    row = summary_row(rows, f"judge.{aspect}", f"human.{aspect}")
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}


def backend_seconds(cache, backend_id: str, rows: list[dict], rubric: str, mode: str, n: int) -> float:
    """Sum of the backend latencies the cache recorded when each of ``rows``' judgments was computed."""
    from csem.judge import rating_cache_key

    return sum((cache.get(rating_cache_key(backend_id, rubric, r, mode=mode, n=n)) or {}).get("latency_s") or 0.0
               for r in rows)


def _reuse(rows: list[dict], n: int) -> dict:
    from csem.judge import judge_records
    from csem.llm import get_model

    arms = {}
    for arm, reuse in (("reuse", True), ("no_reuse", False)):
        model = get_model("local", n_threads=threads(), prefix_reuse=reuse)
        warm = [{"id": "warm-up", "source": "A warm-up article.", "candidate": "A warm-up summary."}]
        judge_records(warm, "geval/summeval-coherence", model, cache=None, progress=False)  # load the model
        t = time.perf_counter()
        out, summ = judge_records(rows[:n], "geval/summeval-coherence", model, cache=None, progress=False)
        arms[arm] = (time.perf_counter() - t, [o["judge.coherence"] for o in out], summ)
        log(f"reuse={reuse}: {arms[arm][0]:.1f} s for {n} judgments; {summ}")
    diffs = [abs(a - b) for a, b in zip(arms["reuse"][1], arms["no_reuse"][1]) if a is not None and b is not None]
    return {"n": n, "s_per_judgment_reuse": arms["reuse"][0] / n, "s_per_judgment_no_reuse": arms["no_reuse"][0] / n,
            "ratio_reuse_over_no_reuse": arms["reuse"][0] / arms["no_reuse"][0],
            "max_abs_score_diff": max(diffs) if diffs else None,
            "evaluated_tokens_reuse": arms["reuse"][2].evaluated_tokens,
            "evaluated_tokens_no_reuse": arms["no_reuse"][2].evaluated_tokens}


def run(quick: bool = False) -> dict:
    """Judge SummEval (``quick``: one document, two systems, coherence) and correlate with the experts."""
    from csem.judge import JudgmentCache, judge_records
    from csem.llm import get_model

    docs, n_reuse, n_sample, sample_docs = (slice(50, 51), 1, 2, 1) if quick else (slice(50, 70), 8, 20, 2)
    rows = load_rows(docs)
    if quick:
        rows = rows[:2]
    doc_ids = list(dict.fromkeys(r["doc_id"] for r in rows))
    aspects = ASPECTS[:1] if quick else ASPECTS
    results = {"docs": f"{docs.start}:{docs.stop}", "machine": f"{machine()}, {threads()} threads",
               "reuse": _reuse(rows, n_reuse)}
    model = get_model("local", n_threads=threads())
    results["judge"] = model.id
    cache = JudgmentCache(None if quick else CACHE / "judge.sqlite")
    try:
        sub = [r for r in rows if r["doc_id"] in set(doc_ids[:sample_docs])]
        stats: dict = {}
        for mode in ("probs", "sample"):
            out, _ = judge_records(sub, "geval/summeval-coherence", model, mode=mode, n=n_sample, temperature=1.0,
                                   cache=cache, progress=False)
            secs = backend_seconds(cache, model.id, sub, "geval/summeval-coherence", mode, n_sample)
            stats[mode] = {"n": len(out), "seconds": secs, "s_per_judgment": secs / len(out),
                           "missing": sum(o["judge.coherence"] is None for o in out), "corr": corr(out, "coherence")}
        stats["n_samples"] = n_sample
        stats["speedup_probs_over_sample"] = stats["sample"]["seconds"] / max(stats["probs"]["seconds"], 1e-9)
        results["sample"] = stats
        results["main"] = {}
        for a in aspects:
            t = time.perf_counter()
            out, summ = judge_records(rows, f"geval/summeval-{a}", model, cache=cache, progress=not quick)
            results["main"][a] = {"docs_done": len(doc_ids), "n": len(out),
                                  "missing": sum(o[f"judge.{a}"] is None for o in out), "corr": corr(out, a),
                                  "mean_mass": sum(o.get(f"judge.{a}.mass") or 0 for o in out) / len(out)}
            log(f"{a}: {time.perf_counter() - t:.1f} s; {summ}")
    finally:
        cache.close()
    return results


def report(results: dict) -> str:
    """The Markdown report of ``results``."""
    lines = [f"# G-Eval judge on SummEval ({results['judge']})", "",
             f"Docs {results['docs']} (sorted doc_id order) x 16 systems; machine: {results['machine']}.", ""]
    if "reuse" in results:
        r = results["reuse"]
        lines += ["## Prefix reuse (same judgments, measured in one run)", "",
                  markdown_table([[r["n"], fmt(r["s_per_judgment_reuse"], 2), fmt(r["s_per_judgment_no_reuse"], 2),
                                   f"{r['ratio_reuse_over_no_reuse']:.3f}x", f"{r['max_abs_score_diff']:.2e}"]],
                                 ["n", "reuse", "no_reuse", "ratio", "diff"],
                                 headers=["judgments", "s/judgment with reuse", "s/judgment without", "ratio",
                                          "max score diff"]), ""]
    if "sample" in results:
        s = results["sample"]
        rows = [[m, s[m]["n"], fmt(s[m]["seconds"], 1), fmt(s[m]["s_per_judgment"], 2), s[m]["corr"]["spearman"],
                 s[m]["corr"]["kendall"], s[m]["missing"]] for m in ("probs", "sample")]
        lines += [f"## probs vs sample (n={s.get('n_samples', 20)}, temperature 1), coherence", "",
                  markdown_table(rows, list("abcdefg"), digits=4,
                                 headers=["mode", "judgments", "backend seconds", "s/judgment", "summary Spearman",
                                          "summary Kendall tau-b", "missing"]),
                  "", f"probs is {s['speedup_probs_over_sample']:.2f}x faster than sample n={s.get('n_samples', 20)}.", ""]
    if results.get("main"):
        rows = [[a, d["docs_done"], d["n"], d["missing"], d["corr"]["spearman"], d["corr"]["kendall"],
                 f"{d['corr']['n_docs']} / {d['corr']['n_skipped']}"] for a, d in results["main"].items()]
        lines += ["## Summary-level correlation with SummEval experts (probs mode)", "",
                  markdown_table(rows, list("abcdefg"), digits=4,
                                 headers=["aspect", "docs done", "judgments", "missing", "Spearman", "Kendall tau-b",
                                          "docs used / skipped"]), ""]
    return "\n".join(lines)
