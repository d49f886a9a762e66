"""MRT + MLE fine-tuning of the real SmolLM2-135M-Instruct (fp32, CPU): CLI, checkpoints, resume, log."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import write_records

_load_commands()


@pytest.mark.slow
def test_mrt_cli_checkpoints_and_resume(nbest_test, tmp_path):
    from transformers import AutoModelForCausalLM

    from csem.apply.metrics import load_metric
    from csem.apply.mrt import MRTConfig, train_mrt

    srcs = {}
    for r in nbest_test[:12]:
        srcs.setdefault(r["doc_id"], {"id": r["doc_id"], "source": r["source"], "reference": r["reference"]})
    src_file = tmp_path / "sources.jsonl"
    write_records(list(srcs.values()), src_file)
    out = tmp_path / "run"
    args = ["mrt", "--generator", "smollm2", "--sources", str(src_file), "--metric", "chrf", "--out", str(out),
            "--max-steps", "2", "--samples", "2", "--batch-size", "1", "--max-new-tokens", "6",
            "--max-source-tokens", "32", "--checkpoint-every", "1", "--lr", "1e-5", "--threads", "2"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output  # (the summary line may go to the progress bar's stream: check files)
    net = AutoModelForCausalLM.from_pretrained(out / "final")  # a loadable transformers folder
    assert net.num_parameters() > 100_000_000
    assert (out / "checkpoint-2" / "config.json").exists() and (out / "lightning" / "last.ckpt").exists()
    rows = list(csv.DictReader(open(out / "train_log.csv")))
    assert [int(x["step"]) for x in rows] == [0, 1]
    for x in rows:
        assert float(x["reward_mean"]) >= 0 and float(x["mle_loss"]) > 0 and 1 <= float(x["sample_length"]) <= 6
        assert float(x["q_entropy"]) > 0
    n_rewards = len((out / "rewards.jsonl").read_text().splitlines())
    assert n_rewards >= 1

    # resume after "a kill": the same folder, one more step; the log continues at step 2
    cfg = MRTConfig(max_steps=3, num_samples=2, batch_size=1, max_new_tokens=6, max_source_tokens=32,
                    checkpoint_every=1, lr=1e-5, threads=2)
    res = train_mrt("smollm2", list(srcs.values()), load_metric("chrf"), out, cfg)
    assert res.resumed_from and res.resumed_from.endswith("last.ckpt") and res.steps == 3
    rows = list(csv.DictReader(open(out / "train_log.csv")))
    assert [int(x["step"]) for x in rows] == [0, 1, 2]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]  # keeps 2


def test_mrt_cli_errors(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "a", "source": "text"}\n')
    r = CliRunner().invoke(app, ["mrt", "--generator", "smollm2", "--sources", str(p), "--metric", "nope",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "unknown metric" in r.output
    r = CliRunner().invoke(app, ["mrt", "--generator", "smollm2", "--sources", str(tmp_path / "missing.jsonl"),
                                 "--metric", "chrf", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
