"""`csem run` with comparison annotation (the compare stage: pairs of candidates of each training
source judged in both orders, the student trained on them with Eq. 3), and issue 11's rule for the
judging stages: failed judgments never mark a stage done, the run exits non-zero and a re-run judges
only what is missing. Fast tier: the FAKE backend judges, the tiny random encoder is trained; slow
tier: SmolLM2 generates, rates and compares through llama.cpp."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records
from csem.pipeline.config import load_pipeline
from csem.pipeline.runner import Pipeline, StageIncomplete

from test_pipeline import _pipeline_file  # the 8-source pipeline of the pipeline tests

_load_commands()


def _with(path, **sections):
    cfg = yaml.safe_load(path.read_text())
    for k, v in sections.items():
        cfg[k] = {**cfg.get(k, {}), **v} if isinstance(v, dict) and k in cfg else v
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run_cli(path, run):
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(run)])
    return res.exit_code, res.output


def test_failed_annotate_is_not_done_exits_3_and_resumes(fake_llm, tiny_encoder, tmp_path):
    path = _pipeline_file(tmp_path, (fake_llm, tiny_encoder))
    src = read_records(tmp_path / "sources.jsonl", required=("source",))
    snippet = src[0]["source"][:40]  # every prompt judging source 0's candidates shows it
    _with(path, annotate={"options": {"fail_on": snippet}})
    run = tmp_path / "run"
    code, out = _run_cli(path, run)
    assert code == 3, out
    assert "csem: error:" in out and "failed" in out and "stage annotate" in out
    state = json.loads((run / "state.json").read_text())
    assert "collect" in state and "annotate" not in state, "a stage with failed judgments is never marked done"
    assert not (run / "model").exists(), "later stages did not run"
    labelled = read_records(run / "labelled.jsonl")
    failed = [r for r in labelled if r["doc_id"] == src[0]["id"]]
    assert failed and all(r["judge.coherence"] is None and "fake backend" in r["judge.coherence.missing"]
                          for r in failed)
    # the judge works again: the re-run judges only the failed candidates and finishes the run
    _with(path, annotate={"options": {}})
    code, out = _run_cli(path, run)
    assert code == 0, out
    state = json.loads((run / "state.json").read_text())
    s = state["annotate"]["summary"]
    assert (s["judged"], s["cached"], s["failed"]) == (len(failed), len(labelled) - len(failed), 0)
    assert "meta_eval" in state


def test_nothing_judged_exits_1(fake_llm, tiny_encoder, tmp_path):
    path = _with(_pipeline_file(tmp_path, (fake_llm, tiny_encoder)),
                 annotate={"options": {"fail_on": "Evaluation"}})  # in every rating prompt
    code, out = _run_cli(path, tmp_path / "run")
    assert code == 1 and "no judgment made" in out, out


def test_compare_config_is_checked(tmp_path):
    path = _pipeline_file(tmp_path)
    _with(path, compare={"pairs": "random"})
    with pytest.raises(ValueError, match="per_source"):
        load_pipeline(path)
    _with(path, compare={"pairs": "all", "per_source": 2})
    with pytest.raises(ValueError, match="per_source goes with pairs 'random'"):
        load_pipeline(path)


@pytest.fixture(scope="module")
def compared(fake_llm, tiny_encoder, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare_fake")
    path = _with(_pipeline_file(tmp, (fake_llm, tiny_encoder)), compare={"pairs": "all"})
    p = Pipeline.from_file(path, tmp / "run", progress=False)
    rows = p.run()
    return tmp, path, p, rows


def test_compare_stage_judges_training_pairs_and_trains_on_them(compared):
    tmp, path, p, rows = compared
    rd = p.run_dir
    scored = read_records(rd / "scored.jsonl")
    split = {r["doc_id"]: r["split"] for r in scored}
    pairs = read_records(rd / "pairs.jsonl", required=())
    assert pairs and {split[r["doc_id"]] for r in pairs} == {"train"}, "only the training sources are compared"
    per_doc: dict = {}
    for r in scored:
        per_doc[r["doc_id"]] = per_doc.get(r["doc_id"], 0) + 1
    assert len(pairs) == sum(n * (n - 1) // 2 for d, n in per_doc.items() if split[d] == "train")  # all pairs
    assert all(0.0 <= r["judge.coherence"] <= 1.0 for r in pairs)
    assert all(r["order_ab.coherence"] is not None and r["order_ba.coherence"] is not None for r in pairs)
    state = json.loads((rd / "state.json").read_text())
    s = state["compare"]["summary"]
    assert (s["pairs"], s["calls"], s["failed"]) == (len(pairs), 2 * len(pairs), 0)
    card = json.loads((rd / "model" / "metric_card.json").read_text())
    assert f"{len(pairs)} judged pairs" in json.dumps(card)
    assert state["train"]["summary"]["train_rows"] == len({r[k] for r in pairs for k in ("id_a", "id_b")})
    # measured against the judge's ratings of the held-out sources
    assert rows and {(r["scorer"], r["target"]) for r in rows} == {("student", "judge")}
    assert all(r["aspect"] == "coherence" for r in rows)
    report = (rd / "report.md").read_text()
    assert f"comparison (compare stage): {len(pairs)} pairs" in report and "ranking loss, Eq. 3" in report
    # a re-run skips everything; a change of the pair choice re-runs compare and what follows, not annotate
    before = json.loads((rd / "state.json").read_text())
    Pipeline.from_file(path, rd, progress=False).run()
    assert json.loads((rd / "state.json").read_text()) == before
    _with(path, compare={"pairs": "random", "per_source": 1, "seed": 3})
    Pipeline.from_file(path, rd, progress=False).run()
    after = json.loads((rd / "state.json").read_text())
    assert after["annotate"] == before["annotate"]
    assert after["compare"]["fingerprint"] != before["compare"]["fingerprint"]
    assert after["compare"]["summary"]["pairs"] == sum(1 for d, n in per_doc.items() if split[d] == "train" and n > 1)
    assert after["train"]["fingerprint"] != before["train"]["fingerprint"]


def test_adjacent_pairs_follow_the_annotate_ratings(compared, tmp_path):
    _, path, p, _ = compared
    import shutil

    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    _with(path, compare={"pairs": "adjacent", "seed": 0, "per_source": None})
    Pipeline.from_file(path, run, progress=False).run()
    pairs = read_records(run / "pairs.jsonl", required=())
    rating = {r["id"]: r["judge.coherence"] for r in read_records(run / "labelled.jsonl")}
    by_doc: dict = {}
    for r in pairs:
        by_doc.setdefault(r["doc_id"], []).append(r)
    for doc, rs in by_doc.items():  # n - 1 neighbour pairs per source, neighbours in the rating order
        ids = {i for r in rs for i in (r["id_a"], r["id_b"])}
        assert len(rs) == len(ids) - 1
        order = sorted(ids, key=lambda i: (-rating[i], i))  # ties by id
        assert {frozenset((r["id_a"], r["id_b"])) for r in rs} == {frozenset(order[k:k + 2])
                                                                    for k in range(len(order) - 1)}


def test_failed_comparisons_leave_compare_undone(compared, tmp_path):
    _, path, p, _ = compared
    import shutil

    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({k: state[k] for k in ("collect", "annotate")}))
    (run / "judge_cache.sqlite").unlink()  # no comparison served from the cache
    _with(path, compare={"pairs": "all", "per_source": None, "options": {"fail_on": "Summary A"}})
    with pytest.raises(StageIncomplete, match="compare"):
        Pipeline.from_file(path, run, progress=False).run()
    assert "compare" not in json.loads((run / "state.json").read_text())
    code, out = _run_cli(path, run)
    assert code == 1 and "no judgment made" in out, out  # every comparison prompt failed


@pytest.mark.slow
def test_compare_stage_with_a_real_local_judge(smollm2_path, tiny_encoder, tmp_path):
    """SmolLM2 (llama.cpp, in process) generates, rates and compares; the tiny encoder learns the pairs."""
    path = _pipeline_file(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg["sources"]["limit"] = 5  # 3 training sources, 1 dev, 1 held out
    cfg["collect"]["generators"][0]["num_samples"] = 3
    cfg["train"]["encoder"] = str(tiny_encoder)
    cfg["compare"] = {"pairs": "random", "per_source": 2, "mode": "probs"}
    path.write_text(yaml.safe_dump(cfg))
    p = Pipeline.from_file(path, tmp_path / "run", progress=False)
    rows = p.run()
    pairs = read_records(p.run_dir / "pairs.jsonl", required=())
    assert len(pairs) >= 4
    # probs mode: P(first) from the A/B tokens of each order, combined so position bias cancels
    for r in pairs:
        ab, ba = r["order_ab.coherence"], r["order_ba.coherence"]
        assert 0.0 < ab < 1.0 and 0.0 < ba < 1.0
        assert r["judge.coherence"] == pytest.approx((ab + 1 - ba) / 2, abs=1e-9)
    state = json.loads((p.run_dir / "state.json").read_text())
    assert state["compare"]["summary"]["calls"] == 2 * len(pairs)
    assert rows and all(r["target"] == "judge" and r["aspect"] == "coherence" for r in rows)
