"""Feature combination of pooled embeddings (pure functions).

Notation of the CSEM paper (Wang et al., "Learning evaluation models from large language models
for sequence generation", Sec. IV-B): ``h_y`` candidate (hypothesis), ``h_x`` source, ``h_ref``
reference, each a pooled sentence embedding of size ``d``; ``*`` is the element-wise product and
``|.|`` the element-wise absolute difference (the COMET estimator features, Rei et al. 2020).

* reference-based, Eq. 9:  ``[h_y; h_ref; h_y*h_x; h_y*h_ref; |h_y-h_x|; |h_y-h_ref|]``  (6d)
* reference-free,  Eq. 10: ``[h_y; h_x; h_y*h_x; |h_y-h_x|]``                            (4d)
* fluency (no source), with a reference: ``[h_y; h_ref; h_y*h_ref; |h_y-h_ref|]``       (4d)
  (Eq. 10 with the reference in the place of the source)
* fluency (no source), no reference: ``[h_y]``                                           (d)
"""

from __future__ import annotations

import torch
from torch import Tensor

_MULTIPLIER = {"ref-based": 6, "ref-free": 4, "fluency-ref": 4, "fluency": 1}
NEEDS_SOURCE = {"ref-based": True, "ref-free": True, "fluency-ref": False, "fluency": False}
NEEDS_REFERENCE = {"ref-based": True, "ref-free": False, "fluency-ref": True, "fluency": False}


def feature_size(mode: str, dim: int) -> int:
    """Width of the feature vector of ``mode`` for embeddings of size ``dim``.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in _MULTIPLIER:
        raise ValueError(f"unknown mode '{mode}'; choose from {sorted(_MULTIPLIER)}")
    return _MULTIPLIER[mode] * dim


def ref_based_features(h_y: Tensor, h_x: Tensor, h_ref: Tensor) -> Tensor:
    """Eq. 9 of the CSEM paper: ``[h_y; h_ref; h_y*h_x; h_y*h_ref; |h_y-h_x|; |h_y-h_ref|]``.

    Args: three tensors of shape ``[N, d]``. Returns: ``[N, 6d]``.
    """
    return torch.cat([h_y, h_ref, h_y * h_x, h_y * h_ref, (h_y - h_x).abs(), (h_y - h_ref).abs()], dim=-1)


def ref_free_features(h_y: Tensor, h_x: Tensor) -> Tensor:
    """Eq. 10 of the CSEM paper: ``[h_y; h_x; h_y*h_x; |h_y-h_x|]``.

    Args: two tensors of shape ``[N, d]``. Returns: ``[N, 4d]``.
    """
    return torch.cat([h_y, h_x, h_y * h_x, (h_y - h_x).abs()], dim=-1)


def fluency_features(h_y: Tensor, h_ref: Tensor | None = None) -> Tensor:
    """Source-free variant: Eq. 10 with the reference as context, or ``h_y`` alone without one.

    Args: ``h_y`` ``[N, d]``; optional ``h_ref`` ``[N, d]``. Returns: ``[N, 4d]`` or ``[N, d]``.
    """
    if h_ref is None:
        return h_y
    return torch.cat([h_y, h_ref, h_y * h_ref, (h_y - h_ref).abs()], dim=-1)


def combine(mode: str, h_y: Tensor, h_x: Tensor | None = None, h_ref: Tensor | None = None) -> Tensor:
    """Dispatch to the feature function of ``mode`` (see the module docstring).

    Raises:
        ValueError: unknown mode, or a text the mode needs is missing.
    """
    if mode not in _MULTIPLIER:
        raise ValueError(f"unknown mode '{mode}'; choose from {sorted(_MULTIPLIER)}")
    if NEEDS_SOURCE[mode] and h_x is None:
        raise ValueError(f"mode '{mode}' needs source embeddings")
    if NEEDS_REFERENCE[mode] and h_ref is None:
        raise ValueError(f"mode '{mode}' needs reference embeddings")
    if mode == "ref-based":
        return ref_based_features(h_y, h_x, h_ref)
    if mode == "ref-free":
        return ref_free_features(h_y, h_x)
    if mode == "fluency-ref":
        return fluency_features(h_y, h_ref)
    return fluency_features(h_y)
