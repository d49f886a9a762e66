"""Scoring throughput in one process vs through Ray Data with 1 and 2 workers (issue 22).

The same records file is scored three ways on this machine, each using all of its CPUs:

* ``csem score`` in one process (``--threads`` torch threads): the steps of the command, timed in
  this process (load the model, read the file, score, write);
* ``csem score --engine ray`` with 1 worker of ``--threads`` CPUs, and with 2 workers of
  ``--threads / 2`` CPUs each (:func:`csem.engines.ray.score_files`: read, score, write part files,
  including each actor's model load), on a local Ray cluster started first (its start-up is
  timed apart).

Records: WMT21 TED MQM en-de (all 6,877 segments) then WMT23 DA en-de segments up to ``--rows``
(short sentences and paragraphs; csem's loaders). Student: a real MiniLM (all-MiniLM-L6-v2, the
default encoder) ref-based student, heads trained on 400 TED segments' MQM scores with the
encoder frozen (quick: its scores are not the point; the encoder's cost is csem's default). For
each setting: wall seconds, rows/s, the overhead per row against one process, and whether every
row got the one-process score (max absolute difference). What the figures imply for N machines is
an estimate from the measured per-machine rate, not a measurement.

Run (figures in results/scale_ray.*):
    nice -n 10 python benchmarks/bench_scale_ray.py --threads 2
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from harness import CACHE, fmt, log, machine, markdown_table, parser, setup, write_results


def records(n: int) -> list[dict]:
    from csem.data.datasets import load_wmt21_mqm, load_wmt23_da

    rows = [dict(r, id=f"ted-{i}") for i, r in enumerate(load_wmt21_mqm())]
    rows += [dict(r, id=f"wmt23-{i}") for i, r in enumerate(load_wmt23_da())]
    keep = ("id", "doc_id", "system_id", "source", "candidate", "reference")
    return [{k: r[k] for k in keep} for r in rows[:n]]


def get_student(train_rows: list[dict], threads: int) -> Path:
    from csem.model import ModelConfig, TrainConfig, train

    out = CACHE / "scale_ray" / "student_minilm_ref_based_mqm400"
    if (out / "model.safetensors").exists():
        return out
    log(f"training the MiniLM student (heads only, frozen encoder) on {len(train_rows)} TED MQM segments")
    t = time.perf_counter()
    train(train_rows, "human.mqm", "ref-based", out_dir=out,
          config=ModelConfig(name="wmt", max_length=64, hidden_sizes=[64]),
          train_config=TrainConfig(max_epochs=2, frozen_epochs=2, head_lr=1e-3, batch_size=32, seed=0,
                                   num_threads=threads),
          judge="WMT21 MQM (human)", rubric="MQM")
    log(f"student trained in {time.perf_counter() - t:.0f} s")
    return out


def read_parts(folder: Path) -> list[dict]:
    rows = []
    for p in sorted(folder.glob("*.jsonl")):
        rows += [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def main() -> None:
    ap = parser(__doc__, out="scale_ray", quick=True)
    ap.add_argument("--rows", type=int, default=10_000, help="rows in the scored file (default 10,000)")
    ap.add_argument("--records-per-batch", type=int, default=1024, help="Ray: records per actor call")
    ap.add_argument("--fixed-rows", type=int, default=8, help="rows of the tiny run that times Ray's fixed cost")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each setting (median reported; default 2)")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.records_per_batch, args.repeats = 60, 16, 1
    setup(args)
    import ray

    from csem.data.records import read_records, write_records
    from csem.engines.ray import score_files
    from csem.model import EvaluationModel
    from csem.data.datasets import load_wmt21_mqm
    from csem.model.scoring import add_columns

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
        m = EvaluationModel.load(student)
        t_load = time.perf_counter() - t0
        recs = read_records(data, required=("candidate", "source", "reference"))
        t1 = time.perf_counter()
        scores = m.score_columns(recs)
        t_score = time.perf_counter() - t1
        write_records(add_columns(recs, scores), work / f"local_{rep}.jsonl")
        sec = time.perf_counter() - t0
        log(f"[{rep}] one process: {sec:.1f} s ({n / sec:.1f} rows/s; model load {t_load:.1f} s, "
            f"scoring {t_score:.1f} s)")
        return {"seconds": sec, "model_load_s": t_load, "scoring_s": t_score,
                "scores": dict(zip((r["id"] for r in recs), scores[col]))}

    def through_ray(rep: int, workers: int) -> dict:
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
                runs.setdefault(names[k], []).append(one_process(rep) if k == 0 else through_ray(rep, k))
    finally:
        ray.shutdown()

    import statistics

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
    data_out = {"machine": machine(), "rows": n, "records": "WMT21 TED MQM en-de then WMT23 DA en-de (csem loaders)",
                "student": f"MiniLM (all-MiniLM-L6-v2) ref-based, heads trained 2 epochs on 400 TED MQM segments, "
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
    table = markdown_table(
        [{**s, "sec": fmt(s["seconds"], 1) + " (" + ", ".join(fmt(x, 1) for x in s["seconds_runs"]) + ")", "rps": fmt(s["rows_per_s"], 1),
          "ovh": fmt(s["overhead_ms_per_row"], 2), "diff": f"{s['max_abs_diff']:.1e}",
          "same": "yes" if s["identical"] else f"no (max diff {s['max_abs_diff']:.1e})"} for s in settings],
        ["setting", "sec", "rps", "ovh", "same"],
        headers=["setting", "wall s, median (runs)", "rows/s", "overhead ms/row vs one process", "scores identical"])
    est = markdown_table([{**e, "r": f"{e['rows']:,}", "h": fmt(e["hours"], 2)} for e in estimate], ["machines", "r", "h"],
                         headers=["machines (like this one)", "rows", "hours (estimate)"])
    md = ["# Scoring at scale: one process vs Ray Data (bench_scale_ray.py)", "",
          f"Machine: {machine()}. Ray {ray.__version__}, local cluster of {args.threads} CPUs for the actors, "
          f"+1 logical CPU for Ray Data's read/write tasks (start-up "
          f"{t_start:.1f} s, not in the Ray rows). {n:,} rows ({data_out['records']}), JSONL in and out; student: "
          f"{data_out['student']}. Ray rows include reading, each actor's model load, scoring in batches of "
          f"{args.records_per_batch} records and writing part files; the one-process row includes the model load "
          f"({settings[0]['model_load_s']:.1f} s) and reading/writing. Each setting ran {args.repeats} time(s), the "
          f"order alternating between rounds (one process, 1 worker, 2 workers; then backwards): wall s is the "
          f"median. Scores are compared with the first one-process run. Overhead per row: (wall - one process's "
          f"wall) / rows. Ray's fixed cost per run, timed on a {args.fixed_rows}-row file with one worker: "
          f"{t_fixed:.1f} s.", "", table, "",
          "## N machines (an estimate, not a measurement)", "",
          f"Assumes the rate grows linearly with machines like this one, each running the best setting measured "
          f"here ({best['setting']}) at its steady rate ({per_machine:.1f} rows/s: its rows over its wall time "
          f"less Ray's fixed cost of {t_fixed:.1f} s), with the cluster start and the fixed cost paid once; real "
          f"clusters "
          f"add network reads and writes and scheduling, and lose some rows/s to stragglers.", "", est]
    j, mdp = write_results(args.out, data_out, md)
    log(f"wrote {j} and {mdp}")
    print("\n".join(md))


if __name__ == "__main__":
    main()
