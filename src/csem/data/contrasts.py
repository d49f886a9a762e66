"""Synthetic contrast pairs without an LLM: rule-made negatives of real candidates, per aspect.

Every record ``(source, candidate[, reference])`` yields within-source preference pairs
``(better = the candidate, worse = a perturbed copy)`` for each aspect, with the perturbation's name,
a severity in (0, 1] and a short description of the edit. The pairs are written in the preference-file
layout that ``csem train --pairs`` reads (:mod:`csem.model.preferences`): ``id_a``/``candidate_a`` is
the better text, ``id_b``/``candidate_b`` the worse one, and ``judge.<aspect>`` = 1.0 (``a`` is better
than ``b`` on that aspect; the other aspects' columns are absent, so a row teaches one head only)::

    csem contrasts --data train.jsonl --out contrasts.jsonl
    csem train --pairs --data contrasts.jsonl \\
        --label-col judge.coherence,judge.consistency,judge.fluency,judge.relevance --out student/

Perturbation families (each function ``f(text, rng, ctx) -> Perturbed | None`` is pure: the output
depends only on its arguments; None when the text offers nothing to perturb, never an unchanged text):

* coherence: :func:`sentence_shuffle`, :func:`sentence_move`, :func:`connective_swap`,
  :func:`connective_drop`, :func:`connective_insert`. Source: UniEval's rule-based coherence
  negative samples (Zhong et al. 2022, "Towards a Unified Multi-Dimensional Evaluator for Text
  Generation": disordered or foreign sentences make an incoherent text) and discourse-connective
  corruption.
* consistency: :func:`entity_swap`, :func:`number_swap`, :func:`date_swap`, :func:`negation`,
  :func:`foreign_sentence`, :func:`subject_swap`. Source: FactCC's transformations (entity, number,
  date and pronoun swaps drawn from the source, sentence negation; Kryscinski et al. 2020,
  "Evaluating the Factual Consistency of Abstractive Text Summarization") and UniEval's
  consistency negatives (Zhong et al. 2022).
* fluency: :func:`word_drop`, :func:`word_double`, :func:`word_swap`, :func:`char_noise`,
  :func:`sentence_cut`. Source: BLEURT's pre-training perturbations (word dropping; Sellam et al.
  2020, "BLEURT: Learning Robust Metrics for Text Generation") and SEScore's
  severity-graded insert/delete/replace/swap errors (Xu et al. 2022, "Not All Errors are Equal:
  Learning Text Generation Metrics using Stratified Error Synthesis").
* relevance: :func:`peripheral_swap`, :func:`redundancy`, :func:`off_topic`, :func:`truncation`.
  Source: UniEval's relevance negatives (Zhong et al. 2022: key content removed or replaced by
  irrelevant sentences) and SEScore's deletion errors (Xu et al. 2022).
* degenerate texts, for every aspect: :func:`empty`, :func:`whitespace`, :func:`few_tokens`,
  :func:`repeated_token`; for coherence and fluency :func:`word_shuffle`; for relevance only
  :func:`source_copy` (a copy of the source is consistent and fluent, but not a summary). Severity 1.
  :func:`sanity_cases` builds the sanity suite's degenerate candidates from one real candidate.

Severity (0-1) grows with the extent of the damage: each function's docstring gives its formula
(SEScore grades errors minor/major; here the grade is continuous). It is recorded, not used by
``csem train --pairs`` (every pair has target 1.0).

NLP tools: sentences are split with ``syntok`` (a rule-based segmenter, pure Python, offline), which
handles abbreviations (``V. Stiviano``, ``Jan. 5``) and tokenised text (``last year . But``) better
than a regex. Named entities are capitalised word spans (minus sentence-initial function words),
numbers and dates are regexes: no offline named-entity model is published on PyPI by its authors
(spaCy's ``en_core_web_sm`` ships from GitHub releases only; the PyPI copies are third-party
mirrors), and the swaps only need spans that occur in the source, not entity types.

Determinism: every random choice comes from a ``random.Random`` seeded with a hash of
``(seed, record key, perturbation name)`` (the record key is its ``id``, else a hash of its texts),
so a record's pairs do not depend on the order of the records. "Another article" is drawn from the
other distinct sources of the input (sorted by hash), so it depends on the set of sources only.

Inserted sentences (from the source or another article) take the candidate's surface style: lower
case and space-separated punctuation when the candidate is written that way (as some SummEval
systems are), so casing is no shortcut to tell a perturbed text from its original.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Sequence

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
#: the preference value written for every pair (``a`` is better than ``b``)
PREFERENCE = 1.0


@dataclass(frozen=True)
class Perturbed:
    """A perturbed text.

    Attributes:
        text: the perturbed text (never equal to the input, up to whitespace).
        severity: damage in (0, 1] (each function's docstring gives the formula).
        edit: a short human-readable description of the change (``"2.6 -> 1.8"``).
    """

    text: str
    severity: float
    edit: str = ""


@dataclass(frozen=True)
class Context:
    """What a perturbation may draw from besides the text itself.

    Attributes:
        source: the record's source (article); ``""`` when there is none.
        other: another article's text (a source of another record); ``""`` when there is none.
    """

    source: str = ""
    other: str = ""


PerturbFn = Callable[[str, random.Random, Context], "Perturbed | None"]


# ----------------------------------------------------------------------------------------- text helpers

_LOWER_BOUNDARY = re.compile(r"(?<=\s[.!?])\s+(?=(?:``|[\"'(])?\s*[a-z])")
_LOWER_BOUNDARY_UNTOKENISED = re.compile(r"(?<![.\w])(\w{2,})[.!?][\"')]?\s+(?=[a-z])")
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr vs etc inc co corp ltd gen gov sen rep no jan feb mar apr jun jul "
                           "aug sep sept oct nov dec prof capt col lt sgt ft mt approx e.g i.e a.m p.m u.s".split())


_CLOSING_QUOTE = re.compile(r"(?:''|”|’(?=\s)|[\"'](?=\s))\s*")


def _lowercase(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(c.isupper() for c in letters) / len(letters) < 0.01


@lru_cache(maxsize=8192)
def _split(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
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
    if _lowercase(text):
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
    return list(_split(text)[0])


def _join(sents: Sequence[str], seps: Sequence[str]) -> str:
    out = []
    for i, s in enumerate(sents):
        out.append(s)
        if i + 1 < len(sents):
            out.append(seps[i] if i < len(seps) and seps[i] else " ")
    return "".join(out)


def _same(a: str, b: str) -> bool:
    return a.split() == b.split()


_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_TOKEN = re.compile(r"\w+(?:['’]\w+)?")
_STOP = frozenset("""a an the and or but so of to in on at for with by from as is are was were be been being has
have had do does did will would can could should may might must it its he she they them his her their this that these
those there here who whom which what when where why how not no than then also just into over after before about up
out more most some any all one s n't 's said says""".split())


def _content(text: str) -> set[str]:
    return {w for w in (t.lower() for t in _TOKEN.findall(text)) if w not in _STOP and len(w) > 1}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _sev(x: float) -> float:
    return round(min(1.0, max(0.01, x)), 3)


def _case_like(replacement: str, mention: str) -> str:
    if mention.islower():
        return replacement.lower()
    if mention.isupper() and len(mention) > 1:
        return replacement.upper()
    if mention[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


_TOKENISED = re.compile(r" [.,;:!?](?:\s|$)| 's\b| n't\b|\( ")


def _mid_capitals(text: str) -> float | None:
    """Share of capitalised words among the words that do not open a sentence (None: too few words)."""
    words = [w for s in split_sentences(text) for w in re.findall(r"[A-Za-z]+", s)[1:]]
    if len(words) < 8:
        return None
    return sum(w[0].isupper() for w in words) / len(words)


def _style(text: str, like: str) -> str:
    """``text`` in the surface style of ``like``: lower case when ``like`` has (almost) no capitals
    (sentence openings kept capitalised when ``like`` capitalises them, as some SummEval systems do),
    punctuation split off by spaces and quotes written ```` `` '' ```` when ``like`` is tokenised
    that way (PTB style)."""
    mid = _mid_capitals(like)
    lower = _lowercase(like) or (mid is not None and mid < 0.01)
    if lower:
        text = text.lower()
    if _TOKENISED.search(like) and not _TOKENISED.search(text):
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


# -------------------------------------------------------------------------------------------- coherence

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
    sents, seps = _split(text)
    if len(sents) < 2 or len(set(sents)) < 2:
        return None
    for _ in range(10):
        order = list(range(len(sents)))
        rng.shuffle(order)
        out = _join([sents[i] for i in order], seps)
        if not _same(out, text):
            return Perturbed(out, _sev(_kendall(order)), f"order {order}")
    return None


def sentence_move(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: one sentence moved to another position (the rest keep their order).

    Needs >= 2 sentences. Severity: normalised Kendall distance of the new order (as in
    :func:`sentence_shuffle`) plus 0.2, at most 1.
    """
    sents, seps = _split(text)
    n = len(sents)
    if n < 2 or len(set(sents)) < 2:
        return None
    moves = [(i, j) for i in range(n) for j in range(n) if i != j]
    rng.shuffle(moves)
    for i, j in moves:
        order = list(range(n))
        order.insert(j, order.pop(i))
        out = _join([sents[k] for k in order], seps)
        if not _same(out, text):
            return Perturbed(out, _sev(0.2 + _kendall(order)), f"sentence {i + 1} moved to position {j + 1}")
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
    ``therefore``, ``because`` -> ``although``; :data:`CONNECTIVE_SWAPS`), capitalisation kept. Words
    that are connectives only sometimes (``so``, ``first``, ``while`` ...) count at a sentence start
    or after a comma only.

    Needs a connective. Severity 0.3.
    """
    hits = [m for m in _CONNECTIVE.finditer(text) if _is_connective(text, m)]
    if not hits:
        return None
    m = hits[rng.randrange(len(hits))]
    new = _case_like(CONNECTIVE_SWAPS[m.group(1).lower()], m.group(1))
    return Perturbed(text[:m.start()] + new + text[m.end():], 0.3, f"{m.group(1)} -> {new}")


def connective_drop(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: the connective opening a sentence removed (``However, the team ...`` -> ``The team ...``),
    for every sentence that opens with one (the text loses its discourse links).

    Needs a sentence (not the first) opening with a connective. Severity ``0.15 + 0.35 * dropped / sentences``.
    """
    sents, seps = _split(text)
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
    return Perturbed(_join(out, seps), _sev(0.15 + 0.35 * len(dropped) / len(sents)), "dropped " + ", ".join(dropped))


_INSERTED = ("however", "therefore", "as a result", "in contrast", "nevertheless", "meanwhile", "consequently",
             "instead", "on the other hand", "for example")


def connective_insert(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Coherence: an unwarranted connective put at the start of a sentence (``However, the judge ...``;
    a discourse relation the text does not have), in the text's casing and tokenisation.

    Needs a sentence of >= 4 words that does not already open with a connective. Severity 0.3.
    """
    sents, seps = _split(text)
    free = [i for i, x in enumerate(sents)
            if not _LEADING_CONNECTIVE.match(x) and x[:1].isalpha() and len(_word_spans(x)) >= 4]
    if not free:
        return None
    i = free[rng.randrange(len(free))]
    c = _INSERTED[rng.randrange(len(_INSERTED))]
    s = sents[i]
    first = re.match(r"[A-Za-z]+", s).group()
    if first.lower() in _STOP and first[:1].isupper() and not first.isupper():
        s = s[:1].lower() + s[1:]
    lead = c if sents[i][:1].islower() else c[:1].upper() + c[1:]
    comma = " , " if _TOKENISED.search(text) else ", "
    out = list(sents)
    out[i] = lead + comma + s
    return Perturbed(_join(out, seps), 0.3, f"'{lead}' put before sentence {i + 1}")


# ------------------------------------------------------------------------------------------ consistency

_NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                            "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
                      "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12})
for _w in ("zero", "one", "hundred", "thousand", "million", "billion"):  # too often not a count, or a unit
    _NUMBER_WORDS.pop(_w)
_NUMBER = re.compile(r"(?<![\w.,])(?<![A-Za-z]-)\d+(?:[.,]\d+)*(?![\w])|\b(?:" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
_YEAR = re.compile(r"^(1[89]\d\d|20\d\d)$")
_MONTHS = ("january february march april may june july august september october november december").split()
_MONTH_ABBR = {m[:3]: i for i, m in enumerate(_MONTHS)} | {"sept": 8}
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_DATE = re.compile(r"\b(?:(?:" + "|".join(_MONTHS[:4] + _MONTHS[5:]) + r")|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\."
                   r"|(?:" + "|".join(_WEEKDAYS) + r")|(?:1[89]\d\d|20\d\d))(?![\w])", re.IGNORECASE)


def _number_value(s: str) -> float | None:
    low = s.lower()
    if low in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[low])
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def _numbers(text: str) -> list[re.Match]:
    return [m for m in _NUMBER.finditer(text) if not _YEAR.match(m.group())]


def _date_kind(s: str) -> tuple[str, str]:
    low = s.lower().rstrip(".")
    if low in _WEEKDAYS:
        return "weekday", low
    if low in _MONTHS:
        return "month", low
    if low in _MONTH_ABBR:
        return "month", _MONTHS[_MONTH_ABBR[low]]
    return "year", low


def number_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: a number of the candidate replaced by a different number that occurs in the source
    (FactCC's number swap, Kryscinski et al. 2020). Years are left to :func:`date_swap`; number words
    (``two`` .. ``ninety``, ``dozen``) count as numbers.

    Needs a number in the text and a source number of another value. Severity 0.7.
    """
    mine = _numbers(text)
    if not mine:
        return None
    pool: dict[float, str] = {}
    for m in _numbers(ctx.source):
        v = _number_value(m.group())
        if v is not None:
            pool.setdefault(v, m.group())
    order = list(range(len(mine)))
    rng.shuffle(order)
    for k in order:
        m = mine[k]
        v = _number_value(m.group())
        choices = sorted(s for val, s in pool.items() if val != v)
        same_form = [c for c in choices if c.isalpha() == m.group().isalpha()]
        choices = same_form or choices
        if v is None or not choices:
            continue
        new = choices[rng.randrange(len(choices))]
        if m.group().islower() and new.isalpha():
            new = new.lower()
        return Perturbed(text[:m.start()] + new + text[m.end():], 0.7, f"{m.group()} -> {new}")
    return None


def date_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: a date of the candidate (weekday, month or year) replaced by a different one of the
    same kind that occurs in the source (FactCC's date swap, Kryscinski et al. 2020).

    Needs a date in the text and another of its kind in the source. Severity 0.6.
    """
    mine = list(_DATE.finditer(text))
    if not mine:
        return None
    pool: dict[tuple[str, str], str] = {}
    for m in _DATE.finditer(ctx.source):
        pool.setdefault(_date_kind(m.group()), m.group())
    order = list(range(len(mine)))
    rng.shuffle(order)
    for k in order:
        m = mine[k]
        kind, canon = _date_kind(m.group())
        choices = sorted(s for (kk, c), s in pool.items() if kk == kind and c != canon)
        if not choices:
            continue
        new = _case_like(choices[rng.randrange(len(choices))], m.group())
        return Perturbed(text[:m.start()] + new + text[m.end():], 0.6, f"{m.group()} -> {new}")
    return None


_CAP_WORD = r"[A-Z][\w'’&-]*(?:\.[A-Z]\.?)?\.?"
_ENTITY = re.compile(r"(?<![\w'’])" + _CAP_WORD + r"(?:\s+(?:(?:of|the|de|da|van|von|del|al|bin|la|le)\s+)?" + _CAP_WORD + ")*")
_NOT_ENTITY = frozenset("""a an the and or but so yet nor for of to in on at by with from as into after before when while
if although though because since however meanwhile moreover also still now then there here this that these those
it its he she they we i you his her their our my your him them us who what where why how which last next first
one two three four five six seven eight nine ten mr mrs ms dr sir his hers each every some many most all both no not
said says according despite during until unless once even just only police officials""".split())


_SENTENCE_START = re.compile(r"(?:^|[.!?][\"'’”)]*\s+|\n\s*)[\"'“‘(]*$")


@lru_cache(maxsize=4096)
def _entities(source: str) -> tuple[str, ...]:
    """Capitalised spans of ``source`` (first-seen order), without leading/trailing function words
    (``The``, ``But``, ``He``), a possessive ``'s``, months and weekdays. A one-word span at the start
    of a sentence counts only if the word is also capitalised somewhere inside a sentence (so
    ``Migration is ...`` gives no entity ``Migration``)."""
    found = []
    inside: set[str] = set()
    for m in _ENTITY.finditer(source):
        initial = bool(_SENTENCE_START.search(source[max(0, m.start() - 12):m.start()]))
        for k, words in enumerate(_cut_span(m.group().split())):
            _add_entity(words, initial and k == 0, found, inside)
    seen: dict[str, str] = {}
    for span, lone_initial in found:
        if lone_initial and span.lower() not in inside:
            continue
        seen.setdefault(span.lower(), span)
    return tuple(seen.values())


_TITLES = frozenset("mr mrs ms dr st jr sr gen gov sen rep prof capt col lt sgt ft mt".split())


def _cut_span(words: list[str]) -> list[list[str]]:
    """Cut a run of capitalised words after a possessive (``CNN's``) and after a word ending a
    sentence (``Monday.``; not an initial ``V.``, an acronym ``U.S.`` or a title ``Mr.``)."""
    out, cur = [], []
    for w in words:
        if re.search(r"['’]s$", w):
            cur.append(re.sub(r"['’]s$", "", w))
            out.append(cur)
            cur = []
        elif w.endswith(".") and len(w) > 2 and "." not in w[:-1] and w[:-1].lower() not in _TITLES:
            cur.append(w[:-1])
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    if cur:
        out.append(cur)
    return [c for c in out if c]


def _add_entity(words: list[str], initial: bool, found: list, inside: set) -> None:
    """Trim function words off one capitalised run and record it as ``(span, lone sentence-initial word)``."""
    if not initial:
        inside.update(w.lower() for w in words)
    while words and words[0].lower().strip(".") in _NOT_ENTITY:
        words = words[1:]
        initial = False
    while words and words[-1].lower().strip(".") in _NOT_ENTITY:
        words = words[:-1]
    if words:
        words = words[:-1] + [re.sub(r"['’]s?$", "", words[-1])]
    span = " ".join(words)
    if not re.search(r"\b[A-Z]\.$", span):
        span = span.rstrip(".")
    if len(span) < 2 or (len(words) == 1 and _DATE.fullmatch(span)):
        return
    found.append((span, initial and len(words) == 1))


def _mentions(text: str, entities: Sequence[str]) -> list[tuple[int, int, str]]:
    """Non-overlapping case-insensitive occurrences ``(start, end, entity)`` of ``entities`` in ``text``,
    longest entities first."""
    taken: list[tuple[int, int, str]] = []
    for e in sorted(entities, key=lambda x: (-len(x), x)):
        for m in re.finditer(r"(?<![\w'’])" + re.escape(e) + r"(?![\w])", text, re.IGNORECASE):
            if all(m.end() <= a or m.start() >= b for a, b, _ in taken):
                taken.append((m.start(), m.end(), e))
    return sorted(taken)


def _shape(entity: str) -> tuple[int, bool]:
    """(words, acronym): the form of an entity (``NBA`` <-> ``CNN``, ``Donald Sterling`` <-> ``Steve Ballmer``)."""
    return len(entity.split()), entity.replace(".", "").isupper()


_TITLE_CUE = re.compile(r"(?:\b(?:mr|mrs|ms|dr|president|sen|senator|rep|gov|governor|judge|officer|coach|manager|"
                        r"singer|player|star|actor|actress|ceo|founder|spokesman|spokeswoman|minister|prince|"
                        r"princess|king|queen|lawyer|attorney|chairman|director|captain|striker|midfielder|"
                        r"defender|boss)\.?\s+)$", re.IGNORECASE)
_PERSON_AFTER = re.compile(r"^(?:\s+(?:said|says|told|added|explained|wrote|who)\b|\s*,\s*\d{1,3}\s*,)", re.IGNORECASE)
_PLACE_CUE = re.compile(r"\b(?:in|at|near|across|outside|inside|throughout)\s+(?:the\s+)?$", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _entity_types(source: str) -> dict[str, str]:
    """A crude entity type from the source's contexts, standing in for NER (FactCC swaps within a type):
    ``person`` (after a title such as ``Mr``/``coach``, or before ``said``/``who``/``, 45,``), ``place``
    (after ``in``/``at``/``near`` ...), ``acronym`` (all capitals), else ``other``. Keys: lower-cased entities."""
    out = {}
    for e in _entities(source):
        person = place = 0
        for m in re.finditer(r"(?<![\w'’])" + re.escape(e) + r"(?![\w])", source):
            before, after = source[max(0, m.start() - 40):m.start()], source[m.end():m.end() + 20]
            person += bool(_TITLE_CUE.search(before)) + bool(_PERSON_AFTER.match(after))
            place += bool(_PLACE_CUE.search(before))
        if re.match(r"[A-Z]\.\s+[A-Z]", e):  # an initial: V. Stiviano
            person += 2
        if person > place:
            out[e.lower()] = "person"
        elif place > person:
            out[e.lower()] = "place"
        else:
            out[e.lower()] = "acronym" if _shape(e)[1] else "other"
    return out


def _entity_replacement(entity: str, pool: Sequence[str], rng: random.Random,
                        types: Mapping[str, str] | None = None) -> str | None:
    """Another entity of ``pool`` sharing no word with ``entity``: one of the same type and form when
    there is one, else the same type, else the same form, else any."""
    words = {w.lower().strip(".") for w in entity.split()}
    choices = [p for p in pool if not words & {w.lower().strip(".") for w in p.split()}]
    types = types or {}
    kind = types.get(entity.lower(), "other")
    typed = [p for p in choices if types.get(p.lower(), "other") == kind] if kind != "other" else []
    for group in ([p for p in typed if _shape(p) == _shape(entity)], typed,
                  [p for p in choices if _shape(p) == _shape(entity)], choices):
        if group:
            return group[rng.randrange(len(group))]
    return None


def entity_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: a named entity of the candidate replaced by another entity of the source (FactCC's
    entity swap, Kryscinski et al. 2020). Entities are capitalised spans of the source (see the module
    docstring); a mention is matched case-insensitively and the replacement takes its casing; the
    replacement shares no word with the mention (``Sterling`` never becomes ``Shelly Sterling``) and
    has the same crude type (person, place, acronym; from the source's contexts) and form (number of
    words) when the source offers one.

    Needs a source entity in the text and another, unrelated one in the source. Severity 0.7.
    """
    pool = _entities(ctx.source)
    mentions = _mentions(text, pool)
    rng.shuffle(mentions)
    for start, end, e in mentions:
        new = _entity_replacement(e, pool, rng, _entity_types(ctx.source))
        if new is None:
            continue
        new = _case_like(new, text[start:end])
        return Perturbed(text[:start] + new + text[end:], 0.7, f"{text[start:end]} -> {new}")
    return None


_PRONOUN_SWAP = {"he": "she", "she": "he", "his": "her", "him": "her", "they": "he", "we": "they", "it": "they"}
_OPENING = re.compile(r"^[\"'“‘(]*")


def subject_swap(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: the wrong subject: the entity or pronoun opening a sentence replaced by another
    entity of the source, or the pronoun by another pronoun (``He`` -> ``She``; FactCC's pronoun swap,
    Kryscinski et al. 2020).

    Needs a sentence opening with a source entity or a personal pronoun. Severity 0.7.
    """
    sents, seps = _split(text)
    pool = _entities(ctx.source)
    sites = []
    for i, s in enumerate(sents):
        pre = len(_OPENING.match(s).group())
        ms = [m for m in _mentions(s, pool) if m[0] == pre]
        if ms:
            sites.append((i, pre, ms[0][1], ms[0][2]))
            continue
        w = re.match(r"[A-Za-z]+", s[pre:])
        if w and w.group().lower() in _PRONOUN_SWAP:
            sites.append((i, pre, pre + len(w.group()), None))
    rng.shuffle(sites)
    for i, start, end, entity in sites:
        s = sents[i]
        old = s[start:end]
        new = (_entity_replacement(entity, pool, rng, _entity_types(ctx.source)) if entity
               else _PRONOUN_SWAP[old.lower()])
        if new is None:
            continue
        new = _case_like(new, old)
        out = list(sents)
        out[i] = s[:start] + new + s[end:]
        return Perturbed(_join(out, seps), 0.7, f"sentence {i + 1}: {old} -> {new}")
    return None


_AUX = "is|are|was|were|has|have|had|does|do|did|will|would|can|could|should|must|may|might"
_NEGATED = [
    (re.compile(r"\b(" + _AUX + r")\s+not\b", re.IGNORECASE), r"\1"),
    (re.compile(r"\b(is|are|was|were|has|have|had|does|do|did|would|could|should|must)\s?n['’]t\b", re.IGNORECASE), r"\1"),
    (re.compile(r"\bwo\s?n['’]t\b", re.IGNORECASE), "will"),
    (re.compile(r"\bca\s?n['’]t\b|\bcannot\b", re.IGNORECASE), "can"),
    (re.compile(r"\bnever\s+", re.IGNORECASE), ""),
    (re.compile(r"\bno longer\s+", re.IGNORECASE), ""),
]
_AFFIRMED = re.compile(r"\b(" + _AUX + r")\b(?=\s+(?!not\b|n['’]t\b|never\b)[A-Za-z])", re.IGNORECASE)


def negation(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: one clause negated or its negation removed (FactCC's sentence negation,
    Kryscinski et al. 2020): ``was`` -> ``was not``, ``didn't``/``did n't`` -> ``did``, ``cannot`` ->
    ``can``, ``never``/``no longer`` dropped. One site, drawn uniformly among all.

    Needs an auxiliary verb or a negation. Severity 0.8.
    """
    sites: list[tuple[int, int, str]] = []
    for pat, repl in _NEGATED:
        for m in pat.finditer(text):
            sites.append((m.start(), m.end(), m.expand(repl) if "\\" in repl else repl))
    for m in _AFFIRMED.finditer(text):
        if not any(a <= m.start() < b for a, b, _ in sites):
            sites.append((m.start(), m.end(), m.group(1) + " not"))
    if not sites:
        return None
    start, end, new = sites[rng.randrange(len(sites))]
    out = text[:start] + new + text[end:]
    if new == "" and start == 0 or (start > 0 and text[start - 1] in ".!?\n" and new == ""):
        out = text[:start] + out[start:start + 1].upper() + out[start + 1:]
    if _same(out, text):
        return None
    return Perturbed(out, 0.8, f"{text[start:end].strip()} -> {new.strip() or '(removed)'}")


def _other_sentences(ctx: Context, lead: int) -> list[str]:
    return [s for s in split_sentences(ctx.other)[:lead] if len(s.split()) >= 5]


def foreign_sentence(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: one sentence replaced by a sentence of another article (unsupported by the source;
    UniEval's consistency negatives, Zhong et al. 2022); a one-sentence text gets it appended instead.

    Needs another article (``ctx.other``). Severity 0.6.
    """
    foreign = _other_sentences(ctx, 10)
    sents, seps = _split(text)
    if not foreign or not sents:
        return None
    new = _style(foreign[rng.randrange(len(foreign))], text)
    out = list(sents)
    if len(sents) == 1:
        out.append(new)
        edit = "appended a sentence of another article"
    else:
        i = rng.randrange(len(sents))
        out[i] = new
        edit = f"sentence {i + 1} replaced by a sentence of another article"
    res = _join(out, seps)
    return None if _same(res, text) else Perturbed(res, 0.6, edit)


# --------------------------------------------------------------------------------------------- fluency

def _word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _WORD.finditer(text)]


def _n_edits(n_words: int, rng: random.Random) -> int:
    return max(1, round(rng.uniform(0.05, 0.2) * n_words))


def _token_severity(k: int, n: int) -> float:
    return _sev(0.2 + 4.0 * k / n)


def _apply(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def word_drop(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Fluency: 5-20% of the words dropped (BLEURT's word dropping, Sellam et al. 2020; SEScore's
    deletion, Xu et al. 2022).

    Needs >= 4 words. Severity ``0.2 + 4 * dropped / words`` (at most 1).
    """
    spans = _word_spans(text)
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
    spans = _word_spans(text)
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
    spans = _word_spans(text)
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
    spans = _word_spans(text)
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
    sents, seps = _split(text)
    long = [i for i, s in enumerate(sents) if len(_word_spans(s)) >= 6]
    if not long:
        return None
    i = long[rng.randrange(len(long))]
    spans = _word_spans(sents[i])
    w = len(spans)
    keep = rng.randint(math.ceil(0.3 * w), math.floor(0.7 * w))
    out = list(sents)
    out[i] = sents[i][:spans[keep - 1][1]]
    return Perturbed(_join(out, seps), _sev(0.3 + 0.5 * (w - keep) / w),
                     f"sentence {i + 1} cut after {keep} of {w} words")


# -------------------------------------------------------------------------------------------- relevance

@lru_cache(maxsize=4096)
def _importance(source: str) -> tuple[float, ...]:
    """Per source sentence: ``0.5 * (1 - position / (n - 1)) + 0.5 * centrality / max centrality``,
    centrality = summed content-word Jaccard similarity to the other sentences (a TextRank-like degree)."""
    sents = split_sentences(source)
    n = len(sents)
    words = [_content(s) for s in sents]
    cent = [sum(_jaccard(words[i], words[j]) for j in range(n) if j != i) for i in range(n)]
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
    sents, seps = _split(text)
    if len(src) < 4 or not sents:
        return None
    imp = _importance(ctx.source)
    ranked = sorted(range(len(src)), key=lambda i: (-imp[i], i))
    key_words = [_content(src[i]) for i in ranked[:3]]
    cand_words = [_content(s) for s in sents]
    rel = [max(_jaccard(c, k) for k in key_words) for c in cand_words]
    targets = sorted((i for i in range(len(sents)) if rel[i] > 0), key=lambda i: (-rel[i], i))
    periph = [src[i] for i in ranked[len(src) - max(1, len(src) // 2):]
              if 5 <= len(src[i].split()) <= 60 and all(_jaccard(_content(src[i]), c) < 0.3 for c in cand_words)]
    if not targets or not periph:
        return None
    m = min(len(targets), len(periph), rng.randint(1, math.ceil(len(sents) / 2)))
    chosen = rng.sample(periph, m)
    out = list(sents)
    for i, new in zip(targets[:m], chosen):
        out[i] = _style(new, text)
    res = _join(out, seps)
    if _same(res, text):
        return None
    return Perturbed(res, _sev(0.3 + 0.6 * m / len(sents)),
                     f"sentence(s) {', '.join(str(i + 1) for i in sorted(targets[:m]))} replaced by peripheral ones")


def redundancy(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: one sentence repeated (right after itself or at the end): no new content for the
    length (SummEval's relevance rubric penalises redundancy).

    Needs a sentence. Severity 0.4.
    """
    sents, seps = _split(text)
    if not sents:
        return None
    i = rng.randrange(len(sents))
    j = i + 1 if rng.random() < 0.5 else len(sents)
    out = list(sents)
    out.insert(j, sents[i])
    seps2 = list(seps)
    seps2.insert(min(j, len(seps2)), " ")
    return Perturbed(_join(out, seps2), 0.4, f"sentence {i + 1} repeated at position {j + 1}")


def off_topic(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: at least half of the sentences replaced by the lead sentences of another article
    (UniEval's relevance negatives, Zhong et al. 2022).

    Needs another article (``ctx.other``). Severity ``0.4 + 0.6 * replaced / sentences`` (1 when all are).
    """
    sents, seps = _split(text)
    foreign = _other_sentences(ctx, 8)
    if not sents or not foreign:
        return None
    m = min(len(foreign), rng.randint(math.ceil(len(sents) / 2), len(sents)))
    positions = sorted(rng.sample(range(len(sents)), m))
    out = list(sents)
    for k, i in enumerate(positions):
        out[i] = _style(foreign[k], text)
    res = _join(out, seps)
    if _same(res, text):
        return None
    return Perturbed(res, _sev(0.4 + 0.6 * m / len(sents)), f"{m} of {len(sents)} sentences from another article")


def truncation(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Relevance: only the first k of n sentences kept (1 <= k < n): content omitted (SEScore's
    deletion errors, Xu et al. 2022).

    Needs >= 2 sentences. Severity ``0.2 + 0.6 * dropped / n``.
    """
    sents, seps = _split(text)
    n = len(sents)
    if n < 2:
        return None
    k = rng.randint(1, n - 1)
    return Perturbed(_join(sents[:k], seps), _sev(0.2 + 0.6 * (n - k) / n), f"kept {k} of {n} sentences")


# ------------------------------------------------------------------------------------------- degenerate

def empty(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: the empty text. Severity 1. (``csem train --pairs`` rejects empty candidates, so
    :func:`make_pairs` leaves it out unless ``include_empty=True``.)"""
    return Perturbed("", 1.0, "empty") if text.strip() else None


def whitespace(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: a text of whitespace only (a space, newlines, a tab). Severity 1. (Left out by
    :func:`make_pairs` unless ``include_empty=True``, as :func:`empty`.)"""
    return Perturbed(rng.choice([" ", "\n", "\n\n", " \t\n "]), 1.0, "whitespace") if text.strip() else None


def few_tokens(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: the first 1-3 words of the text only. Needs > 3 words. Severity 1."""
    words = _TOKEN.findall(text)
    if len(words) <= 3:
        return None
    k = rng.randint(1, 3)
    return Perturbed(" ".join(words[:k]), 1.0, f"first {k} words")


def repeated_token(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Degenerate: the text's most frequent word (ties broken at random) repeated 100 times
    (``the the the ...``). Needs a word. Severity 1."""
    words = [w.lower() for w in _TOKEN.findall(text)]
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
    return Perturbed(_style(ctx.source.strip(), text), 1.0, "source copied")


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
    sanity suite's "truncated mid-sentence"; not drawn by :func:`make_pairs`: :func:`sentence_cut` and
    :func:`truncation` cover it). Needs >= 6 words. Severity ``0.3 + 0.7 * removed / words``."""
    spans = _word_spans(text)
    if len(spans) < 6:
        return None
    for _ in range(10):
        keep = rng.randint(math.ceil(0.3 * len(spans)), math.floor(0.7 * len(spans)))
        out = text[:spans[keep - 1][1]]
        if not re.search(r"[.!?]['\"’”)]*$", out):  # not at a sentence end
            return Perturbed(out, _sev(0.3 + 0.7 * (len(spans) - keep) / len(spans)),
                             f"cut after {keep} of {len(spans)} words")
    return None


#: the sanity suite's degenerate cases (issue 24), in report order
SANITY_CASES = ("empty", "whitespace", "one_token", "repeated_token", "truncated", "words_shuffled", "other_summary",
                "source_copy")


def sanity_cases(candidate: str, *, source: str = "", other_summary: str | None = None,
                 seed: int = 0, key: str = "") -> dict[str, str]:
    """Degenerate candidates for a metric's sanity check, built from one real candidate of a source.

    Returns ``{case: text}`` for the cases of :data:`SANITY_CASES` that apply: ``empty`` (``""``),
    ``whitespace`` (``" \n"``), ``one_token`` (the candidate's first word), ``repeated_token`` (its most
    frequent word x 100), ``truncated`` (cut mid-sentence, :func:`truncate_mid`), ``words_shuffled``
    (:func:`word_shuffle`), ``other_summary`` (given: a candidate written for another source),
    ``source_copy`` (the whole source; only meaningful for relevance). A case whose input is missing
    or too short (no source, a two-word candidate) is left out. Deterministic given ``seed`` and ``key``.
    """
    ctx = Context(source=source)
    out: dict[str, str] = {"empty": "", "whitespace": " \n"}
    words = _TOKEN.findall(candidate)
    if words:
        out["one_token"] = words[0]
    for case, fn in (("repeated_token", repeated_token), ("truncated", truncate_mid),
                     ("words_shuffled", word_shuffle)):
        res = fn(candidate, rng_for(seed, key, case), ctx)
        if res is not None:
            out[case] = res.text
    if other_summary and other_summary.strip() and not _same(other_summary, candidate):
        out["other_summary"] = other_summary
    if source.strip() and not _same(source, candidate):
        out["source_copy"] = source
    return out


# ---------------------------------------------------------------------------------------------- registry

#: aspect -> perturbation name -> function (the names are unique across aspects)
FAMILIES: dict[str, dict[str, PerturbFn]] = {
    "coherence": {"sentence_shuffle": sentence_shuffle, "sentence_move": sentence_move,
                  "connective_swap": connective_swap, "connective_drop": connective_drop,
                  "connective_insert": connective_insert},
    "consistency": {"entity_swap": entity_swap, "number_swap": number_swap, "date_swap": date_swap,
                    "negation": negation, "foreign_sentence": foreign_sentence, "subject_swap": subject_swap},
    "fluency": {"word_drop": word_drop, "word_double": word_double, "word_swap": word_swap,
                "char_noise": char_noise, "sentence_cut": sentence_cut},
    "relevance": {"peripheral_swap": peripheral_swap, "redundancy": redundancy, "off_topic": off_topic,
                  "truncation": truncation},
}
#: degenerate texts, for every aspect
DEGENERATE: dict[str, PerturbFn] = {"empty": empty, "whitespace": whitespace, "few_tokens": few_tokens,
                                    "repeated_token": repeated_token}
#: degenerate texts for one aspect only
DEGENERATE_ONLY: dict[str, dict[str, PerturbFn]] = {"relevance": {"source_copy": source_copy},
                                                     "coherence": {"word_shuffle": word_shuffle},
                                                     "fluency": {"word_shuffle": word_shuffle}}
EMPTY_KINDS = ("empty", "whitespace")


def perturbations(aspect: str, include_empty: bool = False) -> dict[str, tuple[PerturbFn, bool]]:
    """The perturbations of one aspect: name -> (function, is degenerate).

    Raises:
        ValueError: unknown aspect.
    """
    if aspect not in FAMILIES:
        raise ValueError(f"unknown aspect '{aspect}'; contrasts exist for {', '.join(ASPECTS)}")
    out = {k: (f, False) for k, f in FAMILIES[aspect].items()}
    for k, f in {**DEGENERATE, **DEGENERATE_ONLY.get(aspect, {})}.items():
        if include_empty or k not in EMPTY_KINDS:
            out[k] = (f, True)
    return out


def rng_for(seed: int, *parts: Any) -> random.Random:
    """A ``random.Random`` seeded from ``seed`` and ``parts`` through SHA-256 (stable across runs and
    Python processes, unlike ``hash``)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in (seed, *parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def record_key(record: Mapping[str, Any]) -> str:
    """The key a record's random draws are seeded with: its ``id``, else a hash of source and candidate."""
    if record.get("id") is not None:
        return str(record["id"])
    text = f"{record.get('source') or ''}\x1e{record.get('candidate') or ''}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _source_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_pairs(
    records: Iterable[Mapping[str, Any]],
    *,
    aspects: Sequence[str] = ASPECTS,
    per_record: int = 3,
    seed: int = 0,
    include_empty: bool = False,
    degenerate_weight: float = 0.5,
    max_degenerate: int = 1,
    references: bool = False,
    soft: bool = False,
) -> list[dict]:
    """Within-source contrast pairs ``(better = the candidate, worse = a perturbed copy)``.

    For every record and aspect, ``per_record`` perturbations of that aspect are drawn without
    replacement (each family member with weight 1, the degenerate texts together with weight
    ``degenerate_weight``, at most ``max_degenerate`` of them) and applied in the drawn order until
    ``per_record`` of them change the text; a perturbation that finds nothing to change is skipped,
    so a record may give fewer pairs.
    A perturbed text is the same for every aspect that draws it (it is seeded by record and name), so
    its id ``<record id>~<name>`` names one text.

    Args:
        records: csem records with ``source`` and ``candidate`` (records with an empty candidate are
            skipped; without a source, the source-based perturbations find nothing); optional ``id``,
            ``doc_id``, ``system_id``, ``reference`` (copied into the pairs).
        aspects: subset of :data:`ASPECTS`.
        per_record: pairs per record and aspect (>= 1).
        seed: the seed of every draw.
        include_empty: also the empty and whitespace texts (``csem train --pairs`` rejects them).
        degenerate_weight: the draw weight of the degenerate texts together (0: never).
        max_degenerate: at most this many degenerate pairs per record and aspect (they are easy;
            the family's perturbations should make most of the pairs).
        references: also perturb each source's references, as further candidates (one set per
            distinct source, from its first record): id ``<doc_id>~ref<k>``, system ``reference``,
            reference = the source's other references.
        soft: write ``judge.<aspect>`` = ``0.5 + 0.5 * severity`` (a mild perturbation is a weaker
            preference) instead of 1.0.

    Returns:
        One dict per (pair, aspect), in record order: ``id`` (``<id_a>|<id_b>|<aspect>``), ``doc_id``,
        ``source``, ``reference``, ``id_a``, ``id_b``, ``candidate_a`` (better), ``candidate_b``
        (worse), ``system_a``, ``system_b`` (``<system>~<name>``), ``aspect``, ``perturbation``,
        ``degenerate`` (bool), ``severity`` (0-1), ``edit`` (what changed) and ``judge.<aspect>`` = 1.0
        (p(a better than b); ``0.5 + 0.5 * severity`` with ``soft``).

    Raises:
        ValueError: unknown aspect, ``per_record`` < 1, ``degenerate_weight`` < 0.
    """
    aspects = list(aspects)
    tables = {a: perturbations(a, include_empty) for a in aspects}
    if per_record < 1:
        raise ValueError(f"per_record must be >= 1, got {per_record}")
    if degenerate_weight < 0 or max_degenerate < 0:
        raise ValueError(f"degenerate_weight and max_degenerate must be >= 0, got {degenerate_weight}, "
                         f"{max_degenerate}")
    records = [r for r in records if isinstance(r.get("candidate"), str) and r["candidate"].strip()]
    if references:
        records = records + reference_records(records)
    sources = sorted({r.get("source") or "" for r in records} - {""}, key=_source_key)
    out: list[dict] = []
    for rec in records:
        key = record_key(rec)
        text = rec["candidate"]
        source = rec.get("source") or ""
        others = [s for s in sources if s != source]
        other = others[rng_for(seed, key, "other").randrange(len(others))] if others else ""
        ctx = Context(source=source, other=other)
        rid = str(rec["id"]) if rec.get("id") is not None else key
        system = rec.get("system_id")
        done: dict[str, Perturbed | None] = {}
        for aspect in aspects:
            table = tables[aspect]
            n_deg = sum(1 for _, d in table.values() if d)
            pick = rng_for(seed, key, aspect, "draw")
            keys = []
            for name in sorted(table):
                w = (degenerate_weight / n_deg) if table[name][1] else 1.0
                if w > 0:
                    keys.append((pick.random() ** (1.0 / w), name))  # Efraimidis-Spirakis weighted draw
            keys.sort(reverse=True)
            got = degenerate = 0
            for _, name in keys:
                if got >= per_record:
                    break
                if table[name][1] and degenerate >= max_degenerate:
                    continue
                if name not in done:
                    res = table[name][0](text, rng_for(seed, key, name), ctx)
                    done[name] = None if res is None or _same(res.text, text) else res
                res = done[name]
                if res is None:
                    continue
                got += 1
                degenerate += table[name][1]
                id_b = f"{rid}~{name}"
                out.append({
                    "id": f"{rid}|{id_b}|{aspect}", "doc_id": rec.get("doc_id"), "source": rec.get("source"),
                    "reference": rec.get("reference"), "id_a": rid, "id_b": id_b, "candidate_a": text,
                    "candidate_b": res.text, "system_a": system,
                    "system_b": f"{system}~{name}" if system is not None else name,
                    "aspect": aspect, "perturbation": name, "degenerate": table[name][1],
                    "severity": res.severity, "edit": res.edit,
                    f"judge.{aspect}": round(0.5 + 0.5 * res.severity, 4) if soft else PREFERENCE,
                })
    return out


def reference_records(records: Iterable[Mapping[str, Any]]) -> list[dict]:
    """The references of each distinct source as candidate records (the first record of a source gives
    them): ``id`` ``<doc_id>~ref<k>`` (``doc_id`` falls back to a hash of the source), ``system_id``
    ``reference``, ``reference`` = the other references (None when there is only one)."""
    from csem.data.records import references_of

    out, seen = [], set()
    for r in records:
        source = r.get("source") or ""
        if not source or source in seen:
            continue
        seen.add(source)
        refs = [x for x in references_of(r) if isinstance(x, str) and x.strip()]
        doc = r.get("doc_id") if r.get("doc_id") is not None else _source_key(source)[:16]
        for k, ref in enumerate(refs):
            rest = refs[:k] + refs[k + 1:]
            out.append({"id": f"{doc}~ref{k}", "doc_id": r.get("doc_id"), "system_id": "reference", "source": source,
                        "candidate": ref, "reference": rest or None})
    return out


def pairs_by_aspect(records: Iterable[Mapping[str, Any]], **kwargs: Any) -> dict[str, list[dict]]:
    """:func:`make_pairs` split by aspect: ``{aspect: [pair, ...]}`` for every requested aspect (an
    aspect without pairs maps to an empty list). Keyword arguments are those of :func:`make_pairs`."""
    aspects = list(kwargs.get("aspects", ASPECTS))
    out: dict[str, list[dict]] = {a: [] for a in aspects}
    for p in make_pairs(records, **kwargs):
        out[p["aspect"]].append(p)
    return out


def summarize(pairs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Pair counts: ``{aspect: {perturbation: count}}`` (aspects and names sorted)."""
    counts: dict[str, Counter] = {}
    for p in pairs:
        counts.setdefault(p["aspect"], Counter())[p["perturbation"]] += 1
    return {a: dict(sorted(c.items())) for a, c in sorted(counts.items())}
