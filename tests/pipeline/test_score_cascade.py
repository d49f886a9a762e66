"""`csem run` with a ``score:`` section: the student scores every candidate, the records it is least sure
of go to the judge (the cascade of `csem score --defer`), and ``scored.jsonl`` gets the combined column
beside the student's own with each row's provenance. What the run measures against the judge stays the
student's own score; the combined column is measured only against the targets that are not the judged
labels (the judge's repeat labels here). Fast tier: the FAKE backend generates and judges, the tiny random
encoder is trained."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records
from csem.pipeline.runner import Pipeline

from test_compare_stage import _with
from test_pipeline import _pipeline_file

_load_commands()

COL, OWN, PROV = "metric.csem.coherence", "metric.csem.coherence@student", "metric.csem.coherence.provenance"
#: files whose figures are the student's own: a run with the cascade must write them as a run without it
STUDENT_FILES = ("meta.json", "baselines.json", "verdict.json", "gate.json", "curve.json")


@pytest.fixture(scope="module")
def base(fake_llm, tiny_encoder, tmp_path_factory):
    """A finished run without a score section; the judge judged half the sources again (repeat labels)."""
    tmp = tmp_path_factory.mktemp("cascade_fake")
    path = _pipeline_file(tmp, (fake_llm, tiny_encoder), annotate={"repeatability": 0.5})
    p = Pipeline.from_file(path, tmp / "run", progress=False)
    p.run()
    return tmp, path, p


@pytest.fixture(scope="module")
def deferred(base, tmp_path_factory):
    """The base run continued with ``score: {defer: 0.25}`` (a copy of its folder)."""
    tmp, path, p = base
    out = tmp_path_factory.mktemp("cascade_deferred")
    shutil.copy(tmp / "sources.jsonl", out / "sources.jsonl")
    cfg = yaml.safe_load(path.read_text())
    cfg["score"] = {"defer": 0.25}
    (out / "pipe.yaml").write_text(yaml.safe_dump(cfg))
    shutil.copytree(p.run_dir, out / "run")
    Pipeline.from_file(out / "pipe.yaml", out / "run", progress=False).run()
    return out, out / "pipe.yaml", out / "run"


def _state(run):
    return json.loads((run / "state.json").read_text())


def test_the_exact_share_is_deferred_and_answered_by_the_judge_cache(base, deferred):
    _, _, run = deferred
    rows = read_records(run / "scored.jsonl")
    n = len(rows)
    k = math.floor(0.25 * n + 0.5)
    assert sum(r[PROV] == "judge" for r in rows) == k and sum(r[PROV] == "student" for r in rows) == n - k
    c = _state(run)["score"]["summary"]["cascade"]
    assert c["rule"] == "mc" and c["rows"] == n and c["deferred"] == {"csem/summ-coherence-ref-free": k}
    assert c["share_deferred"]["csem/summ-coherence-ref-free"] == pytest.approx(k / n)
    assert c["held_out_deferred"]["csem/summ-coherence-ref-free"] == sum(
        r[PROV] == "judge" for r in rows if r["split"] == "test")
    # the annotate stage judged every candidate with this judge and rubric: no new judge call
    assert c["judge_calls"] == k and c["cached"] == k and c["judged"] == 0 and c["failed"] == 0
    report = (run / "report.md").read_text()
    assert "## Cascade (score stage)" in report and f"{k} judgments asked, 0 new judge calls, {k} answered" in report
    assert "Cascade (score stage)" in (run / "report.html").read_text()
    assert "Cascade" not in (base[2].run_dir / "report.md").read_text()
    from csem.pipeline.cascade import cascade_lines  # what csem run prints after the stages

    lines = cascade_lines(Pipeline.from_file(deferred[1], run, progress=False))
    assert lines[0].startswith(f"cascade: {k} of {n} records to csem/summ-coherence-ref-free (mc rule); judgments 0 "
                               f"new, {k} from the run's judge cache, 0 failed")
    assert len(lines) == 2 and lines[1].startswith("cascade, coherence vs judge repeat (held-out, summary-level")
    assert cascade_lines(base[2]) == []


def test_the_student_figures_are_those_of_a_run_without_the_option(base, deferred):
    _, _, p = base
    _, _, run = deferred
    for name in STUDENT_FILES:
        assert (run / name).read_text() == (p.run_dir / name).read_text(), name
    before = {r["id"]: r[COL] for r in read_records(p.run_dir / "scored.jsonl")}
    after = read_records(run / "scored.jsonl")
    assert {r["id"]: r[OWN] for r in after} == before, "the student's own score is kept as @student"
    assert any(r[COL] != r[OWN] for r in after), "the combined column differs where the judge answered"
    # the equality above can tell: the combined column in the student's place gives other figures (circular ones)
    from csem.pipeline.agreement import BOOTSTRAP, agreement_table

    swapped = [{**r, OWN: r[COL]} for r in after if r["split"] == "test"]
    assert any(r[PROV] == "judge" for r in swapped), "the fixture defers some held-out rows"
    assert agreement_table(swapped, ["judge.coherence"], bootstrap=BOOTSTRAP) != \
        json.loads((run / "meta.json").read_text())


def test_the_combined_column_says_where_each_score_came_from(base, deferred):
    _, _, p = base
    _, _, run = deferred
    rows = read_records(run / "scored.jsonl")
    labelled = {r["id"]: r for r in read_records(p.run_dir / "labelled.jsonl")}
    for r in rows:  # the judge's labels are the annotate stage's, untouched by the cascade
        assert {k: v for k, v in r.items() if k.startswith("judge.")} == \
            {k: v for k, v in labelled[r["id"]].items() if k.startswith("judge.")}
    own = [r for r in rows if r[PROV] == "student"]
    judged = [r for r in rows if r[PROV] == "judge"]
    assert all(r[COL] == r[OWN] for r in own)
    # on a judged row: the judge's score placed on the student's spread by the least-squares line of the
    # student's score on the judge's over the judged rows (calibration "fit")
    b, a = np.polyfit([r["judge.coherence"] for r in judged], [r[OWN] for r in judged], 1)
    assert b > 0
    for r in judged:
        assert r[COL] == pytest.approx(a + b * r["judge.coherence"], abs=1e-6)
    scale = _state(run)["score"]["summary"]["cascade"]["scale"][COL]
    assert scale.startswith("identity: the student learned fake:test's scores") and f"{len(judged)} judged rows" in scale
    # measured only against targets that are not the judged labels: here the judge's repeat labels
    table = json.loads((run / "cascade.json").read_text())
    assert table == _state(run)["meta_eval"]["summary"]["cascade"]
    assert {r["target"] for r in table} == {"judge repeat"}
    assert {r["scorer"] for r in table} == {"cascade", "student", "judge"}
    test_rep = [r for r in rows if r["split"] == "test" and r.get("judge.coherence.repeat") is not None]
    assert test_rep, "the fixture's held-out sources include repeated ones"
    for r in table:
        assert r["rows_judged"] == sum(x[PROV] == "judge" for x in test_rep)
        if r["level"] == "dataset":
            assert r["n_pairs"] == len(test_rep) - (r["scorer"] == "judge") * sum(
                x.get("judge.coherence") is None for x in test_rep)


def test_changing_the_section_reruns_only_score_and_what_follows(base, deferred, tmp_path):
    _, path, run0 = deferred
    run = tmp_path / "run"
    shutil.copytree(run0, run)
    shutil.copy(path.parent / "sources.jsonl", tmp_path / "sources.jsonl")
    before = _state(run)
    changed = tmp_path / "pipe.yaml"
    changed.write_text(path.read_text())
    _with(changed, score={"defer": None, "defer_budget": 3})
    Pipeline.from_file(changed, run, progress=False).run()
    after = _state(run)
    for stage in ("collect", "annotate", "train"):
        assert after[stage] == before[stage], f"{stage} re-ran"
    for stage in ("score", "meta_eval", "report"):
        assert after[stage]["finished_at"] > before[stage]["finished_at"], f"{stage} did not re-run"
    assert after["score"]["fingerprint"] != before["score"]["fingerprint"]
    assert sum(r[PROV] == "judge" for r in read_records(run / "scored.jsonl")) == 3
    assert after["score"]["summary"]["cascade"]["cached"] == 3
    assert (run / "meta.json").read_text() == (run0 / "meta.json").read_text()
    # the same file again: nothing re-runs
    Pipeline.from_file(changed, run, progress=False).run()
    assert _state(run) == after


def test_without_the_section_the_run_is_as_before(base, deferred, tmp_path):
    _, path, p = base
    _, _, run0 = deferred
    run = tmp_path / "run"
    shutil.copytree(run0, run)
    Pipeline.from_file(path, run, progress=False).run()
    st, plain = _state(run), _state(p.run_dir)
    assert st["score"]["fingerprint"] == plain["score"]["fingerprint"] and "cascade" not in st["score"]["summary"]
    assert not any(k.endswith(("@student", ".provenance")) for r in read_records(run / "scored.jsonl") for k in r)
    assert "Cascade" not in (run / "report.md").read_text()
    assert (run / "meta.json").read_text() == (p.run_dir / "meta.json").read_text()


def test_csem_run_prints_what_the_cascade_did(deferred, tmp_path):
    _, path, run0 = deferred
    run = tmp_path / "run"
    shutil.copytree(run0, run)
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(run)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    k = _state(run)["score"]["summary"]["cascade"]["judge_calls"]
    assert f"records to csem/summ-coherence-ref-free (mc rule); judgments 0 new, {k} from the run's judge cache" in out
    assert "cascade, coherence vs judge repeat (held-out, summary-level Spearman)" in out


@pytest.mark.parametrize("score, message", [
    ({"defer": 1.5}, r"score\.defer: Input should be less than or equal to 1"),
    ({"defer": -0.1}, r"score\.defer: Input should be greater than or equal to 0"),
    ({"defer_budget": -1}, r"score\.defer_budget: Input should be greater than or equal to 0"),
    ({"defer": 0.2, "defer_budget": 3}, r"score: .*give exactly one of defer .* and defer_budget"),
    ({"defer_by": "mc"}, r"score: .*give exactly one of defer"),
    ({"defer": 0.2, "defer_by": "entropy"}, r"score\.defer_by: Input should be 'std', 'mc', 'neighbours' or 'random'"),
    ({"defer": 0.2, "calibration": "none"}, r"score\.calibration: Input should be 'fit' or 'identity'"),
    ({"defer": 0.2, "colour": "red"}, r"score\.colour: Extra inputs are not permitted"),
    ({"defer": 0.2, "defer_by": "std"}, r"score\.defer_by 'std' reads the seed ensemble's deviation"),
    ({"defer": 0.2, "judge": "openai:gpt-4o"}, r"score\.judge / score\.rubrics: .* set score\.rescale: true"),
    ({"defer": 0.2, "rubrics": ["csem/summ-relevance-ref-free"]}, r"set score\.rescale: true"),
])
def test_bad_score_sections_exit_2_naming_the_file_and_field(tmp_path, score, message):
    path = _with(_pipeline_file(tmp_path), score=score)
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and res.output.count("csem: error:") == 1, res.output
    line = " ".join(res.output.split())
    assert str(path) in line and re.search(message, line), res.output
    assert "Traceback" not in res.output and not (tmp_path / "run" / "candidates.jsonl").exists()


def test_rescale_accepts_another_judge_and_an_ensemble_may_defer_by_std(tmp_path):
    from csem.pipeline.config import load_pipeline

    cfg, _ = load_pipeline(_with(_pipeline_file(tmp_path), score={"defer": 0.2, "judge": "openai:x", "rescale": True}))
    assert not cfg.score_is_own() and cfg.score.judge == "openai:x"
    cfg, _ = load_pipeline(_with(_pipeline_file(tmp_path), score={"defer_budget": 4, "defer_by": "std"},
                                 train={"model": {"members": 2}}))
    assert cfg.score_is_own() and cfg.score.defer_by == "std"


def test_cascade_rows_measure_the_combined_column_against_humans_only_where_they_rated():
    """Pure logic on hand-made records: the combined column equals the human ratings, the student's own
    score reverses them, so the cascade's Spearman with the humans is 1 and the student's -1 on the same
    rows; a record without a human rating is left out; no target, no row."""
    from csem.pipeline.cascade import cascade_rows

    recs = []
    for d in ("a", "b"):
        for i, h in enumerate([1.0, 2.0, 3.0]):
            recs.append({"doc_id": d, "human.coherence": h, "judge.coherence": h, COL: h, OWN: 4.0 - h,
                         PROV: "judge" if i == 0 else "student"})
    recs.append({"doc_id": "a", "judge.coherence": 5.0, COL: 5.0, OWN: 0.0, PROV: "judge"})  # no human rating
    rows = {(r["scorer"], r["level"]): r for r in cascade_rows(recs, ["judge.coherence"])}
    assert {r["target"] for r in rows.values()} == {"human"}
    assert rows[("cascade", "summary")]["spearman"] == pytest.approx(1.0)
    assert rows[("student", "summary")]["spearman"] == pytest.approx(-1.0)
    assert rows[("cascade", "dataset")]["n_pairs"] == 6 and rows[("cascade", "summary")]["rows_judged"] == 2
    for r in recs:
        r.pop("human.coherence", None)
    assert cascade_rows(recs, ["judge.coherence"]) == []


def test_the_report_says_when_no_target_is_available(tmp_path):
    from csem.pipeline.config import load_pipeline
    from csem.pipeline.report import _cascade_section

    cfg, _ = load_pipeline(_with(_pipeline_file(tmp_path), score={"defer": 0.5}))
    (tmp_path / "cascade.json").write_text("[]")
    c = {"rule": "random", "defer": 0.5, "defer_budget": None, "rows": 4, "held_out_rows": 2, "judge": "local",
         "deferred": {"r": 2}, "share_deferred": {"r": 0.5}, "held_out_deferred": {"r": 1}, "judge_calls": 2,
         "judged": 1, "cached": 1, "failed": 0, "missing": 0, "scale": {COL: "identity"}}
    s = _cascade_section(tmp_path, cfg, {"score": {"summary": {"cascade": c}}})
    text = " ".join(str(i) for i in s.items)
    assert "2 of 4 records (50.0%) to r, 1 of them among the 2 held-out candidates" in text
    assert "2 judgments asked, 1 new judge calls, 1 answered by the run's judge cache" in text
    assert "No such target in this run" in text
