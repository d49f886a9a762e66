"""Pure parsers from a judge's free-text answer to a score (prometheus-eval style: no I/O, own tests).

Accepted forms (case-insensitive, markdown emphasis ignored): ``4``, ``4.``, ``**4**``, ``4/5``,
``4 out of 5``, ``Score: 4``, ``Rating - 4``, ``- Coherence: 4``, ``score of 4``, ``I would rate it
4``, ``4 stars``, ``★★★★☆``, ``four``. A number inside reasoning ("covers 3 of the 5 points") is not a
score: a number counts only when the answer starts with it, when it is labelled (score/rating/
aspect name/"rate it"), or when it carries the scale ("4/5", "4 out of 5", "4 stars"). When several
labelled scores disagree, the last one wins (answers end with the verdict); a label naming the
rubric's aspect beats a generic one.

An answer without a score, or with one outside the scale, is *missing* (``score=None``) with a
reason; never 0 and never NaN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10}
_NUM = r"(\d+(?:\.\d+)?|zero|one|two|three|four|five|six|seven|eight|nine|ten)"
_LABEL = r"(?:final\s+score|overall\s+score|score|rating|grade|evaluation|verdict|stars?)"

REASON_EMPTY = "empty answer"
REASON_NO_SCORE = "no score found"
REASON_OUT_OF_SCALE = "out of scale"
REASON_OTHER_SCALE = "score on another scale"


@dataclass(frozen=True)
class ParseResult:
    """Outcome of parsing one answer.

    Attributes:
        score: the score (within the scale, may be fractional such as 3.5) or None when missing.
        reason: why it is missing (``empty answer`` | ``no score found`` | ``out of scale (..)`` |
            ``score on another scale (..)``); None when a score was found.
        matched: the piece of text the score was read from.
    """

    score: float | None
    reason: str | None = None
    matched: str | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None


def _num(tok: str) -> float:
    tok = tok.lower()
    return float(_WORDS[tok]) if tok in _WORDS else float(tok)


def _clean(text: str) -> str:
    t = text.replace("\u2019", "'")
    t = re.sub(r"[*_`#]+", "", t)  # markdown emphasis, code, headings
    t = re.sub(r"\(\s*\d+\s*[-\u2013to]+\s*\d+\s*(?:stars?|points?)?\s*\)", "", t, flags=re.IGNORECASE)  # "(1-5 stars)"
    return t.strip()


def parse_score(text: str | None, scale: tuple[int, int] | object, *, aspect: str | None = None) -> ParseResult:
    """Parse a score on ``scale`` from a judge's answer.

    Args:
        text: the raw answer (None counts as empty).
        scale: ``(min, max)`` or an object with ``min``/``max`` (a :class:`csem.rubrics.Scale`).
        aspect: the rubric aspect (e.g. ``"coherence"``); a label naming it is preferred.

    Returns:
        :class:`ParseResult`; ``score`` within ``[min, max]`` or None with ``reason``.
    """
    lo, hi = (scale.min, scale.max) if hasattr(scale, "min") else scale  # type: ignore[union-attr]
    if text is None or not text.strip():
        return ParseResult(None, REASON_EMPTY)
    t = _clean(text)
    if not t:
        return ParseResult(None, REASON_EMPTY)

    def judge(value: float, matched: str, denom: float | None = None) -> ParseResult:
        if denom is not None and denom != hi:
            return ParseResult(None, f"{REASON_OTHER_SCALE} ({matched.strip()}; expected {lo}-{hi})", matched)
        if value < lo or value > hi:
            return ParseResult(None, f"{REASON_OUT_OF_SCALE} ({value:g} not in {lo}-{hi})", matched)
        return ParseResult(value, None, matched)

    # 0. star glyphs: "★★★★☆"
    stars = re.search(r"[★⭐]+[☆]*", t)
    if stars and not re.search(r"\d", t[: stars.start()]):
        return judge(float(len(re.findall(r"[★⭐]", stars.group(0)))), stars.group(0))

    flags = re.IGNORECASE
    # 1. labelled scores: aspect label first, then generic labels; the last occurrence wins
    labels = []
    if aspect:
        labels.append(re.escape(aspect.replace("_", " ")))
    labels.append(_LABEL)
    for label in labels:
        pat = (rf"(?:^|[\s\-(\[])(?:{label})\b[^\n\d]{{0,12}}?(?:is|of|=|:|-)?\s*{_NUM}"
               rf"(?:\s*(?:/|out\s+of)\s*(\d+))?")
        hits = list(re.finditer(pat, t, flags))
        hits = [h for h in hits if _plausible_label_gap(t[h.start(): h.start(1)])]
        if hits:
            h = hits[-1]
            return judge(_num(h.group(1)), h.group(0), float(h.group(2)) if h.group(2) else None)

    # 1b. a form line "Name: 4" (any aspect name), alone on its line
    hits = list(re.finditer(rf"(?m)^[ \t\-]*[A-Za-z][A-Za-z ]{{0,30}}?\s*[:=]\s*{_NUM}(?:\s*(?:/|out\s+of)\s*(\d+))?"
                            rf"\s*(?:stars?)?[ \t.!]*$", t, flags))
    if hits:
        h = hits[-1]
        return judge(_num(h.group(1)), h.group(0), float(h.group(2)) if h.group(2) else None)

    # 2. "rate it 4", "I'd give it a 4", "deserves a 4"
    h = list(re.finditer(rf"\b(?:rate|rated|give|gave|assign|award|deserves?)\b(?:\s+(?:it|this|the\s+\w+))?"
                         rf"(?:\s+(?:a|an|as))?\s+{_NUM}(?:\s*(?:/|out\s+of)\s*(\d+))?\b", t, flags))
    if h:
        m = h[-1]
        return judge(_num(m.group(1)), m.group(0), float(m.group(2)) if m.group(2) else None)

    # 3. the answer starts with the number: "4", "4.", "4/5", "4 out of 5", "4 - good", "4 stars"
    m = re.match(rf"^[\s\-(\[]*{_NUM}(?:\s*(?:/|out\s+of)\s*(\d+))?", t, flags)
    if m and _leading_number_is_score(t):
        return judge(_num(m.group(1)), m.group(0), float(m.group(2)) if m.group(2) else None)

    # 4. a number carrying the scale anywhere: "... 4/5", "... 4 out of 5", "... 4 stars"
    hits = list(re.finditer(rf"\b{_NUM}\s*(?:/|out\s+of)\s*(\d+)\b", t, flags))
    if hits:
        h = hits[-1]
        return judge(_num(h.group(1)), h.group(0), float(h.group(2)))
    hits = list(re.finditer(rf"\b{_NUM}\s+stars?\b", t, flags))
    if hits:
        return judge(_num(hits[-1].group(1)), hits[-1].group(0))
    return ParseResult(None, REASON_NO_SCORE)


def _plausible_label_gap(gap: str) -> bool:
    """Between label and number only punctuation and a few filler words may stand."""
    words = re.findall(r"[A-Za-z]+", gap)
    allowed = {"is", "of", "for", "the", "this", "summary", "a", "an", "i", "give", "would", "be", "final",
               "overall", "my", "score", "rating", "stars", "star", "out", "it", "as"}
    return all(w.lower() in allowed or re.fullmatch(_LABEL, w, re.IGNORECASE) for w in words[1:]) and len(words) <= 5


def _leading_number_is_score(t: str) -> bool:
    """True when the answer starts with a number that is not the first item of a numbered list."""
    lines = [x.strip() for x in t.splitlines() if x.strip()]
    first = lines[0]
    if not re.match(rf"^[\-(\[]*{_NUM}\s*(?:(?:/|out\s+of)\s*\d+)?\s*(?:stars?)?\s*(?:[-:,.)\]!\u2013\u2014]|$|\s)",
                    first, re.IGNORECASE):
        return False
    if re.match(r"^[a-z]", first, re.IGNORECASE) and not re.match(rf"^{_NUM}\b", first, re.IGNORECASE):
        return False
    # "1. Read the article ..." followed by "2. ..." is an echoed list of steps, not a score
    numbered = [x for x in lines if re.match(r"^\d+[.)]\s+\S", x)]
    return len(numbered) < 2
