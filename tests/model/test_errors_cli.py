"""Clear errors before training starts, unreadable model folders, and the train/score CLI end to end."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from csem.data.records import read_records, write_records
from csem.model import EvaluationModel, ModelFolderError, TrainingDataError, fit
from csem.model.validation import check_training_data


def _recs(n=10, **extra):
    return [{"id": str(i), "doc_id": str(i // 2), "source": f"article {i // 2} text", "candidate": f"summary {i}",
             "reference": f"reference {i // 2}", "judge.coherence": float(1 + i % 5), **extra} for i in range(n)]


def test_missing_label_column_is_named():
    with pytest.raises(TrainingDataError, match=r"\['judge.relevance'\] not found.*judge.coherence"):
        check_training_data(_recs(), ["judge.relevance"], "ref-free")


def test_label_out_of_declared_range_names_record_and_value():
    recs = _recs()
    recs[3]["judge.coherence"] = 7.0
    with pytest.raises(TrainingDataError, match=r"outside the declared range \[1.0, 5.0\]: '3': 7.0"):
        check_training_data(recs, ["judge.coherence"], "ref-free", label_range=(1, 5))


def test_constant_labels():
    recs = [dict(r, **{"judge.coherence": 3.0}) for r in _recs()]
    with pytest.raises(TrainingDataError, match="constant"):
        check_training_data(recs, ["judge.coherence"], "ref-free")


def test_too_few_rows_and_too_few_labels():
    with pytest.raises(TrainingDataError, match="3 rows, fewer than the minimum of 8"):
        check_training_data(_recs(3), ["judge.coherence"], "ref-free")
    recs = _recs()
    for r in recs[:5]:
        r["judge.coherence"] = None  # missing labels are masked, never 0 ...
    with pytest.raises(TrainingDataError, match="5 labelled rows"):  # ... but too few remain
        check_training_data(recs, ["judge.coherence"], "ref-free")


def test_non_numeric_label():
    recs = _recs()
    recs[2]["judge.coherence"] = "good"
    with pytest.raises(TrainingDataError, match="record '2'.*'good' is not a number"):
        check_training_data(recs, ["judge.coherence"], "ref-free")


def test_mode_needs_its_texts():
    recs = _recs()
    recs[4]["reference"] = None
    with pytest.raises(TrainingDataError, match="ref-based' needs a reference.*ids 4"):
        check_training_data(recs, ["judge.coherence"], "ref-based")
    recs = _recs()
    del recs[1]["source"]
    with pytest.raises(TrainingDataError, match="ref-free' needs a source.*ids 1"):
        check_training_data(recs, ["judge.coherence"], "ref-free")
    # the fluency mode needs neither
    assert check_training_data(recs, ["judge.coherence"], "fluency")[0].aspect == "coherence"


def test_inferred_and_per_column_ranges():
    specs = check_training_data(_recs(), ["judge.coherence"], "ref-free")
    assert (specs[0].min, specs[0].max) == (1.0, 5.0)


def test_train_rejects_bad_dev_data_before_training():
    dev = _recs()
    for r in dev:
        del r["judge.coherence"]
    with pytest.raises(TrainingDataError, match="dev data"):
        fit(_recs(), "judge.coherence", "ref-free", dev_records=dev)


def test_loading_a_broken_folder(tmp_path):
    with pytest.raises(ModelFolderError, match="no 'config.json'"):
        EvaluationModel.load(tmp_path)


@pytest.fixture(scope="module")
def cli():
    import csem.cli.score  # noqa: F401  (registers the commands)
    import csem.cli.train  # noqa: F401
    from csem.cli import app

    return app


def test_cli_train_and_score_end_to_end(cli, tmp_path, train_records, test_records, tiny_encoder):
    data, dev, test, out = tmp_path / "train.jsonl", tmp_path / "dev.csv", tmp_path / "test.jsonl", tmp_path / "m"
    # the user's file names the candidate 'summary' and keeps the labels as judge.quality
    write_records([{("summary" if k == "candidate" else k): v for k, v in r.items()} for r in train_records], data)
    write_records(test_records[:9], dev)
    write_records(test_records, test)
    runner = CliRunner()
    res = runner.invoke(cli, ["train", "--data", str(data), "--label-col", "judge.quality", "--mode", "ref-free",
                              "--dev", str(dev), "--out", str(out), "--epochs", "2", "--set", "train.frozen_epochs=2",
                              "--set", "train.head_lr=3e-3", "--set", "model.hidden_sizes=[64]", "--set",
                              "model.max_length=40",
                              "--label-range", "1,5", "--judge", "synthetic", "--set", "model.name=tiny", "--set",
                              "train.num_threads=1",
                              "--encoder", str(tiny_encoder)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "dev kendall" in res.output
    assert json.loads((out / "metric_card.json").read_text())["distilled_from"]["judge"] == "synthetic"
    scored = tmp_path / "scored.jsonl"
    res = runner.invoke(cli, ["score", "--model", str(out), "--data", str(test), "--out", str(scored), "--mc-dropout", "4"])
    assert res.exit_code == 0, res.output
    rows = read_records(scored)
    assert [r["id"] for r in rows] == [r["id"] for r in test_records]
    assert all(isinstance(r["metric.tiny.quality"], float) and r["metric.tiny.quality.std"] >= 0 for r in rows)
    assert all(r["judge.quality"] == t["judge.quality"] for r, t in zip(rows, test_records))  # columns kept


def test_cli_train_takes_scale_and_judge_from_the_annotate_sidecar(cli, tmp_path, train_records, tiny_encoder):
    """Without --label-range, `csem train` uses the rubric scale that `csem annotate` recorded beside
    the labelled file (not the labels' own min and max) and names the judge in the metric card."""
    from csem.pipeline.annotate import provenance_path

    data, out = tmp_path / "labelled.jsonl", tmp_path / "m"
    write_records(train_records, data)
    provenance_path(data).write_text(json.dumps({
        "judge": "llama-cpp:smollm2", "mode": "probs", "rubrics": ["csem/summ-coherence-ref-free"],
        "columns": {"judge.quality": {"rubric": "csem/summ-coherence-ref-free", "aspect": "quality", "scale": [0, 10]}}}))
    res = CliRunner().invoke(cli, ["train", "--data", str(data), "--label-col", "judge.quality", "--out", str(out),
                                   "--epochs", "1", "--set", "train.frozen_epochs=1", "--set",
                                   "model.hidden_sizes=[16]", "--set", "model.max_length=32",
                                   "--set", "train.num_threads=1", "--encoder", str(tiny_encoder)])
    assert res.exit_code == 0, res.output
    assert "judge.quality 0-10" in res.output
    card = json.loads((out / "metric_card.json").read_text())
    assert card["distilled_from"]["judge"] == "llama-cpp:smollm2"
    assert card["distilled_from"]["rubric"] == "csem/summ-coherence-ref-free"
    assert (card["aspects"][0]["min"], card["aspects"][0]["max"]) == (0, 10)


def test_cli_errors_are_clear(cli, tmp_path):
    runner = CliRunner()
    data = tmp_path / "d.jsonl"
    write_records(_recs(), data)
    res = runner.invoke(cli, ["train", "--data", str(data), "--label-col", "judge.fluency", "--out", str(tmp_path / "m")])
    assert res.exit_code == 2
    assert "judge.fluency" in res.output and "not found" in res.output
    assert not (tmp_path / "m").exists()  # nothing written
    res = runner.invoke(cli, ["score", "--model", str(tmp_path / "nope"), "--data", str(data), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "no 'config.json'" in res.output


def test_train_feature_set_option(cli, tiny_encoder, train_records, tmp_path):
    """`--feature-set overlap` trains the linear overlap set; an unknown set is a one-line error, exit 2."""
    data = tmp_path / "labelled.jsonl"
    write_records(train_records, data)
    common = ["train", "--data", str(data), "--label-col", "judge.quality", "--epochs", "1", "--set", "model.hidden_sizes=[16]",
              "--set", "model.max_length=32", "--set", "train.num_threads=1", "--encoder", str(tiny_encoder),
              "--label-range", "1,5"]
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "m"), "--set", "model.feature_set=overlap"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "m" / "config.json").read_text())["feature_set"] == "overlap"
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "n"), "--set", "model.feature_set=novelty"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "n" / "config.json").read_text())["feature_set"] == "novelty"
    res = CliRunner().invoke(cli, common + ["--out", str(tmp_path / "bad"), "--set", "model.feature_set=bogus"])
    assert res.exit_code == 2 and "feature_set" in res.output and "Traceback" not in res.output
