"""Fluency perturbations: words dropped, doubled or swapped, character noise, a sentence cut short
(BLEURT's pre-training perturbations, Sellam et al. 2020; SEScore's severity-graded errors, Xu et al. 2022)."""

from __future__ import annotations

import math
import random
from typing import Iterable

from csem.data.contrasts.base import Context, Perturbed, severity
from csem.data.text import join_sentences, split_with_separators, word_spans


def _n_edits(n_words: int, rng: random.Random) -> int:
    return max(1, round(rng.uniform(0.05, 0.2) * n_words))


def _token_severity(k: int, n: int) -> float:
    return severity(0.2 + 4.0 * k / n)


def _apply(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def word_drop(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Fluency: 5-20% of the words dropped (BLEURT's word dropping, Sellam et al. 2020; SEScore's
    deletion, Xu et al. 2022).

    Needs >= 4 words. Severity ``0.2 + 4 * dropped / words`` (at most 1).
    """
    spans = word_spans(text)
    if len(spans) < 4:
        return None
    k = _n_edits(len(spans), rng)
    picked = sorted(rng.sample(range(len(spans)), k))
    edits = []
    for i in picked:
        s, e = spans[i]
        while e < len(text) and text[e] == " ":
            e += 1
        edits.append((s, e, ""))
    out = _apply(text, edits)
    return Perturbed(out, _token_severity(k, len(spans)), f"dropped {k} of {len(spans)} words")


def word_double(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Fluency: 5-20% of the words written twice (``the the``; SEScore's insertion, Xu et al. 2022).

    Needs >= 4 words. Severity ``0.2 + 4 * doubled / words`` (at most 1).
    """
    spans = word_spans(text)
    if len(spans) < 4:
        return None
    k = _n_edits(len(spans), rng)
    picked = rng.sample(range(len(spans)), k)
    out = _apply(text, [(spans[i][0], spans[i][0], text[spans[i][0]:spans[i][1]] + " ") for i in picked])
    return Perturbed(out, _token_severity(k, len(spans)), f"doubled {k} of {len(spans)} words")


def word_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Fluency: 5-20% of the words swapped with their right neighbour (SEScore's swap, Xu et al. 2022).

    Needs >= 4 words and two different neighbours. Severity ``0.2 + 4 * swapped pairs / words``.
    """
    spans = word_spans(text)
    if len(spans) < 4:
        return None
    k = _n_edits(len(spans), rng)
    cands = [i for i in range(len(spans) - 1)
             if text[spans[i][0]:spans[i][1]].lower() != text[spans[i + 1][0]:spans[i + 1][1]].lower()]
    rng.shuffle(cands)
    used: set[int] = set()
    edits = []
    for i in cands:
        if len(edits) >= 2 * k:
            break
        if i in used or i + 1 in used:
            continue
        used |= {i, i + 1}
        (a0, a1), (b0, b1) = spans[i], spans[i + 1]
        edits += [(a0, a1, text[b0:b1]), (b0, b1, text[a0:a1])]
    if not edits:
        return None
    return Perturbed(_apply(text, edits), _token_severity(len(edits) // 2, len(spans)),
                     f"swapped {len(edits) // 2} word pairs of {len(spans)} words")


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _typo(word: str, rng: random.Random) -> str:
    for _ in range(10):
        i = rng.randrange(len(word))
        op = rng.randrange(4)
        if op == 0:
            new = word[:i] + word[i + 1:]
        elif op == 1:
            new = word[:i] + rng.choice(_LETTERS) + word[i:]
        elif op == 2:
            new = word[:i] + rng.choice(_LETTERS) + word[i + 1:]
        else:
            i = min(i, len(word) - 2)
            new = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if new != word and new.lower() != word.lower():
            return new
    return word[::-1] if word[::-1] != word else word + "x"


def char_noise(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Fluency: typos in 5-20% of the words of >= 3 letters: a character deleted, inserted, replaced, or two
    adjacent characters transposed (SEScore's character-level errors, Xu et al. 2022).

    Needs >= 4 words, one of >= 3 letters. Severity ``0.2 + 4 * noisy words / words``.
    """
    spans = word_spans(text)
    long = [i for i, (s, e) in enumerate(spans) if e - s >= 3]
    if len(spans) < 4 or not long:
        return None
    k = min(len(long), _n_edits(len(spans), rng))
    picked = rng.sample(long, k)
    out = _apply(text, [(spans[i][0], spans[i][1], _typo(text[spans[i][0]:spans[i][1]], rng)) for i in picked])
    return Perturbed(out, _token_severity(k, len(spans)), f"typos in {k} of {len(spans)} words")


def sentence_cut(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Fluency: one sentence cut mid-way (30-70% of its words kept, the rest and its final punctuation
    removed; the other sentences stay).

    Needs a sentence of >= 6 words. Severity ``0.3 + 0.5 * removed / sentence words``.
    """
    sents, seps = split_with_separators(text)
    long = [i for i, s in enumerate(sents) if len(word_spans(s)) >= 6]
    if not long:
        return None
    i = long[rng.randrange(len(long))]
    spans = word_spans(sents[i])
    w = len(spans)
    keep = rng.randint(math.ceil(0.3 * w), math.floor(0.7 * w))
    out = list(sents)
    out[i] = sents[i][:spans[keep - 1][1]]
    return Perturbed(join_sentences(out, seps), severity(0.3 + 0.5 * (w - keep) / w),
                     f"sentence {i + 1} cut after {keep} of {w} words")
