"""Training losses of the learned evaluation model (pure functions over tensors).

All take predictions and targets on the **normalised** scale (``(y - min) / (max - min)``, in
[0, 1]) and a boolean ``mask`` of the labelled entries (missing labels never count as 0).

* `mse_loss`: mean squared error on min-max-normalised ratings, CSEM paper Eq. 11.
* `star_ce_loss`: cross-entropy over the star classes; the score is the expected value of the
  predicted distribution (CSEM paper Sec. VI-G). Fractional ratings (e.g. 2.5) become soft targets
  split between the two neighbouring stars (linear interpolation), so the target's expectation is
  the rating itself.
* `pairwise_ranking_loss`: ranking loss over pairs of candidates of the same source, for
  comparison data (CSEM paper Eq. 3): ``-log sigmoid(s_i - s_j)`` for every pair where ``i`` is
  labelled better than ``j`` (the RankNet / Bradley-Terry form), averaged over pairs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def mse_loss(pred: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Mean squared error over the labelled entries (Eq. 11).

    Args: ``pred``, ``target``, ``mask`` of the same shape (e.g. ``[B, A]``), targets in [0, 1].
    Returns: a scalar; 0 (with grad) when nothing is labelled.
    """
    if not mask.any():
        return pred.sum() * 0.0
    return F.mse_loss(pred[mask], target[mask])


def soft_star_targets(target: Tensor, n_classes: int) -> Tensor:
    """Soft class targets for normalised ratings ``target`` in [0, 1].

    Class ``k`` (0-based) stands for normalised value ``k / (n_classes - 1)``. A rating between two
    classes puts its mass on both in proportion to its distance, so ``sum_k p_k * k/(K-1) == target``.

    Shapes: ``[...] -> [..., n_classes]``.
    """
    pos = target.clamp(0, 1) * (n_classes - 1)
    lo = pos.floor().long().clamp(max=n_classes - 1)
    hi = (lo + 1).clamp(max=n_classes - 1)
    w_hi = pos - lo.to(pos.dtype)
    out = torch.zeros(*target.shape, n_classes, dtype=target.dtype, device=target.device)
    out.scatter_add_(-1, lo.unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
    out.scatter_add_(-1, hi.unsqueeze(-1), w_hi.unsqueeze(-1))
    return out


def expected_value(probs: Tensor) -> Tensor:
    """Expected normalised score ``sum_k p_k * k / (K - 1)`` of class probabilities ``[..., K]`` (Sec. VI-G)."""
    k = probs.shape[-1]
    values = torch.linspace(0, 1, k, dtype=probs.dtype, device=probs.device)
    return (probs * values).sum(-1)


def star_ce_loss(log_probs: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Cross-entropy of predicted star log-probabilities against (soft) star targets.

    Args:
        log_probs: ``[B, A, K]`` log class probabilities.
        target: ``[B, A]`` normalised ratings in [0, 1]; mask: ``[B, A]`` labelled entries.
    Returns: a scalar, the mean over labelled entries of ``-sum_k q_k log p_k``.
    """
    if not mask.any():
        return log_probs.sum() * 0.0
    q = soft_star_targets(target, log_probs.shape[-1])
    ce = -(q * log_probs).sum(-1)
    return ce[mask].mean()


def pairwise_ranking_loss(score: Tensor, target: Tensor, mask: Tensor, group: Tensor) -> Tensor:
    """RankNet loss over same-group pairs whose labels differ (comparison data, Eq. 3).

    Args:
        score: ``[B, A]`` predicted scores; target: ``[B, A]`` labels (any monotone scale);
        mask: ``[B, A]`` labelled entries; group: ``[B]`` group id (same source = same group).
    Returns: a scalar; 0 (with grad) when the batch holds no usable pair.
    """
    same = group.unsqueeze(0) == group.unsqueeze(1)  # [B, B]
    total = score.sum() * 0.0
    n = 0
    for a in range(score.shape[1]):
        m = mask[:, a]
        better = (target[:, a].unsqueeze(1) > target[:, a].unsqueeze(0)) & same & m.unsqueeze(1) & m.unsqueeze(0)
        if better.any():
            diff = score[:, a].unsqueeze(1) - score[:, a].unsqueeze(0)
            total = total + F.softplus(-diff[better]).sum()
            n += int(better.sum())
    return total / max(n, 1)


def preference_loss(score_a: Tensor, score_b: Tensor, target: Tensor) -> Tensor:
    """Ranking loss on judged preference pairs (comparison data, CSEM paper Eq. 3), soft targets.

    ``-[p log sigmoid(s_a - s_b) + (1 - p) log sigmoid(s_b - s_a)]``, averaged over pairs, where
    ``p`` is the judge's probability that ``a`` is better than ``b``; with ``p = 1`` it is Eq. 3's
    ``-log sigmoid(s_a - s_b)`` (RankNet / Bradley-Terry).

    Args: ``score_a``, ``score_b``, ``target`` of shape ``[P]`` (``target`` in [0, 1]).
    Returns: a scalar; 0 (with grad) for no pairs.
    """
    if score_a.numel() == 0:
        return score_a.sum() * 0.0
    return F.binary_cross_entropy_with_logits(score_a - score_b, target.to(score_a.dtype))
