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
STAGES = ("collect", "annotate", "train", "score", "meta_eval", "curve", "seeds", "rerank", "verdict", "report")


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


def trust(run_dir: Path) -> dict:
    """What the run says about trusting its student: the judge's repeatability (``repeatability``:
    aspect -> summary-level r, its 95% CI, sqrt(r), sources), the verdict (``verdict.json``'s status and
    headline), the learning curve's fit per aspect (``curve.json``), the acceptability gate's count
    (``gate.json``: real candidates floored, of them rated above the judge's median) and the score stage's
    throughput (samples/s, model loading excluded). A file the run did not write gives None."""
    def load(name: str):
        p = run_dir / name
        return json.loads(p.read_text()) if p.is_file() else None

    rep, verdict, curve, gate = (load(n) for n in ("labelled.jsonl.repeatability.json", "verdict.json",
                                                    "curve.json", "gate.json"))
    state = json.loads((run_dir / "state.json").read_text())
    return {
        "repeatability": None if rep is None else {
            col.split(".", 1)[1]: {"r": d["summary"]["r"], "ci": d["summary"]["ci"], "sqrt_r": d["summary"]["sqrt_r"],
                                   "sources": d["summary"]["n_sources"]}
            for col, d in rep["columns"].items()},
        "repeat_seconds": ((((state.get("annotate") or {}).get("summary") or {}).get("repeat")) or {}).get("seconds"),
        "verdict": None if verdict is None else {"status": verdict.get("status"), "headline": verdict.get("headline")},
        "curve_fit": None if curve is None else {a: {k: (f or {}).get(k) for k in ("gain_per_doubling", "gain_ci", "trend", "labels_to_target")} for a, f in (curve.get("fits") or {}).items()},
        "gate": None if gate is None else {a: (d or {}).get("all") for a, d in gate.items() if isinstance(d, dict)},
        "throughput": ((state.get("score") or {}).get("summary") or {}).get("samples_per_second"),
    }


def report(res: dict) -> str:
    """The Markdown report: stage times, the student vs the judge beside the baselines, the judge's range."""
    m = res["meta"]
    lines = [f"# The main job (`csem run {res.get('pipeline', PIPELINE)}`)\n",
             f"{m['cpu']['model']} ({m['cpu']['cores']} cores, AMX: {'yes' if m['cpu']['amx'] else 'no'}); "
             f"csem {m['versions']['csem']}, llama-cpp-python {m['versions']['llama_cpp_python']}, torch "
             f"{m['versions']['torch']}; `{' '.join(res['command'])}`, {res['wall_seconds']:.0f} s wall, "
             f"exit {res['returncode']}." + (f" {res['note']}" if res.get("note") else "")
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
                     *(fmt(b.get(k)) for k in ("length", "extractiveness", "system prior", "overlap fit"))])
    lines.append(markdown_table(rows, ["aspect", "the run's student (model/)", "its 95% CI (test articles resampled)",
                                       "one student per seed, mean +- sd (min-max)", "length", "extractiveness",
                                       "system prior", "overlap fit (least squares)"]))
    rng = "; ".join(f"{a} {fmt(v['min'])}-{fmt(v['max'])} (sd {fmt(v['sd'])})" for a, v in res["judge_range"].items())
    lines.append(f"\nThe judge's scores: {rng}.")
    lines += _trust_lines(res)
    return "\n".join(lines) + "\n"


def _trust_lines(res: dict) -> list[str]:
    """The report's lines on the run's verdict, the judge's repeatability, the curve, the gate and speed."""
    out = []
    if res.get("verdict"):
        out.append(f"\n**Verdict** (`verdict.json`): {res['verdict']['headline']}")
    rows = []
    for a, d in (res.get("repeatability") or {}).items():
        fit = (res.get("curve_fit") or {}).get(a) or {}
        gate = (res.get("gate") or {}).get(a) or {}
        gain, ci = fit.get("gain_per_doubling"), fit.get("gain_ci") or [None, None]
        rows.append([a, f"{fmt(d['r'])} ({fmt(d['ci'][0])} to {fmt(d['ci'][1])}), {d['sources']} sources",
                     fmt(d["sqrt_r"]), f"{fmt(gain)} ({fmt(ci[0])} to {fmt(ci[1])}), {fit.get('trend', '')}",
                     f"{gate.get('floored', '')} of {gate.get('candidates', '')}"
                     f" ({gate.get('floored_above_median', '')} rated above the judge's median)"])
    if rows:
        out.append("\nThe judge against itself (a second rendering of each rubric on a share of the sources), "
                   "the learning curve's gain per doubling of the labels, and the real candidates the "
                   "acceptability gate floors:\n")
        out.append(markdown_table(rows, ["aspect", "judge repeatability r (95% CI)", "sqrt(r)",
                                         "curve: gain per doubling (95% CI)", "gate: floored"]))
    if res.get("repeat_seconds") is not None:
        out.append(f"\nThe repeatability share cost {res['repeat_seconds']:.0f} s of judging.")
    if res.get("throughput"):
        out.append(f"\nScoring throughput of the shipped student (the score stage, model loading excluded): "
                   f"{res['throughput']:.1f} samples/s.")
    return out


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


def read(run_dir: Path, quick: bool = False, wall: float | None = None, cpu_seconds: float | None = None,
         peak_rss_mb: float | None = None, note: str | None = None) -> dict:
    """The results of a finished main-job run folder (what :func:`run` returns); ``wall`` defaults to the
    sum of the stages' seconds (a run resumed after an interruption)."""
    state = json.loads((run_dir / "state.json").read_text())
    stages = {s: {"seconds": state[s]["seconds"], "summary": state[s].get("summary")} for s in STAGES if state.get(s)}
    agree = agreement(run_dir)
    return {"meta": {"date": now(), "machine": machine(), "cpu": cpu(), "versions": versions()},
            "command": ["csem", "run", PIPELINE if not quick else "quick.yaml"], "pipeline": PIPELINE, "quick": quick,
            "returncode": 0, "wall_seconds": wall if wall is not None else sum(v["seconds"] for v in stages.values()),
            "cpu_seconds": cpu_seconds, "peak_rss_mb": peak_rss_mb, "stages": stages, "note": note,
            "seeds": max((len(d.get("per_seed", {})) for d in agree.values()), default=0),
            "agreement": agree, "judge_range": judge_range(run_dir), **trust(run_dir)}


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
    res = read(run_dir, quick, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
    if quick:
        shutil.rmtree(tmp, ignore_errors=True)
    return res
