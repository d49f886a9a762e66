"""One training config (``ModelConfig`` + ``TrainConfig``): every field is reachable from the command
line (``csem train --set``), the Python API (``csem.train`` settings and config objects) and a pipeline
file's ``train:`` section, all of which reach the one training entry, ``csem.model.fit.fit``; the YAML
file of ``csem train --config`` / ``--print-config``; one-line errors naming the field.

The reachability test replaces ``fit`` with a recorder (a fake, named so): it keeps the configs it is
called with and stops there, since training once per field is what the rest of the suite does for the
settings that change a model. ``test_config_file_trains_and_the_card_records_it`` trains for real.
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import write_records
from csem.model import ModelConfig, TrainConfig
from csem.model.config import DERIVED_FIELDS

_load_commands()

#: a valid value other than the default, for every settable field (the test fails when a field is added
#: without one here, so a new field cannot slip past the check)
OTHER = {
    "model": {"name": "m2", "encoder": "mpnet", "encoder_kind": "custom", "pooling": "cls", "mode": "ref-based",
              "architecture": "unified", "ref_aggregation": "mean", "max_length": 128, "source_max_length": 64,
              "hidden_sizes": [64, 32], "activation": "gelu", "dropout": 0.2, "loss": "mse", "pairwise_weight": 0.5,
              "overlap_features": False, "feature_set": "novelty", "feature_hidden": 32, "acceptability_gate": False,
              "members": 3},
    "train": {"lr": 1e-4, "head_lr": 2e-4, "batch_size": 6, "max_epochs": 3, "patience": 2, "frozen_epochs": 0.5,
              "layerwise_decay": 0.9, "train_layers": None, "weight_decay": 0.01, "gradient_clip": 0.5, "seed": 7,
              "precision": "bf16", "accelerator": "cpu", "devices": 2, "num_nodes": 2, "strategy": "ddp",
              "num_threads": 1, "monitor": "spearman", "min_rows": 4, "progress": True, "feature_prefit_steps": 10,
              "feature_prefit_lr": 0.01, "contrast_epochs": 2, "contrast_mix": 0.25, "contrast_per_record": 10,
              "contrast_max_pairs": 3000, "contrast_pairs_per_batch": 4, "contrast_lr": 1e-4,
              "init": "package:news-relevance-minilm"},
}
CLASSES = {"model": ModelConfig, "train": TrainConfig}
FIELDS = [(s, f) for s in OTHER for f in OTHER[s]]


class Recorded(Exception):
    """Raised by the recorder once it has the configs (training itself is not the subject here)."""


@pytest.fixture
def recorder(monkeypatch):
    seen: dict = {}

    def fake_fit(records, label_col, mode="ref-free", *, config=None, train_config=None, **kw):
        seen.update(config=config or ModelConfig(), train_config=train_config or TrainConfig(), mode=mode)
        raise Recorded()

    import importlib

    # the module, not csem.model's attribute of the same name (the function)
    monkeypatch.setattr(importlib.import_module("csem.model.fit"), "fit", fake_fit)
    return seen


def _rows():
    return [{"id": f"r{i}", "source": "The council met.", "candidate": f"Summary {i}.", "judge.quality": 1.0 + i}
            for i in range(4)]


def _got(seen: dict, section: str, field: str):
    if section == "model" and field == "mode":
        return seen["mode"]  # fit's mode (the CLI passes the config's)
    return getattr(seen["config" if section == "model" else "train_config"], field)


def test_the_table_covers_every_field():
    for section, cls in CLASSES.items():
        settable = set(cls.model_fields) - set(DERIVED_FIELDS.get(section, ()))
        assert set(OTHER[section]) == settable, section
        for field, value in OTHER[section].items():
            assert value != cls.model_fields[field].default, (section, field)
            cls.model_validate({field: value})


@pytest.mark.parametrize("section,field", FIELDS)
def test_every_field_reaches_fit_from_the_cli(section, field, recorder, tmp_path):
    data = write_records(_rows(), tmp_path / "d.jsonl")
    value = OTHER[section][field]
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--label-col", "judge.quality", "--out",
                                   str(tmp_path / "m"), "--set", f"{section}.{field}={json.dumps(value)}"])
    assert recorder and "Recorded" in res.output, res.output  # the CLI reports the recorder's stop as a bug
    assert _got(recorder, section, field) == value


@pytest.mark.parametrize("section,field", FIELDS)
def test_every_field_reaches_fit_from_the_api(section, field, recorder):
    import csem

    value = OTHER[section][field]
    with pytest.raises(Recorded):
        csem.train(_rows(), "judge.quality", **{field: value})
    assert _got(recorder, section, field) == value
    cfg = CLASSES[section].model_validate({field: value})
    with pytest.raises(Recorded):
        csem.train(_rows(), "judge.quality", **{"config" if section == "model" else "train_config": cfg})
    assert _got(recorder, section, field) == value


@pytest.mark.parametrize("section,field", FIELDS)
def test_every_field_reaches_fit_from_a_pipeline_file(section, field, recorder, tmp_path):
    from csem.pipeline.config import load_pipeline
    from csem.pipeline.runner import Pipeline

    value = OTHER[section][field]
    write_records([{"id": "s1", "source": "The council met."}], tmp_path / "sources.jsonl")
    train: dict = {"label_cols": ["judge.quality"]}
    if section == "model" and field in ("encoder", "mode"):  # the train section's own keys
        train[field] = value
    else:
        train["model" if section == "model" else "options"] = {field: value}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        "name": "p", "sources": {"path": "sources.jsonl"},
        "collect": {"generators": [{"uri": "llama-cpp:smollm2"}]},
        "annotate": {"judge": "local", "rubrics": ["csem/summ-coherence-ref-free"]}, "train": train}))
    cfg, base = load_pipeline(tmp_path / "p.yaml")
    pipe = Pipeline(cfg, base, tmp_path / "run", progress=False)
    with pytest.raises(Recorded):
        pipe._fit([dict(r, split="train") for r in _rows()], tmp_path / "model")
    assert _got(recorder, section, field) == value


def test_print_config_writes_the_defaults_and_reads_back(tmp_path):
    res = CliRunner().invoke(app, ["train", "--print-config"])
    assert res.exit_code == 0, res.output
    printed = yaml.safe_load(res.output)
    assert printed["model"] == ModelConfig().model_dump(exclude={"labels"})
    assert printed["train"] == TrainConfig().model_dump()
    (tmp_path / "t.yaml").write_text(res.output)
    again = CliRunner().invoke(app, ["train", "--print-config", "--config", str(tmp_path / "t.yaml")])
    assert again.output == res.output
    # the file, then the common options, then --set, each over the one before
    (tmp_path / "s.yaml").write_text("model:\n  hidden_sizes: [64]\ntrain:\n  lr: 0.0002\n  seed: 3\n")
    res = CliRunner().invoke(app, ["train", "--print-config", "--config", str(tmp_path / "s.yaml"), "--seed", "4",
                                   "--set", "train.lr=1e-4"])
    got = yaml.safe_load(res.output)
    assert got["model"]["hidden_sizes"] == [64] and got["train"]["seed"] == 4 and got["train"]["lr"] == 1e-4


@pytest.mark.parametrize("text,message", [
    ("model:\n  hidden_sizes: [8]\n  bogus: 1\n", "t.yaml, line 3: 'model.bogus' is not a setting"),
    ("modle:\n  name: x\n", "t.yaml, line 1: unknown section 'modle'"),
    ("train:\n  lr: 0.1\n  dropout: 0.2\n", "t.yaml, line 3: 'train.dropout' is not a setting"),
    ("model:\n  dropout: 2\n", "t.yaml, line 2: model.dropout = 2: Input should be less than 1"),
    ("train:\n  lr: [1\n", "t.yaml, line 3: not valid YAML"),
    ("train: {lrr: 1}\n", "t.yaml, line 1: 'train.lrr' is not a setting"),
    ("model: {}\ntrain: {lr: 0.1,\n  lrr: 1}\n", "t.yaml, line 3: 'train.lrr' is not a setting"),
    ("model:\n  labels: []\n", "'model.labels' is not a setting (set from the label columns)"),
    ("- a\n- b\n", "t.yaml: a training config is a mapping"),
])
def test_config_file_errors_are_one_line_naming_file_line_and_field(text, message, tmp_path):
    (tmp_path / "t.yaml").write_text(text)
    res = CliRunner().invoke(app, ["train", "--print-config", "--config", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2 and message in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


@pytest.mark.parametrize("item,message", [
    ("train.lr=-1", "--set 'train.lr=-1': train.lr = -1: Input should be greater than 0"),
    ("train.lr=abc", "--set 'train.lr=abc': train.lr = 'abc': Input should be a valid number"),
    ("train.average_tail=0.5", "'train.average_tail' is not a setting"),
    ("model.loss=bogus", "model.loss = 'bogus'"),
    ("lr=1e-4", "write SECTION.FIELD=VALUE"),
    ("optim.lr=1e-4", "unknown section 'optim'"),
])
def test_set_errors_name_the_field(item, message):
    res = CliRunner().invoke(app, ["train", "--print-config", "--set", item])
    assert res.exit_code == 2 and message in res.output, res.output


def test_config_file_trains_and_the_card_records_it(tiny_encoder, train_records, tmp_path):
    """A real (tiny) training from a config file: the folder's config.json and metric card record the
    settings the file and --set gave."""
    data = write_records(train_records, tmp_path / "labelled.jsonl")
    (tmp_path / "train.yaml").write_text(yaml.safe_dump({
        "model": {"encoder": str(tiny_encoder), "hidden_sizes": [16], "max_length": 32, "name": "cfg"},
        "train": {"max_epochs": 1, "num_threads": 1, "batch_size": 8, "seed": 5}}))
    out = tmp_path / "m"
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--label-col", "judge.quality", "--label-range",
                                   "1,5", "--out", str(out), "--config", str(tmp_path / "train.yaml"),
                                   "--set", "train.lr=0.002"])
    assert res.exit_code == 0, res.output
    config = json.loads((out / "config.json").read_text())
    card = json.loads((out / "metric_card.json").read_text())
    assert config["hidden_sizes"] == [16] and config["name"] == "cfg" and config["max_length"] == 32
    assert card["training"]["config"]["lr"] == 0.002 and card["training"]["config"]["seed"] == 5
    assert card["training"]["config"]["batch_size"] == 8
    assert str(tmp_path / "train.yaml") in card["notes"]


def test_a_card_with_a_removed_field_still_loads():
    """The shipped student was trained while TrainConfig had ``average_tail`` and ``contrast_specificity``
    (its card records both); it loads and scores as before."""
    from csem.model import EvaluationModel
    from csem.model.pretrained import resolve

    folder = resolve("package:news-relevance-minilm")
    recorded = json.loads((folder / "metric_card.json").read_text())["training"]["config"]
    assert "average_tail" in recorded and "contrast_specificity" in recorded
    model = EvaluationModel.load(folder)
    pred = model.predict([{"id": "a", "source": "The council approved the budget.", "candidate": "Budget passed."}])
    assert pred.ids == ["a"] and all(v is not None for col in pred.scores.values() for v in col)


def test_a_missing_label_column_names_the_data_file(train_records, tmp_path):
    data = write_records(train_records, tmp_path / "labelled.jsonl")
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--label-col", "judge.nope", "--out",
                                   str(tmp_path / "m")])
    assert res.exit_code == 2, res.output
    assert f"{data}: label column(s) ['judge.nope'] not found" in res.output, res.output
    assert "Traceback" not in res.output
