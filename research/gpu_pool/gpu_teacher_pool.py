"""The teacher pool judged on a GPU (issue 23): the same judge (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the
same GGUF file, sha256-verified), the same rubric and ``csem annotate --mode probs``, through
transformers on CUDA (``hf:FILE.gguf``, dequantised, bf16, prompts batched 64 to a forward pass) instead
of llama.cpp on 2 CPU cores. It judges the pool's 4,894 candidates again (test first) and the
rule-made training extension (``teacher_pool.py extend``) as one form, ``hf-bf16``, and measures how far
the GPU form agrees with the CPU judgments on the same candidates.

    python benchmarks/gpu_teacher_pool.py judge --gguf FILE [--batch-size 64] [--out DIR]

Writes into ``DIR`` (default ``$OUT`` on the lent GPU machine, else ``benchmarks/.cache/gpu``) and into
``benchmarks/data/teacher_pool/forms/hf-bf16/``: ``run-<UTC start>.jsonl.gz`` (id, score, mass, missing;
candidates the form already holds with a score are skipped, so a later run, on another machine too,
resumes), ``chunks.jsonl`` (a row per run: candidates, judgments made, seconds, dates, device),
``provenance.json``, and
``gpu_vs_cpu.json`` (Pearson, Spearman, summary-level Spearman on the test pool, largest difference,
between the GPU form and the pool's llama.cpp judgments). ``benchmarks/gpu_teacher_pool.sh`` is the
device script around it (payload, wheels, sha256 checks, then this, then the students).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import teacher_pool as tp

FORM = "hf-bf16"
RUBRIC = "csem/summ-relevance-ref-free"


def agreement(gpu: dict[str, dict], cpu: dict[str, dict], cands: list[dict]) -> dict:
    """GPU form vs the pool's llama.cpp judgments on the candidates both scored: Pearson and Spearman
    over all of them, summary-level Spearman on the test pool (csem's evaluator), mean and largest
    absolute difference."""
    import numpy as np
    from scipy import stats

    from csem.meta.correlation import column_correlations

    both = [c for c in cands if (gpu.get(c["id"]) or {}).get("score") is not None
            and (cpu.get(c["id"]) or {}).get("score") is not None]
    g = np.array([gpu[c["id"]]["score"] for c in both])
    c_ = np.array([cpu[c["id"]]["score"] for c in both])
    test = [{"doc_id": c["source_id"], "system_id": c["system_id"], "metric.gpu": gpu[c["id"]]["score"],
             "judge.cpu": cpu[c["id"]]["score"]} for c in both if c["split"] == "test"]
    summ = column_correlations(test, "metric.gpu", "judge.cpu", levels=("summary",), methods=("spearman",))
    return {"candidates": len(both), "pearson": float(stats.pearsonr(g, c_)[0]),
            "spearman": float(stats.spearmanr(g, c_)[0]),
            "summary_spearman_test": float(summ[("summary", "spearman")].value),
            "mean_abs_difference": float(np.abs(g - c_).mean()), "max_abs_difference": float(np.abs(g - c_).max()),
            "mean_gpu": float(g.mean()), "mean_cpu": float(c_.mean())}


def judge(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = tp.export(FORM, extended=True)
    # resume across runs and machines: what the form already holds with a score is not judged again
    done = {k for k, v in tp.judged(FORM).items() if v["score"] is not None}
    lines = [x for x in data.read_text(encoding="utf-8").splitlines(keepends=True) if json.loads(x)["id"] not in done]
    if args.limit:  # a smoke test: the first N candidates only
        lines = lines[: args.limit]
    data.write_text("".join(lines), encoding="utf-8")
    n = len(lines)
    print(f"{len(done)} candidates judged before; {n} to judge", flush=True)
    if not n:
        return 0
    dest_dir = tp.form_dir(FORM)
    dest_dir.mkdir(parents=True, exist_ok=True)
    result = tp.work_dir(FORM) / "all-extended.judged.jsonl"
    opts = {"device": args.device, "dtype": args.dtype, "batch_size": args.batch_size}
    cmd = [sys.executable, "-m", "csem", "annotate", "--data", str(data), "--out", str(result), "--rubric", RUBRIC,
           "--judge", f"hf:{args.gguf}", "--mode", "probs", "--cache", str(args.cache)]
    for k, v in opts.items():
        cmd += ["--judge-opt", f"{k}={v}"]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    print(" ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    for line in proc.stdout:  # shown as it comes: a run stopped by a time limit still tells how far it got
        print(line, end="", flush=True)
        said.append(line)
    proc.wait()
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 3):
        print(f"csem annotate exited {proc.returncode}", file=sys.stderr)
        return proc.returncode
    # the judgments this call made (the rest were cache hits): "... judgments (17978 judged, 0 cached, ..."
    made = re.findall(r"(\d+) judged,", " ".join("".join(said).split()))
    new = int(made[-1]) if made else None
    device = "cpu"
    try:
        import torch

        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - the name is a label only
        pass
    run_file = dest_dir / f"run-{started.replace('-', '').replace(':', '')}.jsonl.gz"  # read after judged.jsonl.gz
    tp.keep_judgments(result, run_file,
                      {"chunk": "all", "new_judgments": new, "seconds": seconds, "started": started,
                       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": device,
                       "backend_options": opts, "annotate_exit": proc.returncode})
    tp.provenance(f"hf:{Path(args.gguf).name}", RUBRIC, 0, FORM, model_path=Path(args.gguf), cache=Path(args.cache),
                  backend_options=opts,
                  command="python benchmarks/gpu_teacher_pool.py judge (one csem annotate call over the pool and "
                          "its extension, test candidates first)",
                  extra={"device": device, "extended": True,
                         "runtime": "transformers (GGUF dequantised at load, then cast to the dtype) on CUDA"})
    sources, cands = tp.load_pool(FORM, extended=True)
    agree = agreement(tp.judged(FORM), tp.judged(), cands)
    agree.update({"form": FORM, "device": device, "judgments": n, "seconds": seconds,
                  "seconds_per_judgment": seconds / max(1, new or n)})
    (dest_dir / "gpu_vs_cpu.json").write_text(json.dumps(agree, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(agree, indent=1), flush=True)
    for path in (run_file, dest_dir / "chunks.jsonl", dest_dir / "provenance.json", dest_dir / "gpu_vs_cpu.json"):
        shutil.copy(path, out / path.name)
    return 0 if proc.returncode == 0 else 3


def from_cache(data: Path, cache: Path, backend_id: str) -> list[dict]:
    """The judgments of ``data``'s records (a csem record file) that ``cache`` holds for ``backend_id``
    (probs mode, :data:`RUBRIC`), as ``{id, score, mass, missing}`` rows in ``data``'s order: what a
    stopped run left in its cache, read without loading the model (the keys are
    :func:`csem.judge.cache.judgment_key` of each rendered prompt, as ``csem annotate`` computes them)."""
    from csem.data.records import read_records
    from csem.judge.cache import JudgmentCache, judgment_key
    from csem.rubrics import load_rubrics

    (rubric,) = load_rubrics([RUBRIC])
    (aspect,) = rubric.aspect_names
    out = []
    with JudgmentCache(cache) as store:
        for rec in read_records(data):
            row = store.get(judgment_key(backend_id, rubric.render(rec, aspect), "probs",
                                         {"scores": rubric.scale.values}))
            if row is not None:
                out.append({"id": rec["id"], "score": row["score"], "mass": row["mass"], "missing": row["missing"]})
    return out


def cache_timing(cache: Path, backend_id: str, idle: float = 30.0) -> dict:
    """Judging time read from the cache's ``created`` stamps: ``judgments``, ``span_seconds`` (first to
    last), ``active_seconds`` (the same without pauses longer than ``idle`` seconds, e.g. between two
    calls of the device), ``batches`` (stamps closer than 10 ms belong to one batch) and their mean size."""
    import sqlite3

    with sqlite3.connect(cache) as db:
        t = [c for (c,) in db.execute("SELECT created FROM judgments WHERE backend = ? ORDER BY created", (backend_id,))]
    gaps = [b - a for a, b in zip(t, t[1:])]
    batches = 1 + sum(g >= 0.01 for g in gaps) if t else 0
    return {"judgments": len(t), "span_seconds": (t[-1] - t[0]) if t else 0.0,
            "active_seconds": sum(g for g in gaps if g <= idle), "pauses": sum(g > idle for g in gaps),
            "batches": batches, "mean_batch": len(t) / batches if batches else None,
            "first": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t[0])) if t else None,
            "last": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t[-1])) if t else None}


def recover(args: argparse.Namespace) -> int:
    """Keep what a stopped GPU run judged (its cache file, copied back) as the form's judgments, with
    its timing (:func:`cache_timing`), provenance and agreement with the pool's CPU judgments."""
    data = tp.export(FORM, extended=True)
    rows = from_cache(data, args.cache, args.backend_id)
    if not rows:
        print(f"{args.cache}: no judgment of {args.backend_id} for the pool", file=sys.stderr)
        return 1
    dest_dir = tp.form_dir(FORM)
    dest_dir.mkdir(parents=True, exist_ok=True)
    tp.write_jsonl_gz(dest_dir / "judged.jsonl.gz", rows)
    timing = cache_timing(args.cache, args.backend_id)
    (dest_dir / "chunks.jsonl").write_text(json.dumps(
        {"chunk": "all (stopped)", "candidates": len(rows), "missing": sum(r["score"] is None for r in rows),
         "new_judgments": timing["judgments"], "seconds": timing["active_seconds"], "started": timing["first"],
         "finished": timing["last"], "device": args.device, "backend_options": json.loads(args.options),
         **{k: timing[k] for k in ("span_seconds", "pauses", "batches", "mean_batch")}}) + "\n", encoding="utf-8")
    tp.provenance(f"hf:{Path(args.gguf).name}", RUBRIC, 0, FORM, model_path=Path(args.gguf), cache=Path(args.cache),
                  backend_options=json.loads(args.options),
                  command="bash benchmarks/gpu_teacher_pool.sh run (STAGES=judge), stopped at the device's time limit; "
                          "kept by python benchmarks/gpu_teacher_pool.py recover from its cache",
                  extra={"device": args.device, "extended": True,
                         "runtime": "transformers (GGUF dequantised at load, then cast to the dtype) on CUDA"})
    _, cands = tp.load_pool(FORM, extended=True)
    agree = agreement(tp.judged(FORM), tp.judged(), cands)
    agree.update({"form": FORM, "device": args.device, "judged": len(rows), "timing": timing,
                  "seconds_per_judgment": timing["active_seconds"] / max(1, timing["judgments"])})
    (dest_dir / "gpu_vs_cpu.json").write_text(json.dumps(agree, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(agree, indent=1))
    print(f"kept {len(rows)} judgments of {sum(1 for _ in data.open(encoding='utf-8'))} candidates "
          f"in {dest_dir / 'judged.jsonl.gz'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("judge")
    j.add_argument("--gguf", required=True, help="the judge's GGUF file (sha256-verified by the caller)")
    j.add_argument("--device", default="cuda")
    j.add_argument("--dtype", default="bfloat16")
    j.add_argument("--batch-size", type=int, default=64)
    j.add_argument("--cache", type=Path, default=Path("/tmp/csem-gpu-judge.sqlite"))
    j.add_argument("--limit", type=int, default=None, help="judge the first N candidates only (a smoke test)")
    j.add_argument("--out", default=os.environ.get("OUT") or str(tp.HERE / ".cache" / "gpu"))
    r = sub.add_parser("recover", help="keep the judgments a stopped run left in its cache file")
    r.add_argument("--cache", type=Path, required=True)
    r.add_argument("--backend-id", default="hf:/tmp/payload/judge.gguf/bfloat16")
    r.add_argument("--gguf", default="/tmp/payload/judge.gguf", help="the same GGUF file here (for its sha256)")
    r.add_argument("--device", default="NVIDIA H200")
    r.add_argument("--options", default='{"device": "cuda", "dtype": "bfloat16", "batch_size": 64}')
    args = ap.parse_args(argv)
    return judge(args) if args.cmd == "judge" else recover(args)


if __name__ == "__main__":
    sys.exit(main())
