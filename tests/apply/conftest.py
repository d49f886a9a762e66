"""Fixtures of the apply-layer tests: N-best lists built from SummEval articles with a known
quality order, and a real small student (frozen all-MiniLM-L6-v2, two heads) trained on them here."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # the CI machine has 2 cores shared with other test areas

SMALL = dict(max_length=48, hidden_sizes=[64], dropout=0.1)


def make_nbest(shared_data, n_docs: int, offset: int = 0, seed: int = 0) -> list[dict]:
    """Four candidates per SummEval article with labels on two aspects (1-5): ``own`` (the
    article's highlight) quality 5, fluency 5; ``shuffled`` (its words shuffled) 3, 1; ``other``
    (another article's highlight) 1, 5; ``truncated`` (its first half) 4, 3."""
    from synthetic_records import summeval_candidates

    lab = lambda q, f: {"judge.quality": q, "judge.fluency": f}  # noqa: E731
    return summeval_candidates(shared_data, n_docs, {"own": lab(5.0, 5.0), "shuffled": lab(3.0, 1.0),
                                                     "other": lab(1.0, 5.0), "truncated": lab(4.0, 3.0)},
                               offset=offset, seed=seed)


@pytest.fixture(scope="session")
def nbest_train(shared_data):
    return make_nbest(shared_data, 24, offset=0)


@pytest.fixture(scope="session")
def nbest_test(shared_data):
    return make_nbest(shared_data, 8, offset=40, seed=1)


@pytest.fixture(scope="session")
def student(nbest_train, tmp_path_factory):
    """A ref-free two-head student (quality, fluency) trained head-only for 15 epochs, saved to a folder."""
    from csem.model import ModelConfig, TrainConfig, train

    out = tmp_path_factory.mktemp("apply") / "student"
    train(nbest_train, "judge.quality,judge.fluency", "ref-free", out_dir=out,
          config=ModelConfig(name="tiny", **SMALL),
          train_config=TrainConfig(max_epochs=15, frozen_epochs=15, head_lr=3e-3, batch_size=16, seed=3),
          label_range=(1, 5), judge="synthetic order", rubric="quality,fluency")
    return out
