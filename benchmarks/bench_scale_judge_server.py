"""The judge through an OpenAI-compatible server vs in process: same probs-mode scores? (issue 22)

The CPU stand-in for the vLLM check of docs/guides/scale.md (no GPU machine was lent): the default
local judge (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) judges the same SummEval summaries on G-Eval
coherence in probs mode twice: in process through llama-cpp-python (``llama-cpp:PATH``: exact
probabilities of the scale's tokens) and through llama.cpp's OpenAI-compatible server on loopback
(``openai:`` backend, ``--judge-opt base_url=...``: the first answer token's top-20 logprobs, the
path a vLLM server is read through). Reported: per-record scores of both, their largest
difference, the valid-score mass the server's top-20 showed, and seconds per judgment of each
(llama-cpp-python 0.3.36's server serves one request at a time, so concurrency is not measured:
that needs vLLM).

Run (figures in results/scale_judge_server.*):
    nice -n 10 python benchmarks/bench_scale_judge_server.py --threads 2 --records 6
"""

from __future__ import annotations

import time

from harness import fmt, log, machine, markdown_table, parser, setup, summeval, write_results


def main() -> None:
    ap = parser(__doc__, out="scale_judge_server", quick=True)
    ap.add_argument("--records", type=int, default=6, help="summaries judged (first documents, 2 systems each)")
    args = ap.parse_args()
    if args.quick:
        args.records = 2
    setup(args)
    from csem.assets import local_judge_gguf
    from csem.judge import judge_records
    from csem.llm.server import LlamaServer

    rubric = "geval/summeval-coherence"
    recs = [r for r in summeval(args.data_dir, docs=f":{(args.records + 1) // 2}")
            if r["system_id"] in ("M11", "M23")][:args.records]
    recs = [{"id": f"{r['doc_id']}/{r['system_id']}", "source": r["source"], "candidate": r["candidate"]} for r in recs]
    gguf = local_judge_gguf()
    t = time.perf_counter()
    inproc, s_in = judge_records(recs, rubric, f"llama-cpp:{gguf}", progress=False, cache=None,
                                 backend_options={"n_threads": args.threads, "n_ctx": 2048})
    t_in = time.perf_counter() - t
    log(f"in process: {len(recs)} judgments in {t_in:.1f} s")
    with LlamaServer(gguf, n_ctx=2048, n_threads=args.threads) as srv:
        t = time.perf_counter()
        served, s_srv = judge_records(recs, rubric, "openai:qwen2.5-coder-1.5b", progress=False, cache=None,
                                      backend_options={"base_url": srv.url, "concurrency": 1})
        t_srv = time.perf_counter() - t
    log(f"server: {len(recs)} judgments in {t_srv:.1f} s")
    col = "judge.coherence"
    rows = []
    for a, b in zip(inproc, served):
        d = None if a[col] is None or b[col] is None else abs(a[col] - b[col])
        rows.append({"id": a["id"], "in_process": a[col], "server": b[col], "abs_diff": d,
                     "server_mass": b.get(f"{col}.mass"), "in_process_mass": a.get(f"{col}.mass")})
    diffs = [r["abs_diff"] for r in rows if r["abs_diff"] is not None]
    data = {"machine": machine(), "judge": f"Qwen2.5-Coder-1.5B-Instruct Q4_K_M ({gguf.name})", "rubric": rubric,
            "mode": "probs", "records": rows, "max_abs_diff": max(diffs) if diffs else None,
            "seconds_per_judgment": {"in_process": t_in / len(recs), "server": t_srv / len(recs)},
            "summaries": {"in_process": s_in.as_dict(), "server": s_srv.as_dict()}}
    table = markdown_table(
        [{**r, "a": fmt(r["in_process"], 4), "b": fmt(r["server"], 4), "d": fmt(r["abs_diff"], 4),
          "m": fmt(r["server_mass"], 4)} for r in rows],
        ["id", "a", "b", "d", "m"],
        headers=["summary", "in process (llama-cpp)", "server (openai: top-20 logprobs)", "abs diff",
                 "valid mass in server's top-20"])
    md = ["# The judge through an OpenAI-compatible server vs in process (bench_scale_judge_server.py)", "",
          f"Machine: {machine()}. {data['judge']}, {rubric}, probs mode, {len(recs)} SummEval summaries "
          f"(first documents, systems M11 and M23), {args.threads} threads each way. In process: "
          f"{t_in / len(recs):.1f} s per judgment; llama.cpp server on loopback (one request at a time): "
          f"{t_srv / len(recs):.1f} s per judgment. Largest score difference: "
          f"{fmt(data['max_abs_diff'], 4)}.", "", table]
    j, mdp = write_results(args.out, data, md)
    log(f"wrote {j} and {mdp}")
    print("\n".join(md))


if __name__ == "__main__":
    main()
