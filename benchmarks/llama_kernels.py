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
machine, only the fallback arm runs and the ratio is not measured. Qwen2.5-Coder-0.5B, 2 articles x 4
summaries, 2 runs per arm and regime (~3 min on 2 cores). ``quick``: 1 article x 2 summaries, 1 run.
"""

from __future__ import annotations

import asyncio
import time

from types import SimpleNamespace

from benchmarks.suite import log, machine, markdown_table, summeval, threads

from csem.assets import resolve_gguf, sha256_file
from csem.llm.providers.llama_cpp import LlamaCppBackend
from csem.llm.providers.llama_cpp_kernels import build_info, cpu_info, extra_bufts_usable
from csem.rubrics import load_rubric

FULL = dict(model="qwen-0.5b", docs=2, per_doc=4, repeats=2)
QUICK = dict(model="qwen-0.5b", docs=1, per_doc=2, repeats=1)


def prompts(args) -> list[list[dict]]:
    rubric = load_rubric("geval/summeval-coherence")
    recs = summeval(slice(0, args.docs))
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


def run(quick: bool = False) -> dict:
    """Judge the same prompts with the extra buffer types on and off, cold and warm."""
    args = SimpleNamespace(**(QUICK if quick else FULL), threads=threads())
    path = resolve_gguf(args.model)
    decision = extra_bufts_usable(path, sha256_file(path))
    msgs = prompts(args)
    log(f"{len(msgs)} prompts; probe: {decision['outcome']} ({decision['source']})")
    arms = [True, False] if decision["use_extra_bufts"] else [False]
    results = {}
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
    data = {"model": path.name, "prompts": len(msgs), "docs": args.docs, "per_doc": args.per_doc,
            "repeats": args.repeats, "threads": args.threads, "probe": decision, "cpu": cpu_info(),
            "llama_cpp": build_info(), "machine": machine(), "results": results}
    return data


def report(data: dict) -> str:
    """The Markdown report: judgments/s and tokens/s per arm and regime, the fallback's cost."""
    rows = []
    for regime, agg in data["results"].items():
        for arm in ("on", "off"):
            if arm in agg:
                rows.append([regime, arm, f"{agg[arm]['judgments_per_s']:.3f}", f"{agg[arm]['tokens_per_s']:.1f}",
                             f"{agg[arm]['seconds_per_judgment']:.3f}",
                             f"{agg['off_over_on_time']:.2f}x" if arm == "off" and "on" in agg else "",
                             f"{agg['max_score_diff']:.4f}" if arm == "off" and "on" in agg else ""])
    d = data
    md = [f"# llama.cpp extra buffer types (AMX / repacking) on vs off: {d['model']}", "",
          f"{d['machine']}; llama-cpp-python {d['llama_cpp'].get('version')}; CPU flags: {' '.join(d['cpu']['flags'])}; "
          f"probe on this machine: {d['probe']['outcome']}.", "",
          f"{d['prompts']} G-Eval coherence prompts (SummEval, {d.get('docs', 2)} articles x {d.get('per_doc', 4)} "
          f"summaries), probs mode, {d['threads']} threads, {d['repeats']} runs per arm and regime, arms alternating. "
          "cold = every prompt evaluated whole; warm = the judge's real path (an article's prefix reused across its summaries).", "",
          markdown_table(rows, ["regime", "extra bufts", "judgments/s", "evaluated tokens/s", "s/judgment",
                                "fallback time ratio", "max abs score diff"])]
    return "\n".join(md)
