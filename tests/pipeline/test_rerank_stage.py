"""`csem run` with a ``rerank:`` section: after the score stage the trained student picks one candidate
per held-out source from the collect stage's N-best lists (Eq. 7/8 of the apply layer); the choice is
the argmax of the scores, the stage resumes like the others, changing only its settings re-runs only it
and the report, and the report compares each chosen candidate's judge score with its list's mean.
Fast tier: the FAKE backend generates and judges, the tiny random encoder is trained."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records
from csem.pipeline.config import load_pipeline
from csem.pipeline.runner import Pipeline

from test_compare_stage import _with
from test_pipeline import _pipeline_file

_load_commands()

STAGES_BEFORE = ("collect", "annotate", "train", "score", "meta_eval")


def _by_doc(rows):
    out: dict = {}
    for r in rows:
        out.setdefault(r["doc_id"], []).append(r)
    return out


def _argmax(cands, value):
    """The first candidate with the highest ``value`` (the tie rule of the apply layer), written anew."""
    best = None
    for c in cands:
        v = value(c)
        if best is None or v > value(best):
            best = c
    return best


@pytest.fixture(scope="module")
def reranked(fake_llm, tiny_encoder, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rerank_fake")
    path = _with(_pipeline_file(tmp, (fake_llm, tiny_encoder)), rerank={})
    p = Pipeline.from_file(path, tmp / "run", progress=False)
    p.run()
    return tmp, path, p


def _copy(p, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    return run


def test_rerank_stage_chooses_the_students_argmax_per_held_out_source(reranked):
    tmp, path, p = reranked
    rd = p.run_dir
    scored = read_records(rd / "scored.jsonl")
    student = next(k for k in scored[0] if k.startswith("metric.") and k.endswith(".coherence"))
    test = _by_doc([r for r in scored if r["split"] == "test"])
    chosen = read_records(rd / "reranked.jsonl")
    assert len(chosen) == len(test) >= 2 and {r["doc_id"] for r in chosen} == set(test)
    for r in chosen:  # the argmax of the student's score within the source's N-best list
        want = _argmax(test[r["doc_id"]], lambda c: c[student])
        assert r["id"] == want["id"] and r["rerank.chosen"] is True
        assert r["rerank.score"] == pytest.approx(want[student])
        assert r["judge.coherence"] == want["judge.coherence"] and r[student] == want[student], "every score kept"
    every = read_records(rd / "reranked.scores.jsonl")
    assert sorted(r["id"] for r in every) == sorted(r["id"] for rs in test.values() for r in rs)
    assert sum(r["rerank.chosen"] for r in every) == len(test)

    # the summary and the report: the chosen candidate's judge score vs the mean over its N-best list
    state = json.loads((rd / "state.json").read_text())
    s = state["rerank"]["summary"]
    assert s["columns"] == [student] and s["weights"] == [1.0] and s["normalize"] == "none"
    assert s["sources"] == len(test) and s["candidates"] == len(every) and s["no_choice"] == []
    labelled = {r["id"]: r["judge.coherence"] for r in read_records(rd / "labelled.jsonl")}
    gains = []
    for r in chosen:
        judged = [labelled[c["id"]] for c in test[r["doc_id"]] if labelled[c["id"]] is not None]
        gains.append((labelled[r["id"]], statistics.fmean(judged), labelled[r["id"]] - statistics.fmean(judged)))
    g = s["gain"]["judge.coherence"]
    assert g["sources"] == len(gains)
    assert g["chosen"] == pytest.approx(statistics.fmean(x[0] for x in gains))
    assert g["mean"] == pytest.approx(statistics.fmean(x[1] for x in gains))
    assert g["gain"] == pytest.approx(statistics.fmean(x[2] for x in gains))
    report = (rd / "report.md").read_text()
    assert "## Reranking (rerank stage)" in report
    assert f"mean gain {g['gain']:+.3f} over {len(gains)} sources" in report
    for r, (got, mean, gain) in zip(chosen, gains):
        line = next(ln for ln in report.splitlines() if ln.startswith(f"| {r['doc_id']} |"))
        assert r["id"] in line and f"{got:.3f}" in line and f"{mean:.3f}" in line and f"{gain:+.3f}" in line
    assert "Reranking: chosen candidate per source" in (rd / "report.html").read_text()


def test_rerun_skips_the_rerank_stage_and_a_lost_output_reruns_it_alone(reranked, tmp_path):
    tmp, path, p = reranked
    run = _copy(p, tmp_path)
    before = json.loads((run / "state.json").read_text())
    Pipeline.from_file(path, run, progress=False).run()
    assert json.loads((run / "state.json").read_text()) == before, "nothing re-ran"
    (run / "reranked.jsonl").unlink()
    Pipeline.from_file(path, run, progress=False).run()
    after = json.loads((run / "state.json").read_text())
    for stage in STAGES_BEFORE:
        assert after[stage] == before[stage], f"{stage} re-ran"
    assert after["rerank"]["finished_at"] >= before["rerank"]["finished_at"] and (run / "reranked.jsonl").exists()
    assert after["rerank"]["fingerprint"] == before["rerank"]["fingerprint"]
    assert after["rerank"]["summary"] == before["rerank"]["summary"]


def test_changed_rerank_settings_rerun_only_it_and_the_report(reranked, tmp_path):
    """Eq. 8: two columns (the student and the judge's own rating), z-scored per source, weighted."""
    tmp, path, p = reranked
    run = _copy(p, tmp_path)
    before = json.loads((run / "state.json").read_text())
    _with(path, rerank={"metrics": ["student#coherence", "judge.coherence"], "weights": [1.0, 0.5],
                        "normalize": "zscore", "sources": "all"})
    try:
        Pipeline.from_file(path, run, progress=False).run()
    finally:
        _with(path, rerank={"metrics": ["student"], "weights": None, "normalize": None, "sources": "held-out"})
    after = json.loads((run / "state.json").read_text())
    for stage in STAGES_BEFORE:
        assert after[stage] == before[stage], f"{stage} re-ran"
    assert after["rerank"]["fingerprint"] != before["rerank"]["fingerprint"]
    assert after["report"]["fingerprint"] != before["report"]["fingerprint"]
    scored = read_records(run / "scored.jsonl")
    student = next(k for k in scored[0] if k.startswith("metric.") and k.endswith(".coherence"))
    groups = _by_doc(scored)

    def z(cands, col):
        vals = [c[col] for c in cands]
        mu, sd = statistics.fmean(vals), statistics.pstdev(vals)
        return {c["id"]: (c[col] - mu) / sd if sd > 1e-12 else 0.0 for c in cands}

    chosen = {r["doc_id"]: r for r in read_records(run / "reranked.jsonl")}
    assert set(chosen) == set(groups), "sources: all reranks every source"
    for doc, cands in groups.items():
        zs, zj = z(cands, student), z(cands, "judge.coherence")
        want = _argmax(cands, lambda c: zs[c["id"]] + 0.5 * zj[c["id"]])
        assert chosen[doc]["id"] == want["id"]
        assert chosen[doc]["rerank.score"] == pytest.approx(zs[want["id"]] + 0.5 * zj[want["id"]])
    s = after["rerank"]["summary"]
    assert s["columns"] == [student, "judge.coherence"] and s["weights"] == [1.0, 0.5] and s["normalize"] == "zscore"
    report = (run / "report.md").read_text()
    assert "training sources included" in report and "normalize `zscore`" in report


def test_mert_weights_are_tuned_on_the_training_sources(reranked, tmp_path):
    tmp, path, p = reranked
    run = _copy(p, tmp_path)
    _with(path, rerank={"metrics": ["student", "chrf"], "weights": "mert", "restarts": 2})
    try:
        Pipeline.from_file(path, run, progress=False).run()
    finally:
        _with(path, rerank={"metrics": ["student"], "weights": None, "restarts": 5})
    tuned = json.loads((run / "rerank_weights.json").read_text())
    s = json.loads((run / "state.json").read_text())["rerank"]["summary"]
    assert s["columns"] == tuned["columns"] and s["columns"][1] == "metric.chrf"
    assert s["weights"] == pytest.approx(tuned["weights"])
    n_tune = len({r["doc_id"] for r in read_records(run / "scored.jsonl") if r["split"] in ("train", "dev")})
    assert s["tuned"]["sources"] == tuned["sources"] == n_tune and tuned["objective"] == "judge.coherence"
    assert {r["split"] for r in read_records(run / "reranked.jsonl")} == {"test"}
    assert "weights tuned by MERT on" in (run / "report.md").read_text()
    # the tuned file, named in the pipeline file (relative to it), gives the same choice
    shutil.copy(run / "rerank_weights.json", path.parent / "tuned.json")
    first = read_records(run / "reranked.jsonl")
    _with(path, rerank={"metrics": ["student", "chrf"], "weights": "tuned.json"})
    try:
        Pipeline.from_file(path, run, progress=False).run()
    finally:
        _with(path, rerank={"metrics": ["student"], "weights": None})
    again = json.loads((run / "state.json").read_text())["rerank"]["summary"]
    assert again["weights"] == pytest.approx(s["weights"]) and again["tuned"] is None
    assert [r["id"] for r in read_records(run / "reranked.jsonl")] == [r["id"] for r in first]


def test_no_rerank_section_no_stage_and_no_report_section(reranked, tmp_path):
    tmp, path, p = reranked
    run = _copy(p, tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg.pop("rerank")
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(cfg))
    shutil.copy(tmp / "sources.jsonl", tmp_path / "sources.jsonl")
    Pipeline.from_file(plain, run, progress=False).run()
    assert "Reranking" not in (run / "report.md").read_text()


@pytest.mark.parametrize("rerank, message", [
    ({"normalize": "minmax"}, r"rerank\.normalize: Input should be 'none' or 'zscore'"),
    ({"sources": "test"}, r"rerank\.sources: Input should be 'held-out' or 'all'"),
    ({"weights": "one,two"}, r"rerank\.weights 'one,two': write numbers"),
    ({"weights": "mert", "sources": "all"}, r"rerank\.weights 'mert' tunes on the training and dev sources"),
    ({"metrics": []}, r"rerank\.metrics: List should have at least 1 item"),
    ({"restarts": 0}, r"rerank\.restarts: Input should be greater than or equal to 1"),
    ({"colour": "red"}, r"rerank\.colour: Extra inputs are not permitted"),
])
def test_bad_rerank_settings_are_explained(tmp_path, rerank, message):
    path = _with(_pipeline_file(tmp_path), rerank=rerank)
    with pytest.raises(ValueError, match=message):
        load_pipeline(path)
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and res.output.count("csem: error:") == 1, res.output
    assert "Traceback" not in res.output


def test_bad_rerank_metric_fails_the_stage_with_one_line(reranked, tmp_path):
    tmp, path, p = reranked
    run = _copy(p, tmp_path)
    for rerank, message in (({"metrics": ["student#fluency"]}, "rerank.metrics 'student#fluency': the student has "
                                                                "no head for ['fluency']; it has ['coherence']"),
                            ({"metrics": ["student#"]}, "rerank.metrics 'student#': name the heads after '#'"),
                            ({"weights": [1.0, 2.0]}, "rerank.weights: 2 weight(s) for 1 score column(s)")):
        _with(path, rerank=rerank)
        try:
            res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(run)])
        finally:
            _with(path, rerank={"metrics": ["student"], "weights": None})
        assert res.exit_code == 2 and f"csem: error: {message}" in res.output, res.output
        assert res.output.count("csem: error:") == 1
