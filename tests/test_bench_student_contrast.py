"""benchmarks/bench_student_contrast.py's pure parts: the two SummEval splits and the seed-ensemble table
(pure logic on rows written here; the stages themselves train real students and run as the benchmark)."""

import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("bench_student_contrast")


def test_splits_keep_the_system_disjoint_halves_apart(bench):
    ids = [8, 9, 10, 11, 12, 13, 14, 15, 17, 20, 22, 23]  # SummEval's 12 systems with GPT-4 ratings
    train = [{"doc_id": "d0", "system_id": f"M{i}"} for i in ids]
    test = [{"doc_id": "d9", "system_id": f"M{i}"} for i in ids]
    splits, systems = bench.splits_of(train, test)
    assert splits["standard"] == (train, test)
    tr, te = splits["disjoint"]
    assert len(systems["train"]) == len(systems["test"]) == 6
    assert {r["system_id"] for r in tr} == set(systems["train"])
    assert {r["system_id"] for r in te} == set(systems["test"])
    assert not set(systems["train"]) & set(systems["test"])
    # the student benchmark's split, the one issue 24's targets name (the contrast benchmark drew another
    # one from its own --seed until 7 December 2026)
    assert systems == {"train": ["M14", "M20", "M22", "M23", "M8", "M9"],
                       "test": ["M10", "M11", "M12", "M13", "M15", "M17"]}


def test_final_rows_of_another_disjoint_split_are_dropped(bench, tmp_path, monkeypatch):
    """Rows on file trained on another system-disjoint split (or on an unrecorded one) never stand beside
    this split's rows; the standard split's rows stay; the split's systems are written."""
    import argparse
    import json

    out = tmp_path / "contrast"
    stale = {"meta": {"run": "before"}, "final": {
        "standard": {"baselines": {}, "recipe A": {"seeds": {"12": {}}}},
        "disjoint": {"baselines": {"x": {"average": {"spearman": 0.3, "kendall": 0.2}}}, "recipe A": {"seeds": {"12": {}}}}}}
    out.with_suffix(".json").write_text(json.dumps(stale))
    ids = [8, 9, 10, 11, 12, 13, 14, 15, 17, 20, 22, 23]
    train = [{"doc_id": "d0", "system_id": f"M{i}"} for i in ids]
    test = [{"doc_id": "d9", "system_id": f"M{i}"} for i in ids]
    monkeypatch.setattr(bench, "fit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stop after the split check")))
    monkeypatch.setattr(bench.S, "system_prior", lambda tr, te: None)
    monkeypatch.setattr(bench.S, "row_of", lambda *a, **k: {"average": {"spearman": 0.1, "kendall": 0.1}})
    monkeypatch.setattr(bench.S, "lexical_baselines", lambda *a, **k: {})

    def run(split):
        args = argparse.Namespace(out=str(out), resume=True, threads=1, seeds=1, seed=0, split=split,
                                  final_recipes="old", assume_chosen="")
        b = bench.Bench(args)
        with pytest.raises(RuntimeError, match="stop after the split check"):
            bench.stage_final(b, train, test)
        b.save()
        return json.loads(out.with_suffix(".json").read_text())["final"]

    disk = run("standard")  # a run of the other split neither drops nor vouches for the stale rows
    assert "disjoint_systems" not in disk and "recipe A" in disk["disjoint"]
    disk = run("disjoint")
    assert disk["disjoint_systems"]["train"] == ["M14", "M20", "M22", "M23", "M8", "M9"]
    assert "recipe A" not in disk.get("disjoint", {})  # the stale split's rows are gone
    assert "recipe A" in disk["standard"]  # the other split is untouched


def test_ensemble_table_puts_the_members_spread_beside_the_ensembles(bench):
    ens = {"disjoint": {"recipe": "labels only", "members": 5,
                        "spearman": {"mean": 0.30, "sd": 0.01, "min": 0.29, "max": 0.31, "n": 3},
                        "single": {"mean": 0.28, "sd": 0.03, "min": 0.24, "max": 0.32, "n": 15}}}
    lines = bench.render({"meta": {}, "ensemble": ens})
    text = "\n".join(lines)
    assert "## Seed ensembles of the default recipe" in text
    row = next(line for line in text.splitlines() if line.startswith("| disjoint"))
    assert row == "| disjoint | 5 | 3 | 0.300 ± 0.010 | 0.290-0.310 | 0.280 ± 0.030 | 0.240-0.320 | 0.020 |"


def test_warm_start_recipes_need_init_and_get_their_own_model_folders(bench, monkeypatch):
    warm = [n for n in bench.RECIPES if bench.needs_init(n)]
    assert warm and not bench.needs_init(bench.OLD)
    assert len({bench.slug(n) for n in warm}) == len(warm)  # one model folder per warm recipe
    assert all(bench.slug(n) not in ("old", "contrast") for n in warm)
    monkeypatch.setattr(bench, "INIT", None)
    with pytest.raises(SystemExit, match="--init"):
        bench.fit([], warm[0], 12, 1)


@pytest.fixture(scope="module")
def pool_student():
    yield from load_benchmark("teacher_pool_student")


def test_exclude_dataset_drops_every_candidate_on_that_datasets_articles(pool_student):
    """On the committed teacher pool: no SummEval article is left, the pool's article key also drops the
    other datasets' candidates on SummEval articles, and nothing else is dropped."""
    import teacher_pool as tp

    sources, cands = tp.load_pool()
    article = {sid: s["article"] for sid, s in sources.items()}
    summeval = {article[c["source_id"]] for c in cands if c["dataset"] == "summeval"}
    train = [{"doc_id": c["source_id"], "dataset": c["dataset"]} for c in cands if c["split"] == "train"]
    kept, dropped = pool_student.without_dataset(train, "summeval")
    assert dropped == len(train) - len(kept) > 0
    assert not [r for r in kept if r["dataset"] == "summeval" or article[r["doc_id"]] in summeval]
    shared = [r for r in train if r["dataset"] != "summeval" and article[r["doc_id"]] in summeval]
    assert shared  # REALSumm / QAGS candidates on SummEval articles exist and are dropped too
    assert dropped == sum(r["dataset"] == "summeval" for r in train) + len(shared)
    with pytest.raises(SystemExit, match="no candidate"):
        pool_student.without_dataset(train, "no-such-dataset")


def test_recipe_indices_and_cv_seeds_are_checked(bench, capsys):
    """``--cv-recipes`` / ``--final-recipes`` indices name RECIPES; a bad one is a usage error (exit 2);
    ``--cv-seeds`` must be a whole number >= 1."""
    import argparse

    assert bench.recipes_at("0,1", "--cv-recipes") == list(bench.RECIPES)[:2]
    for bad in ("99", "x", "0,,1"):
        with pytest.raises(SystemExit) as exc:
            bench.recipes_at(bad, "--cv-recipes")
        assert exc.value.code == 2 and "--cv-recipes" in capsys.readouterr().err
    assert bench.positive("3") == 3
    for bad in ("0", "-1", "two"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.positive(bad)


def test_aspect_benchmark_drops_rows_of_another_disjoint_split(monkeypatch):
    """bench_student_aspects.py takes the same split: disjoint rows on file without (or with other) recorded
    systems are dropped before training; the standard split's rows stay."""
    import argparse

    gen = load_benchmark("bench_student_aspects")
    aspects = next(gen)
    try:
        ids = [8, 9, 10, 11, 12, 13, 14, 15, 17, 20, 22, 23]
        train = [{"doc_id": "d0", "system_id": f"M{i}"} for i in ids]
        test = [{"doc_id": "d9", "system_id": f"M{i}"} for i in ids]
        res = {"cv": {"chosen": "default"},
               "final": {"standard": {"default": {"seeds": {}, "kept": True}},
                         "disjoint": {"default": {"seeds": {"12": {}}}}}}
        monkeypatch.setattr(aspects.C, "fit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stop")))
        args = argparse.Namespace(seed=0, seeds=1, threads=1)
        with pytest.raises(RuntimeError, match="stop"):
            aspects.stage_final(res, train, test, args)
        assert res["disjoint_systems"]["test"] == ["M10", "M11", "M12", "M13", "M15", "M17"]
        assert "12" not in res["final"].get("disjoint", {}).get("default", {}).get("seeds", {})
        assert res["final"]["standard"]["default"]["kept"]
    finally:
        gen.close()


def test_ceiling_trains_on_the_experts_labels_and_renders_them(bench):
    """The ceiling stage's rows: the label columns hold the experts' means (the originals untouched), and the
    report puts each split's students on expert labels beside the baselines fitted to the same labels."""
    rec = {"doc_id": "d0", "system_id": "M8", **{f"judge.{a}": 1.0 for a in bench.ASPECTS},
           **{f"human.{a}": 2.0 + i for i, a in enumerate(bench.ASPECTS)}}
    (out,) = bench.expert_labelled([rec])
    assert [out[f"judge.{a}"] for a in bench.ASPECTS] == [2.0, 3.0, 4.0, 5.0]
    assert rec["judge.coherence"] == 1.0
    row = {"average": {"spearman": 0.25, "kendall": 0.2}}
    seeds = {"12": {"row": {"average": {"spearman": 0.3}}}, "13": {"row": {"average": {"spearman": 0.31}}}}
    d = {"meta": {}, "ceiling": {"disjoint": {"systems": {"train": [], "test": []}, "baselines": {"extractiveness": row},
                                              "students": {"recipe A": {"seeds": seeds,
                                                                        "spearman": bench.stats([0.3, 0.31])}}}}}
    text = "\n".join(bench.render(d))
    assert "## Ceiling, disjoint split" in text
    assert "| extractiveness | 0.250 |" in text
    assert "| student trained on the EXPERT labels: recipe A | 0.305 | 0.007 | 0.300, 0.310 |" in text


def test_ceiling_curve_fit_extrapolates_to_the_target(bench):
    """The learning curve's log fit: exact on points on a log line, the documents at which it reaches the
    target; None when the curve is flat."""
    import math

    pts = [(12, 0.1 + 0.05 * math.log(12)), (25, 0.1 + 0.05 * math.log(25)), (50, 0.1 + 0.05 * math.log(50))]
    f = bench.S.log_fit(pts, 0.35)
    assert f["intercept"] == pytest.approx(0.1) and f["slope_per_ln_doc"] == pytest.approx(0.05)
    assert f["docs_to_target"] == pytest.approx(math.exp(5))
    assert bench.S.log_fit([(12, 0.3), (50, 0.3)], 0.35)["docs_to_target"] is None


def test_ceiling_curve_counts_each_point_once_on_a_resumed_run(bench, monkeypatch):
    """The ceiling stage's learning curve (training and scoring replaced by fakes: a "model" is the number of
    training documents, its Spearman docs / 100): a first run and a resumed one fit the same three points, each
    once (a resumed run once counted the last point twice, which moves the fit)."""
    import numpy as np
    from types import SimpleNamespace

    ids = [8, 9, 10, 11, 12, 13, 14, 15, 17, 20, 22, 23]
    recs = [{"doc_id": f"d{d:02d}", "system_id": f"M{i}", "candidate": f"summary {d} {i} of the text .",
             "source": f"the text {d} .", **{f"human.{a}": float((d * i) % 5 + 1) for a in bench.ASPECTS},
             **{f"judge.{a}": 3.0 for a in bench.ASPECTS}} for d in range(50) for i in ids]
    test = [dict(r, doc_id="t" + r["doc_id"]) for r in recs]

    def row(docs):
        return {a: {"spearman": docs / 100} for a in [*bench.ASPECTS, "average"]}

    monkeypatch.setattr(bench, "fit", lambda tr, name, seed, threads: (len({r["doc_id"] for r in tr}), 0.0, 0))
    monkeypatch.setattr(bench, "score", lambda model, recs: model)
    monkeypatch.setattr(bench.S, "row_of", lambda scored, col: row(scored))
    monkeypatch.setattr(bench.S, "lexical_baselines", lambda tr, te: {})
    b = SimpleNamespace(args=SimpleNamespace(split="standard", seed=0, seeds=2, threads=1), data={}, touched=set(),
                        save=lambda: None)
    for _ in range(2):  # first run, then a resumed one
        bench.stage_ceiling(b, recs, test)
        curve = b.data["ceiling"]["standard"]["curve"]
        assert sorted(map(int, curve["points"])) == [12, 25, 50]
        slope, icpt = np.polyfit(np.log([12, 25, 50]), [0.12, 0.25, 0.5], 1)
        assert curve["fit"]["slope_per_ln_doc"] == pytest.approx(slope)
        assert curve["fit"]["intercept"] == pytest.approx(icpt)
    assert set(b.data["ceiling"]["standard"]["students"]) == {bench.default_recipe(), bench.NOVELTY}
