"""The probability of each score of a scale from next-token log-probabilities: one home for the
in-process providers (`csem.llm.providers.llama_cpp`, `csem.llm.providers.hf`).

**Probability-weighted score** (G-Eval, Liu et al. 2023, Eq. 1: ``score = sum_s p(s) * s``): for each
score ``s`` of the scale the token sequences of ``"s"`` and ``" s"`` are enumerated
(`score_variants`) and ``p(s) = sum_variants prod_i p(t_i | prompt, t_<i)`` by the chain rule
(`score_probs`), one extra forward pass per multi-token prefix. Where a score's text is a prefix of
another valid score (``"1"`` vs ``"10"``) the number must also end there:
``p("1") * (1 - sum_{t starts with a digit} p(t | prompt, "1"))``. A score that is no prefix of another
is complete once its tokens are produced (as in G-Eval). A path whose probability falls below 1e-7 is
not expanded further (its contribution, < 1e-7, is dropped), which saves the extra pass for the rarely
used ``" s"`` variants.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

#: log-probability below which a path is not expanded (error < 1e-7 per path)
PRUNE_LOGP = float(np.log(1e-7))


def score_variants(tokenize: Callable[[str], Sequence[int]],
                   scores: Sequence[int]) -> dict[int, list[tuple[int, ...]]]:
    """``{score: [token ids of "s", token ids of " s"]}`` (duplicates and empty sequences dropped);
    ``tokenize(text)`` returns the model's ids for ``text`` without special tokens."""
    out: dict[int, list[tuple[int, ...]]] = {}
    for s in scores:
        seqs: list[tuple[int, ...]] = []
        for text in (str(s), " " + str(s)):
            seq = tuple(int(t) for t in tokenize(text))
            if seq and seq not in seqs:
                seqs.append(seq)
        out[s] = seqs
    return out


def digit_mask(pieces: Sequence[str]) -> np.ndarray:
    """Boolean mask over the vocabulary: the token's text (byte-level ``Ġ`` and SentencePiece ``▁``
    read as spaces, leading spaces removed) starts with a digit. Shape ``(len(pieces),)``."""
    mask = np.zeros(len(pieces), dtype=bool)
    for i, piece in enumerate(pieces):
        piece = (piece or "").replace("\u0120", " ").replace("\u2581", " ").lstrip()
        mask[i] = piece[:1].isdigit()
    return mask


def score_probs(variants: dict[int, list[tuple[int, ...]]],
                logp: Callable[[tuple[int, ...]], np.ndarray],
                digits: Callable[[], np.ndarray]) -> dict[int, float]:
    """``{score: p}`` by the chain rule over each score's token sequences (module docstring).

    Args:
        variants: from `score_variants`.
        logp: ``logp(path)`` -> log-probabilities of the next token after ``prompt + path``, shape
            ``(vocab,)``; called with ``()`` first, then only for paths that are needed (memoise it).
        digits: returns `digit_mask` of the vocabulary (called only when a score is a prefix of
            another).

    Returns:
        p in [0, 1] per score, not renormalised.
    """
    all_seqs = {seq for seqs in variants.values() for seq in seqs}
    probs: dict[int, float] = {}
    for s, seqs in variants.items():
        total = 0.0
        for seq in seqs:
            lp = 0.0
            for i, tok in enumerate(seq):
                lp += float(logp(seq[:i])[tok])
                if lp < PRUNE_LOGP:  # negligible path: not expanded (error < 1e-7 per path)
                    break
            else:
                if any(other != seq and other[: len(seq)] == seq for other in all_seqs):
                    p_cont = float(np.exp(logp(seq))[digits()].sum())
                    lp += float(np.log(max(1.0 - p_cont, 1e-300)))
                total += float(np.exp(lp))
        probs[s] = total
    return probs


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Natural-log softmax of a logit vector, in float64 (shape kept)."""
    logits = np.asarray(logits, dtype=np.float64)
    m = logits.max()
    return logits - (m + np.log(np.exp(logits - m).sum()))
