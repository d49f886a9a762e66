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
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASPECTS = ("coherence", "relevance", "consistency", "fluency")


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def load_summeval(data: Path, docs: slice) -> list[dict]:
    rows = [json.loads(line) for line in (data / "summeval" / "summeval.jsonl").open(encoding="utf-8")]
    doc_ids = sorted({r["doc_id"] for r in rows})[docs]
    keep = set(doc_ids)
    out = []
    for r in rows:
        if r["doc_id"] in keep:
            rec = {"id": f"{r['doc_id']}/{r['system_id']}", "doc_id": r["doc_id"], "system_id": r["system_id"],
                   "source": r["source"], "candidate": r["summary"]}
            rec.update({f"human.{a}": float(v) for a, v in r["expert_mean"].items()})
            out.append(rec)
    order = {d: i for i, d in enumerate(doc_ids)}
    out.sort(key=lambda r: (order[r["doc_id"]], r["system_id"]))
    return out


def corr(rows: list[dict], aspect: str, col: str | None = None) -> dict:
    from csem.meta.correlation import correlate

    col = col or f"judge.{aspect}"
    m = [r.get(col) for r in rows]
    h = [r[f"human.{aspect}"] for r in rows]
    g = [r["doc_id"] for r in rows]
    out = {}
    for method in ("spearman", "kendall"):
        c = correlate(m, h, level="summary", method=method, groups=g)
        out[method] = None if math.isnan(c.value) else round(c.value, 4)
        out["n_docs"], out["n_skipped"], out["n_pairs"], out["n_missing"] = c.n_groups, c.n_skipped, c.n_pairs, c.n_missing
    return out


def latency_sum(cache, backend_id: str, rows: list[dict], rubric, mode: str, params: dict) -> float:
    from csem.judge.cache import judgment_key

    total = 0.0
    for r in rows:
        key = judgment_key(backend_id, rubric.render(r, rubric.aspect_names[0]), mode, params)
        row = cache.get(key)
        total += (row or {}).get("latency_s") or 0.0
    return total


def write_results(results: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    lines = [f"# G-Eval judge on SummEval ({results['judge']})", "",
             f"Docs {results['docs']} (sorted doc_id order) x 16 systems; machine: {results['machine']}; "
             f"updated {results['updated']}.", ""]
    if "reuse" in results:
        r = results["reuse"]
        lines += ["## Prefix reuse (same judgments, measured in one run)", "",
                  "| judgments | s/judgment with reuse | s/judgment without | ratio | max score diff |",
                  "| --- | --- | --- | --- | --- |",
                  f"| {r['n']} | {r['s_per_judgment_reuse']:.2f} | {r['s_per_judgment_no_reuse']:.2f} | "
                  f"{r['ratio_reuse_over_no_reuse']:.3f}x | {r['max_abs_score_diff']:.2e} |", ""]
    if "sample" in results:
        s = results["sample"]
        lines += ["## probs vs sample (n=20, temperature 1), coherence", "",
                  "| mode | judgments | backend seconds | s/judgment | summary Spearman | summary Kendall tau-b | missing |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for m in ("probs", "sample"):
            d = s[m]
            lines.append(f"| {m} | {d['n']} | {d['seconds']:.1f} | {d['s_per_judgment']:.2f} | {d['corr']['spearman']} | "
                         f"{d['corr']['kendall']} | {d['missing']} |")
        lines += ["", f"probs is {s['speedup_probs_over_sample']:.2f}x faster than sample n=20.", ""]
    if results.get("main"):
        lines += ["## Summary-level correlation with SummEval experts (probs mode)", "",
                  "| aspect | docs done | judgments | missing | Spearman | Kendall tau-b | docs used / skipped |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for a, d in results["main"].items():
            c = d["corr"]
            lines.append(f"| {a} | {d['docs_done']} | {d['n']} | {d['missing']} | {c['spearman']} | {c['kendall']} | "
                         f"{c['n_docs']} / {c['n_skipped']} |")
        lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("CSEM_SHARED_DATA", ROOT.parent / "shared" / "data")))
    ap.add_argument("--docs", default="50:70", help="slice of the sorted doc ids (default 50:70)")
    ap.add_argument("--aspects", default=",".join(ASPECTS))
    ap.add_argument("--parts", default="reuse,sample,main")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--reuse-n", type=int, default=8, help="judgments in each arm of the reuse comparison")
    ap.add_argument("--sample-docs", type=int, default=2)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / ".cache" / "judge.sqlite")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_summeval")
    args = ap.parse_args()

    from csem.judge import JudgmentCache, judge_records
    from csem.llm.providers.llama_cpp import llama_cpp_backend
    from csem.rubrics import load_rubric

    lo, hi = (int(x) for x in args.docs.split(":"))
    rows = load_summeval(args.data, slice(lo, hi))
    doc_ids = list(dict.fromkeys(r["doc_id"] for r in rows))
    log(f"{len(rows)} records, {len(doc_ids)} docs")
    t0 = time.perf_counter()
    backend = llama_cpp_backend(args.judge.removeprefix("llama-cpp:"), n_threads=args.threads)
    log(f"judge {backend.id} loaded in {time.perf_counter() - t0:.1f} s")
    results = {"judge": backend.id, "docs": f"{lo}:{hi}", "machine": f"{platform.machine()}, {os.cpu_count()} cpu, "
               f"{args.threads} threads", "updated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    prev = args.out.with_suffix(".json")
    if prev.exists():
        old = json.loads(prev.read_text())
        results.update({k: old[k] for k in ("reuse", "sample", "main") if k in old and old.get("docs") == results["docs"]})
    parts = args.parts.split(",")
    cache = JudgmentCache(args.cache)
    rub = {a: load_rubric(f"geval/summeval-{a}") for a in ASPECTS}

    def save() -> None:
        results["updated"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        write_results(results, args.out)

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
    sys.exit(main())
