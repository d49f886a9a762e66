"""What the AMX/repacking fallback costs: judge throughput with llama.cpp's extra buffer types on vs off.

On CPUs where a batched decode crashes in llama.cpp's extra buffer types (Intel AMX; see
``csem.llm.providers.llama_cpp_kernels``), csem loads GGUF models with ``use_extra_bufts=False``. This
script measures, side by side in one run on a machine where both paths work, what that fallback costs:
the same G-Eval prompts (SummEval articles and summaries, ``geval/summeval-coherence``, probs mode) are
scored in process by the same model loaded twice, once per arm, the arms alternating (on, off, off, on,
...) to spread the drift of a shared machine. Two regimes per arm:

* ``cold``: ``prefix_reuse=False``, every prompt evaluated whole (prompt processing, batches of 32);
* ``warm``: the judge's real path, candidates of one article in a row sharing the article's KV prefix.

Figures: judgments/s and evaluated tokens/s per arm and regime, the off/on ratio, and the largest score
difference between the arms (kernel rounding). Where the probe says the extra buffer types crash on this
machine, only the fallback arm runs and the ratio is not measured. Results:
``benchmarks/results/llama_kernels.{json,md}``.

    nice -n 5 python benchmarks/bench_llama_kernels.py                       # qwen-0.5b, ~3 min on 2 cores
    python benchmarks/bench_llama_kernels.py --model local --docs 2 --per-doc 4
"""

from __future__ import annotations

import asyncio
import time

from harness import log, machine, markdown_table, parser, setup, summeval, write_results

from csem.assets import resolve_gguf
from csem.llm.providers.llama_cpp import LlamaCppBackend, _file_sha256
from csem.llm.providers.llama_cpp_kernels import build_info, cpu_info, extra_bufts_usable
from csem.rubrics import load_rubric


def prompts(args) -> list[list[dict]]:
    rubric = load_rubric("geval/summeval-coherence")
    recs = summeval(args.data_dir, docs=f"0:{args.docs}")
    out = []
    for doc in sorted({r["doc_id"] for r in recs}):
        for r in [r for r in recs if r["doc_id"] == doc][: args.per_doc]:
            out.append(rubric.render(r))
    return out


def run_arm(path, extra_bufts: bool, msgs, *, reuse: bool, threads: int) -> dict:
    b = LlamaCppBackend(path, n_ctx=4096, n_threads=threads, prefix_reuse=reuse, extra_bufts=extra_bufts)
    scale = [1, 2, 3, 4, 5]
    asyncio.run(b.score_distribution(msgs[0], scale))  # warm-up (page in the weights)
    b.llm.reset()
    b.stats.update(requests=0, prompt_tokens=0, evaluated_tokens=0)
    t0 = time.perf_counter()
    scores = []
    for m in msgs:
        d = asyncio.run(b.score_distribution(m, scale))
        scores.append(sum(s * p for s, p in d.probs.items()) / max(d.mass, 1e-12))
    secs = time.perf_counter() - t0
    tokens = b.stats["evaluated_tokens"]
    b.close()
    return {"seconds": secs, "judgments": len(msgs), "evaluated_tokens": tokens, "scores": scores}


def main() -> None:
    ap = parser(__doc__, out="llama_kernels")
    ap.add_argument("--model", default="qwen-0.5b", help="GGUF alias or path (default qwen-0.5b)")
    ap.add_argument("--docs", type=int, default=2, help="SummEval articles (default 2)")
    ap.add_argument("--per-doc", type=int, default=4, help="summaries per article (default 4)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per arm and regime (default 2)")
    args = ap.parse_args()
    setup(args)
    path = resolve_gguf(args.model)
    decision = extra_bufts_usable(path, _file_sha256(path))
    msgs = prompts(args)
    log(f"{len(msgs)} prompts; probe: {decision['outcome']} ({decision['source']})")
    arms = [True, False] if decision["use_extra_bufts"] else [False]
    rows, results = [], {}
    for regime, reuse in (("cold", False), ("warm", True)):
        runs = {a: [] for a in arms}
        order = [a for i in range(args.repeats) for a in (arms if i % 2 == 0 else arms[::-1])]
        for arm in order:
            r = run_arm(path, arm, msgs, reuse=reuse, threads=args.threads)
            runs[arm].append(r)
            log(f"{regime} extra_bufts={arm}: {r['judgments'] / r['seconds']:.3f} judgments/s")
        agg = {}
        for arm, rs in runs.items():
            secs = sum(r["seconds"] for r in rs)
            agg["on" if arm else "off"] = {
                "judgments_per_s": sum(r["judgments"] for r in rs) / secs,
                "tokens_per_s": sum(r["evaluated_tokens"] for r in rs) / secs,
                "seconds_per_judgment": secs / sum(r["judgments"] for r in rs)}
        if "on" in agg:
            diff = max(abs(a - b) for a, b in zip(runs[True][0]["scores"], runs[False][0]["scores"]))
            agg["off_over_on_time"] = agg["off"]["seconds_per_judgment"] / agg["on"]["seconds_per_judgment"]
            agg["max_score_diff"] = diff
        results[regime] = agg
        for arm in ("on", "off"):
            if arm in agg:
                rows.append([regime, arm, f"{agg[arm]['judgments_per_s']:.3f}", f"{agg[arm]['tokens_per_s']:.1f}",
                             f"{agg[arm]['seconds_per_judgment']:.3f}",
                             f"{agg['off_over_on_time']:.2f}x" if arm == "off" and "on" in agg else "",
                             f"{agg['max_score_diff']:.4f}" if arm == "off" and "on" in agg else ""])
    data = {"model": path.name, "prompts": len(msgs), "repeats": args.repeats, "threads": args.threads,
            "probe": decision, "cpu": cpu_info(), "llama_cpp": build_info(), "machine": machine(),
            "results": results}
    md = [f"# llama.cpp extra buffer types (AMX / repacking) on vs off: {path.name}", "",
          f"{machine()}; llama-cpp-python {build_info().get('version')}; CPU flags: {' '.join(cpu_info()['flags'])}; "
          f"probe on this machine: {decision['outcome']}.", "",
          f"{len(msgs)} G-Eval coherence prompts (SummEval, {args.docs} articles x {args.per_doc} summaries), probs mode, "
          f"{args.threads} threads, {args.repeats} runs per arm and regime, arms alternating. cold = every prompt "
          "evaluated whole; warm = the judge's real path (an article's prefix reused across its summaries).", "",
          markdown_table(rows, ["regime", "extra bufts", "judgments/s", "evaluated tokens/s", "s/judgment",
                                "fallback time ratio", "max |score diff|"])]
    write_results(args.out, data, md)


if __name__ == "__main__":
    main()
