"""`csem collect` against a real llama.cpp OpenAI-compatible server on loopback: concurrency 4 vs 1.

Stage i asks the backend for every sample of a generator at once, and the LLM wrapper
(``csem.llm.Model``) keeps at most ``concurrency`` requests in flight. Whether that is faster depends
on the server having parallel slots: llama-cpp-python 0.3.36's ``python -m llama_cpp.server`` has
none (no ``n_parallel``; one global lock serves one request at a time), so the script measures two
servers, side by side in one run, each with ``--generator-opt concurrency=1`` and ``=4`` on the same
sources and seeds:

* ``llama_cpp.server``: the stock server, one process;
* ``uvicorn --workers W``: the same app in W processes sharing the port (each its own model copy,
  ``--server-threads`` threads each), i.e. W parallel slots.

Each arm is one ``nice -n 10 csem collect`` process (the real command line); arms alternate
(1, 4, 4, 1, ...) to spread the drift of a shared machine. Figures: the stage's own time (collect's
summary) and the process wall time; whether every arm produced the same candidates. SmolLM2-135M,
2 sources x 4 samples of at most 24 tokens, 2 worker processes of 1 thread, 3 runs per arm (a few
minutes on 2 idle cores). ``quick``: the stock server only, 1 source x 2 samples of 8 tokens, 1 run per arm.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from types import SimpleNamespace

from benchmarks.suite import log, machine, markdown_table

FULL = dict(model="smollm2", sources=2, num_samples=4, max_tokens=24, workers=2, server_threads=1,
            concurrency=(1, 4), repeats=3, seed=0)
QUICK = FULL | dict(sources=1, num_samples=2, max_tokens=8, workers=1, repeats=1)


def run_collect(src: Path, url: str, concurrency: int, out: Path, args) -> dict:
    cmd = ["nice", "-n", "10", sys.executable, "-m", "csem", "collect", "--sources", str(src),
           "--generator", f"gen=openai:{args.model}", "-J", str(args.num_samples), "--max-tokens", str(args.max_tokens),
           "--seed", str(args.seed), "--no-reference", "--duplicates", "keep", "--empty", "keep",
           "--generator-opt", f"base_url={url}", "--generator-opt", f"concurrency={concurrency}", "--out", str(out)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"csem collect failed ({res.returncode}): {res.stderr[-2000:]}")
    m = re.search(r"dropped \d+, ([\d.]+) s", res.stdout)
    from csem.data.records import read_records

    texts = {r["id"]: r["candidate"] for r in read_records(out)}
    return {"collect_s": float(m.group(1)), "wall_s": wall, "samples": len(texts), "texts": texts, "load": load}


def warm_up(url: str, model: str) -> None:
    """One short request, so that no arm pays the server's first-request costs."""
    from csem.llm import GenerateConfig, get_model, run_sync

    run_sync(get_model(f"openai:{model}", base_url=url).generate([{"role": "user", "content": "Hello."}],
                                                                 GenerateConfig(max_tokens=4, seed=0)))


def run(quick: bool = False) -> dict:
    """Time ``csem collect`` at two concurrency settings against one- and multi-process servers."""
    from csem.assets import resolve_gguf
    from csem.data.records import read_records, write_records
    from csem.llm.server import LlamaServer
    from csem.pipeline.config import resolve_path

    args = SimpleNamespace(**(QUICK if quick else FULL))
    levels = list(args.concurrency)
    gguf = resolve_gguf(args.model)
    work = Path(tempfile.mkdtemp(prefix="csem-bench-collect-"))
    src = work / "sources.jsonl"
    write_records(read_records(resolve_path("package:news_sources.jsonl", work), required=("source",))[: args.sources], src)
    n = args.sources * args.num_samples
    log(f"{machine()}; model {gguf.name}; {args.sources} sources x J={args.num_samples} = {n} samples of <= "
        f"{args.max_tokens} tokens; concurrency {levels}; {args.repeats} runs per arm")

    servers = {"llama_cpp.server (1 process)": dict(workers=1)}
    if args.workers > 1:
        servers[f"uvicorn --workers {args.workers}"] = dict(workers=args.workers)
    arms: dict[str, dict] = {}
    texts: dict[str, dict] = {}
    for sname, kw in servers.items():
        with LlamaServer(gguf, n_ctx=2048, n_threads=args.server_threads, nice=10, **kw) as srv:
            warm_up(srv.url, args.model)
            order = [lv for r in range(args.repeats) for lv in (levels if r % 2 == 0 else levels[::-1])]
            for i, lv in enumerate(order):
                r = run_collect(src, srv.url, lv, work / f"out-{len(arms)}-{i}.jsonl", args)
                key = f"{sname}, concurrency {lv}"
                a = arms.setdefault(key, {"server": sname, "workers": kw["workers"], "concurrency": lv,
                                          "collect_s": [], "wall_s": [], "load_before": []})
                a["collect_s"].append(round(r["collect_s"], 2))
                a["wall_s"].append(round(r["wall_s"], 2))
                a["load_before"].append(round(r["load"], 1))
                texts[f"{key} #{i}"] = r["texts"]
                log(f"{key}: collect {r['collect_s']:.1f} s, process {r['wall_s']:.1f} s ({r['samples']} samples)")
    for a in arms.values():
        a["collect_s_median"] = statistics.median(a["collect_s"])
        a["collect_s_min"] = min(a["collect_s"])
        a["samples_per_s"] = round(n / a["collect_s_median"], 3)
    ref = next(iter(texts.values()))
    same = all(t == ref for t in texts.values())
    speedups = {}
    for sname in servers:
        lo, hi = (arms[f"{sname}, concurrency {lv}"]["collect_s_median"] for lv in levels)
        speedups[sname] = round(lo / hi, 3)
    data = {"machine": machine(), "model": gguf.name, "sources": args.sources, "num_samples": args.num_samples,
            "samples": n, "max_tokens": args.max_tokens, "server_threads": args.server_threads,
            "concurrency": levels, "repeats": args.repeats, "arms": arms,
            "speedup": {k: {"ratio": v, "of": f"concurrency {levels[1]} vs {levels[0]}"} for k, v in speedups.items()},
            "identical_candidates_in_every_run": same}
    return data


def report(data: dict) -> str:
    """The Markdown report: collect seconds per server and concurrency, the speed-ups, identical candidates."""
    levels, n = data["concurrency"], data["samples"]
    rows = [[a["server"], a["concurrency"], ", ".join(f"{x:.1f}" for x in a["collect_s"]), f"{a['collect_s_median']:.1f}",
             f"{a['samples_per_s']:.2f}", ", ".join(f"{x:.1f}" for x in a["wall_s"])] for a in data["arms"].values()]
    md = [f"# `csem collect` over a llama.cpp server: concurrency {levels[1]} vs {levels[0]}", "",
          f"{data['machine']}. Model {data['model']}, {data['sources']} sources x {data['num_samples']} samples = {n} "
          f"samples of at most {data['max_tokens']} tokens (top-k 50, seeded), {data['server_threads']} thread(s) per "
          f"server process; {data['repeats']} runs per arm, alternating; the ratio is of the medians.", "",
          markdown_table(rows, ["server", "concurrency", "collect s (runs)", "median s", "samples/s", "process s (runs)"],
                         align="lrrrrr"),
          "", *[f"- {k}: concurrency {levels[1]} vs {levels[0]} = **{v['ratio']:.2f}x** faster"
                for k, v in data["speedup"].items()],
          f"- identical candidates in every run: {'yes' if data['identical_candidates_in_every_run'] else 'NO'}"]
    return "\n".join(md)
