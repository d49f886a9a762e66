"""The verdict of a standalone ``csem train`` / ``csem.train`` (fast tier, tiny random encoder, real files):
with a dev set of other sources the card carries the verdict of the one rule (csem.report.verdict), its figures
those the rule gives when the evidence is measured by hand from the same records; without one the card says
there is no verdict and why; the judge's ``.repeat`` scores in the records give the ceiling sqrt(r)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

import csem
from csem.baselines import extractiveness, length, overlap_least_squares, system_prior
from csem.cli import _load_commands, app
from csem.data.records import write_records
from csem.meta import paired_test
from csem.meta.bootstrap import bootstrap_ci
from csem.meta.correlation import correlate
from csem.meta.repeatability import column_repeatability
from csem.report.verdict import NO_VERDICT, NOT_MEASURED, STATUS_TEXT, AspectEvidence, best_baseline, verdict

#: the tiny student's settings (as tests/test_api.py's): what is checked here does not need a good student
TINY = dict(max_length=40, source_max_length=40, hidden_sizes=[16], dropout=0.0, max_epochs=1, batch_size=16,
            lr=1e-2, head_lr=1e-2, seed=3)
LABEL = "judge.quality"


def _cli_train(data, out, tiny_encoder, dev=None):
    _load_commands()  # every command registered (with one only, typer drops its name)
    args = ["train", "--data", str(data), "--label-col", LABEL, "--label-range", "1,5", "--out", str(out),
            "--encoder", str(tiny_encoder), "--epochs", "3", "--seed", "3", "--set", "model.max_length=40",
            "--set", "model.source_max_length=40", "--set", "model.hidden_sizes=[16]", "--set", "model.dropout=0",
            "--set", "train.batch_size=16", "--set", "train.lr=1e-2", "--set", "train.head_lr=1e-2"]
    res = CliRunner().invoke(app, args + (["--dev", str(dev)] if dev else []))
    assert res.exit_code == 0, res.output
    return res.output


def _by_hand(train: list[dict], test: list[dict], student: str, repeat: dict | None = None) -> dict:
    """The rule applied to evidence measured here from the records with csem.meta and csem.baselines (the
    figures rounded to 4 places as a run's meta.json and baselines.json hold them)."""
    x, y, g = [r[student] for r in test], [r[LABEL] for r in test], [r["doc_id"] for r in test]
    rnd = lambda v: None if math.isnan(v) else round(v, 4)  # noqa: E731
    s = correlate(x, y, level="summary", method="spearman", groups=g)
    ci = bootstrap_ci(x, y, level="summary", method="spearman", groups=g, n=1000, seed=0)
    pooled = correlate(x, y, level="dataset", method="spearman", groups=g).value
    scores = {"length": length(test), "extractiveness": extractiveness(test),
              "system prior": system_prior(train, test, [LABEL])[LABEL],
              "overlap fit": overlap_least_squares(train, test, [LABEL])[LABEL]}
    base = {k: rnd(correlate(v, y, level="summary", method="spearman", groups=g).value) for k, v in scores.items()}
    name, _ = best_baseline(base)
    rows = [{"doc_id": r["doc_id"], "a": r[student], "b": scores[name][i], "y": r[LABEL]} for i, r in enumerate(test)]
    diff = paired_test(rows, "a", "b", "y", level="summary", method="spearman", n=1000, seed=0)
    r = (repeat or {}).get("summary") or {}
    e = AspectEvidence(aspect="quality", student=rnd(s.value), student_ci=[round(ci.low, 4), round(ci.high, 4)],
                       n_sources=s.n_groups, student_dataset=rnd(pooled), baselines=base,
                       diff_ci=[diff.ci_low, diff.ci_high], r=r.get("r"), r_ci=r.get("ci"))
    return verdict([e], where="train")


def test_a_train_run_with_dev_sources_gets_the_rules_verdict(tiny_encoder, train_records, dev_records, tmp_path):
    write_records(train_records, tmp_path / "train.jsonl")
    # a dev file with three candidates of a training source: they are not held out and are left out
    write_records(dev_records + train_records[:3], tmp_path / "dev.jsonl")
    out = _cli_train(tmp_path / "train.jsonl", tmp_path / "m", tiny_encoder, dev=tmp_path / "dev.jsonl")
    card = json.loads((tmp_path / "m" / "metric_card.json").read_text())
    got = card["verdict"]
    test = csem.load_metric(tmp_path / "m").predict(dev_records).records
    want = _by_hand(train_records, test, "metric.csem.quality")
    assert got["status"] == want["status"] and got["headline"] == want["headline"] == STATUS_TEXT[want["status"]]
    assert got["text"] == want["text"]
    assert got["aspects"] == json.loads(json.dumps(want["aspects"]))
    assert got["aspects"][0]["best_baseline"] in ("length", "extractiveness", "system prior", "overlap fit")
    assert "12 candidates of 4 sources" in got["source"] and "3 dev records" in got["source"]
    # not measured here, and how to measure it: the judge's repeatability; no learning curve
    assert NOT_MEASURED["train"]["repeatability"].format(aspect="quality") in got["text"]
    assert NOT_MEASURED["train"]["curve"] in got["text"]
    assert "judge_repeatability" not in card
    md = (tmp_path / "m" / "metric_card.md").read_text()
    assert md.index("## Verdict") < md.index("## Distilled from") and f"**{got['headline']}**" in md
    assert out.strip().splitlines()[-1].startswith(f"verdict: {got['headline']}")


def test_a_train_run_without_dev_says_there_is_no_verdict_and_why(tiny_encoder, train_records, tmp_path):
    write_records(train_records, tmp_path / "train.jsonl")
    out = _cli_train(tmp_path / "train.jsonl", tmp_path / "m", tiny_encoder)
    assert out.strip().splitlines()[-1] == f"verdict: {NO_VERDICT} Reasons: {tmp_path / 'm' / 'metric_card.md'}"
    v = json.loads((tmp_path / "m" / "metric_card.json").read_text())["verdict"]
    assert v["status"] is None and v["headline"] == NO_VERDICT
    assert "no dev records were given" in v["text"].lower() and "--dev" in v["text"]
    md = (tmp_path / "m" / "metric_card.md").read_text()
    assert md.index("## Verdict") < md.index("## Distilled from") and NO_VERDICT in md and v["text"] in md
    # the API, with dev records of training sources only: nothing held out either
    model = csem.train(train_records, LABEL, dev=train_records[:6], label_range=(1, 5), encoder=str(tiny_encoder),
                       **TINY)
    assert model.card["verdict"]["headline"] == NO_VERDICT
    assert "every dev source (doc_id) also appears in the training data" in model.card["verdict"]["text"].lower()


def test_the_judges_repeat_scores_give_the_ceiling(tiny_encoder, train_records, dev_records, tmp_path):
    train = [dict(r) for r in train_records]
    for i, r in enumerate(train):  # the judge's second score: the same order, with 'shuffled' and 'other'
        swap = {3.0: 1.0, 1.0: 3.0} if int(r["doc_id"][1:]) % 3 == 0 else {}  # swapped in every third source
        if i < 36:
            r["judge.quality.repeat"] = swap.get(r[LABEL], r[LABEL])
    model = csem.train(train, LABEL, dev=dev_records, label_range=(1, 5), encoder=str(tiny_encoder), **TINY)
    rep = column_repeatability([*train, *dev_records], LABEL, "judge.quality.repeat")
    assert 0 < rep["summary"]["r"] < 1
    want = _by_hand(train, model.predict(dev_records).records, "metric.csem.quality", rep)
    got = model.card["verdict"]
    assert got["text"] == want["text"] and got["status"] == want["status"]
    assert got["aspects"][0]["sqrt_r"] == pytest.approx(math.sqrt(rep["summary"]["r"]))
    assert f"The judge agrees with itself at {rep['summary']['r']:.2f}" in got["text"]
    assert model.card["judge_repeatability"]["columns"][LABEL]["summary"]["r"] == rep["summary"]["r"]
    assert model.card["judge_repeatability"]["sources"] == 12


def test_each_judges_head_is_read_against_its_own_judge_and_candidate_only_data_drop_source_baselines(
        tiny_encoder, train_records, dev_records):
    """Several judges as one head each (``combine="heads"``) on data without sources (``fluency`` mode):
    the verdict reads each head against its own judge, with the baselines a candidate alone allows."""
    def two_judges(rows):
        out = []
        for i, r in enumerate(rows):
            r = {k: v for k, v in r.items() if k not in ("source", "reference")}
            out.append({**r, "judge.quality@a": r[LABEL], "judge.quality@b": float(1 + (i * 3) % 5)})
        return out

    train, dev = two_judges(train_records), two_judges(dev_records)
    model = csem.train(train, "judge.quality@a+judge.quality@b", dev=dev, combine="heads", mode="fluency",
                       label_range=(1, 5), encoder=str(tiny_encoder), **TINY)
    rows = model.card["verdict"]["aspects"]
    assert [r["aspect"] for r in rows] == ["quality-a", "quality-b"]
    test = model.predict(dev).records
    for row, judge in zip(rows, ("a", "b")):
        x = [r[f"metric.csem.quality@{judge}"] for r in test]
        y = [r[f"judge.quality@{judge}"] for r in test]
        s = correlate(x, y, level="summary", method="spearman", groups=[r["doc_id"] for r in test]).value
        assert row["student"] == round(s, 4)
        assert row["best_baseline"] in ("length", "system prior")  # no source: no extractiveness, no overlap fit
