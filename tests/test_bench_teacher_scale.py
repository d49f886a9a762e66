"""benchmarks/bench_teacher_scale.py's recipe handling (pure logic; no model is loaded): a recipe's ModelConfig
fields are split from its TrainConfig fields, and runs that train different numbers of layers never share a
lower-layer cache (train() may only share one between runs that freeze the same layers)."""


import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("bench_teacher_scale")


def test_recipe_parts_splits_model_fields_and_keys_caches_by_trained_layers(bench):
    from csem.model import TrainConfig

    caches: dict = {}
    recipe = {"train_layers": 0, "max_epochs": 6, "model": {"hidden_sizes": []}}
    options, model, frozen = bench.recipe_parts(recipe, caches)
    assert options == {"train_layers": 0, "max_epochs": 6} and model == {"hidden_sizes": []}
    assert "model" in recipe  # the recipe table is not modified
    _, model2, default = bench.recipe_parts({"lr": 1e-4}, caches)
    assert model2 is None and default is not frozen
    assert bench.recipe_parts({"train_layers": TrainConfig().train_layers}, caches)[2] is default
    assert bench.recipe_parts(None, caches)[2] is default
    assert set(caches) == {0, TrainConfig().train_layers}


def test_second_recipe_refuses_unknown_names(bench):
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        bench.second_recipe("nope")
    name, options = bench.second_recipe("top 2 layers, 3 epochs at lr 1e-4")
    assert options["max_epochs"] == 3 and options["lr"] == 1e-4


def test_load_takes_the_extension_labels_from_another_form(bench):
    """--extended --extension-form hf-bf16: the pool's own training labels stay the CPU judge's; the
    extension's come from the GPU form, then (those the GPU run left, judged by the pool's own judge into
    judged/ext-K) from the CPU: the pool's order, the GPU-labelled extension, the CPU-labelled rest; test
    unchanged."""
    tp = bench.tp
    test, train, _ = bench.load("judge.relevance")
    test2, train2, _ = bench.load("judge.relevance", "", True, "hf-bf16")
    gpu, cpu = tp.judged("hf-bf16"), tp.judged()
    assert [r["id"] for r in test2] == [r["id"] for r in test]
    assert [r["judge.relevance"] for r in test2] == [r["judge.relevance"] for r in test]
    assert [r["id"] for r in train2[:len(train)]] == [r["id"] for r in train]
    ext = train2[len(train):]
    assert ext and all(r["id"].startswith("ext/") for r in ext)
    forms = [r["label_form"] for r in ext]
    n_gpu = forms.count("hf-bf16")
    assert forms == ["hf-bf16"] * n_gpu + [""] * (len(ext) - n_gpu)  # GPU-labelled first: nested pools
    assert n_gpu == sum(1 for k, v in gpu.items() if k.startswith("ext/") and v["score"] is not None)
    assert all(r["judge.relevance"] == (gpu if r["label_form"] else cpu)[r["id"]]["score"] for r in ext)
    assert len(ext) - n_gpu == sum(1 for k, v in cpu.items() if k.startswith("ext/") and v["score"] is not None)
    assert not {k for k in cpu if k.startswith("ext/")} & set(gpu)  # the CPU judged only what the GPU left


def test_teacher_vs_human_counts_only_candidates_people_scored(bench):
    rows = [{"doc_id": f"s{i // 3}", "system_id": str(i % 3), "dataset": "newsroom", "judge.relevance": float(i % 3),
             "human.relevance": float(i % 3)} for i in range(6)]
    rows += [{"id": f"ext/{i}", "doc_id": "s0", "system_id": f"extract:{i}", "dataset": "newsroom",
              "judge.relevance": 5.0 - i} for i in range(4)]  # rule-made: no human score
    out = bench.teacher_vs_human(rows, "judge.relevance")
    assert out["newsroom"]["candidates"] == 6
    assert out["newsroom"]["aspects"]["relevance"]["spearman"] == 1.0


def test_seed_ensemble_averages_the_seeds_scores(bench):
    # two seeds, each slightly wrong about a different pair within source a and right by a wide margin about
    # the other: their mean ranks both sources right
    test = [{"doc_id": d, "judge.relevance": v} for d in "ab" for v in (1.0, 2.0, 3.0, 4.0)]
    seed_a = [1.0, 2.0, 3.4, 3.0, 1.0, 2.0, 3.0, 4.0]
    seed_b = [2.0, 1.8, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]
    each = [bench.correlations([dict(r, **{"metric.s": v}) for r, v in zip(test, seed)], "metric.s",
                               "judge.relevance")["summary"]["spearman"] for seed in (seed_a, seed_b)]
    both = bench.ensemble_correlations([seed_a, seed_b], test, "judge.relevance")
    assert max(each) < 1.0
    assert both["summary"]["spearman"] == pytest.approx(1.0) and both["summary"]["n_groups"] == 2
    assert bench.ensemble_correlations([seed_a], test, "judge.relevance") is None  # one seed is no ensemble
