"""The whole loop: every stage writes its file, a re-run skips finished stages, --from forces, changed
settings re-run only what follows (fast tier: the FAKE backend generates and judges, the tiny random
encoder is trained); a killed ``csem run`` resumes annotate from the judge cache (slow tier: SmolLM2
generates and judges, MiniLM is trained, in a real subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from csem.data.records import read_records, write_records
from csem.pipeline.config import load_pipeline
from csem.pipeline.runner import Pipeline, split_sources

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "csem" / "pipeline" / "examples"


def _pipeline_file(tmp: Path, fast: tuple[str, Path] | None = None, **over) -> Path:
    """A pipeline over 8 example sources; ``fast`` = (fake backend URI, tiny encoder folder) replaces
    the real generator, judge and encoder."""
    src = read_records(EXAMPLES / "news_sources.jsonl", required=("source",))[:8]
    write_records(src, tmp / "sources.jsonl")
    cfg = {
        "name": "tiny",
        "sources": {"path": "sources.jsonl"},
        "split": {"test_fraction": 0.25, "dev_fraction": 0.2, "seed": 0},
        "collect": {"task": "summarize", "generators": [{"uri": "llama-cpp:smollm2", "name": "smol", "num_samples": 2}],
                    "decoding": {"max_tokens": 20}, "seed": 0},
        "annotate": {"judge": "llama-cpp:smollm2", "rubrics": ["csem/summ-coherence-ref-free"], "mode": "probs"},
        "train": {"encoder": "minilm", "mode": "ref-free", "model": {"hidden_sizes": [64], "max_length": 128},
                  "options": {"max_epochs": 2, "batch_size": 8, "frozen_epochs": 0, "num_threads": 2}},
    }
    if fast is not None:
        cfg["collect"]["generators"] = [{"uri": fast[0], "name": "fake", "num_samples": 2}]
        cfg["annotate"]["judge"] = fast[0]
        cfg["train"]["encoder"] = str(fast[1])
    for k, v in over.items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) else v
    path = tmp / "pipe.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module", params=["fake", pytest.param("real", marks=pytest.mark.slow)])
def finished_run(request, tmp_path_factory):
    """The loop on the fake backend and the tiny encoder (fast tier), or on SmolLM2 and MiniLM (slow tier).
    Returns (folder, pipeline, agreement rows, ``fast`` argument of :func:`_pipeline_file`)."""
    fast = None
    if request.param == "fake":
        fast = (request.getfixturevalue("fake_llm"), request.getfixturevalue("tiny_encoder"))
    tmp = tmp_path_factory.mktemp(f"pipe_{request.param}")
    p = Pipeline.from_file(_pipeline_file(tmp, fast), tmp / "run", progress=False)
    rows = p.run()
    return tmp, p, rows, fast


def test_every_stage_writes_its_file(finished_run):
    tmp, p, rows, _ = finished_run
    rd = p.run_dir
    for f in ("candidates.jsonl", "labelled.jsonl", "model/model.safetensors", "model/metric_card.json",
              "scored.jsonl", "meta.json", "report.md", "report.html", "figures/student_vs_judge_coherence.png"):
        assert (rd / f).exists(), f
    cands = read_records(rd / "scored.jsonl")
    assert {r["split"] for r in cands} == {"train", "dev", "test"}
    by_doc = {}
    for r in cands:
        by_doc.setdefault(r["doc_id"], set()).add(r["split"])
    assert all(len(s) == 1 for s in by_doc.values()), "a source never straddles two splits"
    labelled = read_records(rd / "labelled.jsonl")
    scored = [r for r in labelled if r.get("judge.coherence") is not None]
    assert scored and all(1.0 <= r["judge.coherence"] <= 5.0 for r in scored)
    assert rows and {r["scorer"] for r in rows} == {"student"} and {r["target"] for r in rows} == {"judge"}
    summary = next(r for r in rows if r["level"] == "dataset")
    assert summary["n_pairs"] == sum(1 for r in read_records(rd / "scored.jsonl")
                                     if r["split"] == "test" and r.get("judge.coherence") is not None)
    state = json.loads((rd / "state.json").read_text())
    assert state["annotate"]["summary"]["judged"] == len(labelled)
    report = (rd / "report.md").read_text()
    assert "Agreement on held-out sources" in report and "samples/s" in report
    meta = json.loads((rd / "meta.json").read_text())  # each figure with its 95% interval over resampled sources
    for r in meta:
        assert r["spearman"] is None or -1 <= r["spearman_ci"][0] <= r["spearman_ci"][1] <= 1
    assert "spearman 95% CI" in report
    base = json.loads((rd / "baselines.json").read_text())
    assert {r["scorer"] for r in base} == {"length", "extractiveness", "system prior", "overlap fit"}
    for f in ("curve.json", "verdict.json", "gate.json"):  # the run says whether to trust its student
        assert (rd / f).exists(), f
    verdict = json.loads((rd / "verdict.json").read_text())
    assert verdict["status"] in ("do-not-use", "not-yet", "use-with-care", "replace")
    assert report.startswith("# csem run report") and report.index("## Verdict") < report.index("## Data")
    assert json.loads((rd / "model" / "metric_card.json").read_text())["verdict"]["status"] == verdict["status"]
    from csem.pipeline.trust import trust_lines  # what `csem run` prints after the stages

    lines = trust_lines(p)
    assert lines[-1] == f"verdict: {verdict['headline']}"
    assert any(line.startswith("acceptability gate, coherence: floored ") for line in lines)
    assert {r["target"] for r in base} == {"judge"} and "Trivial baselines on the same held-out sources" in report
    assert p.baseline_rows() == base


def test_a_run_parses_each_file_of_its_folder_once(finished_run, tmp_path, monkeypatch):
    """labelled.jsonl is read by compare, train, score, seeds, mrt and for the label columns; the run
    folder object parses it once (scored.jsonl: once by meta_eval, once by the report)."""
    import csem.data.records as records_module

    tmp, p, _, _ = finished_run
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    parsed: list[str] = []
    real = records_module._iter_raw

    def counting(path, fmt):
        parsed.append(Path(path).name)
        return real(path, fmt)

    monkeypatch.setattr(records_module, "_iter_raw", counting)
    again = Pipeline.from_file(tmp / "pipe.yaml", run, progress=False)
    again.run(from_stage="train")
    assert parsed.count("labelled.jsonl") == 1
    assert again.folder.parses == {"labelled.jsonl": 1, "scored.jsonl": 1}
    # the label scales come from what annotate wrote beside labelled.jsonl, not from the rubrics again
    assert again.scales() == {"judge.coherence": (1.0, 5.0)} == again.label_ranges()


def test_stages_are_declared_as_data():
    from csem.pipeline.config import STAGES
    from csem.pipeline.runner import STAGE_REGISTRY

    assert tuple(s.name for s in STAGE_REGISTRY) == STAGES
    assert {s.name for s in STAGE_REGISTRY if s.enabled(load_pipeline(EXAMPLES / "summarization.yaml")[0])} >= {
        "collect", "annotate", "train", "score", "meta_eval", "report"}


def test_rerun_skips_and_from_forces(finished_run):
    tmp, p, rows, _ = finished_run
    before = json.loads((p.run_dir / "state.json").read_text())
    again = Pipeline.from_file(tmp / "pipe.yaml", p.run_dir, progress=False)
    assert again.run() == rows
    after = json.loads((p.run_dir / "state.json").read_text())
    assert after == before, "nothing re-ran"
    again.run(from_stage="meta-eval")
    forced = json.loads((p.run_dir / "state.json").read_text())
    assert forced["meta_eval"]["finished_at"] >= before["meta_eval"]["finished_at"]
    assert forced["train"] == before["train"]
    with pytest.raises(ValueError, match="unknown stage"):
        again.run(from_stage="fit")


def test_changed_settings_rerun_only_downstream(finished_run, tmp_path):
    tmp, p, _, fast = finished_run
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    before = json.loads((run / "state.json").read_text())
    # a different train setting: collect and annotate stay, train and later stages run again
    path = _pipeline_file(tmp_path, fast, train={"options": {"max_epochs": 1, "batch_size": 8, "frozen_epochs": 0,
                                                             "num_threads": 2}})
    Pipeline.from_file(path, run, progress=False).run()
    after = json.loads((run / "state.json").read_text())
    assert after["collect"] == before["collect"] and after["annotate"] == before["annotate"]
    assert after["train"]["fingerprint"] != before["train"]["fingerprint"]
    # a different split: still no new collect or annotate (the split is applied at training time)
    path = _pipeline_file(tmp_path, fast, split={"seed": 3})
    Pipeline.from_file(path, run, progress=False).run()
    again = json.loads((run / "state.json").read_text())
    assert again["collect"] == before["collect"] and again["annotate"] == before["annotate"]
    assert again["train"]["fingerprint"] != after["train"]["fingerprint"]
    assert again["train"]["summary"]["test_sources"] == 2


def test_killed_annotate_resumes_from_the_judge_cache(finished_run, tmp_path):
    """Kill `csem run` during annotate; the re-run judges only what the cache lacks (a real subprocess:
    SmolLM2 only, since the subprocess cannot see the in-process fake backend)."""
    tmp, p, _, fast = finished_run
    if fast is not None:
        pytest.skip("needs the real judge in a subprocess (the slow tier runs it)")
    run = tmp_path / "run"
    run.mkdir()
    for f in ("candidates.jsonl", "state.json"):
        shutil.copy(p.run_dir / f, run / f)
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({"collect": state["collect"]}))
    path = _pipeline_file(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "csem", "run", str(path), "--run-dir", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    import sqlite3
    import time

    deadline = time.time() + 120
    n_cached = 0
    while time.time() < deadline and proc.poll() is None:
        if (run / "judge_cache.sqlite").exists():
            try:
                with sqlite3.connect(run / "judge_cache.sqlite") as con:
                    n_cached = con.execute("select count(*) from judgments").fetchone()[0]
            except sqlite3.OperationalError:
                n_cached = 0
            if n_cached >= 3:
                break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    total = len(read_records(run / "candidates.jsonl"))
    assert 3 <= n_cached < total, "the kill must land mid-annotate"
    assert not (run / "labelled.jsonl").exists()
    Pipeline.from_file(path, run, progress=False).run()
    st = json.loads((run / "state.json").read_text())
    assert st["collect"] == state["collect"], "collect was not redone"
    assert st["annotate"]["summary"]["cached"] >= n_cached
    assert st["annotate"]["summary"]["judged"] + st["annotate"]["summary"]["cached"] == total
    a = {r["id"]: r["judge.coherence"] for r in read_records(run / "labelled.jsonl")}
    b = {r["id"]: r["judge.coherence"] for r in read_records(p.run_dir / "labelled.jsonl")}
    assert a.keys() == b.keys()
    assert all(a[k] == pytest.approx(b[k], abs=1e-6) for k in a if b[k] is not None)


def test_bad_pipeline_files_are_explained(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsources: {path: s.jsonl}\ncollect: {generators: []}\nannotate: {rubrics: [a], judge: local, colour: red}\n")
    with pytest.raises(ValueError, match=r"annotate.colour"):
        load_pipeline(bad)
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_pipeline(bad)
    with pytest.raises(FileNotFoundError):
        load_pipeline(tmp_path / "missing.yaml")
    path = _pipeline_file(tmp_path, sources={"path": "nope.jsonl"})
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        Pipeline.from_file(path, tmp_path / "run")


def test_split_is_by_source_and_seeded():
    from csem.pipeline.config import SplitConfig

    ids = [f"d{i}" for i in range(20)]
    a = split_sources(ids, SplitConfig(test_fraction=0.25, dev_fraction=0.2, seed=1))
    assert a == split_sources(list(reversed(ids)), SplitConfig(test_fraction=0.25, dev_fraction=0.2, seed=1))
    assert sum(v == "test" for v in a.values()) == 5 and sum(v == "dev" for v in a.values()) == 3
    with pytest.raises(ValueError, match="unknown sources"):
        split_sources(ids, SplitConfig(test_ids=["zz"]))


def test_shipped_example_pipelines_validate():
    for name in ("summarization.yaml", "translation.yaml", "instruction-following.yaml"):
        cfg, base = load_pipeline(f"package:{name}")
        assert (base / cfg.sources.path.split(":", 1)[1]).exists()
        assert cfg.collect.decoding.top_k == 50
    from csem.rubrics import load_rubric

    assert load_rubric(str(EXAMPLES / "instruction-following.rubric.yaml")).aspect_names == ["helpfulness"]


# --------------------------------------------------------------------------- train.seeds: the spread over seeds

def test_seeds_stage_reports_the_spread_and_reruns_alone(finished_run, tmp_path):
    """``train.seeds`` adds the seeds stage: the train stage's student is untouched, one more student per
    other seed is trained on the same annotated data, and seeds.json holds each seed's agreement table and
    the mean, sd, min and max over seeds; changing only the seeds re-runs only that stage and the report."""
    import numpy as np

    tmp, p, rows, fast = finished_run
    if fast is None:
        pytest.skip("the seeds stage's logic is model-independent; the fast tier runs it on the tiny encoder")
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    before = json.loads((run / "state.json").read_text())
    path = _pipeline_file(tmp_path, fast, train={"seeds": [12, 5, 7]})
    pipe = Pipeline.from_file(path, run, progress=False)
    assert pipe.train_seed() == 12  # TrainConfig's default, as the train stage used
    assert pipe.run() == rows, "the single-seed output is the train stage's student, as without seeds"
    st = json.loads((run / "state.json").read_text())
    for stage in ("collect", "annotate", "train", "score", "meta_eval"):
        assert st[stage] == before[stage], f"{stage} re-ran"
    assert st["seeds"]["summary"]["trained"] == 2 and set(st["seeds"]["summary"]["seconds_per_seed"]) == {"5", "7"}
    data = json.loads((run / "seeds.json").read_text())
    assert data["seeds"] == [12, 5, 7] and data["train_seed"] == 12
    assert data["per_seed"]["12"] == json.loads((run / "meta.json").read_text())
    key = lambda r: (r["aspect"], r["scorer"], r["target"], r["level"])  # noqa: E731
    for seed in ("5", "7"):
        assert [key(r) for r in data["per_seed"][seed]] == [key(r) for r in rows]
        assert {r["n_pairs"] for r in data["per_seed"][seed]} == {r["n_pairs"] for r in rows}
    assert data["per_seed"]["5"] != data["per_seed"]["12"], "another seed trains another student"
    assert len(data["spread"]) == 3 * len(rows)
    for s in data["spread"]:
        vals = [next(r for r in data["per_seed"][seed] if key(r) == key(s))[s["method"]] for seed in ("12", "5", "7")]
        assert s["values"] == vals
        got = np.array([v for v in vals if v is not None], dtype=float)
        assert s["n_seeds"] == len(got)
        if len(got):
            assert s["mean"] == pytest.approx(got.mean(), abs=1e-4) and s["min"] == got.min() and s["max"] == got.max()
        if len(got) > 1:
            assert s["sd"] == pytest.approx(got.std(ddof=1), abs=1e-4)
    assert pipe.seed_spread() == data["spread"]
    report = (run / "report.md").read_text()
    assert "## Spread over training seeds" in report and "seed 12's student" in report
    assert "Spread over training seeds" in (run / "report.html").read_text()
    assert not [d for d in run.iterdir() if d.name.startswith("seed") and d.is_dir()], "per-seed students are deleted"

    # fewer seeds: only the seeds stage and the report run again
    path = _pipeline_file(tmp_path, fast, train={"seeds": [12, 5]})
    Pipeline.from_file(path, run, progress=False).run()
    again = json.loads((run / "state.json").read_text())
    for stage in ("collect", "annotate", "train", "score", "meta_eval"):
        assert again[stage] == before[stage], f"{stage} re-ran"
    assert again["seeds"]["fingerprint"] != st["seeds"]["fingerprint"] and again["seeds"]["summary"]["trained"] == 1
    assert json.loads((run / "seeds.json").read_text())["per_seed"]["5"] == data["per_seed"]["5"], \
        "training is deterministic given the seed"

    # no seeds: the pipeline is what it was (no seeds section in the report)
    path = _pipeline_file(tmp_path, fast)
    plain = Pipeline.from_file(path, run, progress=False)
    plain.run()
    assert plain.seed_spread() is None and "Spread over training seeds" not in (run / "report.md").read_text()
    assert json.loads((run / "state.json").read_text())["train"] == before["train"]


def test_seeds_stage_retrains_the_train_seed_identically(finished_run, tmp_path):
    """The seeds stage reuses the train stage's student for its own seed; that is sound because a student
    trained in the seeds stage with the same seed agrees with the judge exactly as the train stage's did."""
    tmp, p, rows, fast = finished_run
    if fast is None:
        pytest.skip("model-independent; run on the tiny encoder in the fast tier")
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    path = _pipeline_file(tmp_path, fast, train={"seeds": [12],
                                                 "options": {"max_epochs": 2, "batch_size": 8, "frozen_epochs": 0,
                                                             "num_threads": 2, "seed": 99}})
    Pipeline.from_file(path, run, progress=False).run()
    st = json.loads((run / "state.json").read_text())
    assert st["seeds"]["summary"]["trained"] == 1
    again = json.loads((run / "seeds.json").read_text())["per_seed"]["12"]
    metric = lambda r: [r[m] for m in ("spearman", "kendall", "pearson")]  # noqa: E731
    assert [pytest.approx(metric(r), abs=1e-3) for r in rows] == [metric(r) for r in again]


def test_seeds_cli_prints_the_spread(finished_run, tmp_path):
    from typer.testing import CliRunner

    from csem.cli import _load_commands, app

    tmp, p, _, fast = finished_run
    if fast is None:
        pytest.skip("in-process CLI on the fake backend (fast tier)")
    _load_commands()
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    path = _pipeline_file(tmp_path, fast, train={"seeds": [12, 3]})
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(run)])
    assert res.exit_code == 0, res.output
    assert "spread over training seeds" in res.output and "Spearman" in res.output


def test_baseline_rows_score_length_extractiveness_and_the_system_prior():
    """Pure logic on hand-made records: a judge that tracks length gives length a summary-level Spearman of
    1; extractiveness and the system prior are there with their counts (an unseen system is missing)."""
    from csem.pipeline.agreement import baseline_rows

    src = "the council voted to close the bridge for repairs on tuesday"
    def rec(doc, system, cand, score):
        return {"doc_id": doc, "system_id": system, "source": src, "candidate": cand, "judge.coherence": score}
    train = [rec("t", "a", "the council voted", 2.0), rec("t", "b", "the council voted to close the bridge", 4.0)]
    test = [rec(d, s, c, y) for d in ("x", "y") for s, c, y in
            (("a", "council", 1.0), ("b", "the council voted to close", 3.0), ("new", "a bridge closes for long repairs on tuesday", 5.0))]
    rows = {(r["scorer"], r["level"]): r for r in baseline_rows(train, test, ["judge.coherence"])}
    assert rows[("length", "summary")]["spearman"] == pytest.approx(1.0)
    assert rows[("length", "summary")]["n_groups"] == 2 and rows[("length", "dataset")]["n_pairs"] == 6
    assert ("extractiveness", "summary") in rows
    prior = rows[("system prior", "summary")]
    assert prior["n_missing"] == 2 and prior["spearman"] == pytest.approx(1.0)  # 'new' has no training label
    assert all(r["aspect"] == "coherence" and r["target"] == "judge" for r in rows.values())


def test_seed_spread_skips_undefined_figures_and_bad_seed_lists_are_explained(tmp_path):
    from csem.pipeline.agreement import seed_spread

    row = {"aspect": "coherence", "scorer": "student", "target": "judge", "level": "summary"}
    per_seed = {"1": [{**row, "spearman": 0.5, "kendall": 0.4, "pearson": None}],
                "2": [{**row, "spearman": 0.1, "kendall": 0.2, "pearson": None}],
                "3": [{**row, "spearman": None, "kendall": 0.0, "pearson": 0.3}]}
    out = {r["method"]: r for r in seed_spread(per_seed)}
    assert out["spearman"]["n_seeds"] == 2 and out["spearman"]["mean"] == pytest.approx(0.3)
    assert out["spearman"]["sd"] == pytest.approx(0.2828, abs=1e-4) and out["spearman"]["values"] == [0.5, 0.1, None]
    assert out["kendall"]["min"] == 0.0 and out["kendall"]["max"] == 0.4 and out["kendall"]["n_seeds"] == 3
    assert out["pearson"]["n_seeds"] == 1 and out["pearson"]["sd"] is None and out["pearson"]["mean"] == 0.3
    for seeds, msg in (([], "train.seeds"), ([1, 2, 1], "repeats a seed")):
        path = _pipeline_file(tmp_path, train={"seeds": seeds})
        with pytest.raises(ValueError, match=msg):
            load_pipeline(path)


def test_collect_fingerprint_ignores_unset_decoding_fields(tmp_path):
    """An unset decoding field (None) inherits, so it is not part of the collect stage's fingerprint: a
    field csem adds to GenerateConfig later, unset, does not re-run the collect (and annotate) of a finished
    run. A set field does change it."""
    from csem.pipeline.state import fingerprint

    def settings(**decoding):
        path = _pipeline_file(tmp_path, collect={"decoding": decoding,
                                                 "generators": [{"uri": "llama-cpp:smollm2", "name": "smol",
                                                                 "num_samples": 2, "decoding": decoding}]})
        p = Pipeline.from_file(path, tmp_path / "run", progress=False)
        return fingerprint({"collect": p.collect_settings()}, []), p.collect_settings()

    plain, s = settings(max_tokens=20)
    assert s["decoding"] == {"max_tokens": 20} and s["generators"][0]["decoding"] == {"max_tokens": 20}
    assert settings(max_tokens=20, top_p=None, stop=None)[0] == plain
    assert settings(max_tokens=20, top_p=0.9)[0] != plain


def test_collect_fingerprint_of_truncated(tmp_path):
    """``collect.truncated`` at its default (``keep``, the behaviour before it existed) leaves a finished run's
    collect fingerprint as it was; ``trim`` or ``drop`` changes it."""
    from csem.pipeline.state import fingerprint

    def fp(**extra):
        path = _pipeline_file(tmp_path, collect={"generators": [{"uri": "llama-cpp:smollm2", "name": "smol"}],
                                                 **extra})
        s = Pipeline.from_file(path, tmp_path / "run", progress=False).collect_settings()
        return fingerprint({"collect": s}, []), s

    plain, s = fp()
    assert "truncated" not in s and fp(truncated="keep")[0] == plain
    assert len({plain, fp(truncated="trim")[0], fp(truncated="drop")[0]}) == 3
