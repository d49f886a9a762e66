"""The main job, timed and measured: ``csem run package:summarization.yaml`` (issue 24).

Runs the shipped pipeline in ``--run-dir`` as a user would (a subprocess ``csem run``), then reads what the
run wrote: each stage's wall seconds and summary (``state.json``), the student's summary-level Spearman with
the judge on the held-out test articles for every seed (``seeds.json``: mean, sd, min, max over seeds) and the
trivial baselines on the same candidates (``baselines.json``: length, extractiveness, system prior), the
judge's score range, and the machine (CPU model, AMX or not, cores, llama-cpp-python and torch versions).

An empty ``--run-dir`` times the whole job from scratch (collect ~3.5 min and annotate ~10.5 min on 2 idle
cores). ``--from STAGE`` re-runs that stage and the later ones on a finished folder (e.g. ``--from train``
after a change to the student: the judged candidates are kept); stages not re-run keep the seconds they
took when they ran, and the results say which stages ran in this call and when each finished.

Run:  python benchmarks/bench_main_job.py --run-dir /tmp/mainjob [--from train]
Out:  benchmarks/results/main_job.{json,md}
"""

from __future__ import annotations

import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from harness import fmt, log, machine, markdown_table, now, parser, setup, write_results

PIPELINE = "package:summarization.yaml"
STAGES = ("collect", "annotate", "train", "score", "meta_eval", "seeds", "rerank", "report")


def cpu() -> dict:
    """CPU model, whether it has AMX (llama.cpp's extra buffer types), and the cores csem may use."""
    import os

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")),
                 platform.processor())
    return {"model": model, "amx": "amx" in info, "cores": len(os.sched_getaffinity(0))}


def versions() -> dict:
    out = {}
    for pkg in ("csem", "llama_cpp_python", "torch", "transformers"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


#: what the figures are read from; a pipeline without a seeds stage writes no seeds.json
OUTPUTS = ("state.json", "seeds.json", "meta.json", "labelled.jsonl")


def missing_outputs(run_dir: Path) -> list[str]:
    """The files of :data:`OUTPUTS` that ``run_dir`` lacks (empty: every figure can be read)."""
    return [name for name in OUTPUTS if not (run_dir / name).is_file()]


def agreement(run_dir: Path) -> dict:
    """aspect -> {mean, sd, min, max, per_seed (single students, ``seeds.json``), model (the run's
    student ``model/``, a seed ensemble where ``train.model.members`` > 1; ``meta.json``), baselines
    (name -> value, ``baselines.json``), model_ci ([low, high]: the 95% interval of ``model`` over resampled
    test articles, ``meta.json``'s ``spearman_ci``; None for a run made before it was written)}:
    summary-level Spearman with the judge on the test articles."""
    seeds = json.loads((run_dir / "seeds.json").read_text())
    out: dict = {}
    for seed, rows in seeds["per_seed"].items():
        for r in rows:
            if r["level"] == "summary" and r["scorer"] == "student":
                out.setdefault(r["aspect"], {"per_seed": {}})["per_seed"][seed] = r["spearman"]
    for a, d in out.items():
        vals = [v for v in d["per_seed"].values() if v is not None]
        d.update(mean=statistics.fmean(vals), sd=statistics.stdev(vals) if len(vals) > 1 else None,
                 min=min(vals), max=max(vals))
    for r in json.loads((run_dir / "meta.json").read_text()):  # the run's own student (a seed ensemble or one)
        if r["level"] == "summary" and r["scorer"] == "student" and r["target"] == "judge" and r["aspect"] in out:
            out[r["aspect"]]["model"] = r["spearman"]
            out[r["aspect"]]["model_ci"] = r.get("spearman_ci")  # 95%, held-out articles resampled
    base = run_dir / "baselines.json"
    for r in json.loads(base.read_text()) if base.exists() else []:
        if r["level"] == "summary":
            out.setdefault(r["aspect"], {}).setdefault("baselines", {})[r["scorer"]] = r["spearman"]
    return out


def judge_range(run_dir: Path) -> dict:
    """The judge's scores per aspect on the run's candidates: min, max, sd."""
    cols: dict = {}
    for line in (run_dir / "labelled.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        for k, v in rec.items():
            if k.startswith("judge.") and isinstance(v, (int, float)) and k.count(".") == 1:
                cols.setdefault(k.split(".", 1)[1], []).append(float(v))
    return {a: {"min": min(v), "max": max(v), "sd": statistics.pstdev(v), "n": len(v)} for a, v in cols.items()}


def report(res: dict) -> str:
    m = res["meta"]
    lines = [f"# The main job (`csem run {res.get('pipeline', PIPELINE)}`)\n",
             f"{m['date']}; {m['cpu']['model']} ({m['cpu']['cores']} cores, AMX: {'yes' if m['cpu']['amx'] else 'no'}); "
             f"csem {m['versions']['csem']}, llama-cpp-python {m['versions']['llama_cpp_python']}, torch "
             f"{m['versions']['torch']}; this call: `{' '.join(res['command'])}`, {res['wall_seconds']:.0f} s wall, "
             f"exit {res['returncode']}."
             + (f" The full run of this folder: `{' '.join(res['full_run']['command'])}`, "
                f"{res['full_run']['wall_seconds']:.0f} s wall ({res['full_run']['date']})." if res.get("full_run") else "")
             + "\n"]
    rows = []
    for s in STAGES:
        st = res["stages"].get(s)
        if st:
            rows.append([s, f"{st['seconds']:.0f}", st["finished_at"], "yes" if st["ran_now"] else "no (earlier run)"])
    total = sum(st["seconds"] for st in res["stages"].values())
    rows.append(["**all stages**", f"**{total:.0f}**", "", ""])
    lines.append(markdown_table(rows, ["stage", "seconds", "finished", "ran in this call"]))
    lines.append("\nSummary-level Spearman of the student with the judge on the held-out test articles, "
                 f"{res['seeds']} seeds, beside the trivial baselines on the same candidates:\n")
    rows = []
    for a, d in res["agreement"].items():
        b = d.get("baselines", {})
        ci = d.get("model_ci")
        rows.append([a, fmt(d.get("model")), f"{fmt(ci[0])} to {fmt(ci[1])}" if ci else "",
                     f"{fmt(d['mean'])} +- {fmt(d['sd'])} ({fmt(d['min'])}-{fmt(d['max'])})",
                     *(fmt(b.get(k)) for k in ("length", "extractiveness", "system prior"))])
    lines.append(markdown_table(rows, ["aspect", "the run's student (model/)", "its 95% CI (test articles resampled)",
                                       "one student per seed, mean +- sd (min-max)", "length", "extractiveness",
                                       "system prior"]))
    rng = "; ".join(f"{a} {fmt(v['min'])}-{fmt(v['max'])} (sd {fmt(v['sd'])})" for a, v in res["judge_range"].items())
    lines.append(f"\nThe judge's scores: {rng}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = parser(__doc__, out="main_job", seed=None)
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--from", dest="from_stage", default=None, help="re-run this stage and the later ones")
    ap.add_argument("--pipeline", default=PIPELINE, help="another pipeline file (e.g. an earlier recipe of the "
                    "main job, re-measured on a run folder's judged candidates with --from train)")
    args = ap.parse_args()
    setup(args)
    cmd = ["csem", "run", args.pipeline, "--run-dir", str(args.run_dir)]
    if args.from_stage:
        cmd += ["--from", args.from_stage]
    started = time.time()
    log("running: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        log(f"csem run exited {proc.returncode}; no figures written")
        sys.exit(proc.returncode)
    missing = missing_outputs(args.run_dir)
    if missing:
        log(f"{args.run_dir}: csem run exited 0 but wrote no {', '.join(missing)}; no figures written")
        sys.exit(2)
    state = json.loads((args.run_dir / "state.json").read_text())
    stages = {}
    for s in STAGES:
        st = state.get(s)
        if st:
            fin = time.mktime(time.strptime(st["finished_at"], "%Y-%m-%dT%H:%M:%S"))
            stages[s] = {"seconds": st["seconds"], "finished_at": st["finished_at"], "ran_now": fin >= started - 1,
                         "summary": st.get("summary")}
    agree = agreement(args.run_dir)
    res = {"meta": {"date": now(), "machine": machine(), "cpu": cpu(), "versions": versions()},
           "command": cmd, "pipeline": args.pipeline, "returncode": proc.returncode, "wall_seconds": wall,
           "cpu_seconds": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
           "stages": stages, "seeds": max((len(d.get("per_seed", {})) for d in agree.values()), default=0),
           "agreement": agree, "judge_range": judge_range(args.run_dir)}
    if args.from_stage:  # the earlier stages' call (the timed full run) stays on record beside this one
        prev = Path(f"{args.out}.json")
        prev = json.loads(prev.read_text()) if prev.exists() else {}
        earlier = prev.get("full_run") or ({k: prev[k] for k in ("command", "wall_seconds")} | {"date": prev["meta"]["date"]}
                                           if prev.get("command") and "--from" not in prev["command"] else None)
        if earlier and str(args.run_dir) in earlier["command"]:
            res["full_run"] = earlier
    write_results(args.out, res, report(res))
    log(f"wrote {args.out}.json / .md")


if __name__ == "__main__":
    main()
