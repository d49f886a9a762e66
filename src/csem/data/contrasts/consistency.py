"""Consistency perturbations: entities, numbers, dates and subjects swapped with ones drawn from the
source, sentences negated, a sentence of another article inserted (FactCC's transformations, Kryscinski
et al. 2020; UniEval's consistency negatives, Zhong et al. 2022).

Named entities are capitalised word spans (minus sentence-initial function words), numbers and dates are
regexes: no offline named-entity model is published on PyPI by its authors, and the swaps only need spans
that occur in the source, not entity types."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Mapping, Sequence

from csem.data.contrasts.base import Context, Perturbed
from csem.data.text import case_like, join_sentences, same_words, split_sentences, split_with_separators, surface_style


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
    (FactCC's number swap, Kryscinski et al. 2020). Years are left to `date_swap`; number words
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
        new = case_like(choices[rng.randrange(len(choices))], m.group())
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
        new = case_like(new, text[start:end])
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
    sents, seps = split_with_separators(text)
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
        new = case_like(new, old)
        out = list(sents)
        out[i] = s[:start] + new + s[end:]
        return Perturbed(join_sentences(out, seps), 0.7, f"sentence {i + 1}: {old} -> {new}")
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
    if same_words(out, text):
        return None
    return Perturbed(out, 0.8, f"{text[start:end].strip()} -> {new.strip() or '(removed)'}")


def other_sentences(ctx: Context, lead: int) -> list[str]:
    return [s for s in split_sentences(ctx.other)[:lead] if len(s.split()) >= 5]


def foreign_sentence(text: str, rng: random.Random, ctx: Context) -> Perturbed | None:
    """Consistency: one sentence replaced by a sentence of another article (unsupported by the source;
    UniEval's consistency negatives, Zhong et al. 2022); a one-sentence text gets it appended instead.

    Needs another article (``ctx.other``). Severity 0.6.
    """
    foreign = other_sentences(ctx, 10)
    sents, seps = split_with_separators(text)
    if not foreign or not sents:
        return None
    new = surface_style(foreign[rng.randrange(len(foreign))], text)
    out = list(sents)
    if len(sents) == 1:
        out.append(new)
        edit = "appended a sentence of another article"
    else:
        i = rng.randrange(len(sents))
        out[i] = new
        edit = f"sentence {i + 1} replaced by a sentence of another article"
    res = join_sentences(out, seps)
    return None if same_words(res, text) else Perturbed(res, 0.6, edit)
