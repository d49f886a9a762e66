"""The main job, timed and measured: ``csem run package:summarization.yaml`` from an empty run folder.

Runs the shipped pipeline as a user would (a subprocess ``csem run`` in ``benchmarks/.cache/main_job``),
then reads what the run wrote: each stage's wall seconds (``state.json``), the student's summary-level
Spearman with the judge on the held-out articles (the run's seed ensemble with its 95% interval over
resampled articles, ``meta.json``; each member alone, ``seeds.json``: mean, sd, min, max) and the trivial
baselines on the same candidates (``baselines.json``: length, extractiveness, system prior), the judge's
score range, and the machine (CPU model, AMX or not, cores, llama-cpp-python and torch versions).
``quick``: the same pipeline on 4 articles, one generator (2 samples each), one rubric, a single student,
2 seeds.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from benchmarks.suite import CACHE, fmt, log, machine, markdown_table, now

PIPELINE = "package:summarization.yaml"
STAGES = ("collect", "annotate", "train", "score", "meta_eval", "seeds", "rerank", "report")


def cpu() -> dict:
    """CPU model, whether it has AMX (llama.cpp's extra buffer types), and the cores csem may use."""
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
    """The Markdown report: stage times, the student vs the judge beside the baselines, the judge's range."""
    m = res["meta"]
    lines = [f"# The main job (`csem run {res.get('pipeline', PIPELINE)}`)\n",
             f"{m['cpu']['model']} ({m['cpu']['cores']} cores, AMX: {'yes' if m['cpu']['amx'] else 'no'}); "
             f"csem {m['versions']['csem']}, llama-cpp-python {m['versions']['llama_cpp_python']}, torch "
             f"{m['versions']['torch']}; `{' '.join(res['command'])}`, {res['wall_seconds']:.0f} s wall, "
             f"exit {res['returncode']}."
             + "\n"]
    rows = []
    for s in STAGES:
        st = res["stages"].get(s)
        if st:
            rows.append([s, f"{st['seconds']:.0f}"])
    total = sum(st["seconds"] for st in res["stages"].values())
    rows.append(["**all stages**", f"**{total:.0f}**"])
    lines.append(markdown_table(rows, ["stage", "seconds"]))
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


def quick_pipeline(folder: Path) -> str:
    """The shipped pipeline cut to a smoke run (4 articles, one generator, one rubric, one student), as a file."""
    import yaml

    from csem.pipeline.config import resolve_path

    spec = yaml.safe_load(resolve_path(PIPELINE, folder).read_text(encoding="utf-8"))
    spec["sources"]["limit"] = 4
    spec["collect"]["generators"] = [dict(spec["collect"]["generators"][0], num_samples=2)]  # >= 8 training rows
    spec["collect"]["decoding"]["max_tokens"] = 24
    spec["annotate"]["rubrics"] = spec["annotate"]["rubrics"][:1]
    spec["train"]["model"]["members"] = 1
    spec["train"]["seeds"] = [12, 13]
    spec.pop("rerank", None)
    path = folder / "quick.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def run(quick: bool = False) -> dict:
    """Run the pipeline from an empty folder and read its figures (``quick``: a 4-article smoke run).

    Raises:
        RuntimeError: ``csem run`` failed or wrote no figures.
    """
    import shutil

    tmp = Path(tempfile.mkdtemp(prefix="csem-main-job-"))
    run_dir = tmp / "run" if quick else CACHE / "main_job"
    shutil.rmtree(run_dir, ignore_errors=True)
    pipeline = quick_pipeline(tmp) if quick else PIPELINE
    cmd = [sys.executable, "-m", "csem", "run", pipeline, "--run-dir", str(run_dir)]
    log("running: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"csem run exited {proc.returncode}")
    missing = missing_outputs(run_dir)
    if missing:
        raise RuntimeError(f"{run_dir}: csem run exited 0 but wrote no {', '.join(missing)}")
    state = json.loads((run_dir / "state.json").read_text())
    stages = {s: {"seconds": state[s]["seconds"], "summary": state[s].get("summary")} for s in STAGES if state.get(s)}
    agree = agreement(run_dir)
    res = {"meta": {"date": now(), "machine": machine(), "cpu": cpu(), "versions": versions()},
           "command": ["csem", "run", PIPELINE if not quick else "quick.yaml"], "pipeline": PIPELINE, "quick": quick,
           "returncode": proc.returncode, "wall_seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
           "peak_rss_mb": usage.ru_maxrss / 1024, "stages": stages,
           "seeds": max((len(d.get("per_seed", {})) for d in agree.values()), default=0),
           "agreement": agree, "judge_range": judge_range(run_dir)}
    if quick:
        shutil.rmtree(tmp, ignore_errors=True)
    return res
