"""issue 22: the multi-node training recipe of docs/guides/scale.md, run for real on one machine.

Two ``torchrun --nnodes 2 --nproc-per-node 1`` launchers (what two machines would each run) meet
through a c10d rendezvous on loopback and run ``csem train --num-nodes 2 --devices 1 --strategy ddp``
on CPU (gloo): Lightning takes torchrun's environment, the two processes train one model, only
global rank 0 writes the folder and prints the summary, and the folder scores. Tiny RANDOM encoder
(plumbing, not quality); two real training processes, so ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_torchrun_two_nodes_on_loopback(tiny_encoder, shared_data, tmp_path):
    from synthetic_records import summeval_candidates

    from csem.llm.server import free_port

    recs = summeval_candidates(shared_data, 16, {"own": {"judge.quality": 5.0}, "shuffled": {"judge.quality": 3.0},
                                                 "other": {"judge.quality": 1.0}})
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    out = tmp_path / "model"
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", CSEM_DEBUG="1")
    procs = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "csem-test",
               "-m", "csem", "train", "--data", str(data), "--label-col", "judge.quality", "--label-range", "1,5",
               "--out", str(out), "--encoder", str(tiny_encoder), "--set", "model.max_length=40", "--set",
               "model.hidden_sizes=[16]",
               "--epochs", "2", "--set", "train.frozen_epochs=0", "--set", "train.batch_size=8", "--set",
               "train.num_threads=1",
               "--set", "train.accelerator=cpu", "--set", "train.devices=1", "--set", "train.num_nodes=2", "--set",
               "train.strategy=ddp"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (so, se) in zip(procs, outputs):
        assert p.returncode == 0, se[-3000:]
    assert sum(so.count("wrote ") for so, _ in outputs) == 1, [so for so, _ in outputs]  # global rank 0 only
    assert (out / "model.safetensors").exists()
    test = tmp_path / "test.jsonl"
    test.write_text("".join(json.dumps(r) + "\n" for r in recs[:6]), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "csem", "score", "--model", str(out), "--data", str(test),
                          "--out", str(tmp_path / "scored.jsonl")], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(isinstance(r["metric.csem.quality"], float) for r in rows)
