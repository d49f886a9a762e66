"""csem rerank / tune-weights / mbr from the command line: files in, files out, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records, write_records

_load_commands()
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture()
def nbest_file(nbest_test, tmp_path):
    p = tmp_path / "nbest.jsonl"
    write_records(nbest_test, p)
    return p


def test_rerank_tune_and_rerank_with_the_tuned_weights(student, nbest_file, tmp_path):
    out = tmp_path / "chosen.jsonl"
    r = _run("rerank", "--data", nbest_file, "--metric", f"{student}#quality", "--out", out, "--threads", "1")
    assert r.exit_code == 0, r.output
    chosen = read_records(out)
    assert len(chosen) == 8 and all("metric.tiny.quality" in c for c in chosen)
    scores = read_records(tmp_path / "chosen.scores.jsonl")
    assert len(scores) == 32 and sum(bool(s["rerank.chosen"]) for s in scores) == 8

    weights = tmp_path / "weights.json"
    r = _run("tune-weights", "--dev", nbest_file, "--metric", str(student), "--objective", "judge.quality",
             "--normalize", "zscore", "--restarts", "2", "--out", weights)
    assert r.exit_code == 0, r.output
    rep = json.loads(weights.read_text())
    assert rep["columns"] == ["metric.tiny.quality", "metric.tiny.fluency"] and rep["normalize"] == "zscore"
    assert "MERT" in r.output and "random search" in r.output
    out2 = tmp_path / "chosen2.jsonl"
    r = _run("rerank", "--data", nbest_file, "--metric", str(student), "--weights", weights, "--out", out2)
    assert r.exit_code == 0, r.output and "normalize zscore" in r.output
    got = read_records(out2)
    mean_q = sum(c["judge.quality"] for c in got) / len(got)
    assert mean_q == pytest.approx(rep["value"])  # the same lists: the tuned objective is reproduced


def test_mbr_command(nbest_file, tmp_path):
    out = tmp_path / "mbr.jsonl"
    r = _run("mbr", "--data", nbest_file, "--utility", "chrf", "--out", out)
    assert r.exit_code == 0, r.output
    assert len(read_records(out)) == 8 and all(x["mbr.chosen"] for x in read_records(out))


def test_rerank_reports_sources_without_a_choice(tmp_path):
    p = tmp_path / "n.jsonl"
    write_records([{"id": "a", "doc_id": "1", "source": "s", "candidate": "x", "judge.q": 3.0},
                   {"id": "b", "doc_id": "2", "source": "s", "candidate": "y", "judge.q": None}], p)
    r = _run("rerank", "--data", p, "--metric", "judge.q", "--out", tmp_path / "o.jsonl")
    assert r.exit_code == 3 and "1 source(s) had no candidate" in r.output
    assert [x["id"] for x in read_records(tmp_path / "o.jsonl")] == ["a"]


@pytest.mark.parametrize("args, message", [
    (["--metric", "no-such-metric"], "unknown metric"),
    (["--metric", "judge.quality", "--weights", "1,2"], "2 weight(s) for 1 score column"),
    (["--metric", "judge.quality", "--normalize", "minmax"], "unknown normalisation"),
])
def test_rerank_errors_are_one_line_exit_2(nbest_file, tmp_path, args, message):
    r = runner.invoke(app, ["rerank", "--data", str(nbest_file), "--out", str(tmp_path / "o.jsonl"), *args])
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_rerank_bad_input_names_the_file(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "a", "candidate": "x"}\n{broken\n')
    r = _run("rerank", "--data", p, "--metric", "chrf", "--out", tmp_path / "o.jsonl")
    assert r.exit_code == 2 and "bad.jsonl, line 2" in r.output
