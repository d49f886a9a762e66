"""Scoring speed: one student, seed ensembles of 5 and COMET on the same rows, batch size and threads.

Rows: SummEval's first 300 records (sorted doc_id order; articles of ~400 words, ref-free). Models:
csem's default student (MiniLM, top 2 layers fine-tuned over cached lower layers, four aspect heads)
trained briefly on 64 SummEval rows (weights do not change the speed), as one member and as two seed
ensembles of 5 (``members=5``): csem train's default (``train_layers=2``: the members share the
embeddings and the 4 lower layers, which scoring runs once per text, and each runs its own top 2) and
the main job's recipe (``train_layers=1``: 5 layers shared, each member's top layer);
each loaded with ``csem.load_metric`` and timed on ``EvaluationModel.predict`` (best of 3 passes
after a warm-up, the students in turn within each pass, wall seconds); COMET (unbabel-comet
2.2.7's ``ReferencelessRegression`` on the same MiniLM folder, its own ``predict``), in its own virtual
environment built from PyPI once (below: COMET pins ``transformers<5`` and ``numpy<2``, so it never
becomes a csem dependency). ``quick``: 8 rows, ensembles of 2, no COMET.

COMET's timer: a ``ReferencelessRegression`` (src + mt, features [mt; src; mt*src; |mt-src|]) with
``encoder_model="BERT"``, ``pretrained_model=<MiniLM folder>``, offline, COMET's defaults otherwise
(layer mix over all layers, average pooling, 2048-1024 head, random head weights, seed 0); the call
timed is ``model.predict(samples, batch_size=B, gpus=0, progress_bar=False)`` after one warm-up batch,
best of ``repeats``. COMET encodes src and mt separately per sample, each truncated to 508 tokens;
csem's student reads at most 512.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

COMET_REQUIREMENT = "unbabel-comet==2.2.7"
SETUPTOOLS_REQUIREMENT = "setuptools<81"  # torchmetrics 0.10 needs pkg_resources
MODES = {"ref-free": ("ReferencelessRegression", ("src", "mt")),
         "ref-based": ("RegressionMetric", ("src", "mt", "ref"))}
_MARKER = "csem-comet-venv.json"  # written last: its presence means the build finished
_RESULT_TAG = "COMET_SPEED_RESULT "


class CometSpeedError(RuntimeError):
    """The COMET venv could not be built, or the timing run failed."""


class CometInputError(ValueError):
    """The records file is unusable (message names file, line and field)."""


# ----------------------------------------------------------------------------------------------
# the venv
# ----------------------------------------------------------------------------------------------

def venv_dir() -> Path:
    from csem.assets import cache_dir

    return cache_dir() / "comet-venv"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(cmd: list[str], what: str, timeout: float = 3600) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_clean_env())
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise CometSpeedError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{tail}")
    return p.stdout


def _clean_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update({"PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    env.update(extra or {})
    return env


def _host_torch() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def choose_torch(py: Path) -> str:
    """The torch requirement for the venv: a CPU build, never a CUDA one.

    ``CSEM_COMET_TORCH`` (a pip requirement or wheel path) wins. Otherwise the versions that pip
    offers for the venv's interpreter (``pip index versions torch``) are read: csem's own torch if
    it is a CPU build (``+cpu``) on offer (same kernels on both sides of the comparison), else the
    newest ``+cpu`` build on offer (COMET accepts any torch >= 1.6). Raises CometSpeedError when
    the index offers no CPU build (plain ``torch`` wheels on Linux pull CUDA libraries).
    """
    if os.environ.get("CSEM_COMET_TORCH"):
        return os.environ["CSEM_COMET_TORCH"]
    out = _run([str(py), "-m", "pip", "index", "versions", "torch"], "pip index versions torch", timeout=600)
    line = next((ln for ln in out.splitlines() if ln.strip().startswith("Available versions:")), "")
    offered = [v.strip() for v in line.split(":", 1)[-1].split(",") if v.strip()]
    cpu = [v for v in offered if v.endswith("+cpu")]
    host = _host_torch()
    if host and host in cpu:
        return f"torch=={host}"
    if cpu:
        return f"torch=={cpu[0]}"  # pip lists newest first
    raise CometSpeedError(f"no CPU build of torch among the versions pip offers ({', '.join(offered[:8]) or 'none'}); "
                          "set CSEM_COMET_TORCH to a CPU torch requirement or wheel path")


def _probe(venv: Path) -> dict | None:
    """Versions inside the venv, or None when it does not import COMET."""
    py = _venv_python(venv)
    if not py.exists():
        return None
    code = ("import json, importlib.metadata as m, comet, torch, transformers, pytorch_lightning;"
            "print(json.dumps({k: m.version(k) for k in ('unbabel-comet', 'torch', 'transformers', "
            "'pytorch-lightning', 'torchmetrics', 'numpy')}))")
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=600, env=_clean_env())
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def ensure_comet_venv(venv: Path | None = None, log=print) -> dict:
    """Build (once) the venv with unbabel-comet 2.2.7; reuse it while it imports COMET.

    Steps: ``python -m venv``; ``pip install <CPU torch>`` (see :func:`choose_torch`); ``pip install
    unbabel-comet==2.2.7 setuptools<81`` with torch constrained to that build (pip resolves COMET's other
    pins; torchmetrics 0.10 imports ``pkg_resources``, gone from setuptools 81 on).
    A lock file serialises concurrent builders. Returns the marker dict: ``venv``, ``versions``
    (package -> version inside the venv), ``torch_requirement``, ``build_s`` (seconds the build
    took, when it was built), ``built_now``. Raises CometSpeedError when a step fails.
    """
    import shutil

    venv = Path(venv) if venv else venv_dir()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / (venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = venv / _MARKER
        if marker.exists():
            versions = _probe(venv)
            if versions and versions.get("unbabel-comet") == COMET_REQUIREMENT.split("==")[1]:
                info = json.loads(marker.read_text(encoding="utf-8"))
                info.update(versions=versions, built_now=False)
                return info
            log(f"comet venv {venv} does not import COMET; rebuilding")
        shutil.rmtree(venv, ignore_errors=True)
        t0 = time.perf_counter()
        log(f"building the COMET venv in {venv} (once)")
        _run([sys.executable, "-m", "venv", str(venv)], "python -m venv")
        py = _venv_python(venv)
        torch_req = choose_torch(py)
        log(f"  installing {torch_req}")
        _run([str(py), "-m", "pip", "install", "--quiet", torch_req], f"pip install {torch_req}")
        pinned = _run([str(py), "-c", "import importlib.metadata as m; print(m.version('torch'))"], "torch version")
        constraints = venv / "csem-constraints.txt"
        # torchmetrics 0.10 (COMET's pin) imports pkg_resources, which setuptools 81 removed
        constraints.write_text(f"torch=={pinned.strip()}\n{SETUPTOOLS_REQUIREMENT}\n", encoding="utf-8")
        log(f"  installing {COMET_REQUIREMENT} (torch kept at {pinned.strip()}; {SETUPTOOLS_REQUIREMENT})")
        _run([str(py), "-m", "pip", "install", "--quiet", COMET_REQUIREMENT, SETUPTOOLS_REQUIREMENT,
              "-c", str(constraints)],
             f"pip install {COMET_REQUIREMENT}")
        versions = _probe(venv)
        if not versions:
            raise CometSpeedError(f"{venv}: COMET installed but does not import")
        build_s = time.perf_counter() - t0
        info = {"venv": str(venv), "torch_requirement": torch_req, "build_s": build_s,
                "built": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "versions": versions}
        marker.write_text(json.dumps(info, indent=2), encoding="utf-8")
        log(f"  COMET venv built in {build_s:.0f} s: {versions}")
        info["built_now"] = True
        return info


# ----------------------------------------------------------------------------------------------
# the timer (runs inside the venv)
# ----------------------------------------------------------------------------------------------

_TIMER = r'''
import json, os, sys, time
path, threads, batch_size, repeats, mode, encoder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
fields = {"ref-free": ("src", "mt"), "ref-based": ("src", "mt", "ref")}[mode]
with open(path, encoding="utf-8") as f:  # checked by check_comet_jsonl before this runs
    samples = [{k: row[k] for k in fields} for row in map(json.loads, filter(str.strip, f))]

import logging, warnings
import torch
torch.set_num_threads(threads)
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
logging.getLogger("lightning").setLevel(logging.ERROR)
warnings.filterwarnings("ignore")
import importlib.metadata as md
from comet.models import ReferencelessRegression, RegressionMetric

torch.manual_seed(0)
cls = ReferencelessRegression if mode == "ref-free" else RegressionMetric
model = cls(encoder_model="BERT", pretrained_model=encoder, local_files_only=True, load_pretrained_weights=True)
model.eval()
max_tokens = model.encoder.max_positions - 2
srcs = sorted({s["src"] for s in samples})
src_truncated = sum(len(model.encoder.tokenizer(s)["input_ids"]) > max_tokens for s in srcs)

def run(rows):
    return model.predict(rows, batch_size=batch_size, gpus=0, progress_bar=False)

run(samples[:batch_size])  # warm-up
times, cpu_times = [], []
for _ in range(repeats):
    c0, t0 = time.process_time(), time.perf_counter()
    out = run(samples)
    times.append(time.perf_counter() - t0)
    cpu_times.append(time.process_time() - c0)
scores = list(out.scores)
assert len(scores) == len(samples), (len(scores), len(samples))
best = min(times)
print("''' + _RESULT_TAG + r'''" + json.dumps({
    "samples": len(samples), "seconds": best, "samples_per_s": len(samples) / best, "all_seconds": times,
    "cpu_seconds": min(cpu_times), "all_cpu_seconds": cpu_times,
    "repeats": repeats, "threads": threads, "torch_threads_after": torch.get_num_threads(),
    "batch_size": batch_size, "mode": mode, "model_class": cls.__name__, "encoder_model": "BERT",
    "encoder": encoder, "max_tokens_per_segment": max_tokens, "distinct_sources": len(srcs),
    "src_truncated": src_truncated, "finite_scores": sum(1 for s in scores if s == s),
    "comet_version": md.version("unbabel-comet"), "torch_version": torch.__version__,
    "transformers_version": md.version("transformers"),
    "pytorch_lightning_version": md.version("pytorch-lightning")}), flush=True)
'''


def time_comet(records_jsonl: Path, threads: int, batch_size: int, repeats: int, mode: str = "ref-free", *,
               encoder: str | Path | None = None, venv: Path | None = None, timeout: float = 7200,
               log=print) -> dict:
    """Time COMET's ``predict`` on a JSONL file, in COMET's own venv (built on first use).

    Args:
        records_jsonl: JSONL, one object a line with ``src``, ``mt`` (and ``ref`` for ref-based).
        threads: torch intra-op threads (``torch.set_num_threads``; OMP/MKL env set to match).
        batch_size: COMET ``predict`` batch size (samples per batch).
        repeats: timed passes over the whole file after one warm-up batch; the best is reported.
        mode: ``"ref-free"`` (COMET's ReferencelessRegression, COMET-QE style) or ``"ref-based"``
            (COMET's RegressionMetric).
        encoder: HF BERT folder; default csem's all-MiniLM-L6-v2 (``csem.assets.resolve_encoder``).
        venv: venv folder; default ``<csem cache>/comet-venv``.
        timeout: seconds for the timing subprocess.

    Returns:
        dict with ``samples``, ``seconds`` (best pass, wall-clock s), ``samples_per_s``, ``all_seconds``,
        ``cpu_seconds`` (least process CPU time of a pass, s: less sensitive to a shared machine),
        ``comet_version``, ``torch_version``, ``transformers_version``, ``encoder``, ``model_class``,
        ``max_tokens_per_segment`` (508 for MiniLM), ``src_truncated``, ``threads``, ``batch_size``,
        ``mode``, ``repeats``, plus ``venv`` and ``venv_build_s`` / ``venv_built_now``.

    Raises:
        CometSpeedError: the venv could not be built or the COMET run failed.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, not {mode!r}")
    if threads < 1 or batch_size < 1 or repeats < 1:
        raise ValueError("threads, batch_size and repeats must be >= 1")
    records_jsonl = Path(records_jsonl)
    if encoder is None:
        from csem.assets import resolve_encoder

        encoder = resolve_encoder("minilm")
    info = ensure_comet_venv(venv, log=log)
    env = _clean_env({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    cmd = [str(_venv_python(Path(info["venv"]))), "-c", _TIMER, str(records_jsonl.resolve()), str(threads),
           str(batch_size), str(repeats), mode, str(encoder)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    hits = [ln[len(_RESULT_TAG):] for ln in p.stdout.splitlines() if ln.startswith(_RESULT_TAG)]
    if p.returncode != 0 or not hits:
        tail = "\n".join(p.stderr.strip().splitlines()[-15:])
        raise CometSpeedError(f"COMET timing run failed (exit {p.returncode}):\n{tail}")
    res = json.loads(hits[-1])
    res.update(venv=info["venv"], venv_build_s=info.get("build_s"), venv_built_now=info.get("built_now"))
    return res


def write_comet_jsonl(records, path: Path, mode: str = "ref-free") -> Path:
    """Write csem records (``source``, ``candidate``, ``reference``) as COMET samples (src, mt, ref).

    A list-valued ``reference`` (SummEval: 11 references) contributes its first element.
    Raises CometInputError naming the record index and field when one is missing.
    """
    fields = MODES[mode][1]
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        for i, r in enumerate(records):
            row = {"src": r.get("source"), "mt": r.get("candidate")}
            if "ref" in fields:
                ref = r.get("reference")
                row["ref"] = ref[0] if isinstance(ref, list) and ref else ref
            for k, name in (("src", "source"), ("mt", "candidate"), ("ref", "reference")):
                if k in row and not isinstance(row[k], str):
                    raise CometInputError(f"record {i} ({r.get('id', '?')}): field '{name}' missing or not text")
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path

N_ROWS, N_TRAIN, BATCH, REPEATS = 300, 64, 32, 3
#: the seed ensembles timed: name -> ``train_layers`` of their members
ENSEMBLES = {"top 2 layers (csem train's default)": 2, "top layer (the main job's recipe)": 1}


def _time_interleaved(models: dict, rows: list[dict], repeats: int) -> dict:
    """Best-of-``repeats`` wall seconds of ``predict`` on ``rows`` for each model, the models timed in
    turn within each round (after one warm-up batch each), so a change in the machine's load falls on
    all of them alike."""
    for model in models.values():
        model.predict(rows[:BATCH], batch_size=BATCH)  # warm-up
    times: dict = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            t0 = time.perf_counter()
            model.predict(rows, batch_size=BATCH)
            times[name].append(time.perf_counter() - t0)
    return {name: {"seconds": min(t), "all_seconds": t, "rows_per_s": len(rows) / min(t)} for name, t in times.items()}


def run(quick: bool = False) -> dict:
    """Train the two students briefly, then time them (and COMET unless ``quick``) on the same rows."""
    import tempfile

    import torch

    import csem
    from benchmarks.suite import ASPECTS, log, machine, summeval, threads

    n_threads = threads()
    torch.set_num_threads(n_threads)
    n_rows, n_train, members, repeats = (8, 8, 2, 1) if quick else (N_ROWS, N_TRAIN, 5, REPEATS)
    rows = [{k: r[k] for k in ("id", "doc_id", "system_id", "source", "candidate")} for r in summeval()[:n_rows]]
    train = summeval(slice(90, None))[:n_train]
    labels = ",".join(f"human.{a}" for a in ASPECTS)
    out: dict = {"machine": machine(), "threads": n_threads, "rows": len(rows), "batch_size": BATCH,
                 "repeats": repeats, "members": members, "timings": {}}
    scorers = [("one student", 1, 2)] + [(f"seed ensemble of {members}, {name}", members, layers)
                                         for name, layers in ENSEMBLES.items()]
    with tempfile.TemporaryDirectory(prefix="csem-speed-") as tmp:
        models = {}
        for i, (name, m, layers) in enumerate(scorers):
            folder = Path(tmp) / f"m{i}"
            csem.train(train, labels, out_dir=folder, members=m, train_layers=layers, max_epochs=1, seed=12,
                       num_threads=n_threads)
            models[name] = csem.load_metric(folder)
        out["timings"] = _time_interleaved(models, rows, repeats)
        for name, res in out["timings"].items():
            log(f"{name}: {res['rows_per_s']:.1f} rows/s")
        if not quick:
            comet = time_comet(write_comet_jsonl(rows, Path(tmp) / "comet.jsonl"), n_threads, BATCH, repeats,
                               log=log)
            out["timings"]["COMET 2.2.7 (same MiniLM)"] = {k: comet[k] for k in ("seconds", "all_seconds")} | {
                "rows_per_s": comet["samples_per_s"]}
            out["comet"] = {k: comet.get(k) for k in ("comet_version", "torch_version", "transformers_version",
                                                      "max_tokens_per_segment", "src_truncated")}
    t = out["timings"]
    one = t["one student"]["seconds"]
    out["ensemble_over_one"] = {name: t[f"seed ensemble of {members}, {name}"]["seconds"] / one for name in ENSEMBLES}
    out["headline"] = {"setting": f"{len(rows)} SummEval rows, {n_threads} threads",
                       "student": t["one student"]["rows_per_s"],
                       "others": {k: v["rows_per_s"] for k, v in t.items() if k != "one student"}}
    return out


def report(results: dict) -> str:
    """The Markdown report: rows/s of each scorer, the ensemble's cost relative to one member."""
    from benchmarks.suite import fmt, markdown_table

    rows = [[k, fmt(v["seconds"], 2), fmt(v["rows_per_s"], 1), ", ".join(fmt(x, 2) for x in v["all_seconds"])]
            for k, v in results["timings"].items()]
    return "\n".join([
        "# Scoring speed: student, seed ensemble and COMET side by side", "",
        f"{results['rows']} SummEval rows (ref-free), batch size {results['batch_size']}, {results['threads']} torch "
        f"threads, best of {results['repeats']} passes after a warm-up, the students timed in turn within each round; machine: {results['machine']}.", "",
        markdown_table(rows, ["scorer", "best s", "rows/s", "passes (s)"]), "",
        f"A seed ensemble of {results['members']} takes "
        + "; ".join(f"**{ratio:.2f}x** the time of one member when its members fine-tune the {name}"
                    for name, ratio in results["ensemble_over_one"].items())
        + ". The members' shared frozen lower encoder layers run once per text."])
