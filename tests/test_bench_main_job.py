"""benchmarks/bench_main_job.py's readers of a run folder (pure logic, on files written here in the layout
`csem run` writes: seeds.json, baselines.json, labelled.jsonl) and its report."""

import json

import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("bench_main_job")


def _row(aspect, scorer, level, rho):
    return {"aspect": aspect, "scorer": scorer, "target": "judge", "level": level, "spearman": rho}


@pytest.fixture()
def run_dir(tmp_path):
    per_seed = {"12": [_row("coherence", "student", "summary", 0.7), _row("coherence", "student", "dataset", 0.1),
                       _row("relevance", "student", "summary", 0.5)],
                "13": [_row("coherence", "student", "summary", 0.5), _row("relevance", "student", "summary", 0.3)]}
    (tmp_path / "seeds.json").write_text(json.dumps({"seeds": [12, 13], "per_seed": per_seed}))
    (tmp_path / "meta.json").write_text(json.dumps([{**_row("coherence", "student", "summary", 0.65),
                                                     "spearman_ci": [0.3, 0.9]},
                                                    {**_row("coherence", "student", "summary", 0.1), "target": "human"},
                                                    _row("coherence", "student", "dataset", 0.2)]))
    (tmp_path / "baselines.json").write_text(json.dumps([
        _row("coherence", "length", "summary", 0.8), _row("coherence", "length", "dataset", 0.2),
        _row("relevance", "system prior", "summary", 0.25)]))
    rows = [{"judge.coherence": 3.0, "judge.coherence.mass": 0.9, "judge.relevance": 4.0},
            {"judge.coherence": 5.0, "judge.relevance": 2.0, "human.coherence": 1.0}]
    (tmp_path / "labelled.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path


def test_agreement_reads_summary_level_rows_per_seed_and_baselines(bench, run_dir):
    agree = bench.agreement(run_dir)
    coh = agree["coherence"]
    assert coh["per_seed"] == {"12": 0.7, "13": 0.5}  # the dataset-level row is not a summary-level figure
    assert coh["mean"] == pytest.approx(0.6) and coh["sd"] == pytest.approx(0.1414, abs=1e-4)
    assert (coh["min"], coh["max"]) == (0.5, 0.7)
    assert coh["baselines"] == {"length": 0.8}
    assert coh["model"] == 0.65 and "model" not in agree["relevance"]  # the run's own student (meta.json)
    assert coh["model_ci"] == [0.3, 0.9]  # vs the judge, not the human row
    assert agree["relevance"]["baselines"] == {"system prior": 0.25}


def test_judge_range_skips_the_mass_columns(bench, run_dir):
    rng = bench.judge_range(run_dir)
    assert set(rng) == {"coherence", "relevance"}
    assert (rng["coherence"]["min"], rng["coherence"]["max"], rng["coherence"]["n"]) == (3.0, 5.0, 2)


def test_missing_outputs_names_what_the_run_folder_lacks(bench, run_dir):
    assert bench.missing_outputs(run_dir) == ["state.json"]
    (run_dir / "state.json").write_text("{}")
    (run_dir / "seeds.json").unlink()
    assert bench.missing_outputs(run_dir) == ["seeds.json"]


@pytest.fixture(scope="module")
def reliability():
    yield from load_benchmark("bench_main_job_reliability")


def test_reliability_summary_is_a_per_article_spearman_with_its_interval(reliability):
    """Pure logic on values written here: two articles, the second wording reversing one of them."""
    x = [1, 2, 3, 1, 2, 3]
    y = [1, 2, 3, 3, 2, 1]
    groups = ["a", "a", "a", "b", "b", "b"]
    s = reliability.summary(x, y, groups)
    assert s["spearman"] == pytest.approx(0.0) and s["articles"] == 2 and s["pairs"] == 6
    low, high = s["ci"]
    assert low == pytest.approx(-1.0) and high == pytest.approx(1.0)  # resampling two articles: all, none or one
    assert reliability.summary(x, x, groups)["ci"] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_reliability_refuses_a_folder_without_a_finished_run(reliability, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["bench_main_job_reliability.py", "--run-dir", str(tmp_path),
                                     "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="no candidates.jsonl"):
        reliability.main()


@pytest.fixture(scope="module")
def init_script():
    yield from load_benchmark("main_job_init")


def test_init_texts_are_whole_realsumm_training_articles_never_summeval(init_script):
    """On the committed teacher pool: the initial student's texts are whole articles (every summary of
    each), training split only, REALSumm only, no article that SummEval also has; seeded."""
    import teacher_pool as tp

    recs = init_script.select(200)
    sources, cands = tp.load_pool()
    article = {sid: s["article"] for sid, s in sources.items()}
    summeval = {article[c["source_id"]] for c in cands if c["dataset"] == "summeval"}
    pool = {c["id"]: c for c in cands}
    assert len(recs) >= 200
    assert all(pool[r["id"]]["split"] == "train" and pool[r["id"]]["dataset"] == "realsumm" for r in recs)
    assert not {article[r["doc_id"]] for r in recs} & summeval
    for sid in {r["doc_id"] for r in recs}:  # whole articles
        want = {c["id"] for c in cands if c["source_id"] == sid and c["split"] == "train"}
        assert {r["id"] for r in recs if r["doc_id"] == sid} == want
    assert init_script.select(200) == recs and init_script.select(200, seed=1) != recs


@pytest.fixture(scope="module")
def recipe_bench():
    yield from load_benchmark("bench_main_job_recipe")


def test_csem_train_default_recipe_drops_the_pipelines_warm_start(recipe_bench):
    """On a main job that warm-starts an ensemble of 5 (the shipped one until 7 December): the 'csem train
    default' recipe is csem train's default student (no warm start, one member), and a warm-start recipe starts
    from --init."""
    from csem.model import ModelConfig, TrainConfig
    from csem.pipeline.config import load_pipeline

    t = load_pipeline("package:summarization.yaml")[0].train
    t = t.model_copy(update={"model": {**t.model, "members": 5},
                             "options": {**t.options, "init": "package:news-relevance-minilm", "lr": 3e-4}})
    config, tc = recipe_bench.configs_of(t, recipe_bench.RECIPES["csem train default"], 12)
    assert tc.init is None and config.members == 1 and tc.seed == 12
    assert (tc.lr, tc.max_epochs, tc.contrast_per_record) == (TrainConfig().lr, TrainConfig().max_epochs, 0)
    assert config.feature_set == ModelConfig().feature_set
    recipe_bench.INIT = "/some/student"
    try:
        config, tc = recipe_bench.configs_of(t, recipe_bench.RECIPES["warm start 1 epoch lr 1e-3 x5 seed ensemble"], 3)
    finally:
        recipe_bench.INIT = None
    assert tc.init == "/some/student" and config.members == 5 and tc.seed == 15


def test_recipe_baselines_include_the_system_prior(recipe_bench):
    """The system prior (each candidate scored by its system's mean training label) stands beside the lexical
    baselines: here the judge prefers system a in every article, and the prior says so from training alone."""
    src = "The council voted to close the bridge for repairs. Buses will still cross. Work starts in May."
    cands = {"a": "The council voted to close the bridge.", "b": "Buses cross in May the bridge work.",
             "c": "Work starts."}

    def rows(docs, judged):
        return [{"id": f"{d}/{s}", "doc_id": d, "system_id": s, "source": src, "candidate": cands[s],
                 "judge.relevance": judged[s] + 0.1 * i} for i, d in enumerate(docs) for s in cands]

    train = rows(["d1", "d2", "d3"], {"a": 4.0, "b": 2.0, "c": 3.0})
    test = rows(["d4", "d5"], {"a": 4.5, "b": 1.5, "c": 3.5})
    res = recipe_bench.baselines(train, test, ["judge.relevance"])
    assert res["system prior"]["judge.relevance"] == pytest.approx(1.0)
    assert set(res) >= {"length", "extractiveness", "overlap features (least squares)"}


@pytest.fixture(scope="module")
def gate_bench():
    yield from load_benchmark("bench_main_job_gate")


def test_gate_bench_splits_generated_candidates_by_a_final_stop(gate_bench, tmp_path, monkeypatch):
    rows = [{"system_id": "g", "candidate": "The bridge closes.", "judge.coherence": 4.0},
            {"system_id": "g", "candidate": 'He said "we go."', "judge.coherence": 3.0},
            {"system_id": "g", "candidate": "The bridge will be", "judge.coherence": 5.0},
            {"system_id": "reference", "candidate": "A reference without a stop", "judge.coherence": 1.0}]
    res = gate_bench.cut_vs_complete(rows, ["judge.coherence"])
    assert res == {"cut": {"n": 1, "judge.coherence": 5.0}, "complete": {"n": 2, "judge.coherence": 3.5}}
    import sys

    monkeypatch.setattr(sys, "argv", ["bench_main_job_gate.py", "--run-dirs", str(tmp_path)])
    with pytest.raises(SystemExit) as exc:  # not a finished run folder: a usage error before any work
        gate_bench.main()
    assert exc.value.code == 2
