"""GPU check of the student: training and scoring on one CUDA GPU (bf16-mixed and fp32), frozen and
fine-tuned encoder, on the main job's labelled candidates (``runs/summarization/labelled.jsonl``,
same split as the pipeline), plus the largest difference between the trained model's scores on the
GPU and on the CPU. Figures go to ``$OUT/gpu_check.json`` (default benchmarks/results/).

    python benchmarks/gpu_student_check.py [LABELLED.jsonl] [ENCODER]

Run on an H200 with ``ENCODER`` an fp16 copy of all-MiniLM-L6-v2 (the packaged one is 87 MiB);
the encoder is loaded with fp32 weights either way (see csem.model.encoder)."""
import json, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
import torch
from csem.data.records import read_records
from csem.pipeline.runner import split_sources
from csem.pipeline.config import SplitConfig
from csem.model import ModelConfig, TrainConfig, train
from csem.model.evaluation_model import EvaluationModel
from csem.pipeline.agreement import agreement_table

out = os.environ.get("OUT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
recs = read_records(sys.argv[1] if len(sys.argv) > 1 else "runs/summarization/labelled.jsonl")
encoder = sys.argv[2] if len(sys.argv) > 2 else "minilm"
split = split_sources([r["doc_id"] for r in recs], SplitConfig(test_fraction=0.25, dev_fraction=0, seed=0))
for r in recs:
    r["split"] = split[r["doc_id"]]
tr = [r for r in recs if r["split"] == "train"]; te = [r for r in recs if r["split"] == "test"]
cols = ["judge.coherence", "judge.relevance"]
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0), "bf16", torch.cuda.is_bf16_supported(), flush=True)
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "runs": []}
runs = [("frozen-bf16", "bf16-mixed", 30, 30, 1e-5), ("frozen-fp32", "32-true", 30, 30, 1e-5),
        ("finetune-bf16", "bf16-mixed", 10, 0.3, 1e-5), ("finetune-fp32", "32-true", 10, 0.3, 1e-5)]
for name, prec, ep, frozen, lr in runs:
    t0 = time.perf_counter()
    m = train(tr, cols, mode="ref-free", config=ModelConfig(encoder=encoder, mode="ref-free", hidden_sizes=[256], loss="pairwise"),
              train_config=TrainConfig(max_epochs=ep, frozen_epochs=frozen, lr=lr, head_lr=3e-4, batch_size=16, seed=12,
                                       accelerator="gpu", devices=1, precision=prec),
              label_range={c: (1.0, 5.0) for c in cols}, out_dir=f"/tmp/m_{name}")
    train_s = time.perf_counter() - t0
    g = EvaluationModel.load(f"/tmp/m_{name}", device="cuda")
    t0 = time.perf_counter(); scored = g.score_records(te, precision="fp32"); score_s = time.perf_counter() - t0
    c = EvaluationModel.load(f"/tmp/m_{name}", device="cpu").score_records(te, precision="fp32")
    diff = max(abs(a[f"metric.csem.{x}"] - b[f"metric.csem.{x}"]) for a, b in zip(scored, c) for x in ("coherence", "relevance"))
    rows = agreement_table(scored, cols)
    agree = {f"{r['aspect']}/{r['level']}": r["spearman"] for r in rows}
    entry = {"run": name, "precision": prec, "epochs": ep, "frozen_epochs": frozen, "train_s": round(train_s, 1),
             "score_s": round(score_s, 3), "max_abs_diff_gpu_vs_cpu_scores": diff, "spearman_vs_judge": agree,
             "history_last": g.card["validation_history"][-1:] if g.card.get("validation_history") else None}
    res["runs"].append(entry); print(json.dumps(entry), flush=True)
    json.dump(res, open(os.path.join(out, "gpu_check.json"), "w"), indent=2)
