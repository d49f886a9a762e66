"""Eq. 9 / Eq. 10 features on hand-made vectors, and the three losses."""

from __future__ import annotations

import pytest
import torch

from csem.model.features import combine, feature_size, fluency_features, ref_based_features, ref_free_features
from csem.model.losses import (expected_value, mse_loss, pairwise_ranking_loss, soft_star_targets,
                               star_ce_loss)

Y = torch.tensor([[1.0, -2.0]])
X = torch.tensor([[3.0, 0.5]])
R = torch.tensor([[-1.0, 4.0]])


def test_ref_free_eq10_values():
    f = ref_free_features(Y, X)
    # [h_y; h_x; h_y*h_x; |h_y-h_x|]
    assert f.tolist() == [[1.0, -2.0, 3.0, 0.5, 3.0, -1.0, 2.0, 2.5]]
    assert feature_size("ref-free", 2) == 8


def test_ref_based_eq9_values():
    f = ref_based_features(Y, X, R)
    # [h_y; h_ref; h_y*h_x; h_y*h_ref; |h_y-h_x|; |h_y-h_ref|]
    assert f.tolist() == [[1.0, -2.0, -1.0, 4.0, 3.0, -1.0, -1.0, -8.0, 2.0, 2.5, 2.0, 6.0]]
    assert feature_size("ref-based", 2) == 12


def test_fluency_variants():
    assert fluency_features(Y).tolist() == Y.tolist()
    assert fluency_features(Y, R).tolist() == [[1.0, -2.0, -1.0, 4.0, -1.0, -8.0, 2.0, 6.0]]
    assert combine("fluency", Y).shape == (1, feature_size("fluency", 2))
    assert combine("fluency-ref", Y, h_ref=R).shape == (1, feature_size("fluency-ref", 2))


def test_combine_errors():
    with pytest.raises(ValueError, match="needs source"):
        combine("ref-free", Y)
    with pytest.raises(ValueError, match="needs reference"):
        combine("ref-based", Y, X)
    with pytest.raises(ValueError, match="unknown mode"):
        combine("bleu", Y)


def test_mse_ignores_missing_labels():
    pred = torch.tensor([[0.5, 0.0], [1.0, 0.2]])
    target = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    mask = torch.tensor([[True, False], [True, True]])
    # (0.25 + 0 + 0.04) / 3
    assert mse_loss(pred, target, mask).item() == pytest.approx(0.29 / 3)
    assert mse_loss(pred, target, torch.zeros_like(mask)).item() == 0.0


def test_soft_star_targets_keep_the_rating_as_expectation():
    t = torch.tensor([0.0, 0.375, 1.0])  # 1, 2.5 and 5 stars on a 1-5 scale
    q = soft_star_targets(t, 5)
    assert torch.allclose(q.sum(-1), torch.ones(3))
    assert q[1].tolist() == pytest.approx([0, 0.5, 0.5, 0, 0])
    assert torch.allclose(expected_value(q), t)


def test_ce_loss_prefers_the_right_star():
    target = torch.tensor([[0.75]])  # 4 stars
    mask = torch.tensor([[True]])
    right = torch.log_softmax(torch.tensor([[[0.0, 0.0, 0.0, 5.0, 0.0]]]), -1)
    wrong = torch.log_softmax(torch.tensor([[[5.0, 0.0, 0.0, 0.0, 0.0]]]), -1)
    assert star_ce_loss(right, target, mask) < star_ce_loss(wrong, target, mask)


def test_pairwise_loss_orders_within_groups_only():
    target = torch.tensor([[1.0], [0.0], [1.0], [0.0]])
    mask = torch.ones(4, 1, dtype=torch.bool)
    group = torch.tensor([0, 0, 1, 1])
    good = torch.tensor([[2.0], [-2.0], [2.0], [-2.0]])
    bad = -good
    assert pairwise_ranking_loss(good, target, mask, group) < 0.05
    assert pairwise_ranking_loss(bad, target, mask, group) > 3.0
    # across groups: record 0 (group 0) vs record 3 (group 1) is never compared
    lone = torch.tensor([0, 1, 2, 3])
    assert pairwise_ranking_loss(bad, target, mask, lone).item() == 0.0
