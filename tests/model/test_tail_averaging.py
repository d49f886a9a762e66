"""Tail averaging (``TrainConfig.average_tail``): the returned weights are the uniform mean of the
weights after each of the last share of the optimiser steps.

Fast tier: the tiny RANDOM 2-layer encoder (exactness of the average, not what the encoder knows).
With a batch larger than the training set every epoch is one optimiser step, and the trajectory of a
run of E epochs is the prefix of a longer run's, so the weights after step k are those of a run of k
epochs.
"""

from __future__ import annotations

import pytest
import torch

from csem.model import ModelConfig, TrainConfig, train

SMALL = dict(max_length=40, hidden_sizes=[32], dropout=0.0, acceptability_gate=False)
TC = dict(lr=1e-2, head_lr=1e-2, batch_size=512, train_layers=1, feature_prefit_steps=0, seed=4,
          contrast_per_record=0)


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().float() for k, v in model.module.state_dict().items()}


def _train(tiny_encoder, records, epochs: int, tail: float = 0.0, dev=None):
    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), **SMALL)
    return train(records, "judge.quality", "ref-free", config=cfg, dev_records=dev,
                 train_config=TrainConfig(max_epochs=epochs, average_tail=tail, patience=10, **TC),
                 label_range=(1, 5))


@pytest.fixture(scope="module")
def trajectory(tiny_encoder, train_records):
    """The weights after steps 1..4 (runs of 1..4 one-step epochs)."""
    return [_weights(_train(tiny_encoder, train_records, k)) for k in (1, 2, 3, 4)]


def test_the_model_is_the_mean_of_the_last_steps_weights(tiny_encoder, train_records, trajectory):
    last = trajectory[-1]
    moved = [k for k in last if not torch.equal(last[k], trajectory[-2][k])]
    # the last step moves the weights well beyond the tolerance, so the average is not the last weights
    assert max(float((last[k] - trajectory[-2][k]).abs().max()) for k in moved) > 1e-3
    # 4 steps, share 0.5: the average starts at step index floor(0.5 * 4) = 2, i.e. after steps 3 and 4
    got = _weights(_train(tiny_encoder, train_records, 4, tail=0.5))
    for k in moved:
        assert torch.allclose(got[k], (trajectory[2][k] + trajectory[3][k]) / 2, atol=1e-6), k
    # share 0.75: steps 2, 3 and 4
    got = _weights(_train(tiny_encoder, train_records, 4, tail=0.75))
    for k in moved:
        assert torch.allclose(got[k], sum(trajectory[i][k] for i in (1, 2, 3)) / 3, atol=1e-6), k


def test_frozen_layers_and_caches_stay_out_of_the_average(tiny_encoder, train_records, trajectory):
    got = _weights(_train(tiny_encoder, train_records, 4, tail=0.5))
    frozen = [k for k in got if torch.equal(trajectory[0][k], trajectory[-1][k])]
    assert frozen  # the lower encoder layer is frozen (train_layers=1)
    for k in frozen:
        assert torch.equal(got[k], trajectory[-1][k]), k


def test_with_a_dev_set_the_best_validated_average_is_returned(tiny_encoder, train_records, dev_records,
                                                               trajectory):
    """Validation from the first averaged step on scores the average; the returned model is the one kept."""
    model = _train(tiny_encoder, train_records, 4, tail=0.5, dev=dev_records)
    got = _weights(model)
    moved = [k for k in trajectory[-1] if not torch.equal(trajectory[-1][k], trajectory[-2][k])]
    # the kept weights are one of: step 1, step 2 (before the tail), mean(3), mean(3, 4)
    candidates = [trajectory[0], trajectory[1], trajectory[2],
                  {k: (trajectory[2][k] + trajectory[3][k]) / 2 for k in trajectory[3]}]
    matches = [i for i, c in enumerate(candidates) if all(torch.allclose(got[k], c[k], atol=1e-6) for k in moved)]
    assert matches, "the returned weights are none of the validated ones"
    assert not all(torch.allclose(got[k], trajectory[3][k], atol=1e-6) for k in moved)


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_share_out_of_range_is_refused(share):
    with pytest.raises(ValueError, match="average_tail"):
        TrainConfig(average_tail=share)
