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
    from csem.model import ModelConfig, TrainConfig, fit

    out = tmp_path_factory.mktemp("apply") / "student"
    fit(nbest_train, "judge.quality,judge.fluency", "ref-free", out_dir=out,
        config=ModelConfig(name="tiny", **SMALL),
        train_config=TrainConfig(max_epochs=15, frozen_epochs=15, head_lr=3e-3, batch_size=16, seed=3),
        label_range=(1, 5), judge="synthetic order", rubric="quality,fluency")
    return out


@pytest.fixture(scope="session")
def multi_judge(nbest_train, tiny_encoder, tmp_path_factory):
    """A three-head student on the tiny RANDOM encoder (fast tier): two judges of quality (``quality@fine``
    1-5, ``quality@coarse`` 1-3) and one of fluency, saved with the ensemble card entry that
    ``csem train --combine heads`` writes (``quality`` = the mean of the two quality heads on [0, 1])."""
    from csem.model import ModelConfig, TrainConfig, fit

    rows = [dict(r, **{"judge.quality@fine": r["judge.quality"],
                       "judge.quality@coarse": 1 + (r["judge.quality"] - 1) / 2}) for r in nbest_train]
    out = tmp_path_factory.mktemp("multi") / "student"
    model = fit(rows, ["judge.quality@fine", "judge.quality@coarse", "judge.fluency"], "ref-free",
                config=ModelConfig(name="mj", encoder=str(tiny_encoder), max_length=32, hidden_sizes=[16]),
                train_config=TrainConfig(max_epochs=1, frozen_epochs=1, head_lr=3e-3, batch_size=16, seed=0),
                label_range={"judge.quality@fine": (1, 5), "judge.quality@coarse": (1, 3),
                             "judge.fluency": (1, 5)})
    assert model.aspects == ["quality@fine", "quality@coarse", "fluency"]
    model.card["labels"] = {"normalise": "none", "combine": "heads", "judge_col": None,
                            "ensembles": {"quality": ["quality@fine", "quality@coarse"]}}
    model.save(out)
    return out
