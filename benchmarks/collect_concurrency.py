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
summary) and the process wall time; whether every arm produced the same candidates. Results:
``benchmarks/results/collect_concurrency.{json,md}``.

    nice -n 10 python benchmarks/bench_collect_concurrency.py            # SmolLM2-135M, a few minutes on 2 idle cores
    python benchmarks/bench_collect_concurrency.py --model qwen-0.5b --workers 2
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import log, machine, markdown_table, parser, setup, write_results

from csem.assets import resolve_gguf
from csem.data.records import read_records, write_records
from csem.llm.server import LlamaServer

EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "csem" / "pipeline" / "examples"


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
    texts = {r["id"]: r["candidate"] for r in read_records(out)}
    return {"collect_s": float(m.group(1)), "wall_s": wall, "samples": len(texts), "texts": texts, "load": load}


def warm_up(url: str, model: str) -> None:
    """One short request, so that no arm pays the server's first-request costs."""
    from csem.llm import GenerateConfig, get_model, run_sync

    run_sync(get_model(f"openai:{model}", base_url=url).generate([{"role": "user", "content": "Hello."}],
                                                                 GenerateConfig(max_tokens=4, seed=0)))


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still stops its server (context manager)
    ap = parser(__doc__, out="collect_concurrency", threads=1)
    ap.add_argument("--model", default="smollm2", help="GGUF alias or path served (smollm2 | qwen-0.5b | PATH)")
    ap.add_argument("--sources", type=int, default=2, help="news sources from the package examples")
    ap.add_argument("--num-samples", "-J", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--workers", type=int, default=2, help="server processes of the multi-slot server")
    ap.add_argument("--server-threads", type=int, default=1, help="threads per server process")
    ap.add_argument("--concurrency", default="1,4", help="the two concurrency settings compared")
    ap.add_argument("--repeats", type=int, default=3, help="runs per arm (alternating order; the median counts)")
    args = ap.parse_args()
    setup(args)
    levels = [int(c) for c in args.concurrency.split(",")]
    gguf = resolve_gguf(args.model)
    work = Path(tempfile.mkdtemp(prefix="csem-bench-collect-"))
    src = work / "sources.jsonl"
    write_records(read_records(EXAMPLES / "news_sources.jsonl", required=("source",))[: args.sources], src)
    n = args.sources * args.num_samples
    log(f"{machine()}; model {gguf.name}; {args.sources} sources x J={args.num_samples} = {n} samples of <= "
        f"{args.max_tokens} tokens; concurrency {levels}; {args.repeats} runs per arm")

    servers = {"llama_cpp.server (1 process)": dict(workers=1),
               f"uvicorn --workers {args.workers}": dict(workers=args.workers)}
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
    rows = [[a["server"], a["concurrency"], ", ".join(f"{x:.1f}" for x in a["collect_s"]), f"{a['collect_s_median']:.1f}",
             f"{a['samples_per_s']:.2f}", ", ".join(f"{x:.1f}" for x in a["wall_s"]),
             ", ".join(f"{x:.1f}" for x in a["load_before"])] for a in arms.values()]
    md = [f"# `csem collect` over a llama.cpp server: concurrency {levels[1]} vs {levels[0]}", "",
          f"{machine()}. Model {gguf.name}, {args.sources} sources x {args.num_samples} samples = {n} samples of at "
          f"most {args.max_tokens} tokens (top-k 50, seeded), {args.server_threads} thread(s) per server process; "
          f"{args.repeats} runs per arm, alternating; the ratio is of the medians.", "",
          markdown_table(rows, ["server", "concurrency", "collect s (runs)", "median s", "samples/s", "process s (runs)",
                                "load avg before each run"], align="lrrrrrr"),
          "", *[f"- {k}: concurrency {levels[1]} vs {levels[0]} = **{v:.2f}x** faster" for k, v in speedups.items()],
          f"- identical candidates in every run: {'yes' if same else 'NO'}"]
    js, mdp = write_results(args.out, data, md)
    log(f"wrote {js} and {mdp}")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
