"""Text utilities shared by csem's data preparation: sentence splitting, word spans, content words and
surface style (the one home of these tools; the contrast families, the candidate sampler of
`csem.collect.sampler` and the acceptability gate import them from here).

Sentences are split with ``syntok`` (a rule-based segmenter, pure Python, offline), which handles
abbreviations (``V. Stiviano``, ``Jan. 5``) and tokenised text (``last year . But``) better than a regex;
lower-cased texts (some SummEval systems) get extra boundaries after a full stop.

`surface_style` gives an inserted sentence the surface style of the text it goes into (lower case
and space-separated punctuation when that text is written that way), so casing is no shortcut to tell a
perturbed text from its original.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence


_LOWER_BOUNDARY = re.compile(r"(?<=\s[.!?])\s+(?=(?:``|[\"'(])?\s*[a-z])")
_LOWER_BOUNDARY_UNTOKENISED = re.compile(r"(?<![.\w])(\w{2,})[.!?][\"')]?\s+(?=[a-z])")
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr vs etc inc co corp ltd gen gov sen rep no jan feb mar apr jun jul "
                           "aug sep sept oct nov dec prof capt col lt sgt ft mt approx e.g i.e a.m p.m u.s".split())


_CLOSING_QUOTE = re.compile(r"(?:''|”|’(?=\s)|[\"'](?=\s))\s*")


def is_lowercase(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(c.isupper() for c in letters) / len(letters) < 0.01


@lru_cache(maxsize=8192)
def split_with_separators(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    import syntok.segmenter as segmenter

    starts: list[int] = []
    for paragraph in segmenter.analyze(text):
        for sentence in paragraph:
            if sentence:
                starts.append(sentence[0].offset)
    if not starts:
        return ((text.strip(),) if text.strip() else ()), ()
    # syntok wants a capital after a full stop; lower-cased texts (some SummEval systems) need help
    extra = [m.end() for m in _LOWER_BOUNDARY.finditer(text)]
    if is_lowercase(text):
        extra += [m.end() for m in _LOWER_BOUNDARY_UNTOKENISED.finditer(text)
                  if m.group(1).lower() not in _ABBREVIATIONS]
    starts = sorted(set(starts) | set(extra))
    for k in range(1, len(starts)):  # a closing quote syntok put at a sentence start goes back
        m = _CLOSING_QUOTE.match(text, starts[k])
        if m and m.end() < len(text):
            starts[k] = m.end()
    starts = sorted(set(starts))
    starts[0] = 0
    sents, seps = [], []
    for i, s in enumerate(starts):
        chunk = text[s: starts[i + 1] if i + 1 < len(starts) else len(text)]
        body = chunk.rstrip()
        lead = len(body) - len(body.lstrip())
        if i == 0:
            body = body.lstrip()
        elif lead:  # whitespace between sentences belongs to the separator before
            seps[-1] += body[:lead]
            body = body[lead:]
        if not body:
            if seps:
                seps[-1] += chunk
            continue
        sents.append(body)
        seps.append(chunk[len(chunk.rstrip()):] if i + 1 < len(starts) else "")
    return tuple(sents), tuple(seps[:-1])


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (syntok), as exact substrings without surrounding whitespace.

    Returns an empty list for an empty or whitespace text.
    """
    return list(split_with_separators(text)[0])


def join_sentences(sents: Sequence[str], seps: Sequence[str]) -> str:
    out = []
    for i, s in enumerate(sents):
        out.append(s)
        if i + 1 < len(sents):
            out.append(seps[i] if i < len(seps) and seps[i] else " ")
    return "".join(out)


def same_words(a: str, b: str) -> bool:
    return a.split() == b.split()


WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
TOKEN = re.compile(r"\w+(?:['’]\w+)?")
STOPWORDS = frozenset("""a an the and or but so of to in on at for with by from as is are was were be been being has
have had do does did will would can could should may might must it its he she they them his her their this that these
those there here who whom which what when where why how not no than then also just into over after before about up
out more most some any all one s n't 's said says""".split())


def content_words(text: str) -> set[str]:
    return {w for w in (t.lower() for t in TOKEN.findall(text)) if w not in STOPWORDS and len(w) > 1}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def case_like(replacement: str, mention: str) -> str:
    if mention.islower():
        return replacement.lower()
    if mention.isupper() and len(mention) > 1:
        return replacement.upper()
    if mention[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


TOKENISED = re.compile(r" [.,;:!?](?:\s|$)| 's\b| n't\b|\( ")


def _mid_capitals(text: str) -> float | None:
    """Share of capitalised words among the words that do not open a sentence (None: too few words)."""
    words = [w for s in split_sentences(text) for w in re.findall(r"[A-Za-z]+", s)[1:]]
    if len(words) < 8:
        return None
    return sum(w[0].isupper() for w in words) / len(words)


def surface_style(text: str, like: str) -> str:
    """``text`` in the surface style of ``like``: lower case when ``like`` has (almost) no capitals
    (sentence openings kept capitalised when ``like`` capitalises them, as some SummEval systems do),
    punctuation split off by spaces and quotes written ```` `` '' ```` when ``like`` is tokenised
    that way (PTB style)."""
    mid = _mid_capitals(like)
    lower = is_lowercase(like) or (mid is not None and mid < 0.01)
    if lower:
        text = text.lower()
    if TOKENISED.search(like) and not TOKENISED.search(text):
        text = re.sub(r"(['’]s|n['’]t)\b", r" \1", text)
        text = re.sub(r"(?<=\w)(?<!\.\w)([.,;:!?])(?=\s|$|[\"')])", r" \1", text)  # not in U.S. or 2.6
        text = re.sub(r"([()])", r" \1 ", text)
        if "``" in like:
            quotes = iter(range(text.count('"')))
            text = re.sub(r'"', lambda m: " `` " if next(quotes) % 2 == 0 else " '' ", text)
        else:
            text = re.sub(r'"', r' " ', text)
        text = re.sub(r"\$(?=\d)", "$ ", text)
        text = " ".join(text.split())
    opens = [x[:1] for x in split_sentences(like) if x[:1].isalpha()]
    if lower and opens and sum(c.isupper() for c in opens) > len(opens) / 2:
        text = " ".join(x[:1].upper() + x[1:] for x in split_sentences(text))
    return text

def word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in WORD.finditer(text)]
