"""issue 11: no silently lost labels in `csem train`: a label that is not a number is an error naming
file, line and column; rows without a label are counted and reported in the output and the metric card."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from csem.data.records import write_records
from csem.model.validation import describe_label_counts, label_counts


def test_label_counts_and_their_description():
    recs = [{"judge.a": 1.0, "judge.b": None}, {"judge.a": None, "judge.b": 2.0}, {"judge.a": None, "judge.b": None},
            {"judge.a": float("nan"), "judge.b": 3.0}]
    c = label_counts(recs, ["judge.a"])
    assert c == {"rows": 4, "labelled": {"judge.a": 1}, "unlabelled_rows": 3}
    assert describe_label_counts(c) == "1 of 4 rows labelled; 3 without a label skipped"
    c = label_counts(recs, ["judge.a", "judge.b"])
    assert c["unlabelled_rows"] == 1
    assert describe_label_counts(c) == ("judge.a: 1 of 4 rows labelled, judge.b: 2 of 4 rows labelled; "
                                        "1 without a label skipped")
    assert describe_label_counts(label_counts(recs[:1], ["judge.a"])) == "1 of 1 rows labelled"


def _cli():
    from csem.cli import _load_commands, app

    _load_commands()
    return app


ARGS = ["--label-col", "judge.quality", "--mode", "ref-free", "--epochs", "1", "--set", "train.frozen_epochs=1",
        "--set", "model.hidden_sizes=[16]", "--set", "model.max_length=16", "--label-range", "1,5",
        "--set", "train.num_threads=1"]


def test_non_numeric_label_is_an_error_naming_file_line_column(tmp_path, train_records):
    rows = [dict(r) for r in train_records[:16]]
    rows[5]["judge.quality"] = "four"
    data = write_records(rows, tmp_path / "labelled.jsonl")
    res = CliRunner().invoke(_cli(), ["train", "--data", str(data), "--out", str(tmp_path / "m"), *ARGS])
    assert res.exit_code == 2, res.output
    assert "labelled.jsonl, line 6, field 'judge.quality'" in res.output and "'four' is not a number" in res.output
    assert not (tmp_path / "m").exists()


def test_rows_without_a_label_are_counted_in_output_and_card(tmp_path, train_records, tiny_encoder):
    rows = [dict(r) for r in train_records[:16]]
    rows[2]["judge.quality"] = None
    del rows[9]["judge.quality"]
    data = write_records(rows, tmp_path / "labelled.csv")
    out = tmp_path / "m"
    res = CliRunner().invoke(_cli(), ["train", "--data", str(data), "--out", str(out), *ARGS,
                                      "--encoder", str(tiny_encoder)])
    assert res.exit_code == 0, res.output
    assert "14 of 16 rows labelled; 2 without a label skipped" in res.output
    card = json.loads((out / "metric_card.json").read_text())
    assert card["training"]["labels"]["unlabelled_rows"] == 2
    assert card["training"]["labels"]["labelled"] == {"judge.quality": 14}
    assert "labels: 14 of 16 rows labelled; 2 without a label skipped" in (out / "metric_card.md").read_text()


def test_an_undeclared_label_range_is_said_not_silent():
    """Pure logic of csem.model.fit.training_set: without --label-range or annotate's provenance the scale
    is inferred from the labels, and the notes csem train prints say so; declared or recorded, they do not."""
    from csem.model.fit import training_set

    recs = [{"source": "s", "candidate": f"c{i}", "judge.coherence": float(2 + i % 3)} for i in range(6)]
    inferred = training_set(recs, "judge.coherence").notes
    assert any("label range not declared" in n and "--label-range" in n for n in inferred)
    assert not any("not declared" in n for n in training_set(recs, "judge.coherence", label_range=(1, 5)).notes)
    prov = {"columns": {"judge.coherence": {"scale": [1, 5]}}}
    recorded = training_set(recs, "judge.coherence", provenance=prov).notes
    assert any("recorded by `csem annotate`" in n for n in recorded) and not any("not declared" in n for n in recorded)
