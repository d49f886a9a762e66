"""Warm start (``TrainConfig.init``, ``csem train --init``): a student starts from a trained student's
weights instead of the bare encoder.

Fast tier: the tiny RANDOM 2-layer encoder (which weights are copied, not what the encoder knows).
"""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from csem.data.records import write_records
from csem.model import EvaluationModel, ModelConfig, TrainConfig, fit
from csem.model.module import EvaluationModule

SMALL = dict(max_length=40, hidden_sizes=[32], dropout=0.0, acceptability_gate=False)
TC = dict(lr=1e-2, head_lr=1e-2, batch_size=16, train_layers=1, feature_prefit_steps=0, seed=4,
          contrast_per_record=0, max_epochs=2)


@pytest.fixture(scope="module")
def initial(tiny_encoder, train_records, tmp_path_factory):
    """A one-aspect student ('quality') trained and saved."""
    out = tmp_path_factory.mktemp("init") / "student"
    fit(train_records, "judge.quality", "ref-free", out_dir=out,
        config=ModelConfig(name="t", encoder=str(tiny_encoder), **SMALL), train_config=TrainConfig(**TC),
        label_range=(1, 5), judge="synthetic order", rubric="quality")
    return out


def _module(tiny_encoder, aspects, **over):
    from csem.model.config import LabelSpec

    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), **{**SMALL, **over},
                      labels=[LabelSpec(column=f"judge.{a}", aspect=a, min=1, max=5) for a in aspects])
    return EvaluationModule(cfg, TrainConfig(**TC))


def test_warm_start_copies_the_encoder_and_maps_heads_by_aspect(tiny_encoder, initial):
    start = EvaluationModel.load(initial).module
    fresh = _module(tiny_encoder, ["coherence", "quality"])
    before = {k: v.clone() for k, v in fresh.encoder.state_dict().items()}
    theirs = start.encoder.state_dict()
    assert any(not torch.equal(before[k], theirs[k]) for k in theirs)  # the initial encoder was trained
    mapping = fresh.warm_start(start)
    # a one-aspect initial model starts every aspect; the same name maps to itself
    assert mapping == {"coherence": "quality", "quality": "quality"}
    for k, v in fresh.encoder.state_dict().items():
        assert torch.equal(v, theirs[k]), k
    for aspect in ("coherence", "quality"):
        for k, v in fresh.heads[aspect].state_dict().items():
            assert torch.equal(v, start.heads["quality"].state_dict()[k])
        for k, v in fresh.overlap_heads[aspect].state_dict().items():
            assert torch.equal(v, start.overlap_heads["quality"].state_dict()[k])


def test_warm_start_refuses_another_architecture(tiny_encoder, initial):
    start = EvaluationModel.load(initial).module
    with pytest.raises(ValueError, match="hidden_sizes"):
        _module(tiny_encoder, ["quality"], hidden_sizes=[16]).warm_start(start)
    with pytest.raises(ValueError, match="feature_set"):
        _module(tiny_encoder, ["quality"], feature_set="lexical").warm_start(start)


def test_train_from_init_starts_there_and_records_it(tiny_encoder, train_records, initial):
    """With the encoder frozen (train_layers 0), a student trained from the initial one keeps the initial
    encoder exactly (whose top layer differs from the bare encoder's), one trained cold keeps the bare
    encoder; with the top layer trained it moves on from there. The card names where it started."""
    start = EvaluationModel.load(initial)
    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), **SMALL)
    frozen = {**TC, "max_epochs": 1, "train_layers": 0}
    warm = fit(train_records, "judge.quality", "ref-free", config=cfg,
               train_config=TrainConfig(**frozen, init=str(initial)), label_range=(1, 5))
    cold = fit(train_records, "judge.quality", "ref-free", config=cfg, train_config=TrainConfig(**frozen),
               label_range=(1, 5))
    theirs, bare = start.module.encoder.state_dict(), cold.module.encoder.state_dict()
    top = [k for k in theirs if ".layer.1." in k]
    assert top and any(not torch.equal(theirs[k], bare[k]) for k in top)
    assert all(torch.equal(v, theirs[k]) for k, v in warm.module.encoder.state_dict().items())
    assert warm.card["init"]["from"] == str(initial)
    assert warm.card["init"]["aspects"] == {"quality": "quality"}
    assert warm.card["init"]["distilled_from"]["judge"] == "synthetic order"
    assert "init" not in cold.card
    on = fit(train_records, "judge.quality", "ref-free", config=cfg,
             train_config=TrainConfig(**{**TC, "max_epochs": 1}, init=str(initial)), label_range=(1, 5))
    assert any(not torch.equal(on.module.encoder.state_dict()[k], theirs[k]) for k in top)  # it trained on
    # the initial model is not modified by training from it
    again = EvaluationModel.load(initial)
    assert all(torch.equal(v, again.module.state_dict()[k]) for k, v in start.module.state_dict().items())


def test_seed_ensemble_members_start_from_the_initial_student(tiny_encoder, train_records, initial):
    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), members=2, **SMALL)
    model = fit(train_records, "judge.quality", "ref-free", config=cfg,
                train_config=TrainConfig(**{**TC, "max_epochs": 1}, init=str(initial)), label_range=(1, 5))
    assert len(model.members) == 2 and model.card["init"]["aspects"] == {"quality": "quality"}
    assert model.card["init"]["from"] == str(initial)


@pytest.fixture
def cli():
    import csem.cli.score  # noqa: F401  (registers the commands: with one, typer makes it the whole app)
    import csem.cli.train  # noqa: F401
    from csem.cli import app

    return app


def test_cli_init_takes_the_architecture_and_errors_are_one_line(cli, tiny_encoder, train_records, initial,
                                                                   tmp_path):
    data = tmp_path / "labelled.jsonl"
    write_records(train_records, data)
    common = ["train", "--data", str(data), "--label-col", "judge.quality", "--epochs", "1", "--set", "train.num_threads=1",
              "--label-range", "1,5"]
    # no architecture option: the initial student's (tiny encoder, head of 32, max length 40) are taken
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "m"), "--set", f"train.init={initial}"])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["hidden_sizes"] == [32] and saved["encoder"] == str(tiny_encoder) and saved["max_length"] == 40
    assert json.loads((tmp_path / "m" / "metric_card.json").read_text())["init"]["from"] == str(initial)
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "bad"), "--set", f"train.init={tmp_path / 'nope'}"])
    assert res.exit_code == 2 and "no such model folder" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "bad"), "--set", "train.init=package:nope"])
    assert res.exit_code == 2 and "no shipped student 'nope'" in res.output
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "bad"), "--set", f"train.init={initial}",
                                            "--set", "model.hidden_sizes=[16]"])
    assert res.exit_code == 2 and "hidden_sizes" in res.output and str(initial) in res.output
    assert "Traceback" not in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "bad"), "--set", f"train.init={empty}"])
    assert res.exit_code == 2 and "no 'config.json'" in res.output and "Traceback" not in res.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "bad"), "--set", f"train.init={broken}"])
    assert res.exit_code == 2 and "not a valid csem model config" in res.output
    assert not (tmp_path / "bad").exists()


def test_base_relative_folder_stores_only_what_training_changed(tiny_encoder, train_records, test_records, initial,
                                                                  tmp_path):
    """``save(base_relative=True)``: the weights equal to the base encoder's are left out (the frozen lower
    layer, the embeddings), the rest stored in float16; loading fills them from the base encoder."""
    from safetensors import safe_open

    model = EvaluationModel.load(initial)
    out = model.save(tmp_path / "compact", base_relative=True)
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        keys = list(f.keys())
        assert f.metadata()["csem_base_encoder"] == str(tiny_encoder)
    assert not any(".layer.0." in k or "embeddings" in k for k in keys)  # frozen: the base's own
    assert any(".layer.1." in k for k in keys) and any(k.startswith("heads.") for k in keys)
    full = (initial / "model.safetensors").stat().st_size
    assert (out / "model.safetensors").stat().st_size < full / 2
    again = EvaluationModel.load(out)
    a = model.predict(test_records, name="s").scores["metric.s.quality"]
    b = again.predict(test_records, name="s").scores["metric.s.quality"]
    assert max(abs(x - y) for x, y in zip(a, b)) < 0.02


def test_the_shipped_student_loads_from_the_package():
    """``package:news-relevance-minilm`` (teacher_pool_student.py --ship): base-relative on the packaged
    MiniLM, distilled from the teacher pool's judge, scores on its 1-5 scale."""
    from csem.model.pretrained import resolve

    model = EvaluationModel.load(resolve("package:news-relevance-minilm"))
    assert model.config.encoder == "minilm" and model.aspects == ["relevance"]
    assert model.card["distilled_from"]["judge"] == "llama-cpp:qwen-0.5b"
    source = ("The city council voted on Tuesday to build a new bridge over the river, at a cost of 40 million "
              "dollars. Work starts next spring and should take two years, the mayor said.")
    scores = model.predict([{"source": source, "candidate": c} for c in
                            ("The council approved a 40 million dollar bridge; work starts next spring.", "")],
                           name="s").scores["metric.s.relevance"]
    assert 1.0 <= scores[1] < scores[0] <= 5.0
    # loading filled the untrained lower layers from the packaged MiniLM and took the stored top layers
    from csem.model.encoder import build_encoder

    base = build_encoder("hf", "minilm", model.config.pooling).state_dict()
    mine = model.module.encoder.state_dict()
    lower = [k for k in base if ".layer.0." in k]
    top = [k for k in base if ".layer.5." in k]
    assert lower and top
    assert all(torch.equal(mine[k], base[k]) for k in lower)
    assert any(not torch.equal(mine[k], base[k]) for k in top)
