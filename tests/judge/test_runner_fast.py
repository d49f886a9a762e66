"""Judge runner plumbing on the FAKE in-process backend (fast tier: no model is loaded).

What a real model does (probabilities, prefix reuse, sampling, a killed job) is tested with SmolLM2
in the ``slow`` tier; here: counts, keyed results, the cache, missing values with reasons, the three
modes' bookkeeping and ``csem judge``'s exit codes.
"""

from __future__ import annotations

import json
import random

import yaml
from typer.testing import CliRunner

from csem.judge import JudgmentCache, judge_records


def _records(n_docs: int = 3, n_sys: int = 3) -> list[dict]:
    return [{"id": f"d{i}-s{j}", "doc_id": f"d{i}", "system_id": f"s{j}",
             "source": f"Article {i}: the council met and approved budget item {i}.",
             "candidate": f"Summary {j} of article {i}."} for i in range(n_docs) for j in range(n_sys)]


def test_scores_are_keyed_not_positional(fake_llm, tiny_rubric):
    recs = _records()
    first, s = judge_records(recs, tiny_rubric, fake_llm, progress=False)
    assert (s.judged, s.cached, s.n_missing, s.total) == (9, 0, 0, 9)
    assert all(1 <= r["judge.coherence"] <= 5 and r["judge.coherence.mass"] > 0.5 for r in first)
    shuffled = recs[:]
    random.Random(0).shuffle(shuffled)
    second, _ = judge_records(shuffled, tiny_rubric, fake_llm, progress=False)
    assert [r["id"] for r in second] == [r["id"] for r in shuffled]  # output order = input order
    by_id = {r["id"]: r["judge.coherence"] for r in first}
    assert all(by_id[r["id"]] == r["judge.coherence"] for r in second)


def test_cache_makes_a_second_run_free(fake_llm, tiny_rubric, tmp_path):
    db = tmp_path / "c.sqlite"
    recs = _records()
    first, s1 = judge_records(recs, tiny_rubric, fake_llm, cache=db, progress=False)
    second, s2 = judge_records(recs, tiny_rubric, fake_llm, cache=db, progress=False)
    assert (s1.judged, s1.cached) == (9, 0) and (s2.judged, s2.cached) == (0, 9)
    assert [r["judge.coherence"] for r in first] == [r["judge.coherence"] for r in second]
    with JudgmentCache(db) as c:
        assert len(c) == 9
    _, s3 = judge_records(recs[:2], tiny_rubric, fake_llm, mode="parse", max_tokens=8, cache=db, progress=False)
    assert s3.judged == 2  # another mode is another key


def test_backend_failure_is_missing_with_reason_and_not_cached(fake_llm, tiny_rubric, tmp_path):
    db = tmp_path / "c.sqlite"
    recs = _records()
    out, s = judge_records(recs, tiny_rubric, fake_llm, cache=db, backend_options={"fail_on": "Article 1:"},
                           progress=False)
    assert (s.total, s.n_missing) == (9, 3) and all("fake backend" in e for e in s.errors)
    failed = [r for r in out if r["doc_id"] == "d1"]
    assert all(r["judge.coherence"] is None and "fake backend" in r["judge.coherence.missing"] for r in failed)
    assert all(r["judge.coherence"] is not None for r in out if r["doc_id"] != "d1")
    # the failures were not cached: a healthy backend judges exactly them on the re-run
    again, s2 = judge_records(recs, tiny_rubric, fake_llm, cache=db, progress=False)
    assert (s2.judged, s2.cached, s2.n_missing) == (3, 6, 0)
    assert all(r["judge.coherence"] is not None for r in again)


def test_parse_and_sample_modes_keep_raw_answers(fake_llm, tiny_rubric):
    recs = _records(1, 2)
    parsed, sp = judge_records(recs, tiny_rubric, fake_llm, mode="parse", max_tokens=8, progress=False)
    assert sp.completion_tokens > 0
    for r in parsed:
        assert r["judge.coherence"] == float(r["judge.coherence.raw"].split(".")[0])
    sampled, _ = judge_records(recs, tiny_rubric, fake_llm, mode="sample", n=3, max_tokens=8, progress=False)
    for r in sampled:
        raw = json.loads(r["judge.coherence.raw"])
        assert len(raw) == 3
        assert r["judge.coherence"] == sum(float(a.split(".")[0]) for a in raw) / 3


def test_cli_judge_exit_codes(fake_llm, tiny_template, tmp_path):
    from csem.cli import _load_commands, app

    _load_commands()
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records()))
    rub = tmp_path / "tiny.yaml"
    rub.write_text(yaml.safe_dump({"id": "test/tiny", "aspect": "coherence", "criteria": "reads well",
                                   "template": tiny_template, "system": None}))
    out = tmp_path / "out.jsonl"
    base = ["judge", "--data", str(data), "--rubric", str(rub), "--judge", fake_llm, "--out", str(out), "--no-progress"]
    res = CliRunner().invoke(app, [*base, "--cache", str(tmp_path / "a.sqlite")])
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 9
    # a permanent backend error is a recorded missing value, and the run is partial (exit 3, issue 11) ...
    res = CliRunner().invoke(app, [*base, "--cache", str(tmp_path / "b.sqlite"), "--judge-opt", "fail_on=Article 2:"])
    assert res.exit_code == 3 and "judged 6, cached 0, failed 3" in res.output, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sum(r["judge.coherence"] is None and "fake backend" in r["judge.coherence.missing"] for r in rows) == 3
    # ... a transient one makes the run partial: exit 3, the finished rows kept
    res = CliRunner().invoke(app, [*base, "--cache", str(tmp_path / "c.sqlite"), "--judge-opt", "fail_on=Article 2:",
                                   "--judge-opt", "transient=true", "--judge-opt", "max_retries=0"])
    assert res.exit_code == 3, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sum(r["judge.coherence"] is not None for r in rows) == 6
