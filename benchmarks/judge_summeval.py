"""G-Eval judge on SummEval: correlations with the experts, prefix reuse, probs vs n=20 sampling.

Data: ../shared/data/summeval/summeval.jsonl (Fabbri et al. 2021), documents 50..69 in sorted
doc_id order x 16 systems; source = ``source`` (untokenised article), candidate = ``summary``,
human = ``expert_mean``. Judge: ``local`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama.cpp, CPU).

Parts (run in this order, each resumable through the SQLite cache except ``reuse``):

1. ``reuse``: seconds per judgment with vs without KV prefix reuse on the same judgments
   (first doc x ``--reuse-n`` systems, coherence, probs), measured now, side by side, in one run,
   plus the largest score difference between the two.
2. ``sample``: ``probs`` vs G-Eval's ``sample`` (n=20, temperature 1) on ``--sample-docs`` docs x 16
   systems x coherence: time ratio (sum of the per-judgment backend latencies recorded in the cache
   when each judgment was computed) and both summary-level correlations.
3. ``main``: probs on all docs x systems, aspects in the order coherence, relevance, consistency,
   fluency; summary-level Spearman and Kendall tau-b (per document, averaged; documents where a
   side is constant are skipped and counted) via :func:`csem.meta.correlation.correlate`.

Results are rewritten after every document to benchmarks/results/judge_summeval.{json,md}.
Run: ``nohup python3 benchmarks/bench_judge_summeval.py > benchmarks/results/judge_summeval.log 2>&1 &``
(``--help`` lists the options; ``--data-dir`` or ``$CSEM_DATA`` locates SummEval.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness import CACHE, fmt, log, machine, markdown_table, now, parser, setup, summary_row, summeval, write_results

ASPECTS = ("coherence", "relevance", "consistency", "fluency")
JUDGE_FIELDS = ("id", "doc_id", "system_id", "source", "candidate")  # what the judge sees (prompts stay as cached)


def load_rows(data_dir, docs: str) -> list[dict]:
    """SummEval through csem's loader: untokenised article as source, G-Eval's ``system_output`` as
    candidate, expert means as ``human.<aspect>``; ordered by (sorted doc_id, system_id)."""
    return [{k: r[k] for k in JUDGE_FIELDS} | {f"human.{a}": r[f"human.{a}"] for a in ASPECTS}
            for r in summeval(data_dir, docs=docs)]


def corr(rows: list[dict], aspect: str, col: str | None = None) -> dict:
    """Summary-level Spearman and Kendall tau-b of ``judge.<aspect>`` (or ``col``) with the experts."""
    return summary_row(rows, col or f"judge.{aspect}", f"human.{aspect}", digits=4)


def latency_sum(cache, backend_id: str, rows: list[dict], rubric, mode: str, params: dict) -> float:
    from csem.judge.cache import judgment_key

    total = 0.0
    for r in rows:
        key = judgment_key(backend_id, rubric.render(r, rubric.aspect_names[0]), mode, params)
        row = cache.get(key)
        total += (row or {}).get("latency_s") or 0.0
    return total


def render(results: dict) -> list[str]:
    """The Markdown report of ``results``."""
    lines = [f"# G-Eval judge on SummEval ({results['judge']})", "",
             f"Docs {results['docs']} (sorted doc_id order) x 16 systems; machine: {results['machine']}; "
             f"updated {results['updated']}.", ""]
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
        lines += ["## probs vs sample (n=20, temperature 1), coherence", "",
                  markdown_table(rows, list("abcdefg"), digits=4,
                                 headers=["mode", "judgments", "backend seconds", "s/judgment", "summary Spearman",
                                          "summary Kendall tau-b", "missing"]),
                  "", f"probs is {s['speedup_probs_over_sample']:.2f}x faster than sample n=20.", ""]
    if results.get("main"):
        rows = [[a, d["docs_done"], d["n"], d["missing"], d["corr"]["spearman"], d["corr"]["kendall"],
                 f"{d['corr']['n_docs']} / {d['corr']['n_skipped']}"] for a, d in results["main"].items()]
        lines += ["## Summary-level correlation with SummEval experts (probs mode)", "",
                  markdown_table(rows, list("abcdefg"), digits=4,
                                 headers=["aspect", "docs done", "judgments", "missing", "Spearman", "Kendall tau-b",
                                          "docs used / skipped"]), ""]
    return lines


def main() -> int:
    ap = parser(__doc__, out="judge_summeval", threads=2)
    ap.add_argument("--docs", default="50:70", help="slice of the sorted doc ids (default 50:70)")
    ap.add_argument("--aspects", default=",".join(ASPECTS))
    ap.add_argument("--parts", default="reuse,sample,main")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--reuse-n", type=int, default=8, help="judgments in each arm of the reuse comparison")
    ap.add_argument("--sample-docs", type=int, default=2)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--cache", type=Path, default=CACHE / "judge.sqlite")
    args = ap.parse_args()
    setup(args)

    from csem.judge import JudgmentCache, judge_records
    from csem.llm.providers.llama_cpp import llama_cpp_backend
    from csem.rubrics import load_rubric

    rows = load_rows(args.data_dir, args.docs)
    doc_ids = list(dict.fromkeys(r["doc_id"] for r in rows))
    log(f"{len(rows)} records, {len(doc_ids)} docs")
    t0 = time.perf_counter()
    backend = llama_cpp_backend(args.judge.removeprefix("llama-cpp:"), n_threads=args.threads)
    log(f"judge {backend.id} loaded in {time.perf_counter() - t0:.1f} s")
    results = {"judge": backend.id, "docs": args.docs, "machine": f"{machine()}, {args.threads} threads",
               "updated": now()}
    prev = args.out.with_suffix(".json")
    if prev.exists():
        old = json.loads(prev.read_text())
        results.update({k: old[k] for k in ("reuse", "sample", "main") if k in old and old.get("docs") == results["docs"]})
    parts = args.parts.split(",")
    cache = JudgmentCache(args.cache)
    rub = {a: load_rubric(f"geval/summeval-{a}") for a in ASPECTS}

    def save() -> None:
        results["updated"] = now()
        write_results(args.out, results, render(results))

    if "reuse" in parts:
        sub = [r for r in rows if r["doc_id"] == doc_ids[0]][: args.reuse_n]
        arms = {}
        for arm, reuse in (("reuse", True), ("no_reuse", False)):
            backend.prefix_reuse = reuse
            backend.llm.reset()
            t = time.perf_counter()
            out, summ = judge_records(sub, rub["coherence"], backend, cache=None, progress=False)
            arms[arm] = (time.perf_counter() - t, [o["judge.coherence"] for o in out], summ)
            log(f"reuse={reuse}: {arms[arm][0]:.1f} s for {len(sub)} judgments; {summ}")
        backend.prefix_reuse = True
        diffs = [abs(a - b) for a, b in zip(arms["reuse"][1], arms["no_reuse"][1]) if a is not None and b is not None]
        n = len(sub)
        results["reuse"] = {"n": n, "s_per_judgment_reuse": arms["reuse"][0] / n,
                            "s_per_judgment_no_reuse": arms["no_reuse"][0] / n,
                            "ratio_reuse_over_no_reuse": arms["reuse"][0] / arms["no_reuse"][0],
                            "max_abs_score_diff": max(diffs) if diffs else float("nan"),
                            "evaluated_tokens_reuse": arms["reuse"][2].evaluated_tokens,
                            "evaluated_tokens_no_reuse": arms["no_reuse"][2].evaluated_tokens}
        log(f"RESULT reuse: {json.dumps(results['reuse'])}")
        save()

    if "sample" in parts:
        sub = [r for r in rows if r["doc_id"] in set(doc_ids[: args.sample_docs])]
        r = rub["coherence"]
        res = {}
        for mode in ("probs", "sample"):
            for d in doc_ids[: args.sample_docs]:
                part = [x for x in sub if x["doc_id"] == d]
                t = time.perf_counter()
                out, summ = judge_records(part, r, backend, mode=mode, n=args.n, temperature=1.0, cache=cache,
                                          progress=False)
                log(f"sample-part {mode} doc {d[:20]}: {time.perf_counter() - t:.1f} s; {summ}")
                for o in out:
                    res.setdefault(mode, {})[o["id"]] = o
        from csem.llm import GenerateConfig

        stats = {}
        for mode in ("probs", "sample"):
            outs = [res[mode][x["id"]] for x in sub]
            params = ({"scores": r.scale.values} if mode == "probs" else
                      GenerateConfig(n=args.n, max_tokens=10, temperature=1.0, top_k=0, top_p=1.0, seed=0).cache_params())
            secs = latency_sum(cache, backend.id, sub, r, mode, params)
            stats[mode] = {"n": len(outs), "seconds": secs, "s_per_judgment": secs / len(outs),
                           "missing": sum(o["judge.coherence"] is None for o in outs), "corr": corr(outs, "coherence")}
        stats["speedup_probs_over_sample"] = stats["sample"]["seconds"] / max(stats["probs"]["seconds"], 1e-9)
        results["sample"] = stats
        log(f"RESULT sample: {json.dumps(stats)}")
        save()

    if "main" in parts:
        results.setdefault("main", {})
        for a in [x for x in ASPECTS if x in args.aspects.split(",")]:
            done: list[dict] = []
            for i, d in enumerate(doc_ids, 1):
                part = [x for x in rows if x["doc_id"] == d]
                t = time.perf_counter()
                out, summ = judge_records(part, rub[a], backend, cache=cache, progress=False)
                done.extend(out)
                c = corr(done, a)
                results["main"][a] = {"docs_done": i, "n": len(done), "missing": sum(o[f"judge.{a}"] is None for o in done),
                                      "corr": c, "mean_mass": sum(o.get(f"judge.{a}.mass") or 0 for o in done) / len(done)}
                log(f"main {a} doc {i}/{len(doc_ids)}: {time.perf_counter() - t:.1f} s ({summ.judged} judged, "
                    f"{summ.cached} cached); running summary-level spearman {c['spearman']} kendall {c['kendall']}")
                save()
        log(f"RESULT main: {json.dumps(results['main'])}")
    cache.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
