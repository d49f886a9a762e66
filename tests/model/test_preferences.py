"""Training on judged preference pairs (csem.model.preferences, Eq. 3 with soft targets), through the
Python API and `csem train --pairs` (real MiniLM, head-only)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from csem.data.records import read_records, write_records
from csem.model.losses import preference_loss
from csem.model.preferences import pairs_to_training
from csem.model.validation import TrainingDataError


def test_preference_loss_is_eq3_with_soft_targets():
    a, b = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 1.0])
    hard = preference_loss(a, b, torch.tensor([1.0, 1.0]))
    expect = (-math.log(1 / (1 + math.exp(-2.0))) - math.log(1 / (1 + math.exp(1.0)))) / 2
    assert hard.item() == pytest.approx(expect, rel=1e-6)
    # p = 0.5: the minimum is at equal scores
    s = torch.zeros(1, requires_grad=True)
    preference_loss(s, torch.zeros(1), torch.tensor([0.5])).backward()
    assert s.grad.abs().item() < 1e-7
    assert preference_loss(torch.zeros(0), torch.zeros(0), torch.zeros(0)).item() == 0.0


def test_pair_loss_is_eq3_on_the_pairs_own_head():
    """PreferenceTable.loss is Eq. 3 (-log sigmoid(s_a - s_b)) on the head of the pair's aspect only."""
    from csem.model.config import LabelSpec
    from csem.model.pairs import PreferenceTable

    specs = [LabelSpec(column=f"judge.{a}", aspect=a, min=0.0, max=1.0) for a in ("coherence", "fluency", "relevance")]
    table = PreferenceTable([("a", "b", 0, 1.0)], specs)
    # margins m = s(a) - s(b): coherence 0.1, fluency 0.3, relevance -0.2
    score = torch.tensor([[0.6, 0.8, 0.3], [0.5, 0.5, 0.5]], requires_grad=True)
    loss = table.loss(score, ["a", "b"])
    assert loss.item() == pytest.approx(-math.log(1 / (1 + math.exp(-0.1))), rel=1e-5)
    loss.backward()
    assert score.grad[0, 0] < 0 < score.grad[1, 0]  # descent widens the coherence margin
    assert not score.grad[:, 1:].any()  # the other heads are not touched
    assert table.loss(score, ["a", "c"]).item() == 0.0  # b is not in the batch: no pair


def _pairs(records):
    """All pairs per source, preference from the fixture's known quality order (own > shuffled > other)."""
    by = {}
    for r in records:
        by.setdefault(r["doc_id"], []).append(r)
    rows = []
    for doc, rs in by.items():
        for x, y in itertools.combinations(rs, 2):
            p = 1.0 if x["judge.quality"] > y["judge.quality"] else 0.0
            rows.append({"id": f"{x['id']}|{y['id']}", "doc_id": doc, "source": x["source"], "id_a": x["id"],
                         "id_b": y["id"], "candidate_a": x["candidate"], "candidate_b": y["candidate"],
                         "system_a": x["system_id"], "system_b": y["system_id"], "judge.quality": p})
    return rows


def test_pairs_to_training_and_its_errors(train_records):
    rows = _pairs(train_records)
    recs, table = pairs_to_training(rows, "judge.quality")
    assert len(recs) == len(train_records) and len(table) == len(rows)
    assert table.specs[0].aspect == "quality" and (table.specs[0].min, table.specs[0].max) == (0.0, 1.0)
    bad = [dict(rows[0], **{"judge.quality": 1.5})]
    with pytest.raises(TrainingDataError, match=r"row 'd0-own\|d0-shuffled'.*outside \[0, 1\]"):
        pairs_to_training(bad, "judge.quality")
    with pytest.raises(TrainingDataError, match="with itself"):
        pairs_to_training([dict(rows[0], id_b=rows[0]["id_a"], candidate_b=rows[0]["candidate_a"])], "judge.quality")
    with pytest.raises(TrainingDataError, match="different candidate"):
        pairs_to_training([rows[0], dict(rows[1], candidate_a="changed")], "judge.quality")
    with pytest.raises(TrainingDataError, match=r"\['judge.relevance'\] not found"):
        pairs_to_training(rows, "judge.relevance")
    with pytest.raises(TrainingDataError, match="id_a"):
        pairs_to_training(train_records, "judge.quality")


@pytest.mark.slow  # MiniLM: checks that the order is learnt
@pytest.mark.slow
def test_train_on_pairs_learns_the_order(train_records, test_records, small_model):
    from csem.model import ModelConfig, TrainConfig, fit

    model = fit(_pairs(train_records), "judge.quality", "ref-free", config=ModelConfig(name="pw", **small_model),
                train_config=TrainConfig(max_epochs=10, frozen_epochs=10, head_lr=3e-3, batch_size=16, seed=3),
                pairs=True)
    assert model.config.loss == "pairwise"
    scored = model.predict(test_records).records
    mean = lambda kind: sum(r["metric.pw.quality"] for r in scored if r["system_id"] == kind) / 12  # noqa: E731
    assert mean("own") > mean("other")


def test_cli_train_pairs(tmp_path, train_records, tiny_encoder):
    import csem.cli.score  # noqa: F401  (registers the commands)
    import csem.cli.train  # noqa: F401
    from csem.cli import app

    data, out = tmp_path / "pairs.jsonl", tmp_path / "m"
    write_records(_pairs(train_records), data)
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--pairs", "--label-col", "judge.quality", "--out",
                                   str(out), "--epochs", "2", "--set", "train.frozen_epochs=2", "--set",
                                   "model.hidden_sizes=[32]",
                                   "--set", "model.max_length=32", "--set", "train.num_threads=1", "--encoder",
                                   str(tiny_encoder)])
    assert res.exit_code == 0, res.output
    assert f"{len(_pairs(train_records))} judged pairs of {len(train_records)} candidates" in res.output
    card = json.loads((out / "metric_card.json").read_text())
    assert card["labels"]["preference_pairs"] == len(_pairs(train_records))
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--pairs", "--label-col", "judge.quality",
                                   "--normalise", "zscore", "--out", str(tmp_path / "m2")])
    assert res.exit_code == 2 and "--pairs trains on one preference column" in res.output
