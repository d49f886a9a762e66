"""Load test of ``csem serve`` on loopback: requests/s and latency percentiles (issue 12).

Serves the GPT-4 student of bench_apply_rerank.py (``--student`` or the cached one) with FastAPI +
uvicorn in this process (a real HTTP server on 127.0.0.1) and sends POST /score requests from
concurrent httpx clients; each request carries ``--records`` SummEval summaries (docs 50-99, with
their article). Settings are measured side by side in one run. ``--judge-requests K`` also serves
the local judge (G-Eval relevance, probs mode) through the same endpoint and sends K one-record
requests, for the judge's rate beside the student's (slow: each is one 1.5B forward pass over the
article).

Run (figures in results/apply_serve.*):
    nice -n 10 python benchmarks/bench_apply_serve.py --threads 2
"""

from __future__ import annotations

import time

from bench_apply_rerank import get_student
from harness import fmt, log, machine, markdown_table, parser, setup, summeval, write_results


def main() -> None:
    ap = parser(__doc__, out="apply_serve", quick=True)
    ap.add_argument("--requests", type=int, default=96, help="requests per setting")
    ap.add_argument("--judge-requests", type=int, default=0, help="one-record requests to the served judge")
    ap.add_argument("--student", default=None)
    args = ap.parse_args()
    if args.quick:
        args.requests = 8
    setup(args)
    from csem.apply.metrics import JudgeMetric, load_metric
    from csem.apply.server import BackgroundServer, load_test

    student_dir, origin = get_student(args)
    recs = [{"id": f"{r['doc_id']}/{r['system_id']}", "source": r["source"], "candidate": r["candidate"]}
            for r in summeval(args.data_dir, docs="50:100")]
    metric = load_metric(str(student_dir))
    settings = [(1, 1), (1, 8), (8, 1), (8, 8)]  # (records per request, concurrent clients)
    rows, data = [], {"machine": machine(), "student": origin, "settings": []}
    with BackgroundServer(metric, max_batch=256, max_wait_ms=5) as srv:
        load_test(srv.url, recs[:8], requests=4, records_per_request=1, concurrency=1)  # warm-up
        for per_req, conc in settings:
            t = time.perf_counter()
            res = load_test(srv.url, recs, requests=args.requests, records_per_request=per_req, concurrency=conc)
            log(f"student: {per_req} record(s)/request, {conc} clients: {res.requests_per_s:.1f} req/s, "
                f"p50 {res.p50_ms:.0f} ms, p99 {res.p99_ms:.0f} ms ({time.perf_counter() - t:.0f} s)")
            rows.append({"metric": "student", "records": per_req, "clients": conc, **res.as_dict()})
    if args.judge_requests:
        judge = JudgeMetric("local", ["geval/summeval-relevance"], cache=None)
        with BackgroundServer(judge, max_batch=8, max_wait_ms=5) as srv:
            res = load_test(srv.url, recs[100:], requests=args.judge_requests, records_per_request=1, concurrency=1)
            log(f"local judge: {res.requests_per_s:.3f} req/s, p50 {res.p50_ms:.0f} ms")
            rows.append({"metric": "local judge (relevance)", "records": 1, "clients": 1, **res.as_dict()})
    data["settings"] = rows
    table = markdown_table(
        [{**r, "rps": fmt(r["requests_per_s"], 2), "recps": fmt(r["records_per_s"], 1), "p50": fmt(r["p50_ms"], 0),
          "p99": fmt(r["p99_ms"], 0)} for r in rows],
        ["metric", "records", "clients", "requests", "errors", "rps", "recps", "p50", "p99"],
        headers=["served metric", "records/request", "clients", "requests", "errors", "requests/s", "records/s",
                 "p50 ms", "p99 ms"])
    md = ["# Scoring endpoint load test (bench_apply_serve.py)", "",
          f"Machine: {machine()}. `csem serve` (FastAPI + uvicorn, loopback, dynamic batching up to 256 records, "
          f"5 ms wait) with {origin}; SummEval summaries of docs 50-99 with their articles.", "", table]
    j, mdp = write_results(args.out, data, md)
    log(f"wrote {j} and {mdp}")
    print("\n".join(md))


if __name__ == "__main__":
    main()
