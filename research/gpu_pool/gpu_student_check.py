"""GPU check of the student: training and scoring on one CUDA GPU (bf16-mixed and fp32), frozen and
fine-tuned encoder, on the main job's labelled candidates (``runs/summarization/labelled.jsonl``,
same split as the pipeline), plus the largest difference between the trained model's scores on the
GPU and on the CPU. Figures go to ``benchmarks/results/gpu_student_check.json`` and ``.md``
(``--out``; under ``$OUT`` when that is set, as on the lent GPU machine).

    python benchmarks/gpu_student_check.py [LABELLED.jsonl] [--encoder ENCODER]

Run on an H200 with ``ENCODER`` an fp16 copy of all-MiniLM-L6-v2 (the packaged one is 87 MiB);
the encoder is loaded with fp32 weights either way (see csem.model.encoder). ``--quick`` trains
the first run only, for 2 epochs, on the device ``--accelerator`` names (``cpu`` works without a
GPU; then the "GPU vs CPU" difference compares two CPU scorings).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from harness import RESULTS, fmt, log, markdown_table, now, parser, setup, write_results

RUNS = [("frozen-bf16", "bf16-mixed", 30, 30, 1e-5), ("frozen-fp32", "32-true", 30, 30, 1e-5),
        ("finetune-bf16", "bf16-mixed", 10, 0.3, 1e-5), ("finetune-fp32", "32-true", 10, 0.3, 1e-5)]
COLS = ["judge.coherence", "judge.relevance"]


def main() -> int:
    ap = parser(__doc__, out="gpu_student_check", threads=4, seed=12, quick=True)
    ap.add_argument("labelled", nargs="?", default="runs/summarization/labelled.jsonl",
                    help="the main job's labelled candidates (default runs/summarization/labelled.jsonl)")
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--accelerator", default="gpu", help="gpu (default) or cpu")
    args = ap.parse_args()
    if os.environ.get("OUT") and args.out == RESULTS / "gpu_student_check":
        args.out = Path(os.environ["OUT"]) / "gpu_student_check"
    setup(args)

    import torch

    from csem.data.records import read_records
    from csem.model import ModelConfig, TrainConfig, fit
    from csem.model.evaluation_model import EvaluationModel
    from csem.pipeline.agreement import agreement_table
    from csem.pipeline.config import SplitConfig
    from csem.pipeline.runner import split_sources

    gpu = args.accelerator == "gpu"
    device = "cuda" if gpu else "cpu"
    recs = read_records(args.labelled)
    split = split_sources([r["doc_id"] for r in recs], SplitConfig(test_fraction=0.25, dev_fraction=0, seed=0))
    for r in recs:
        r["split"] = split[r["doc_id"]]
    tr = [r for r in recs if r["split"] == "train"]
    te = [r for r in recs if r["split"] == "test"]
    name = torch.cuda.get_device_name(0) if gpu else "cpu"
    log(f"device {name}; cuda {torch.cuda.is_available()}; bf16 {gpu and torch.cuda.is_bf16_supported()}")
    res = {"device": name, "torch": torch.__version__, "started": now(), "quick": bool(args.quick),
           "train_rows": len(tr), "test_rows": len(te), "runs": []}
    runs = [(RUNS[1][0], RUNS[1][1], 2, 2, RUNS[1][4])] if args.quick else RUNS
    work = Path(tempfile.mkdtemp(prefix="gpu_student_check_"))
    for run, prec, ep, frozen, lr in runs:
        t0 = time.perf_counter()
        fit(tr, COLS, mode="ref-free",
            config=ModelConfig(encoder=args.encoder, mode="ref-free", hidden_sizes=[256], loss="pairwise"),
            train_config=TrainConfig(max_epochs=ep, frozen_epochs=frozen, lr=lr, head_lr=3e-4, batch_size=16,
                                     seed=args.seed, accelerator=args.accelerator, devices=1, precision=prec),
            label_range={c: (1.0, 5.0) for c in COLS}, out_dir=work / run)
        train_s = time.perf_counter() - t0
        g = EvaluationModel.load(work / run, device=device)
        t0 = time.perf_counter()
        scored = g.predict(te, precision="fp32").records
        score_s = time.perf_counter() - t0
        c = EvaluationModel.load(work / run, device="cpu").predict(te, precision="fp32").records
        diff = max(abs(a[f"metric.csem.{x}"] - b[f"metric.csem.{x}"]) for a, b in zip(scored, c)
                   for x in ("coherence", "relevance"))
        agree = {f"{r['aspect']}/{r['level']}": r["spearman"] for r in agreement_table(scored, COLS)}
        entry = {"run": run, "precision": prec, "epochs": ep, "frozen_epochs": frozen, "train_s": round(train_s, 1),
                 "score_s": round(score_s, 3), "max_abs_diff_gpu_vs_cpu_scores": diff, "spearman_vs_judge": agree,
                 "history_last": g.card["validation_history"][-1:] if g.card.get("validation_history") else None}
        res["runs"].append(entry)
        log(f"{run}: {entry}")
        rows = [[e["run"], e["precision"], e["epochs"], fmt(e["train_s"], 1), e["spearman_vs_judge"].get("coherence/summary"),
                 e["spearman_vs_judge"].get("relevance/summary"), f"{e['max_abs_diff_gpu_vs_cpu_scores']:.1e}"]
                for e in res["runs"]]
        md = [f"# The student on one device ({name})" + (" (QUICK mode: not the check)" if args.quick else ""), "",
              f"The main job's labelled candidates ({len(tr)} training, {len(te)} held-out rows), pairwise loss; "
              f"summary-level Spearman with the judge on the held-out articles. torch {torch.__version__}.", "",
              markdown_table(rows, list("abcdefg"), headers=["run", "precision", "epochs", "training s", "coherence",
                                                             "relevance", "largest GPU-vs-CPU score difference"])]
        write_results(args.out, res, md)
    log(f"wrote {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
