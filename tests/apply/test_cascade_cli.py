"""``csem score --defer``: the cascade through the command line (fast tier: a student on the tiny RANDOM
encoder, the FAKE in-process judge ``fake:test`` and a FAKE OpenAI server on loopback for the HTTP
failures; the real local judge and kill -9 are in test_cascade_local.py, slow tier)."""

from __future__ import annotations

import json
import sqlite3

import pytest
import yaml
from typer.testing import CliRunner

from fake_openai import ScriptedServer, error

RUBRIC_ID = "test/tiny-coherence"


@pytest.fixture(scope="module")
def setup(tiny_records, tiny_encoder, tiny_template, fake_llm, tmp_path_factory):
    """A one-head (coherence) student on the tiny random encoder whose card names the fake judge and
    the tiny rubric, the records file and the rubric file."""
    from csem.model import ModelConfig, TrainConfig, fit

    d = tmp_path_factory.mktemp("cascade")
    tails = ("", " It rained all day.", " The mayor said more later.")
    records = [dict(r, id=f"{r['id']}-{k}", candidate=r["candidate"] + t) for k, t in enumerate(tails)
               for r in tiny_records]
    rows = [dict(r, **{"judge.coherence": float(1 + i % 5)}) for i, r in enumerate(records)]
    fit(rows, "judge.coherence", "ref-free", out_dir=d / "student",
        config=ModelConfig(name="tiny", encoder=str(tiny_encoder), max_length=32, hidden_sizes=[16], dropout=0.2),
        train_config=TrainConfig(max_epochs=1, frozen_epochs=1, head_lr=3e-3, batch_size=8, seed=0),
        label_range=(1, 5), judge="fake:test", rubric=RUBRIC_ID)
    data = d / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    rub = d / "tiny.yaml"
    rub.write_text(yaml.safe_dump({"id": RUBRIC_ID, "aspect": "coherence", "criteria": "reads well",
                                   "template": tiny_template, "system": None}))
    return d, data, rub, len(records)


def _score(setup, tmp_path, *extra, judge="fake:test", cache="c.sqlite"):
    from csem.cli import _load_commands, app

    _load_commands()
    d, data, rub, _ = setup
    out = tmp_path / "out.jsonl"
    args = ["score", "--model", str(d / "student"), "--data", str(data), "--out", str(out), "--judge", judge,
            "--rubric", str(rub), "--judge-cache", str(tmp_path / cache), *extra]
    return CliRunner().invoke(app, args), out


def _rows(out):
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_defer_share_judges_exactly_that_share_and_resumes_from_the_cache(setup, tmp_path):
    n = setup[3]
    want = int(0.34 * n + 0.5)
    res, out = _score(setup, tmp_path, "--defer", "0.34", "--defer-by", "mc", "--judge-calibration", "identity")
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    col = "metric.tiny.coherence"
    judged = [r for r in rows if r[f"{col}.provenance"] == "judge"]
    assert len(judged) == want and len(rows) == n
    for r in rows:  # both scores kept; the combined column is the judge's where it judged
        assert isinstance(r[f"{col}@student"], float)
        if r[f"{col}.provenance"] == "judge":
            assert r[col] == r["judge.coherence"]
        else:
            assert r[col] == r[f"{col}@student"] and "judge.coherence" not in r
    assert f"judgments: {want} new, 0 from the cache, 0 failed" in res.output
    # a second run judges nothing again: the same rows come from the cache
    res2, out2 = _score(setup, tmp_path, "--defer", "0.34", "--defer-by", "mc", "--judge-calibration", "identity")
    assert res2.exit_code == 0 and f"judgments: 0 new, {want} from the cache" in res2.output, res2.output
    assert _rows(out2) == rows
    with sqlite3.connect(tmp_path / "c.sqlite") as con:
        assert con.execute("select count(*) from judgments").fetchone()[0] == want


def test_budget_and_rules(setup, tmp_path):
    res, out = _score(setup, tmp_path, "--defer-budget", "2", "--defer-by", "neighbours")
    assert res.exit_code == 0, res.output
    assert sum(r["metric.tiny.coherence.provenance"] == "judge" for r in _rows(out)) == 2
    res, out = _score(setup, tmp_path, "--defer", "0", "--defer-by", "random")
    assert res.exit_code == 0 and all(r["metric.tiny.coherence.provenance"] == "student" for r in _rows(out))


def test_dry_run_counts_and_writes_nothing(setup, tmp_path):
    res, out = _score(setup, tmp_path, "--defer-budget", "3", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "the judge would get 3 for test/tiny-coherence" in res.output
    assert not out.exists() and not (tmp_path / "c.sqlite").exists() or \
        sqlite3.connect(tmp_path / "c.sqlite").execute("select count(*) from judgments").fetchone()[0] == 0


@pytest.mark.parametrize("extra, message", [
    (["--defer", "0.2", "--defer-by", "std"], "seed ensemble"),  # one student: no members' deviation
    (["--defer", "1.5"], "must lie in [0, 1]"),
    (["--defer", "0.2", "--defer-budget", "2"], "exactly one"),
    (["--defer", "0.2", "--defer-by", "entropy"], "unknown deferral rule"),
])
def test_bad_requests_exit_2_before_judging(setup, tmp_path, extra, message):
    res, out = _score(setup, tmp_path, *extra)
    assert res.exit_code == 2 and message in res.output, res.output
    assert not out.exists()


def test_a_judge_the_card_does_not_name_is_refused_unless_rescaled(setup, tmp_path):
    res, out = _score(setup, tmp_path, "--defer", "0.2", judge="fake:other")
    assert res.exit_code == 2 and "not 'fake:other'" in res.output and not out.exists(), res.output
    res, out = _score(setup, tmp_path, "--defer", "0.2", "--judge-rescale", judge="fake:other")
    assert res.exit_code == 0, res.output


def test_judge_failures_exit_as_csem_judge(setup, tmp_path):
    # a permanent backend error on some prompts: partial, exit 3; the failed rows keep the student's score
    res, out = _score(setup, tmp_path, "--defer", "1", "--judge-opt", "fail_on=Article: The river")
    assert res.exit_code == 3, res.output
    rows = _rows(out)
    failed = [r for r in rows if "The river" in r["source"]]
    assert failed and all(r["metric.tiny.coherence.provenance"] == "student" for r in failed)
    assert any(r["metric.tiny.coherence.provenance"] == "judge" for r in rows)


def test_http_500_from_an_openai_judge_is_exit_1(setup, tmp_path, monkeypatch):
    """FAKE OpenAI server (a real HTTP server on loopback) that answers every request with 500."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with ScriptedServer([error(500, "internal error")]) as srv:
        res, out = _score(setup, tmp_path, "--defer-budget", "2", "--judge-rescale", "--judge-opt",
                          f"base_url={srv.url}", "--judge-opt", "max_retries=0", judge="openai:m")
    assert res.exit_code == 1, res.output
    assert "no judgment made" in res.output and "sk-test-not-a-key" not in res.output


def test_two_stage_rerank_judges_only_the_shortlist(setup, tmp_path):
    from csem.cli import _load_commands, app

    _load_commands()
    d, data, rub, n = setup
    out, scores = tmp_path / "chosen.jsonl", tmp_path / "all.jsonl"
    res = CliRunner().invoke(app, ["rerank", "--data", str(data), "--metric", str(d / "student"), "--out", str(out),
                                   "--scores", str(scores), "--shortlist", "2", "--judge", "fake:test", "--rubric",
                                   str(rub), "--judge-cache", str(tmp_path / "c.sqlite")])
    assert res.exit_code == 0, res.output
    rows, chosen = _rows(scores), _rows(out)
    sources = {r["doc_id"] for r in rows}
    assert len(chosen) == len(sources)
    short = [r for r in rows if r["shortlisted"]]
    assert len(short) == 2 * len(sources) and f"the judge scored {len(short)} of {n} candidates" in res.output
    for c in chosen:  # the judge's best of the student's top 2 of that source
        mine = [r for r in short if r["doc_id"] == c["doc_id"]]
        top2 = sorted((r for r in rows if r["doc_id"] == c["doc_id"]), key=lambda r: -r["metric.tiny.coherence"])[:2]
        assert {r["id"] for r in mine} == {r["id"] for r in top2}
        assert c["judge.coherence"] == max(r["judge.coherence"] for r in mine)
    assert all("judge.coherence" not in r for r in rows if not r["shortlisted"])


def test_fitted_calibration_is_applied_to_the_judged_rows(setup, tmp_path):
    from csem.apply.cascade import fit_calibration

    res, out = _score(setup, tmp_path, "--defer", "1", "--defer-by", "random")
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    col = "metric.tiny.coherence"
    # every row judged: the combined score is the fitted line through the judge's score (the identity
    # when this random student's scores give no increasing line)
    a, b = fit_calibration({i: r["judge.coherence"] for i, r in enumerate(rows)},
                           [r[f"{col}@student"] for r in rows]) or (0.0, 1.0)
    for r in rows:
        assert r[col] == pytest.approx(a + b * r["judge.coherence"])


def test_defer_says_what_it_does_and_shows_the_judges_progress(setup, tmp_path):
    """While the judge works, stderr has the line saying which rule picks the rows and csem judge's
    progress bar (done/total); --no-progress leaves only the line."""
    n = setup[3]
    want = int(0.34 * n + 0.5)
    res, _ = _score(setup, tmp_path, "--defer", "0.34", "--defer-by", "mc")
    assert res.exit_code == 0, res.output
    assert f"scoring {n} records, then judging those the student is least sure of (mc rule)" in res.stderr
    assert f"{want}/{want}" in res.stderr, res.stderr
    quiet, _ = _score(setup, tmp_path, "--defer", "0.34", "--defer-by", "mc", "--no-progress", cache="d.sqlite")
    assert quiet.exit_code == 0 and f"{want}/{want}" not in quiet.stderr, quiet.stderr
