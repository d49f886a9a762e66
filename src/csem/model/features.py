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

from csem.errors import InputError

_MULTIPLIER = {"ref-based": 6, "ref-free": 4, "fluency-ref": 4, "fluency": 1}
NEEDS_SOURCE = {"ref-based": True, "ref-free": True, "fluency-ref": False, "fluency": False}
NEEDS_REFERENCE = {"ref-based": True, "ref-free": False, "fluency-ref": True, "fluency": False}


def feature_size(mode: str, dim: int) -> int:
    """Width of the feature vector of ``mode`` for embeddings of size ``dim``.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in _MULTIPLIER:
        raise InputError(f"unknown mode '{mode}'; choose from {sorted(_MULTIPLIER)}")
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
        raise InputError(f"unknown mode '{mode}'; choose from {sorted(_MULTIPLIER)}")
    if NEEDS_SOURCE[mode] and h_x is None:
        raise InputError(f"mode '{mode}' needs source embeddings")
    if NEEDS_REFERENCE[mode] and h_ref is None:
        raise InputError(f"mode '{mode}' needs reference embeddings")
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


#: ``overlap``: novel n-gram shares, repetition, length; ``novelty``: the same without the length (a linear
#: term on length learns the training systems' lengths; see ``csem.model.config.ModelConfig.feature_set``);
#: ``lexical``: `lexical_features`
FEATURE_SETS = ("overlap", "novelty", "lexical")


def overlap_size(mode: str, feature_set: str = "overlap") -> int:
    """Number of lexical features per pair of ``mode`` under ``feature_set``.

    ``overlap``: 3 novelty shares per context text (source and/or reference) + candidate
    repetition + candidate length (`overlap_features`); ``novelty``: the same without the
    length. ``lexical``: 13 per context text +
    15 of the candidate alone (`lexical_features`).

    Raises:
        ValueError: unknown mode or feature set.
    """
    if mode not in _MULTIPLIER:
        raise InputError(f"unknown mode '{mode}'; choose from {sorted(_MULTIPLIER)}")
    if feature_set not in FEATURE_SETS:
        raise InputError(f"unknown feature set '{feature_set}'; choose from {list(FEATURE_SETS)}")
    n_ctx = int(NEEDS_SOURCE[mode]) + int(NEEDS_REFERENCE[mode])
    if feature_set == "lexical":
        return len(CANDIDATE_FEATURES) + len(CONTEXT_FEATURES) * n_ctx
    return (2 if feature_set == "overlap" else 1) + 3 * n_ctx


def pair_features(feature_set: str, candidate: str, contexts: list[str]) -> list[float]:
    """The features of ``feature_set`` (``overlap`` | ``novelty`` | ``lexical``) of one (candidate,
    contexts) pair; ``novelty`` is `overlap_features` without its last entry (the length).

    Raises:
        ValueError: unknown feature set.
    """
    if feature_set == "overlap":
        return overlap_features(candidate, contexts)
    if feature_set == "novelty":
        return overlap_features(candidate, contexts)[:-1]
    if feature_set == "lexical":
        return lexical_features(candidate, contexts)
    raise InputError(f"unknown feature set '{feature_set}'; choose from {list(FEATURE_SETS)}")


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
        out += _novelty(cw, _words(ctx))
    out.append(_repetition(cw))
    out.append(min(1.0, math.log1p(len(cw)) / math.log1p(1024)))
    return out


def _novelty(cw: list[str], xw: list[str]) -> list[float]:
    """Shares of the candidate's 1-, 2- and 3-grams absent from the context (0 for none)."""
    out = []
    for n in (1, 2, 3):
        cg = _ngrams(cw, n)
        have = set(_ngrams(xw, n))
        out.append(sum(g not in have for g in cg) / len(cg) if cg else 0.0)
    return out


def _repetition(cw: list[str]) -> float:
    """Share of the candidate's trigrams that repeat an earlier one (0 for none)."""
    tri = _ngrams(cw, 3)
    return 1.0 - len(set(tri)) / len(tri) if tri else 0.0


# ---- the richer lexical set (ModelConfig.feature_set = "lexical") --------------------------------
#
# What a judge sees at a glance and a pooled, lower-cased embedding cannot: how the candidate was
# put together from its context (extractive fragments, Grusky et al. 2018: coverage, density; from
# where in the source, in which order), and its surface form (casing, detokenisation, truncation,
# repetition). On SummEval these separate the output styles of summarisers whose ratings differ.

_SENT = re.compile(r"(?<=[.!?])\s+")
_PRONOUNS = frozenset("he she it they his her their its this these him them".split())
_SPACED_PUNCT = re.compile(r" [,.;:!?]| 's\b| n't\b")
_ALPHA = re.compile(r"[A-Za-z]+")
#: tokens of each text the ``lexical`` set reads (the fragment search is quadratic in the worst
#: case; a student's encoder reads far fewer tokens than this)
MAX_CANDIDATE_WORDS, MAX_CONTEXT_WORDS, MAX_SENTENCES = 1024, 4096, 64

#: names of the per-context features of `lexical_features`, in order (one block per context)
CONTEXT_FEATURES = ("novel_1", "novel_2", "novel_3", "coverage", "density", "fragments_per_word",
                    "log_mean_fragment", "short_fragment_share", "longest_fragment_share", "mean_position",
                    "first_position", "order_inversions", "lead_coverage")
#: names of the candidate-only features of `lexical_features`, after the context blocks
CANDIDATE_FEATURES = ("repeated_trigrams", "log_words", "log_sentences", "log_words_per_sentence",
                      "capitalised_sentences", "capitalised_words", "spaced_punctuation", "latex_quotes",
                      "bracket_tokens", "unknown_tokens", "ends_with_punctuation", "repeated_sentences",
                      "max_sentence_overlap", "pronoun_first", "short_sentences")


def extractive_fragments(candidate: list[str], context: list[str]) -> list[tuple[int, int]]:
    """Greedy extractive fragments of a token sequence in its context (Grusky et al. 2018, Newsroom,
    Alg. 1): scanning the candidate left to right, the longest shared token sequence starting at
    each position.

    Args: candidate and context token lists. Returns: ``(length, context start)`` per fragment.
    """
    where: dict[str, list[int]] = {}
    for j, t in enumerate(context):
        where.setdefault(t, []).append(j)
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(candidate):
        best, at = 0, -1
        for j in where.get(candidate[i], ()):
            k = 0
            while i + k < len(candidate) and j + k < len(context) and candidate[i + k] == context[j + k]:
                k += 1
            if k > best:
                best, at = k, j
        if best:
            out.append((best, at))
            i += best
        else:
            i += 1
    return out


def _context_block(cw: list[str], xw: list[str]) -> list[float]:
    out = _novelty(cw, xw)
    n_words, n_ctx = max(1, len(cw)), max(1, len(xw))
    frags = extractive_fragments(cw, xw)
    lengths = [f for f, _ in frags]
    long_starts = [j for f, j in frags if f >= 3]
    inversions = sum(long_starts[k] < long_starts[i] for i in range(len(long_starts))
                     for k in range(i + 1, len(long_starts)))
    pairs = len(long_starts) * (len(long_starts) - 1) / 2
    out += [sum(lengths) / n_words,                                   # coverage
            min(10.0, sum(f * f for f in lengths) / n_words) / 10.0,  # density (capped at 10 tokens)
            len(frags) / n_words,
            math.log1p(sum(lengths) / len(lengths)) if lengths else 0.0,
            sum(f <= 3 for f in lengths) / len(lengths) if lengths else 0.0,
            max(lengths, default=0) / n_words,
            sum(long_starts) / len(long_starts) / n_ctx if long_starts else 1.0,
            min(long_starts, default=n_ctx) / n_ctx,
            inversions / pairs if pairs else 0.0,
            sum(f for f, j in frags if j < 0.2 * n_ctx) / n_words]
    return out


def lexical_features(candidate: str, contexts: list[str]) -> list[float]:
    """The ``lexical`` feature set of a candidate (names in `CONTEXT_FEATURES` and
    `CANDIDATE_FEATURES`; most in [0, 1], the ``log_*`` ones unbounded; the model
    standardises them with training means and deviations).

    Per context text (source, then reference): novel 1/2/3-gram shares (See et al. 2017), and over
    the greedy extractive fragments (`extractive_fragments`): coverage and density (Grusky et
    al. 2018; density / 10, capped), fragments per word, log mean fragment length, share of
    fragments of at most 3 tokens, longest fragment / words, mean and first context position of
    fragments of 3+ tokens (0 = the start, 1 = none), share of inverted pairs among those
    fragments' positions (sentence order against the source), share of the candidate copied from
    the first 20% of the context (lead bias). Then of the candidate alone: repeated-trigram share,
    log words, log sentences, log words per sentence, share of sentences starting with a capital,
    share of words with a capital, spaced punctuation per word (`` ,`` `` 's``: tokenised output),
    LaTeX-style quotes (`````), bracket tokens (``-lrb-``), unknown tokens (``<unk>``), ends with
    sentence punctuation, repeated sentences, the largest word overlap between two sentences,
    starts with a pronoun (a dangling reference), share of sentences under 6 words.

    Args:
        candidate: the candidate text (its first ``MAX_CANDIDATE_WORDS`` tokens are read).
        contexts: 0-2 context texts (their first ``MAX_CONTEXT_WORDS`` tokens).

    Returns:
        ``len(CONTEXT_FEATURES) * len(contexts) + len(CANDIDATE_FEATURES)`` floats.
    """
    cw = _words(candidate)[:MAX_CANDIDATE_WORDS]
    out: list[float] = []
    for ctx in contexts:
        out += _context_block(cw, _words(ctx)[:MAX_CONTEXT_WORDS])
    sents = [s for s in _SENT.split(candidate.strip()) if s]
    sent_words = [_words(s) for s in sents]
    n_words, n_sents = max(1, len(cw)), max(1, len(sents))
    alpha = _ALPHA.findall(candidate)
    overlap = 0.0
    first = sent_words[:MAX_SENTENCES]  # pairs of the first sentences only (quadratic)
    for i in range(len(first)):
        for k in range(i + 1, len(first)):
            a, b = set(first[i]), set(first[k])
            if a and b:
                overlap = max(overlap, len(a & b) / min(len(a), len(b)))
    low = candidate.lower()
    out += [_repetition(cw),
            math.log1p(len(cw)),
            math.log1p(len(sents)),
            math.log1p(len(cw) / n_sents),
            sum(s[0].isupper() for s in sents) / n_sents if sents else 0.0,
            sum(any(c.isupper() for c in w) for w in alpha) / len(alpha) if alpha else 0.0,
            len(_SPACED_PUNCT.findall(candidate)) / n_words,
            float("``" in candidate or "''" in candidate),
            float("-lrb-" in low or "-rrb-" in low),
            float("<unk>" in low or "[unk]" in low),
            float(candidate.strip()[-1:] in ".!?\"'"),
            1.0 - len({s.strip().lower() for s in sents}) / n_sents if sents else 0.0,
            overlap,
            float(bool(cw) and cw[0] in _PRONOUNS),
            sum(len(w) < 6 for w in sent_words) / n_sents if sents else 0.0]
    return out
