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

import math
import re

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


# ---- lexical overlap features (optional, ModelConfig.overlap_features) ----------------------------
#
# Pooled embeddings (Eq. 9/10) cannot count which of the candidate's words the source contains,
# yet copying is the strongest single quality signal of news summaries (abstractive systems'
# unfaithful content is what they do not copy; Grusky et al. 2018, Newsroom, "coverage" and
# "density"; Durmus et al. 2020). These few scalars let the head see it. They are computed from
# the texts alone (no model), in [0, 1], and appended to the Eq. 9/10 features.

_WORD = re.compile(r"\w+|[^\w\s]")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def overlap_size(mode: str) -> int:
    """Number of overlap features of ``mode``: 3 novelty shares per context text (source and/or
    reference) + candidate repetition + candidate length.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in _MULTIPLIER:
        raise ValueError(f"unknown mode '{mode}'; choose from {sorted(_MULTIPLIER)}")
    return 2 + 3 * (int(NEEDS_SOURCE[mode]) + int(NEEDS_REFERENCE[mode]))


def overlap_features(candidate: str, contexts: list[str]) -> list[float]:
    """Lexical features of a candidate, each in [0, 1] (lower-cased ``\\w+|[^\\w\\s]`` tokens).

    For each context text (source, then reference, as the mode uses them): the share of the
    candidate's unigrams, bigrams and trigrams that do not occur in the context (*novel n-gram
    share*, See et al. 2017 / Grusky et al. 2018; 0 = fully extractive). Then the share of the
    candidate's trigrams that repeat an earlier trigram of the candidate (self-repetition, See et
    al. 2017), and the length ``log(1 + words) / log(1 + 1024)`` capped at 1.

    Args:
        candidate: the candidate text. contexts: 0-2 context texts.

    Returns:
        ``3 * len(contexts) + 2`` floats (empty n-gram sets count as 0 novelty / repetition).
    """
    cw = _words(candidate)
    out: list[float] = []
    for ctx in contexts:
        xw = _words(ctx)
        for n in (1, 2, 3):
            cg = _ngrams(cw, n)
            have = set(_ngrams(xw, n))
            out.append(sum(g not in have for g in cg) / len(cg) if cg else 0.0)
    tri = _ngrams(cw, 3)
    out.append(1.0 - len(set(tri)) / len(tri) if tri else 0.0)
    out.append(min(1.0, math.log1p(len(cw)) / math.log1p(1024)))
    return out
