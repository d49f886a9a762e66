"""Degenerate texts (empty, whitespace, a few tokens, one token repeated, the source copied, words
shuffled, cut mid-sentence; severity 1) and the sanity suite's degenerate candidates (`sanity_cases`)."""

from __future__ import annotations

import math
import random
import re
from collections import Counter

from csem.data.contrasts.base import Context, Perturbed, rng_for, severity
from csem.data.text import TOKEN, same_words, surface_style, word_spans


def empty(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: the empty text. Severity 1. (``csem train --pairs`` rejects empty candidates, so
    `make_pairs` leaves it out unless ``include_empty=True``.)"""
    return Perturbed("", 1.0, "empty") if text.strip() else None


def whitespace(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: a text of whitespace only (a space, newlines, a tab). Severity 1. (Left out by
    `make_pairs` unless ``include_empty=True``, as `empty`.)"""
    return Perturbed(rng.choice([" ", "\n", "\n\n", " \t\n "]), 1.0, "whitespace") if text.strip() else None


def few_tokens(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: the first 1-3 words of the text only. Needs > 3 words. Severity 1."""
    words = TOKEN.findall(text)
    if len(words) <= 3:
        return None
    k = rng.randint(1, 3)
    return Perturbed(" ".join(words[:k]), 1.0, f"first {k} words")


def repeated_token(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: the text's most frequent word (ties broken at random) repeated 100 times
    (``the the the ...``). Needs a word. Severity 1."""
    words = [w.lower() for w in TOKEN.findall(text)]
    if not words:
        return None
    counts = Counter(words)
    top = max(counts.values())
    best = sorted(w for w, c in counts.items() if c == top)
    w = best[rng.randrange(len(best))]
    return Perturbed(" ".join([w] * 100), 1.0, f"'{w}' x 100")


def source_copy(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate, relevance only: the whole source copied (in the candidate's surface style; consistent
    and fluent, but no summary). Needs a source at least twice the text's length. Severity 1."""
    if not ctx.source.strip() or len(ctx.source.split()) < 2 * len(text.split()):
        return None
    return Perturbed(surface_style(ctx.source.strip(), text), 1.0, "source copied")


def word_shuffle(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate, coherence and fluency only: all words (and punctuation tokens) in a random order.
    Needs >= 4 distinct tokens. Severity 1."""
    tokens = text.split()
    if len(set(tokens)) < 4:
        return None
    for _ in range(10):
        out = list(tokens)
        rng.shuffle(out)
        if out != tokens:
            return Perturbed(" ".join(out), 1.0, f"{len(tokens)} tokens shuffled")
    return None


def truncate_mid(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """The text cut in the middle of a sentence at 30-70 % of its words, everything after dropped (the
    sanity suite's "truncated mid-sentence"; not drawn by `make_pairs`: `sentence_cut` and
    `truncation` cover it). Needs >= 6 words. Severity ``0.3 + 0.7 * removed / words``."""
    spans = word_spans(text)
    if len(spans) < 6:
        return None
    for _ in range(10):
        keep = rng.randint(math.ceil(0.3 * len(spans)), math.floor(0.7 * len(spans)))
        out = text[:spans[keep - 1][1]]
        if not re.search(r"[.!?]['\"’”)]*$", out):  # not at a sentence end
            return Perturbed(out, severity(0.3 + 0.7 * (len(spans) - keep) / len(spans)),
                             f"cut after {keep} of {len(spans)} words")
    return None


#: the sanity suite's degenerate cases, in report order
SANITY_CASES = ("empty", "whitespace", "one_token", "repeated_token", "truncated", "words_shuffled", "other_summary",
                "source_copy")


def sanity_cases(candidate: str, *, source: str = "", other_summary: str | None = None,
                 seed: int = 0, key: str = "") -> dict[str, str]:
    """Degenerate candidates for a metric's sanity check, built from one real candidate of a source.

    Returns ``{case: text}`` for the cases of `SANITY_CASES` that apply: ``empty`` (``""``),
    ``whitespace`` (``" \n"``), ``one_token`` (the candidate's first word), ``repeated_token`` (its most
    frequent word x 100), ``truncated`` (cut mid-sentence, `truncate_mid`), ``words_shuffled``
    (`word_shuffle`), ``other_summary`` (given: a candidate written for another source),
    ``source_copy`` (the whole source; only meaningful for relevance). A case whose input is missing
    or too short (no source, a two-word candidate) is left out. Deterministic given ``seed`` and ``key``.
    """
    ctx = Context(source=source)
    out: dict[str, str] = {"empty": "", "whitespace": " \n"}
    words = TOKEN.findall(candidate)
    if words:
        out["one_token"] = words[0]
    for case, fn in (("repeated_token", repeated_token), ("truncated", truncate_mid),
                     ("words_shuffled", word_shuffle)):
        res = fn(candidate, rng_for(seed, key, case), ctx)
        if res is not None:
            out[case] = res.text
    if other_summary and other_summary.strip() and not same_words(other_summary, candidate):
        out["other_summary"] = other_summary
    if source.strip() and not same_words(source, candidate):
        out["source_copy"] = source
    return out
