"""Labels from several judges: wide and long files, per-judge normalisation, mean or separate heads
(csem.model.labels), and `csem train` with them end to end (real MiniLM, head-only)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from csem.data.records import read_records, write_records
from csem.model.labels import (LabelSpecError, combined_name, normalise_values, parse_label_spec, pivot_long,
                               prepare_labels)


def test_parse_label_spec_groups_judges_per_aspect():
    assert parse_label_spec("judge.c@a+judge.c@b, judge.r") == [["judge.c@a", "judge.c@b"], ["judge.r"]]
    with pytest.raises(LabelSpecError, match="named twice"):
        parse_label_spec("a+b,b")
    with pytest.raises(LabelSpecError, match="empty label column"):
        parse_label_spec("a+,b")
    assert combined_name(["judge.c@a", "judge.c@b"]) == "judge.c"
    assert combined_name(["judge.c"]) == "judge.c"


def test_normalisations():
    assert normalise_values([1.0, None, 3.0], "none") == [1.0, None, 3.0]
    z = normalise_values([1.0, 2.0, 3.0, None], "zscore")
    assert z[3] is None and abs(sum(z[:3])) < 1e-12
    assert abs(math.sqrt(sum(v * v for v in z[:3]) / 3) - 1.0) < 1e-12  # population std 1
    assert normalise_values([5.0, 1.0, 3.0, 3.0], "rank") == [1.0, 0.0, 0.5, 0.5]  # ties share their mean rank
    with pytest.raises(LabelSpecError, match="constant"):
        normalise_values([2.0, 2.0], "zscore")
    with pytest.raises(LabelSpecError, match="unknown normalisation"):
        normalise_values([1.0], "minmax")


def _wide():
    # judge a rates on 1-5, judge b (harsher, compressed) on 1-5 too; b misses one row
    a = [1, 2, 3, 4, 5, 3]
    b = [1, 1, 2, 2, 3, None]
    return [{"id": str(i), "source": f"s{i // 3}", "candidate": f"c{i}", "judge.q@a": float(x),
             "judge.q@b": None if y is None else float(y)} for i, (x, y) in enumerate(zip(a, b))]


def test_mean_skips_missing_judges_and_keeps_the_declared_scale():
    p = prepare_labels(_wide(), [["judge.q@a", "judge.q@b"]], normalise="none", combine="mean", label_range=(1, 5))
    assert p.label_cols == ["judge.q"]
    assert [r["judge.q"] for r in p.records] == [1.0, 1.5, 2.5, 3.0, 4.0, 3.0]  # last row: judge a only
    assert p.label_range == {"judge.q": (1.0, 5.0)}


def test_zscore_equalises_the_judges_weight():
    p = prepare_labels(_wide(), [["judge.q@a", "judge.q@b"]], normalise="zscore", combine="mean")
    a = normalise_values([r["judge.q@a"] for r in _wide()], "zscore")
    b = normalise_values([r["judge.q@b"] for r in _wide()], "zscore")
    assert p.records[0]["judge.q"] == pytest.approx((a[0] + b[0]) / 2)
    assert p.records[5]["judge.q"] == pytest.approx(a[5])
    assert p.label_range is None  # inferred from the z-scores at training time
    assert p.info["judge.q@b"]["rows"] == 5 and p.info["judge.q@b"]["std"] > 0


def test_heads_keep_one_column_per_judge():
    p = prepare_labels(_wide(), [["judge.q@a", "judge.q@b"]], normalise="rank", combine="heads")
    assert p.label_cols == ["judge.q@a", "judge.q@b"]
    assert p.ensembles == {"judge.q": ["judge.q@a", "judge.q@b"]}
    assert p.label_range == {"judge.q@a": (0.0, 1.0), "judge.q@b": (0.0, 1.0)}


def test_different_scales_without_normalisation_are_refused():
    with pytest.raises(LabelSpecError, match="different declared scales"):
        prepare_labels(_wide(), [["judge.q@a", "judge.q@b"]], normalise="none", combine="mean",
                       label_range={"judge.q@a": (1, 5), "judge.q@b": (0, 100)})


def test_pivot_long_file():
    rows = [{"id": "1", "source": "s", "candidate": "x", "judge_name": "gpt", "judge.q": 4.0},
            {"id": "2", "source": "s", "candidate": "x", "judge_name": "llama", "judge.q": 2.0},
            {"id": "3", "source": "s", "candidate": "y", "judge_name": "gpt", "judge.q": 1.0}]
    wide, groups, judges = pivot_long(rows, "judge_name", ["judge.q"])
    assert judges == ["gpt", "llama"] and groups == [["judge.q@gpt", "judge.q@llama"]]
    assert wide == [{"id": "1", "source": "s", "candidate": "x", "judge.q@gpt": 4.0, "judge.q@llama": 2.0},
                    {"id": "3", "source": "s", "candidate": "y", "judge.q@gpt": 1.0}]
    with pytest.raises(LabelSpecError, match="rates the same candidate twice.*'1' and '4'"):
        pivot_long(rows + [dict(rows[0], id="4")], "judge_name", ["judge.q"])
    with pytest.raises(LabelSpecError, match="record '5' has no judge name"):
        pivot_long(rows + [dict(rows[0], id="5", judge_name=None)], "judge_name", ["judge.q"])


@pytest.fixture(scope="module")
def cli():
    import csem.cli.score  # noqa: F401  (registers the commands)
    import csem.cli.train  # noqa: F401
    from csem.cli import app

    return app


def _two_judges(records):
    """The fixture's synthetic order as two judges: 'fine' on 1-5, 'coarse' compressed into 1-3."""
    out = []
    for r in records:
        q = r["judge.quality"]
        out.append(dict(r, **{"judge.quality@fine": q, "judge.quality@coarse": 1 + (q - 1) / 2}))
    return out


@pytest.mark.slow  # MiniLM: checks that the combined labels are learnt
@pytest.mark.slow
def test_cli_train_with_two_judges_zscore_mean(cli, tmp_path, train_records, test_records):
    data, out, test, scored = tmp_path / "t.jsonl", tmp_path / "m", tmp_path / "x.jsonl", tmp_path / "s.jsonl"
    write_records(_two_judges(train_records), data)
    write_records(test_records, test)
    runner = CliRunner()
    res = runner.invoke(cli, ["train", "--data", str(data), "--label-col", "judge.quality@fine+judge.quality@coarse",
                              "--normalise", "zscore", "--out", str(out), "--epochs", "8", "--set",
                              "train.frozen_epochs=8",
                              "--set", "train.head_lr=3e-3", "--set", "model.hidden_sizes=[64]", "--set",
                              "model.max_length=40", "--set", "train.num_threads=1"])
    assert res.exit_code == 0, res.output
    card = json.loads((out / "metric_card.json").read_text())
    assert card["labels"]["normalise"] == "zscore" and card["aspects"][0]["column"] == "judge.quality"
    res = runner.invoke(cli, ["score", "--model", str(out), "--data", str(test), "--out", str(scored)])
    assert res.exit_code == 0, res.output
    rows = read_records(scored)
    # the synthetic order (own highlight > shuffled > other article's) is learnt from the combined labels
    own = [r["metric.csem.quality"] for r in rows if r["system_id"] == "own"]
    other = [r["metric.csem.quality"] for r in rows if r["system_id"] == "other"]
    assert sum(own) / len(own) > sum(other) / len(other)


def test_cli_train_long_file_separate_heads(cli, tmp_path, train_records, test_records, tiny_encoder):
    data, out, test, scored = tmp_path / "long.jsonl", tmp_path / "m", tmp_path / "x.jsonl", tmp_path / "s.jsonl"
    long = []
    for r in _two_judges(train_records):
        base = {k: v for k, v in r.items() if not k.startswith("judge.")}
        long.append(dict(base, id=r["id"] + "/fine", judge_name="fine", **{"judge.quality": r["judge.quality@fine"]}))
        long.append(dict(base, id=r["id"] + "/coarse", judge_name="coarse",
                         **{"judge.quality": r["judge.quality@coarse"]}))
    write_records(long, data)
    write_records(test_records, test)
    runner = CliRunner()
    res = runner.invoke(cli, ["train", "--data", str(data), "--label-col", "judge.quality", "--judge-col", "judge_name",
                              "--normalise", "rank", "--combine", "heads", "--out", str(out), "--epochs", "8",
                              "--set", "train.frozen_epochs=8", "--set", "train.head_lr=3e-3", "--set",
                              "model.hidden_sizes=[64]", "--set", "model.max_length=40",
                              "--set", "train.num_threads=1", "--encoder", str(tiny_encoder)])
    assert res.exit_code == 0, res.output
    assert "2 judges in 'judge_name': fine, coarse" in res.output
    card = json.loads((out / "metric_card.json").read_text())
    assert card["labels"]["ensembles"] == {"quality": ["quality@fine", "quality@coarse"]}
    res = runner.invoke(cli, ["score", "--model", str(out), "--data", str(test), "--out", str(scored)])
    assert res.exit_code == 0, res.output
    rows = read_records(scored)
    for r in rows:  # the aspect's score is the mean of its two heads (each on [0, 1] after rank)
        assert r["metric.csem.quality"] == pytest.approx((r["metric.csem.quality@fine"] +
                                                          r["metric.csem.quality@coarse"]) / 2)


def test_cli_multi_judge_errors(cli, tmp_path, train_records):
    data = tmp_path / "t.jsonl"
    write_records(_two_judges(train_records), data)
    res = CliRunner().invoke(cli, ["train", "--data", str(data), "--label-col", "judge.quality@fine+judge.quality@x",
                                   "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "judge.quality@x" in res.output and "not found" in res.output
    res = CliRunner().invoke(cli, ["train", "--data", str(data), "--label-col", "judge.quality@fine",
                                   "--normalise", "minmax", "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "unknown normalisation" in res.output
