"""Fault sweep of ``csem serve`` on loopback: limits, auth, validation, memory, and a bounded load test (issue 20).

Starts the real server (``python -m csem serve``, a separate process, so its resident memory is
measured from outside with psutil) with a bearer token and the default limits, then sends:

1. faults: no/wrong token (401), ``text/plain`` and form bodies (415), broken JSON (400), a 5 MiB
   body and a 10 MB candidate (413), 513 records (413), a 150,000-character candidate (422), empty,
   whitespace and NUL texts and a missing source (422 naming the record and field); each answer's
   status, whether its body is a JSON error, and its latency; and whether ``/health`` shows the
   model's path;
2. memory: RSS after warm-up, then ``--large`` times a request of the largest size allowed (512
   SummEval summaries with their articles), RSS after each (and its peak while scoring), and
   the issue's 11 MB, 4,096-record request (refused now); RSS at the end;
3. a bounded load test: ``--requests`` requests (at most ``--max-seconds`` each setting) of 1 and 8
   records from 8 concurrent clients: requests/s, p50/p95/p99 latency, errors;
4. while a 10 MB request is refused, the latency of a concurrent one-record request (does one
   client's huge body stall the others?).

The student: ``--student DIR``, else a small one trained here once (frozen all-MiniLM-L6-v2, two
epochs of its heads on GPT-4 ratings of SummEval documents 0-19; cached): its quality is beside
the point, its size (MiniLM) is what the server holds.

Run (figures in results/serve_faults.*):
    nice -n 10 python benchmarks/bench_serve_faults.py --threads 2
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import CACHE, fmt, log, machine, markdown_table, parser, setup, summeval, summeval_llm_ratings, write_results

TOKEN = "bench-token"


def get_student(args) -> tuple[Path, str]:
    if args.student:
        return Path(args.student), f"given: {args.student}"
    from csem.model import ModelConfig, TrainConfig, fit

    out = CACHE / "serve_faults" / "student_minilm_heads"
    origin = "frozen all-MiniLM-L6-v2 with heads trained 2 epochs on GPT-4 ratings of SummEval docs 0-19"
    if (out / "model.safetensors").exists():
        return out, origin + " (cached)"
    recs = [r for r in summeval_llm_ratings(args.data_dir, docs="0:20")
            if r.get("judge.coherence") is not None and r.get("judge.relevance") is not None]
    t = time.perf_counter()
    fit(recs, ["judge.coherence", "judge.relevance"], "ref-free", out_dir=out, config=ModelConfig(name="student"),
        train_config=TrainConfig(max_epochs=2, frozen_epochs=2, batch_size=16, seed=0, precision="32-true",
                                 num_threads=args.threads, train_layers=0), label_range=(1, 5))
    log(f"student trained in {time.perf_counter() - t:.0f} s on {len(recs)} summaries")
    return out, origin


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m csem serve`` in a child process, its RSS sampled from outside."""

    def __init__(self, student: Path, threads: int):
        import psutil

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", CSEM_SERVE_TOKEN=TOKEN)
        self.proc = subprocess.Popen([sys.executable, "-m", "csem", "serve", "--model", str(student), "--port",
                                      str(self.port), "--threads", str(threads)], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.ps = psutil.Process(self.proc.pid)
        self.peak = 0
        self._sampling = False

    def wait(self, timeout: float = 300) -> float:
        import httpx

        t0 = time.perf_counter()
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(self.proc.stderr.read().decode())
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError("csem serve did not come up")
            time.sleep(0.5)

    def rss_mb(self) -> float:
        return self.ps.memory_info().rss / 2**20

    def sample_peak(self):
        """Context: sample RSS every 50 ms, keep the peak."""
        server = self

        class _Ctx:
            def __enter__(self):
                server.peak, server._sampling = server.rss_mb(), True

                def loop():
                    while server._sampling:
                        server.peak = max(server.peak, server.rss_mb())
                        time.sleep(0.05)

                self.t = threading.Thread(target=loop, daemon=True)
                self.t.start()
                return self

            def __exit__(self, *a):
                server._sampling = False
                self.t.join()

        return _Ctx()

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return self.proc.stderr.read().decode()


def main() -> None:
    ap = parser(__doc__, out="serve_faults", quick=True)
    ap.add_argument("--student", default=None)
    ap.add_argument("--requests", type=int, default=160, help="load-test requests per setting")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="load-test time cap per setting")
    ap.add_argument("--large", type=int, default=3, help="requests of the largest allowed size")
    args = ap.parse_args()
    if args.quick:
        args.requests, args.large, args.max_seconds = 16, 1, 10.0
    setup(args)
    import httpx

    from csem.apply.server import MAX_RECORDS_PER_REQUEST, load_test

    student, origin = get_student(args)
    recs = [{"id": f"{r['doc_id']}/{r['system_id']}", "source": r["source"], "candidate": r["candidate"]}
            for r in summeval(args.data_dir, docs="50:100")]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    srv = Server(student, args.threads)
    data: dict = {"machine": machine(), "student": origin, "threads": args.threads}
    try:
        data["startup_s"] = round(srv.wait(), 1)
        client = httpx.Client(base_url=srv.url, timeout=600)
        health = client.get("/health").json()
        data["health"] = health
        data["health_shows_path"] = str(student.resolve()) in json.dumps(health) or str(student) in json.dumps(health)
        for _ in range(3):  # warm-up
            client.post("/score", json={"records": recs[:8]}, headers=auth)
        rss0 = srv.rss_mb()
        log(f"server up in {data['startup_s']} s; RSS after warm-up {rss0:.0f} MiB")

        # ---- 1. faults -------------------------------------------------------------------------
        good = dict(recs[0])
        big_cand = "word " * 2_000_000  # 10 MB
        cases = [
            ("no token", 401, dict(json={"records": [good]})),
            ("wrong token", 401, dict(json={"records": [good]}, headers={"Authorization": "Bearer nope"})),
            ("text/plain body", 415, dict(content=json.dumps({"records": [good]}),
                                          headers={**auth, "Content-Type": "text/plain"})),
            ("form body", 415, dict(content="records=x", headers={**auth, "Content-Type":
                                                                   "application/x-www-form-urlencoded"})),
            ("broken JSON", 400, dict(content="{not json", headers={**auth, "Content-Type": "application/json"})),
            ("5 MiB body", 413, dict(json={"records": [dict(good, pad="x" * (5 * 2**20))]}, headers=auth)),
            ("10 MB candidate", 413, dict(json={"records": [dict(good, candidate=big_cand)]}, headers=auth)),
            (f"{MAX_RECORDS_PER_REQUEST + 1} records", 413,
             dict(json={"records": [dict(r, id=str(i)) for i, r in enumerate((recs * 2)[:MAX_RECORDS_PER_REQUEST + 1])]},
                  headers=auth)),
            ("150,000-character candidate", 422, dict(json={"records": [dict(good, candidate="x" * 150_000)]},
                                                      headers=auth)),
            ("empty candidate", 422, dict(json={"records": [good, dict(good, candidate="")]}, headers=auth)),
            ("whitespace candidate", 422, dict(json={"records": [good, dict(good, candidate=" \n ")]}, headers=auth)),
            ("NUL in candidate", 422, dict(json={"records": [good, dict(good, candidate="a\x00b")]}, headers=auth)),
            ("missing source", 422, dict(json={"records": [{"candidate": "text"}]}, headers=auth)),
            ("valid request", 200, dict(json={"records": [good]}, headers=auth)),
        ]
        faults = []
        for name, want, kw in cases:
            t = time.perf_counter()
            r = client.post("/score", **kw)
            ms = (time.perf_counter() - t) * 1000
            try:
                body = r.json()
            except ValueError:
                body = None
            err = body.get("error") if isinstance(body, dict) else None
            faults.append({"case": name, "expected": want, "status": r.status_code, "ok": r.status_code == want,
                           "json_error": bool(err) or want == 200, "error": err, "record": (body or {}).get("record")
                           if isinstance(body, dict) else None, "field": (body or {}).get("field")
                           if isinstance(body, dict) else None, "ms": round(ms, 1)})
            log(f"{name}: {r.status_code} (want {want}) in {ms:.0f} ms: {err}")
        data["faults"] = faults

        # ---- 4. does a refused 10 MB body stall a small request? --------------------------------
        stall = {}

        def huge():
            t = time.perf_counter()
            httpx.post(f"{srv.url}/score", json={"records": [dict(good, candidate=big_cand)]}, headers=auth, timeout=600)
            stall["huge_ms"] = (time.perf_counter() - t) * 1000

        th = threading.Thread(target=huge)
        th.start()
        time.sleep(0.01)
        t = time.perf_counter()
        client.post("/score", json={"records": [good]}, headers=auth)
        stall["small_ms"] = (time.perf_counter() - t) * 1000
        th.join()
        data["stall"] = {k: round(v, 1) for k, v in stall.items()}
        log(f"one-record request beside a refused 10 MB one: {stall['small_ms']:.0f} ms (the 10 MB: {stall['huge_ms']:.0f} ms)")

        # ---- 2. memory --------------------------------------------------------------------------
        mem = {"rss_warm_mib": round(rss0, 1), "large": []}
        big = {"records": [dict(r, id=str(i)) for i, r in enumerate((recs * 2)[:MAX_RECORDS_PER_REQUEST])]}
        size = len(json.dumps(big).encode())
        for k in range(args.large):
            with srv.sample_peak():
                t = time.perf_counter()
                r = client.post("/score", json=big, headers=auth)
                secs = time.perf_counter() - t
            time.sleep(1.0)
            after = srv.rss_mb()
            mem["large"].append({"status": r.status_code, "records": MAX_RECORDS_PER_REQUEST, "bytes": size,
                                 "seconds": round(secs, 2), "peak_mib": round(srv.peak, 1), "after_mib": round(after, 1)})
            log(f"large request {k + 1}: {r.status_code}, {MAX_RECORDS_PER_REQUEST} records ({size / 2**20:.1f} MiB) "
                f"in {secs:.1f} s; RSS peak {srv.peak:.0f}, after {after:.0f} MiB")
        issue = {"records": [dict(good, id=str(i), candidate=good["candidate"] + " " + "x" * 600) for i in range(4096)]}
        issue_bytes = len(json.dumps(issue).encode())
        with srv.sample_peak():
            t = time.perf_counter()
            r = client.post("/score", json=issue, headers=auth)
            secs = time.perf_counter() - t
        time.sleep(1.0)
        mem["issue_request"] = {"records": 4096, "bytes": issue_bytes, "status": r.status_code,
                                "seconds": round(secs, 2), "peak_mib": round(srv.peak, 1),
                                "after_mib": round(srv.rss_mb(), 1)}
        log(f"the issue's 4,096-record request ({issue_bytes / 2**20:.1f} MiB): {r.status_code} in {secs:.2f} s")

        # ---- 3. bounded load test ---------------------------------------------------------------
        load = []
        for per_req in (1, 8):
            res = load_test(srv.url, recs, requests=args.requests, records_per_request=per_req, concurrency=8,
                            token=TOKEN, max_seconds=args.max_seconds)
            load.append(res.as_dict())
            log(f"load: {per_req} record(s)/request, 8 clients: {res.requests} requests, {res.requests_per_s:.1f} "
                f"req/s, p50 {res.p50_ms:.0f} ms, p95 {res.p95_ms:.0f} ms, errors {res.errors}")
        data["load"] = load
        time.sleep(1.0)
        mem["rss_end_mib"] = round(srv.rss_mb(), 1)
        mem["growth_after_large_mib"] = round(mem["large"][-1]["after_mib"] - rss0, 1) if mem["large"] else None
        mem["growth_end_mib"] = round(mem["rss_end_mib"] - rss0, 1)
        data["memory"] = mem
        log(f"RSS: warm {rss0:.0f} MiB, end {mem['rss_end_mib']:.0f} MiB")
    finally:
        data["server_stderr_tail"] = srv.stop()[-2000:]

    # ---- report ----------------------------------------------------------------------------------
    ok = sum(f["ok"] for f in data["faults"])
    md = ["# `csem serve` fault sweep (bench_serve_faults.py)", "",
          f"Machine: {data['machine']}. Server: `python -m csem serve` (separate process, loopback, bearer token, "
          f"default limits: 4 MiB body, 512 records, 100,000 characters per text, 64 requests in flight), "
          f"{args.threads} torch threads; student: {origin}. Up in {data['startup_s']} s.", "",
          f"## Faults: {ok} of {len(data['faults'])} answered as expected", "",
          markdown_table([{**f, "ms": fmt(f["ms"], 0), "json": "yes" if f["json_error"] else "no",
                           "where": f"{f['record'] or ''} {f['field'] or ''}".strip()} for f in data["faults"]],
                         ["case", "expected", "status", "json", "where", "ms"],
                         headers=["request", "expected", "status", "JSON error", "record / field", "ms"]), "",
          f"`/health` shows the model's path: {'yes' if data['health_shows_path'] else 'no'} "
          f"(it names `{data['health']['metric']}`).", "",
          f"A one-record request sent while a 10 MB body was being refused: {fmt(data['stall']['small_ms'], 0)} ms "
          f"(the 10 MB request: {fmt(data['stall']['huge_ms'], 0)} ms).", "",
          "## Memory (resident set of the server process)", "",
          markdown_table([{"what": f"largest allowed request #{i + 1} ({x['records']} records, "
                                   f"{x['bytes'] / 2**20:.1f} MiB)", "status": x["status"], "s": fmt(x["seconds"], 1),
                           "peak": fmt(x["peak_mib"], 0), "after": fmt(x["after_mib"], 0)}
                          for i, x in enumerate(data["memory"]["large"])]
                         + [{"what": f"the issue's request (4,096 records, "
                                     f"{data['memory']['issue_request']['bytes'] / 2**20:.1f} MiB)",
                             "status": data["memory"]["issue_request"]["status"],
                             "s": fmt(data["memory"]["issue_request"]["seconds"], 2),
                             "peak": fmt(data["memory"]["issue_request"]["peak_mib"], 0),
                             "after": fmt(data["memory"]["issue_request"]["after_mib"], 0)}],
                         ["what", "status", "s", "peak", "after"],
                         headers=["request", "status", "seconds", "RSS peak MiB", "RSS after MiB"]), "",
          f"RSS after warm-up {fmt(data['memory']['rss_warm_mib'], 0)} MiB; after the large requests "
          f"{fmt(data['memory']['growth_after_large_mib'], 0)} MiB more; at the end (after the load test) "
          f"{fmt(data['memory']['rss_end_mib'], 0)} MiB ({fmt(data['memory']['growth_end_mib'], 0)} MiB more).", "",
          "## Bounded load test (8 concurrent clients)", "",
          markdown_table([{**x, "rps": fmt(x["requests_per_s"], 1), "recps": fmt(x["records_per_s"], 1),
                           "p50": fmt(x["p50_ms"], 0), "p95": fmt(x["p95_ms"], 0), "p99": fmt(x["p99_ms"], 0)}
                          for x in data["load"]],
                         ["records_per_request", "requests", "errors", "rps", "recps", "p50", "p95", "p99"],
                         headers=["records/request", "requests", "errors", "requests/s", "records/s", "p50 ms",
                                  "p95 ms", "p99 ms"]),
          "", f"At most {args.requests} requests and {args.max_seconds:g} s per setting."]
    j, mdp = write_results(args.out, data, md)
    log(f"wrote {j} and {mdp}")
    print("\n".join(md))


if __name__ == "__main__":
    main()
