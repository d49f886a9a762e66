"""Coherence perturbations: sentences shuffled or moved, discourse connectives swapped, dropped or
inserted (UniEval's rule-based coherence negatives, Zhong et al. 2022; discourse-connective corruption)."""

from __future__ import annotations

import random
import re
from typing import Sequence

from csem.data.contrasts.base import Context, Perturbed, severity
from csem.data.text import STOPWORDS, TOKENISED, case_like, join_sentences, same_words, split_with_separators, word_spans


def _kendall(order: Sequence[int]) -> float:
    n = len(order)
    if n < 2:
        return 0.0
    disc = sum(1 for i in range(n) for j in range(i + 1, n) if order[i] > order[j])
    return disc / (n * (n - 1) / 2)


def sentence_shuffle(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: the sentences in a random order (UniEval's shuffled negatives, Zhong et al. 2022).

    Needs >= 2 sentences that differ. Severity: normalised Kendall distance of the new order to the
    old, ``discordant pairs / (n (n - 1) / 2)`` (1 = reversed).
    """
    sents, seps = split_with_separators(text)
    if len(sents) < 2 or len(set(sents)) < 2:
        return None
    for _ in range(10):
        order = list(range(len(sents)))
        rng.shuffle(order)
        out = join_sentences([sents[i] for i in order], seps)
        if not same_words(out, text):
            return Perturbed(out, severity(_kendall(order)), f"order {order}")
    return None


def sentence_move(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: one sentence moved to another position (the rest keep their order).

    Needs >= 2 sentences. Severity: normalised Kendall distance of the new order (as in
    `sentence_shuffle`) plus 0.2, at most 1.
    """
    sents, seps = split_with_separators(text)
    n = len(sents)
    if n < 2 or len(set(sents)) < 2:
        return None
    moves = [(i, j) for i in range(n) for j in range(n) if i != j]
    rng.shuffle(moves)
    for i, j in moves:
        order = list(range(n))
        order.insert(j, order.pop(i))
        out = join_sentences([sents[k] for k in order], seps)
        if not same_words(out, text):
            return Perturbed(out, severity(0.2 + _kendall(order)), f"sentence {i + 1} moved to position {j + 1}")
    return None


#: discourse connectives and a replacement of another relation (contrast <-> cause/addition)
CONNECTIVE_SWAPS = {
    "however": "therefore", "therefore": "however", "thus": "however", "hence": "nevertheless",
    "consequently": "nevertheless", "nevertheless": "consequently", "nonetheless": "therefore",
    "meanwhile": "as a result", "moreover": "instead", "furthermore": "in contrast", "also": "instead",
    "instead": "also", "because": "although", "although": "because", "though": "because",
    "since": "although", "but": "so", "yet": "therefore", "still": "therefore", "later": "earlier",
    "as a result": "in contrast", "in addition": "on the other hand", "on the other hand": "in addition",
    "in contrast": "as a result", "for example": "in contrast", "for instance": "nevertheless",
    "in fact": "however", "despite": "because of", "because of": "despite", "while": "because",
    "whereas": "because", "so": "but", "then": "meanwhile", "finally": "first", "first": "finally",
}
_CONNECTIVE = re.compile(r"\b(" + "|".join(sorted((re.escape(k) for k in CONNECTIVE_SWAPS), key=len, reverse=True))
                         + r")\b", re.IGNORECASE)
#: connectives that may open a sentence and can be dropped with their comma
_DROPPABLE = ("however", "therefore", "thus", "hence", "consequently", "nevertheless", "nonetheless", "meanwhile",
              "moreover", "furthermore", "also", "instead", "but", "yet", "still", "later", "as a result",
              "in addition", "on the other hand", "in contrast", "for example", "for instance", "in fact", "and",
              "so", "then", "finally", "first", "additionally", "besides", "similarly", "likewise", "indeed")
_LEADING_CONNECTIVE = re.compile(r"^(?P<pre>[\"'“‘(]*)(?P<c>" + "|".join(sorted(map(re.escape, _DROPPABLE), key=len,
                                                                               reverse=True)) + r")\b\s*,?\s*",
                                 re.IGNORECASE)


#: words that are connectives only at a sentence start or after a comma (``in first three months``)
_AMBIGUOUS = frozenset("so still also later since while yet then first finally instead".split())


def _is_connective(text: str, m: re.Match) -> bool:
    if m.group(1).lower() not in _AMBIGUOUS:
        return True
    before = text[:m.start()].rstrip(" \"'“‘(`")
    return not before or before[-1] in ".!?,;:"


def connective_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: one discourse connective replaced by one of another relation (``however`` ->
    ``therefore``, ``because`` -> ``although``; `CONNECTIVE_SWAPS`), capitalisation kept. Words
    that are connectives only sometimes (``so``, ``first``, ``while`` ...) count at a sentence start
    or after a comma only.

    Needs a connective. Severity 0.3.
    """
    hits = [m for m in _CONNECTIVE.finditer(text) if _is_connective(text, m)]
    if not hits:
        return None
    m = hits[rng.randrange(len(hits))]
    new = case_like(CONNECTIVE_SWAPS[m.group(1).lower()], m.group(1))
    return Perturbed(text[:m.start()] + new + text[m.end():], 0.3, f"{m.group(1)} -> {new}")


def connective_drop(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: the connective opening a sentence removed (``However, the team ...`` -> ``The team ...``),
    for every sentence that opens with one (the text loses its discourse links).

    Needs a sentence (not the first) opening with a connective. Severity ``0.15 + 0.35 * dropped / sentences``.
    """
    sents, seps = split_with_separators(text)
    out, dropped = list(sents), []
    for i, s in enumerate(sents):
        m = _LEADING_CONNECTIVE.match(s)
        if i == 0 or not m or m.end() >= len(s):
            continue
        rest = s[m.end():]
        if not rest[:1].isalpha():
            continue
        cap = s[len(m.group("pre")):][:1].isupper()
        out[i] = m.group("pre") + (rest[:1].upper() if cap else rest[:1]) + rest[1:]
        dropped.append(m.group("c"))
    if not dropped:
        return None
    return Perturbed(join_sentences(out, seps), severity(0.15 + 0.35 * len(dropped) / len(sents)), "dropped " + ", ".join(dropped))


_INSERTED = ("however", "therefore", "as a result", "in contrast", "nevertheless", "meanwhile", "consequently",
             "instead", "on the other hand", "for example")


def connective_insert(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: an unwarranted connective put at the start of a sentence (``However, the judge ...``;
    a discourse relation the text does not have), in the text's casing and tokenisation.

    Needs a sentence of >= 4 words that does not already open with a connective. Severity 0.3.
    """
    sents, seps = split_with_separators(text)
    free = [i for i, x in enumerate(sents)
            if not _LEADING_CONNECTIVE.match(x) and x[:1].isalpha() and len(word_spans(x)) >= 4]
    if not free:
        return None
    i = free[rng.randrange(len(free))]
    c = _INSERTED[rng.randrange(len(_INSERTED))]
    s = sents[i]
    first = re.match(r"[A-Za-z]+", s).group()
    if first.lower() in STOPWORDS and first[:1].isupper() and not first.isupper():
        s = s[:1].lower() + s[1:]
    lead = c if sents[i][:1].islower() else c[:1].upper() + c[1:]
    comma = " , " if TOKENISED.search(text) else ", "
    out = list(sents)
    out[i] = lead + comma + s
    return Perturbed(join_sentences(out, seps), 0.3, f"'{lead}' put before sentence {i + 1}")
