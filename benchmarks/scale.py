"""Scale out: the judge through an OpenAI-compatible server, and scoring through Ray Data.

Judge server: the local judge (Qwen2.5-Coder-1.5B Q4_K_M) on SummEval summaries, in process
(llama-cpp) vs through a llama.cpp server on loopback (``openai:`` with top-20 logprobs): seconds per
judgment and the largest score difference.

Ray: the same records file scored three ways, each using the benchmark's threads: ``csem score``'s
steps in one process (load, read, score, write), and ``csem score --engine ray``
([`csem.engines.ray.score_files`][]) with 1 worker and with 2 workers, on a local Ray cluster started
first (its start-up timed apart). Records: WMT21 TED MQM en-de then WMT23 DA en-de up to 10,000 rows
(csem's loaders); student: a MiniLM ref-based student, heads trained on 400 TED segments' MQM scores
with the encoder frozen. Per setting: wall seconds (median of 2 runs, order alternating), rows/s, the
overhead per row against one process, and whether every row got the one-process score; an estimate
(not a measurement) for N machines from the measured rate. ``quick``: 2 judgments; 60 rows, 1 run.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

from benchmarks.suite import CACHE, fmt, log, machine, markdown_table, summeval, threads


def records(n: int) -> list[dict]:
    from csem.data.datasets import load_wmt21_mqm, load_wmt23_da

    rows = [dict(r, id=f"ted-{i}") for i, r in enumerate(load_wmt21_mqm())]
    rows += [dict(r, id=f"wmt23-{i}") for i, r in enumerate(load_wmt23_da())]
    keep = ("id", "doc_id", "system_id", "source", "candidate", "reference")
    return [{k: r[k] for k in keep} for r in rows[:n]]


def get_student(train_rows: list[dict], threads: int) -> Path:
    """A MiniLM ref-based student, heads trained 2 epochs on ``train_rows``' MQM scores (encoder frozen); cached."""
    import csem

    out = CACHE / "scale_ray" / "student_minilm_ref_based_mqm400"
    if (out / "model.safetensors").exists():
        return out
    log(f"training the MiniLM student (heads only, frozen encoder) on {len(train_rows)} TED MQM segments")
    t = time.perf_counter()
    csem.train(train_rows, "human.mqm", mode="ref-based", out_dir=out, name="wmt", max_length=64,
               hidden_sizes=[64], max_epochs=2, frozen_epochs=2, head_lr=1e-3, batch_size=32, seed=0,
               num_threads=threads, judge="WMT21 MQM (human)", rubric="MQM")
    log(f"student trained in {time.perf_counter() - t:.0f} s")
    return out


def read_parts(folder: Path) -> list[dict]:
    rows = []
    for p in sorted(folder.glob("*.jsonl")):
        rows += [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def judge_server(n_records: int, n_threads: int) -> dict:
    """The local judge in process vs through a llama.cpp server on loopback, same records."""
    from csem.assets import local_judge_gguf
    from csem.judge import judge_records
    from csem.llm.server import LlamaServer

    rubric = "geval/summeval-coherence"
    recs = [r for r in summeval(slice(None, (n_records + 1) // 2)) if r["system_id"] in ("M11", "M23")][:n_records]
    recs = [{"id": f"{r['doc_id']}/{r['system_id']}", "source": r["source"], "candidate": r["candidate"]} for r in recs]
    gguf = local_judge_gguf()
    t = time.perf_counter()
    inproc, s_in = judge_records(recs, rubric, f"llama-cpp:{gguf}", progress=False, cache=None,
                                 backend_options={"n_threads": n_threads, "n_ctx": 2048})
    t_in = time.perf_counter() - t
    with LlamaServer(gguf, n_ctx=2048, n_threads=n_threads) as srv:
        t = time.perf_counter()
        served, s_srv = judge_records(recs, rubric, "openai:qwen2.5-coder-1.5b", progress=False, cache=None,
                                      backend_options={"base_url": srv.url, "concurrency": 1})
        t_srv = time.perf_counter() - t
    col = "judge.coherence"
    rows = []
    for a, b in zip(inproc, served):
        d = None if a[col] is None or b[col] is None else abs(a[col] - b[col])
        rows.append({"id": a["id"], "in_process": a[col], "server": b[col], "abs_diff": d,
                     "server_mass": b.get(f"{col}.mass"), "in_process_mass": a.get(f"{col}.mass")})
    diffs = [r["abs_diff"] for r in rows if r["abs_diff"] is not None]
    return {"machine": machine(), "judge": f"Qwen2.5-Coder-1.5B-Instruct Q4_K_M ({gguf.name})", "rubric": rubric,
            "mode": "probs", "threads": n_threads, "records": rows, "max_abs_diff": max(diffs) if diffs else None,
            "seconds_per_judgment": {"in_process": t_in / len(recs), "server": t_srv / len(recs)},
            "summaries": {"in_process": s_in.as_dict(), "server": s_srv.as_dict()}}


def through_ray(quick: bool) -> dict:
    """One process vs Ray Data with 1 and 2 workers on the same file."""
    args = SimpleNamespace(rows=60 if quick else 10_000, records_per_batch=16 if quick else 1024, fixed_rows=8,
                           repeats=1 if quick else 2, threads=threads())
    import ray

    import csem
    from csem.data.datasets import load_wmt21_mqm
    from csem.data.records import read_records, write_records
    from csem.engines.ray import score_files

    work = CACHE / "scale_ray" / f"run_{args.rows}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    student = get_student(load_wmt21_mqm()[:400], args.threads)
    data = write_records(records(args.rows), work / "records.jsonl")
    n = args.rows
    col = "metric.wmt.mqm"
    runs: dict[str, list[dict]] = {}

    def one_process(rep: int) -> dict:
        """The steps of `csem score` in this process."""
        t0 = time.perf_counter()
        m = csem.load_metric(student)
        t_load = time.perf_counter() - t0
        recs = read_records(data, required=("candidate", "source", "reference"))
        t1 = time.perf_counter()
        pred = m.predict(recs)
        scores = pred.scores
        t_score = time.perf_counter() - t1
        write_records(pred.records, work / f"local_{rep}.jsonl")
        sec = time.perf_counter() - t0
        log(f"[{rep}] one process: {sec:.1f} s ({n / sec:.1f} rows/s; model load {t_load:.1f} s, "
            f"scoring {t_score:.1f} s)")
        return {"seconds": sec, "model_load_s": t_load, "scoring_s": t_score,
                "scores": dict(zip((r["id"] for r in recs), scores[col]))}

    def ray_run(rep: int, workers: int) -> dict:
        cpus = args.threads / workers
        out = work / f"ray_{workers}_{rep}.jsonl"
        t = time.perf_counter()
        res = score_files(student, data, out, workers=workers, cpus_per_worker=cpus,
                          records_per_batch=args.records_per_batch, threads=max(1, int(cpus)))
        sec = time.perf_counter() - t
        rows = read_parts(out)
        got = {r["id"]: r[col] for r in rows}
        assert res["rows"] == n and len(rows) == n and len(got) == n, "rows lost or duplicated"
        log(f"[{rep}] Ray, {workers} worker(s) x {cpus:g} CPU: {sec:.1f} s ({n / sec:.1f} rows/s)")
        return {"seconds": sec, "scores": got}

    t = time.perf_counter()
    # one logical CPU more than the actors take, for Ray Data's read and write tasks (as csem score --engine ray)
    ray.init(num_cpus=args.threads + 1, include_dashboard=False, object_store_memory=512 * 2**20,
             log_to_driver=False)
    t_start = time.perf_counter() - t
    ray.data.DataContext.get_current().enable_progress_bars = False
    log(f"local Ray cluster ({args.threads} CPUs) started in {t_start:.1f} s")
    names = {0: f"csem score, one process, {args.threads} threads",
             1: f"csem score --engine ray, 1 worker x {args.threads:g} CPU",
             2: f"csem score --engine ray, 2 workers x {args.threads / 2:g} CPU"}
    try:
        # Ray's fixed cost per run (actor start, model load, pipeline set-up): a tiny file, one worker
        tiny = write_records(records(args.fixed_rows), work / "tiny.jsonl")
        t = time.perf_counter()
        score_files(student, tiny, work / "tiny_out.jsonl", workers=1, cpus_per_worker=args.threads,
                    records_per_batch=args.records_per_batch, threads=args.threads)
        t_fixed = time.perf_counter() - t
        log(f"Ray fixed cost: {args.fixed_rows} rows in {t_fixed:.1f} s")
        for rep in range(args.repeats):  # the order alternates, so a drifting machine load hits every setting
            for k in ((0, 1, 2) if rep % 2 == 0 else (2, 1, 0)):
                runs.setdefault(names[k], []).append(one_process(rep) if k == 0 else ray_run(rep, k))
    finally:
        ray.shutdown()

    reference = runs[names[0]][0]["scores"]
    settings = []
    for k, name in names.items():
        secs = [r["seconds"] for r in runs[name]]
        diffs = [max(abs(r["scores"][i] - reference[i]) for i in reference) for r in runs[name]]
        sec = statistics.median(secs)
        settings.append({"setting": name, "workers": k, "cpus_per_worker": args.threads / max(k, 1),
                         "seconds": sec, "seconds_runs": secs, "rows_per_s": n / sec,
                         "model_load_s": statistics.median(r["model_load_s"] for r in runs[name]) if k == 0 else None,
                         "max_abs_diff": max(diffs), "identical": max(diffs) == 0.0})
    base = settings[0]["seconds"]
    for s in settings:
        s["overhead_ms_per_row"] = (s["seconds"] - base) / n * 1000
    best = max(settings[1:], key=lambda s: s["rows_per_s"])
    # estimate (not a measurement): N machines like this one, each running the best Ray setting measured here
    # at its steady rate (its rows over its wall time less Ray's fixed cost per run), rows split evenly, plus
    # the measured cluster start and fixed cost once
    per_machine = n / max(best["seconds"] - t_fixed, 1e-9)
    estimate = [{"machines": k, "rows": 10 ** 7, "hours": (t_start + t_fixed + 10 ** 7 / (k * per_machine)) / 3600}
                for k in (1, 4, 16, 64)]
    return {"machine": machine(), "rows": n, "threads": args.threads,
            "records": "WMT21 TED MQM en-de then WMT23 DA en-de (csem loaders)",
            "student": "MiniLM (all-MiniLM-L6-v2) ref-based, heads trained 2 epochs on 400 TED MQM segments, "
                       f"frozen encoder ({student.name})",
            "records_per_batch": args.records_per_batch, "repeats": args.repeats, "ray_version": ray.__version__,
            "ray_cluster_start_s": t_start, "ray_fixed_cost_s": t_fixed, "fixed_cost_rows": args.fixed_rows,
            "settings": settings,
            "estimate_not_measured": {"assumption": "rate scales linearly with machines like this one running "
                                                    f"the best setting measured here ({best['setting']}) at "
                                                    f"its steady rate ({per_machine:.1f} rows/s: rows over wall "
                                                    "time less Ray's fixed cost per run); cluster start and "
                                                    "fixed cost paid once",
                                      "rows_per_s_per_machine": per_machine, "table": estimate}}


def run(quick: bool = False) -> dict:
    """The judge server and the Ray comparisons (``quick``: 2 judgments, 60 rows)."""
    return {"judge_server": judge_server(2 if quick else 6, threads()), "ray": through_ray(quick)}


def report(results: dict) -> str:
    """The Markdown report: the judge server table, then the Ray settings and the N-machine estimate."""
    md = ["# Scale out"]
    d = results.get("judge_server")
    if d:
        spj = d["seconds_per_judgment"]
        table = markdown_table(
            [{**r, "a": fmt(r["in_process"], 4), "b": fmt(r["server"], 4), "d": fmt(r["abs_diff"], 4),
              "m": fmt(r["server_mass"], 4)} for r in d["records"]], ["id", "a", "b", "d", "m"],
            headers=["summary", "in process (llama-cpp)", "server (openai: top-20 logprobs)", "abs diff",
                     "valid mass in server's top-20"])
        md += ["", "## The judge through an OpenAI-compatible server vs in process", "",
               f"Machine: {d['machine']}. {d['judge']}, {d['rubric']}, probs mode, {len(d['records'])} SummEval "
               f"summaries (first documents, systems M11 and M23). In process: {spj['in_process']:.1f} s per judgment; "
               f"llama.cpp server on loopback (one request at a time): {spj['server']:.1f} s per judgment. Largest "
               f"score difference: {fmt(d['max_abs_diff'], 4)}.", "", table]
    d = results.get("ray")
    if d:
        settings = d["settings"]
        table = markdown_table(
            [{**s, "sec": fmt(s["seconds"], 1) + " (" + ", ".join(fmt(x, 1) for x in s["seconds_runs"]) + ")",
              "rps": fmt(s["rows_per_s"], 1), "ovh": fmt(s["overhead_ms_per_row"], 2),
              "same": "yes" if s["identical"] else f"no (max diff {s['max_abs_diff']:.1e})"} for s in settings],
            ["setting", "sec", "rps", "ovh", "same"],
            headers=["setting", "wall s, median (runs)", "rows/s", "overhead ms/row vs one process", "scores identical"])
        est = d["estimate_not_measured"]
        est_table = markdown_table([{**e, "r": f"{e['rows']:,}", "h": fmt(e["hours"], 2)} for e in est["table"]],
                                   ["machines", "r", "h"], headers=["machines (like this one)", "rows", "hours (estimate)"])
        md += ["", "## Scoring: one process vs Ray Data", "",
               f"Machine: {d['machine']}. Ray {d['ray_version']}, local cluster (start-up {d['ray_cluster_start_s']:.1f} s, "
               f"not in the Ray rows). {d['rows']:,} rows ({d['records']}), JSONL in and out; student: {d['student']}. "
               f"Ray rows include reading, each actor's model load, scoring in batches of {d['records_per_batch']} "
               f"records and writing part files; the one-process row includes the model load and reading/writing. "
               f"{d['repeats']} run(s) per setting, order alternating; wall s is the median. Ray's fixed cost per run "
               f"({d['fixed_cost_rows']} rows, one worker): {d['ray_fixed_cost_s']:.1f} s.", "", table, "",
               "### N machines (an estimate, not a measurement)", "", f"Assumes {est['assumption']}.", "", est_table]
    return "\n".join(md)
