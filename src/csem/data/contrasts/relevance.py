"""Relevance perturbations: key content swapped for peripheral source sentences, redundancy, off-topic
sentences, truncation (UniEval's relevance negatives, Zhong et al. 2022; SEScore's deletion errors)."""

from __future__ import annotations

import math
import random
from functools import lru_cache

from csem.data.contrasts.base import Context, Perturbed, severity
from csem.data.contrasts.consistency import other_sentences
from csem.data.text import content_words, jaccard, join_sentences, same_words, split_sentences, split_with_separators, surface_style


@lru_cache(maxsize=4096)
def _importance(source: str) -> tuple[float, ...]:
    """Per source sentence: ``0.5 * (1 - position / (n - 1)) + 0.5 * centrality / max centrality``,
    centrality = summed content-word Jaccard similarity to the other sentences (a TextRank-like degree)."""
    sents = split_sentences(source)
    n = len(sents)
    words = [content_words(s) for s in sents]
    cent = [sum(jaccard(words[i], words[j]) for j in range(n) if j != i) for i in range(n)]
    top = max(cent) if cent and max(cent) > 0 else 1.0
    return tuple(0.5 * (1 - i / max(1, n - 1)) + 0.5 * cent[i] / top for i in range(n))


def peripheral_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: the candidate's most important sentences replaced by peripheral source sentences.

    Source sentences are ranked by importance (position and centrality; ``_importance``); the
    candidate sentences closest (content-word Jaccard) to the source's three most important ones are
    replaced, 1 to ceil(n/2) of them, by sentences from the least important half of the source that
    the candidate does not already cover (Jaccard < 0.3 with each candidate sentence; 5-60 words).
    Such a text stays consistent and fluent but misses the key content (UniEval's relevance
    negatives, Zhong et al. 2022).

    Needs a source of >= 4 sentences and a candidate sentence sharing content with its key sentences.
    Severity ``0.3 + 0.6 * replaced / sentences``.
    """
    src = split_sentences(ctx.source)
    sents, seps = split_with_separators(text)
    if len(src) < 4 or not sents:
        return None
    imp = _importance(ctx.source)
    ranked = sorted(range(len(src)), key=lambda i: (-imp[i], i))
    key_words = [content_words(src[i]) for i in ranked[:3]]
    cand_words = [content_words(s) for s in sents]
    rel = [max(jaccard(c, k) for k in key_words) for c in cand_words]
    targets = sorted((i for i in range(len(sents)) if rel[i] > 0), key=lambda i: (-rel[i], i))
    periph = [src[i] for i in ranked[len(src) - max(1, len(src) // 2):]
              if 5 <= len(src[i].split()) <= 60 and all(jaccard(content_words(src[i]), c) < 0.3 for c in cand_words)]
    if not targets or not periph:
        return None
    m = min(len(targets), len(periph), rng.randint(1, math.ceil(len(sents) / 2)))
    chosen = rng.sample(periph, m)
    out = list(sents)
    for i, new in zip(targets[:m], chosen):
        out[i] = surface_style(new, text)
    res = join_sentences(out, seps)
    if same_words(res, text):
        return None
    return Perturbed(res, severity(0.3 + 0.6 * m / len(sents)),
                     f"sentence(s) {', '.join(str(i + 1) for i in sorted(targets[:m]))} replaced by peripheral ones")


def redundancy(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: one sentence repeated (right after itself or at the end): no new content for the
    length (SummEval's relevance rubric penalises redundancy).

    Needs a sentence. Severity 0.4.
    """
    sents, seps = split_with_separators(text)
    if not sents:
        return None
    i = rng.randrange(len(sents))
    j = i + 1 if rng.random() < 0.5 else len(sents)
    out = list(sents)
    out.insert(j, sents[i])
    seps2 = list(seps)
    seps2.insert(min(j, len(seps2)), " ")
    return Perturbed(join_sentences(out, seps2), 0.4, f"sentence {i + 1} repeated at position {j + 1}")


def off_topic(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: at least half of the sentences replaced by the lead sentences of another article
    (UniEval's relevance negatives, Zhong et al. 2022).

    Needs another article (``ctx.other``). Severity ``0.4 + 0.6 * replaced / sentences`` (1 when all are).
    """
    sents, seps = split_with_separators(text)
    foreign = other_sentences(ctx, 8)
    if not sents or not foreign:
        return None
    m = min(len(foreign), rng.randint(math.ceil(len(sents) / 2), len(sents)))
    positions = sorted(rng.sample(range(len(sents)), m))
    out = list(sents)
    for k, i in enumerate(positions):
        out[i] = surface_style(foreign[k], text)
    res = join_sentences(out, seps)
    if same_words(res, text):
        return None
    return Perturbed(res, severity(0.4 + 0.6 * m / len(sents)), f"{m} of {len(sents)} sentences from another article")


def truncation(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: only the first k of n sentences kept (1 <= k < n): content omitted (SEScore's
    deletion errors, Xu et al. 2022).

    Needs >= 2 sentences. Severity ``0.2 + 0.6 * dropped / n``.
    """
    sents, seps = split_with_separators(text)
    n = len(sents)
    if n < 2:
        return None
    k = rng.randint(1, n - 1)
    return Perturbed(join_sentences(sents[:k], seps), severity(0.2 + 0.6 * (n - k) / n), f"kept {k} of {n} sentences")
