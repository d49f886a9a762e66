"""Seed ensembles (``ModelConfig.members``): k students trained alike with seeds seed..seed+k-1,
saved as one folder, scored as the mean of the members.

Fast tier: the tiny RANDOM 2-layer encoder (plumbing and exactness, not what the encoder knows).
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from csem.model import EvaluationModel, ModelConfig, TrainConfig, fit
from csem.model.evaluation_model import ModelFolderError
from csem.model.scoring import model_fingerprint

SMALL = dict(max_length=40, hidden_sizes=[32], dropout=0.0)
TC = dict(max_epochs=1, lr=1e-2, head_lr=1e-2, batch_size=16, train_layers=1, feature_prefit_steps=0)


def _scores(model, records):
    return model.predict(records, precision="fp32").scores["metric.e.quality"]


@pytest.fixture(scope="module")
def ensemble(tiny_encoder, train_records, tmp_path_factory):
    out = tmp_path_factory.mktemp("ens") / "student"
    cfg = ModelConfig(name="e", encoder=str(tiny_encoder), members=3, **SMALL)
    model = fit(train_records, "judge.quality", "ref-free", out_dir=out, config=cfg,
                train_config=TrainConfig(seed=5, **TC), label_range=(1, 5))
    return model, out


def test_members_are_the_single_seed_students_and_the_score_is_their_mean(ensemble, tiny_encoder, train_records,
                                                                          test_records):
    model, _ = ensemble
    assert model.config.members == 3 and len(model.members) == 3
    assert [m["seed"] for m in model.card["members"]] == [5, 6, 7]
    assert model.card["model"]["members"] == 3  # the card describes the ensemble, not its first member
    cfg = ModelConfig(name="e", encoder=str(tiny_encoder), **SMALL)
    singles = [fit(train_records, "judge.quality", "ref-free", config=cfg,
                   train_config=TrainConfig(seed=s, **TC), label_range=(1, 5)) for s in (5, 6, 7)]
    single_scores = [_scores(s, test_records) for s in singles]
    for i, own in enumerate(single_scores):  # member i is exactly the student seed 5 + i gives alone
        assert _scores(model.member(i), test_records) == pytest.approx(own, abs=1e-6)
    assert len({round(v[0], 6) for v in single_scores}) == 3  # the seeds differ, so the mean is not a copy
    mean = [sum(col) / 3 for col in zip(*single_scores)]
    assert _scores(model, test_records) == pytest.approx(mean, abs=1e-5)


def test_ensemble_folder_round_trip_and_fingerprint(ensemble, test_records):
    model, out = ensemble
    loaded = EvaluationModel.load(out)
    assert loaded.config.members == 3 and len(loaded.members) == 3
    assert json.loads((out / "config.json").read_text())["members"] == 3
    assert _scores(loaded, test_records) == pytest.approx(_scores(model, test_records), abs=1e-6)
    assert model_fingerprint(loaded) == model_fingerprint(model)
    assert model_fingerprint(loaded) != model_fingerprint(loaded.member(0))
    # an empty candidate still gets the scale's minimum, whatever the members say
    floor = loaded.predict([{"source": test_records[0]["source"], "candidate": "  "}])
    assert floor.scores["metric.e.quality"] == [1.0] and floor.std["metric.e.quality"] == [0.0]


def test_ensemble_folder_with_a_missing_or_stray_member_is_refused(ensemble, tmp_path):
    import shutil

    _, out = ensemble
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    state = load_file(str(bad / "model.safetensors"))
    save_file({k: v for k, v in state.items() if not k.startswith("members.2.")}, str(bad / "model.safetensors"))
    with pytest.raises(ModelFolderError, match="member 2: missing"):
        EvaluationModel.load(bad)
    state["members.3.extra"] = torch.zeros(1)
    save_file(state, str(bad / "model.safetensors"))
    with pytest.raises(ModelFolderError, match="outside the 3 members"):
        EvaluationModel.load(bad)


def test_ensemble_mc_dropout_std_is_the_total_deviation(ensemble, test_records):
    """With MC dropout, an ensemble's std is sqrt(mean of the members' MC variances + variance of their
    means) (law of total variance); one member's is its own MC deviation."""
    model, _ = ensemble
    for m in model.members:  # the fixture trains without dropout: give the heads some to sample
        for mod in m.heads.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.3
    recs = test_records[:4]
    torch.manual_seed(0)
    ens = model.predict(recs, mc_dropout=6, precision="fp32")
    torch.manual_seed(0)  # the same dropout draws, member after member
    parts = [model.member(i).predict(recs, mc_dropout=6, precision="fp32") for i in range(3)]
    col = "metric.e.quality"
    for j in range(len(recs)):
        means = [p.scores[col][j] for p in parts]
        var = sum(p.std[col][j] ** 2 for p in parts) / 3 + sum((x - sum(means) / 3) ** 2 for x in means) / 3
        assert ens.std[col][j] == pytest.approx(math.sqrt(var), rel=1e-4)
    assert all(s > 0 for s in ens.std[col])


def test_members_must_share_a_config(ensemble, tiny_encoder, train_records):
    model, _ = ensemble
    other = fit(train_records, "judge.quality", "ref-free",
                config=ModelConfig(name="e", encoder=str(tiny_encoder), max_length=40, hidden_sizes=[16]),
                train_config=TrainConfig(seed=1, **TC), label_range=(1, 5))
    with pytest.raises(ValueError, match="share one config"):
        EvaluationModel.ensemble([model.member(0), other])


def test_csem_train_members_then_csem_score(tiny_encoder, train_records, test_records, tmp_path):
    from typer.testing import CliRunner

    from csem.cli import _load_commands, app
    from csem.data.records import read_records, write_records

    _load_commands()
    data = write_records(train_records, tmp_path / "labelled.jsonl")
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--label-col", "judge.quality", "--epochs", "1",
                                   "--set", "model.hidden_sizes=[16]", "--set", "model.max_length=32", "--set",
                                   "train.num_threads=1", "--encoder",
                                   str(tiny_encoder), "--label-range", "1,5", "--members", "2", "--seed", "3",
                                   "--out", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    card = json.loads((tmp_path / "m" / "metric_card.json").read_text())
    assert [m["seed"] for m in card["members"]] == [3, 4]
    write_records(test_records, tmp_path / "test.jsonl")
    res = CliRunner().invoke(app, ["score", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "test.jsonl"),
                                   "--out", str(tmp_path / "scored.jsonl"), "--precision", "fp32"])
    assert res.exit_code == 0, res.output
    scored = read_records(tmp_path / "scored.jsonl", required=())
    model = EvaluationModel.load(tmp_path / "m")
    expected = model.predict(test_records, precision="fp32").scores["metric.csem.quality"]
    assert [r["metric.csem.quality"] for r in scored] == pytest.approx(expected, abs=1e-6)
    assert all(r["metric.csem.quality.std"] >= 0 for r in scored)  # the members' spread
