"""Contrast pretraining (csem.model.contrast + fit(contrast=...)): pair plumbing on the tiny random
encoder (fast tier), and bounded scores."""

from __future__ import annotations

import torch

from csem.data.contrasts import make_pairs
from csem.model import ModelConfig, TrainConfig, fit
from csem.model.config import LabelSpec
from csem.model.contrast import PairBatchSampler, contrast_training
from csem.model.module import bounded

SMALL = dict(max_length=40, hidden_sizes=[32], dropout=0.0)


def _col(pred, aspect):
    """The scores of ``aspect`` (column ``metric.<name>.<aspect>``) of a prediction, in input order."""
    return pred.scores[next(c for c in pred.columns if c.endswith("." + aspect))]


def _by_id(pred, aspect):
    """``{record id: score of aspect}`` of a prediction."""
    return dict(zip(pred.ids, _col(pred, aspect)))


def _rows():
    src = "The council approved the budget on Monday. Taxes rise by 2 percent. Schools get new funds."
    return [{"source": src, "candidate_a": "Council approves budget.", "candidate_b": "budget budget budget",
             "aspect": "fluency", "perturbation": "repeated_token"},
            {"source": src, "candidate_a": "Council approves budget.", "candidate_b": "", "aspect": "all"},
            {"source": src, "candidate_a": "Taxes rise.", "candidate_b": "Taxes fall.", "judge.consistency": 1.0},
            {"source": src, "candidate_a": "x", "candidate_b": "y", "aspect": "style"}]


def test_contrast_training_maps_aspects_and_keeps_pairs_together():
    specs = [LabelSpec(aspect=a, column=f"judge.{a}", min=1, max=5) for a in ("consistency", "fluency")]
    recs, table = contrast_training(_rows(), specs)
    assert len(recs) == 6  # the 'style' pair names no aspect of the model: skipped
    assert [r["id"] for r in recs] == ["c0a", "c0b", "c1a", "c1b", "c2a", "c2b"]
    assert sorted(table.pairs) == [("c0a", "c0b", 1, 1.0), ("c1a", "c1b", 0, 1.0), ("c1a", "c1b", 1, 1.0),
                                   ("c2a", "c2b", 0, 1.0)]
    batches = list(PairBatchSampler(recs, pairs_per_batch=2, seed=0))
    for b in batches:
        assert all(i + 1 in b for i in b if i % 2 == 0)
    assert sorted(i for b in batches for i in b) == list(range(6))


def test_bounded_is_strictly_increasing_inside_the_unit_interval():
    far = bounded(torch.tensor([-1e6, -50.0, 50.0, 1e6]))
    assert float(far.min()) >= 0 and float(far.max()) <= 1 and bool((far[1:] >= far[:-1]).all())
    x = torch.linspace(-5, 6, 11001, dtype=torch.float32)  # float32 still tells 0.001 steps apart here
    y = bounded(x)
    assert bool((y[1:] > y[:-1]).all())
    mid = torch.linspace(0.05, 0.95, 11)
    assert torch.allclose(bounded(mid), mid)


def test_contrast_pretraining_then_labels_ranks_perturbed_texts_lower(tiny_encoder, train_records):
    """After pretraining on the pairs (and mixing them into label training) the model scores the
    perturbed side of most training pairs below its original (the plumbing learns; the tiny encoder is
    random, so the lexical overlap features carry it)."""
    pairs = make_pairs(train_records, aspects=["fluency"], per_record=2, seed=0)
    for p in pairs:
        p["aspect"] = "quality"
    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), **SMALL)
    tc = TrainConfig(max_epochs=1, lr=1e-2, head_lr=1e-2, batch_size=16, seed=1, contrast_epochs=3,
                     contrast_mix=0.5, contrast_pairs_per_batch=8)
    model = fit(train_records, "judge.quality", "ref-free", config=cfg, train_config=tc, label_range=(1, 5),
                contrast=pairs)
    card = model.card["contrast"]
    assert card["pairs"] == len(pairs) and card["epochs"] == 3 and card["mix"] == 0.5
    better = [{"id": f"b{i}", "source": p["source"], "candidate": p["candidate_a"]} for i, p in enumerate(pairs)]
    worse = [{"id": f"w{i}", "source": p["source"], "candidate": p["candidate_b"]} for i, p in enumerate(pairs)
             if p["candidate_b"].strip()]
    sb = _by_id(model.predict(better), "quality")
    sw = _by_id(model.predict(worse), "quality")
    wins = sum(sb[f"b{k[1:]}"] > v for k, v in sw.items())
    assert wins / len(sw) > 0.6
    assert all(1 < v < 5 for v in list(sb.values()) + list(sw.values()))


def test_train_cli_contrast_file_and_auto_pairs(tiny_encoder, train_records, tmp_path):
    """`csem train --contrast PAIRS` (a `csem contrasts` file) and `--set train.contrast_per_record=N` (pairs made
    from the training rows) record the pretraining in the metric card; a pairs file naming no aspect of
    the labels is a one-line error, exit 2."""
    import json

    from typer.testing import CliRunner

    from csem.cli import _load_commands, app
    from csem.data.records import write_records

    _load_commands()
    records = train_records[:24]  # 8 articles: what is checked is the card, not what the student learns
    data = write_records(records, tmp_path / "labelled.jsonl")
    pairs = make_pairs(records, aspects=["fluency"], per_record=1, seed=0)
    write_records([dict(p, aspect="quality") for p in pairs], tmp_path / "pairs.jsonl")
    common = ["train", "--data", str(data), "--label-col", "judge.quality", "--epochs", "1",
              "--set", "model.hidden_sizes=[16]", "--set", "model.max_length=32", "--set", "train.num_threads=1",
              "--encoder", str(tiny_encoder), "--label-range", "1,5"]
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "m"), "--contrast", str(tmp_path / "pairs.jsonl"),
                                            "--set", "train.contrast_epochs=1"])
    assert res.exit_code == 0, res.output
    card = json.loads((tmp_path / "m" / "metric_card.json").read_text())
    assert card["contrast"]["pairs"] == len(pairs) and card["contrast"]["epochs"] == 1
    assert card["acceptability"]["accepted"] >= len(records)  # the gate is on by default
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "nogate"), "--set", "train.contrast_per_record=0",
                                            "--set", "model.acceptability_gate=false"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "nogate" / "config.json").read_text())["acceptability_gate"] is False
    assert "acceptability" not in json.loads((tmp_path / "nogate" / "metric_card.json").read_text())
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "auto"), "--set", "train.contrast_per_record=1",
                                            "--set", "train.contrast_epochs=1"])
    assert res.exit_code == 0, res.output
    auto = json.loads((tmp_path / "auto" / "metric_card.json").read_text())["contrast"]
    assert auto["pairs"] >= len(records)  # an 'overall' aspect gets every family's pairs
    # the aspect-specificity term lost its measurement and left the surface: naming it is a usage error
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "spec"), "--set", "train.contrast_specificity=2"])
    assert res.exit_code == 2 and "'train.contrast_specificity' is not a setting" in res.output
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "few"), "--set", "train.contrast_per_record=1",
                                            "--set", "train.contrast_epochs=1", "--set",
                                            "train.contrast_max_pairs=3"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "few" / "metric_card.json").read_text())["contrast"]["pairs"] == 3
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "none"), "--set", "train.contrast_max_pairs=0"])
    assert res.exit_code == 2 and "train.contrast_max_pairs = 0: Input should be greater than or equal to 1" in res.output
    write_records([dict(p, aspect="style") for p in pairs], tmp_path / "bad.jsonl")
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "bad"), "--contrast", str(tmp_path / "bad.jsonl")])
    assert res.exit_code == 2 and "no pair names one of the model's aspects" in res.output
    rows = [dict(p, aspect="quality") for p in pairs]
    del rows[1]["candidate_b"]
    write_records(rows, tmp_path / "textless.jsonl")
    res = CliRunner().invoke(app, common + ["--out", str(tmp_path / "t"), "--contrast", str(tmp_path / "textless.jsonl")])
    assert res.exit_code == 2 and f"{tmp_path / 'textless.jsonl'}: row 2 lacks candidate_b" in res.output


def test_auto_pairs_cover_the_aspects_and_respect_the_cap(train_records):
    from csem.model.contrast import auto_pairs

    specs = [LabelSpec(aspect=a, column=f"judge.{a}", min=1, max=5) for a in ("coherence", "quality")]
    rows = auto_pairs(train_records, specs, per_record=1, seed=3)
    assert {r["aspect"] for r in rows} == {"coherence", "quality"}
    assert any(r["candidate_b"].strip() == "" for r in rows) or any(r["degenerate"] for r in rows)
    capped = auto_pairs(train_records, specs, per_record=1, seed=3, max_pairs=10)
    assert len(capped) == 10 and all(r in rows for r in capped)
    assert auto_pairs(train_records, specs, per_record=1, seed=3) == rows  # seeded
