"""Pure parsers from a judge's free-text answer to a score (prometheus-eval style: no I/O, own tests).

An answer with no clear score on the rubric's scale is *missing* (``score=None``) with a reason;
never 0, never NaN, never a guess. The rules, in the order they are tried:

0. **Reasoning models**: the text of a reasoning block (``<think>...</think>``, also ``<thinking>``,
   ``<reasoning>``, ``<thought>``) is never read; the answer after the last closing tag is (also when
   the opening tag was part of the prompt and only ``</think>`` appears). A block that is opened and
   never closed (the model ran out of tokens while thinking) is missing (``unfinished reasoning``),
   and so is an empty answer after the block (``empty answer after the reasoning``), even when the
   reasoning names numbers.
1. **Structured answers** are read first, the last one wins: JSON (``{"score": 4, "reason": ...}``,
   also inside a code fence or cut off after the score; keys: the rubric's aspect, ``score``,
   ``rating``, ``final_score``, ``overall_score``, ``grade``, ``result``; one level of nesting such as
   ``{"scores": {"coherence": 4}}``; keys compared case- and separator-blind; a Python dict literal
   with single quotes as FLASK's judge writes it, ``{'logical correctness': 3}``, read with
   ``ast.literal_eval``; a value ``N/A`` / ``not applicable`` is missing, ``not applicable``),
   Prometheus' result tags and their variants (``[RESULT] 4``, ``[RESULT] (4)``, ``[RESULT]: [4]``,
   ``[SCORE] 4``, ``[RESULT: 4``, ``Result: 4``: the forms prometheus-eval's own parser reads), tags
   ``<score>4</score>`` (``score``, ``rating``, ``grade``, ``answer``, ``result`` or the aspect),
   MT-Bench's and Auto-J's ``[[4]]`` / ``Rating: [[4]]`` (MT-Bench's pairwise ``[[8, 7]]`` holds two
   scores and is missing, ``ambiguous score``), a
   LaTeX ``\\boxed{4}`` (reasoning models' final answers), and **Markdown tables**: the score cell of
   the row naming the rubric's aspect (``| Coherence | 4 |``), of the one data row under a score
   header (``| Score | Reason |``), of a column headed by the aspect with one data row, or of an
   ``Overall``/``Final``/``Total`` row; a table with several scored rows and none for the aspect is
   missing (``no score found (a table ...)``), never one of its rows picked.
2. **Echoed prompt text is dropped** before the free-text rules: a scale description (two or more
   lines such as ``Score 1: The response ...`` / ``5 - excellent``), a quoted reference answer labelled
   with its own score (``Reference Answer (Score 5): ...`` up to the next blank line or header), and
   scale declarations (``(1-5)``, ``on a scale of 1 to 5``, ``on a 1-10 scale``). A declared scale whose
   maximum is not the rubric's makes the answer missing (``score on another scale``).
3. **Self-corrections**: after the last correction marker (``no wait``, ``actually``, ``correction``,
   ``on second thought``, ``on reflection``, ``let me revise``, ``I mean``, ``scratch that``) the
   text after it is read first; the whole answer only when it holds no score.
4. **Free text**, first rule that matches, last occurrence within a rule: a number labelled with the
   rubric's aspect (``Coherence: 4``, ``The coherence of this summary is 2``), then with a generic
   label (``Score: 4``, ``Rating - 4``, ``score of 2``, ``My rating is 4``; final-answer phrases inside
   a sentence: ``my final answer is 4``, ``The answer is 3 because ...``, ``Answer: 4``), then with a label in
   another language (``Note : 4``, ``Puntuación: 4``, ``Bewertung: 4/5``, ``Punteggio: 4``,
   ``Pontuação: 4``, ``Оценка: 4``, ``评分：4``, ``得分：4分``, ``評価：4``; full-width digits and colons
   read as ASCII), where the number must end its line or clause (``Note: 3 of the 5 points`` is an
   English note, not a score); a form line ``Name: 4``;
   a verbal label with the number in parentheses (``Good (4)``, ``Rating: Very good (5/5)``; two such
   labels with different numbers are ``ambiguous score``); a verb (``I would rate it 4``, ``I'd give
   this summary a 2``, ``deserves a 4``); JudgeLM's first line of two scores (``8 7``, ``8, 7``: one per
   assistant) is ``ambiguous score``, never its first number; a number the
   answer starts with (``4``, ``4.``, ``4 - clear``; not the first item of a numbered list); a number
   carrying the scale anywhere (``4/5``, ``4 out of 5``, ``4 stars``); star glyphs (``★★★★☆``). A
   labelled number followed by ``would``/``means``/``indicates``/``represents``/``corresponds`` is a
   hypothetical (``a score of 5 would mean ...``) and is skipped. A number inside reasoning
   ("covers 3 of the 5 points") is never a score.

How a value is read:

* Numbers: ``4``, ``3.5``, ``4,5`` (decimal comma: 4.5), ``1,000`` (thousands: 1000), ``1e3`` (1000),
  ``-2`` (a minus sign directly before the digits is kept, so ``Score: -2`` on 1-5 is out of scale);
  words ``zero`` ... ``ten``, and ``three and a half`` (3.5).
* A denominator must be the rubric's maximum: ``4/5``, ``4 out of 5`` (also ``4 sur 5``, ``4 von 5``,
  ``4 de 5``, ``4 su 5``, ``4 из 5``); ``4/10`` and ``4 out of ten``
  on a 1-5 scale are missing (``score on another scale``).
* A range or hedge (``4-5``, ``3 to 4``, ``2 or 3``, ``between 3 and 4``) is missing (``ambiguous
  score``): the judge did not decide, and neither end nor the midpoint is its verdict.
* A value outside ``[min, max]`` is missing (``out of scale``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10}
_WORD = r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten)\b"
# one number token: thousands, decimal (point or comma), exponent, an attached minus sign; or a word
_DIGITS = r"[-\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+|,\d{1,2}(?!\d))?(?:[eE][+-]?\d+)?)"
_NUM = rf"(?:{_DIGITS}|{_WORD})"
_HALF = r"\s+and\s+a\s+half\b"
# a value expression: number [and a half] [range/hedge second number] [/ or "out of" denominator]
_VALUE = re.compile(
    rf"(?P<a>{_NUM})(?P<ah>{_HALF})?"
    rf"(?:\s*(?P<sep>-|\u2013|\u2014|\bto\b|\bor\b|\band\b)\s*(?P<b>{_NUM})(?P<bh>{_HALF})?)?"
    rf"(?:\s*(?:/|\bout\s+of\b|\b(?:sur|von|de|di|su|из)\b)\s*(?P<d>{_NUM}))?", re.IGNORECASE)
_LABEL = r"(?:final\s+score|overall\s+score|score|rating|grade|evaluation|verdict|stars?|(?:final\s+)?answer)"
_HYPOTHETICAL = re.compile(r"\s*[,;]?\s*(?:would|means|meaning|indicates|represents|corresponds|is\s+reserved|"
                           r"is\s+given|is\s+for|=\s*[a-z])", re.IGNORECASE)
_CORRECTION = re.compile(r"\b(?:no,?\s+wait|wait,?\s+no|actually|correction|on\s+second\s+thought|on\s+reflection|"
                         r"let\s+me\s+(?:revise|correct|reconsider)|i\s+mean|scratch\s+that)\b", re.IGNORECASE)
_JSON_KEYS = ("score", "rating", "final_score", "overall_score", "grade", "result", "overall")

# labels in other languages (French, Spanish, German, Italian, Portuguese, Dutch, Russian, Chinese, Japanese, Korean)
_FOREIGN_LABEL = (r"(?:note|notation|puntuaci[oó]n|calificaci[oó]n|puntaje|nota|bewertung|punktzahl|punkte|"
                  r"punteggio|valutazione|voto|pontua[cç][aã]o|avalia[cç][aã]o|beoordeling|cijfer|"
                  r"оценка|балл|баллы|评分|分数|得分|打分|評分|評価|スコア|点数|得点|점수|평가)")
# what may follow a number read after a foreign label: end of line, punctuation, or a unit word
_FOREIGN_END = re.compile(r"\s*(?:$|\n|[.!;,)\]\-\u2013\u2014(]|分|点|점|(?:points?|punkte?|puntos?|punti|pontos|"
                          r"баллов|балла|балл|sur|von|de|di|su)\b)", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_THINK_TAGS = r"(?:think|thinking|reasoning|thought)"
# full-width ASCII forms (U+FF01-FF5E: "：", "４") -> ASCII, and the ideographic space
_FULLWIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

REASON_EMPTY = "empty answer"
REASON_UNFINISHED = "unfinished reasoning"
REASON_NO_SCORE = "no score found"
REASON_OUT_OF_SCALE = "out of scale"
REASON_OTHER_SCALE = "score on another scale"
REASON_AMBIGUOUS = "ambiguous score"
REASON_NOT_APPLICABLE = "not applicable"
#: verbal quality labels a judge may put before its number in parentheses ("Good (4)")
_VERBAL = (r"(?:excellent|outstanding|exceptional|perfect|very\s+good|good|decent|fair|average|acceptable|adequate|"
           r"satisfactory|mediocre|moderate|weak|poor|very\s+poor|bad|very\s+bad|terrible|awful|unacceptable)")
_NOT_APPLICABLE = re.compile(r"^\s*(?:n/?a|not\s+applicable|none)\s*$", re.IGNORECASE)


#: characters of a judge's answer kept in ``judge.<aspect>.raw`` and the judgment cache (the first and the
#: last half of them; the whole answer is parsed first)
RAW_MAX_CHARS = 4000


def kept_raw(text: str | None, limit: int = RAW_MAX_CHARS) -> str | None:
    """What is kept of an answer (``.raw`` in the output and the cache): the whole answer up to
    ``limit`` characters; a longer one keeps its first and last ``limit // 2`` characters around a
    marker ``[... N characters not kept ...]`` (a runaway 2 MB answer costs 4 kB per row, and where a
    judge wrote its score, at the end, stays readable)."""
    if text is None or len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [... {len(text) - 2 * half:,} characters not kept ...] {text[-half:]}"


@dataclass(frozen=True)
class ParseResult:
    """Outcome of parsing one answer.

    Attributes:
        score: the score (within the scale, may be fractional such as 3.5) or None when missing.
        reason: why it is missing (``empty answer`` | ``no score found`` | ``out of scale (..)`` |
            ``score on another scale (..)`` | ``ambiguous score (..)``); None when a score was found.
        matched: the piece of text the score was read from.
    """

    score: float | None
    reason: str | None = None
    matched: str | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None


class _Found(Exception):
    """Internal: a rule decided (carries the result)."""

    def __init__(self, result: ParseResult):
        self.result = result


def _number(tok: str) -> float:
    tok = tok.lower().replace("\u2212", "-")
    if tok in _WORDS:
        return float(_WORDS[tok])
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+", tok):
        return float(tok.replace(",", ""))
    return float(tok.replace(",", "."))


def _clean(text: str) -> str:
    t = text.translate(_FULLWIDTH).replace("\u2019", "'").replace("\u00a0", " ")
    t = re.sub(r"[*_`#]+", " ", t)  # markdown emphasis, code, headings
    t = re.sub(r"[ \t]+", " ", t)
    return t.strip()


class _Reader:
    """Applies the rules of the module docstring to one answer."""

    def __init__(self, lo: float, hi: float, aspect: str | None):
        self.lo, self.hi, self.aspect = lo, hi, aspect

    # -- values ---------------------------------------------------------------------------------
    def decide(self, m: re.Match, matched: str | None = None) -> ParseResult:
        """Turn a `_VALUE` match into a result (range, denominator and scale checks)."""
        matched = (matched if matched is not None else m.group(0)).strip()
        if m.group("b") is not None:
            return ParseResult(None, f"{REASON_AMBIGUOUS} (range or hedge '{m.group(0).strip()}'; "
                               f"expected one score in {self.lo:g}-{self.hi:g})", matched)
        value = _number(m.group("a")) + (0.5 if m.group("ah") else 0.0)
        if m.group("d") is not None and _number(m.group("d")) != self.hi:
            return ParseResult(None, f"{REASON_OTHER_SCALE} ({m.group(0).strip()}; expected {self.lo:g}-{self.hi:g})",
                               matched)
        if value < self.lo or value > self.hi:
            return ParseResult(None, f"{REASON_OUT_OF_SCALE} ({value:g} not in {self.lo:g}-{self.hi:g})", matched)
        return ParseResult(value, None, matched)

    def value_at(self, text: str, pos: int) -> re.Match | None:
        return _VALUE.match(text, pos)

    def read_string(self, s: str, matched: str) -> ParseResult | None:
        """A JSON field's value: a number, optionally followed by words without digits ("4 - good")."""
        s = s.strip()
        m = _VALUE.match(s)
        if m is None or re.search(r"\d", s[m.end():]):
            return None
        return self.decide(m, matched)

    # -- 1. structured ----------------------------------------------------------------------------
    def structured(self, t: str) -> ParseResult | None:
        found: list[tuple[int, ParseResult]] = []
        keys = ([_key(self.aspect)] if self.aspect else []) + [_key(k) for k in _JSON_KEYS]
        # JSON objects (raw_decode at each "{")
        dec = json.JSONDecoder()
        covered_until = -1
        for i, ch in enumerate(t):
            if ch != "{" or i < covered_until:
                continue
            try:
                obj, end = dec.raw_decode(t, i)
            except ValueError:  # a Python dict literal (FLASK's "{'logical correctness': 3, ...}")
                obj, end = _python_dict(t, i)
                if obj is None:
                    continue
            covered_until = end
            r = self._from_json(obj, keys, t[i:end])
            if r is not None:
                found.append((i, r))
        if not found:  # an answer cut off after the score: {"score": 4, "reason": "The su
            key_alt = "|".join(re.escape(k) for k in keys)
            for m in re.finditer(rf"[\"'](?:{key_alt})[\"']\s*:\s*[\"']?(?={_NUM})", t, re.IGNORECASE):
                v = self.value_at(t, m.end())
                if v is not None:
                    found.append((m.start(), self.decide(v, t[m.start():v.end()])))
        for pat in (r"\[(?:RESULT|SCORE)\]\s*[:\-]?\s*[(\[]?\s*", r"\[RESULT\s*:\s*", r"(?<![\w-])result\s*:\s*[(\[]?\s*",
                    rf"<(?P<tag>score|rating|grade|answer|result{'|' + re.escape(self.aspect) if self.aspect else ''})"
                    r"\s*>\s*",
                    r"\[\[\s*",
                    r"\\boxed\s*\{\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*\{\s*)?"):
            for m in re.finditer(pat, t, re.IGNORECASE):
                v = self.value_at(t, m.end())
                if v is None:
                    continue
                pair = re.match(rf"\s*,\s*{_NUM}\s*\]\]", t[v.end():])
                if m.group(0).startswith("[[") and pair:  # MT-Bench's pairwise [[8, 7]]: two scores, no rule
                    found.append((m.start(), ParseResult(None, f"{REASON_AMBIGUOUS} (two scores "
                                                         f"'{t[m.start():v.end() + pair.end()]}')",
                                                         t[m.start():v.end() + pair.end()])))
                    continue
                found.append((m.start(), self.decide(v, t[m.start():v.end()])))
        found.extend(self.tables(t))
        if not found:
            return None
        return max(found, key=lambda x: x[0])[1]

    def tables(self, t: str) -> list[tuple[int, ParseResult]]:
        """Scores read from Markdown tables (module docstring, rule 1), with each table's position."""
        out = []
        lines = t.split("\n")
        starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
        i = 0
        while i < len(lines):
            if not _is_row(lines[i]) or i + 1 >= len(lines) or not _is_separator(lines[i + 1]):
                i += 1
                continue
            header = _cells(lines[i])
            j = i + 2
            rows = []
            while j < len(lines) and _is_row(lines[j]) and not _is_separator(lines[j]):
                rows.append(_cells(lines[j]))
                j += 1
            r = self._from_table(header, rows)
            if r is not None:
                out.append((starts[i], r))
            i = j
        return out

    def _cell(self, cell: str) -> ParseResult | None:
        return self.read_string(re.sub(r"[*_`]+", "", cell).translate(_FULLWIDTH), cell)

    def _from_table(self, header: list[str], rows: list[list[str]]) -> ParseResult | None:
        if not rows:
            return None
        norm = [re.sub(r"[*_`:]+", "", h).strip().lower() for h in header]
        aspect = self.aspect.replace("_", " ").lower() if self.aspect else None
        label = re.compile(rf"^(?:{_LABEL}|{_FOREIGN_LABEL})(?:\s*\(.*\))?$", re.IGNORECASE)
        score_cols = [k for k, h in enumerate(norm) if label.match(h)]

        def row_value(row: list[str]) -> ParseResult | None:
            cells = [row[k] for k in score_cols if k < len(row)] if score_cols else row[1:]
            vals = [v for v in (self._cell(c) for c in cells) if v is not None]
            if len(vals) > 1:
                return ParseResult(None, f"{REASON_AMBIGUOUS} (a table row with several numbers: "
                                   f"{' | '.join(row)})", " | ".join(row))
            return vals[0] if vals else None

        def names(row: list[str], *words: str) -> bool:
            first = re.sub(r"[*_`:]+", "", row[0]).strip().lower() if row else ""
            return any(w and (first == w or re.match(rf"^{re.escape(w)}\b", first)) for w in words)

        # a row for the aspect
        if aspect:
            hit = [row for row in rows if names(row, aspect)]
            if hit:
                return row_value(hit[-1])
            # a column headed by the aspect, one data row
            if aspect in norm and len(rows) == 1:
                k = norm.index(aspect)
                return self._cell(rows[0][k]) if k < len(rows[0]) else None
        if not score_cols:
            return None
        if len(rows) == 1:
            return row_value(rows[0])
        final = [row for row in rows if names(row, "overall", "final", "total", "overall score", "final score")]
        if final:
            return row_value(final[-1])
        if any(row_value(row) is not None for row in rows):
            what = f"no row for {self.aspect}" if self.aspect else "no overall row"
            return ParseResult(None, f"{REASON_NO_SCORE} (a table of {len(rows)} scored rows, {what})",
                               " | ".join(header))
        return None

    def _from_json(self, obj, keys: list[str], text: str, depth: int = 0) -> ParseResult | None:
        if not isinstance(obj, dict) or depth > 2:
            return None
        lower = {_key(str(k)): v for k, v in obj.items()}
        for k in keys:
            if k not in lower:
                continue
            v = lower[k]
            if isinstance(v, bool):
                continue
            if isinstance(v, str) and _NOT_APPLICABLE.match(v):
                return ParseResult(None, f"{REASON_NOT_APPLICABLE} (the judge answered {v.strip()!r} for {k})", text)
            if isinstance(v, (int, float)):
                return self.read_string(repr(float(v)) if isinstance(v, float) else str(v), text)
            if isinstance(v, str):
                r = self.read_string(v, text)
                if r is not None:
                    return r
            if isinstance(v, dict):
                r = self._from_json(v, ["score", "rating", "value"], text, depth + 1)
                if r is not None:
                    return r
        for v in obj.values():  # {"scores": {"coherence": 4}}
            if isinstance(v, dict):
                r = self._from_json(v, keys, text, depth + 1)
                if r is not None:
                    return r
        return None

    # -- 2. echoes and scale declarations ---------------------------------------------------------
    def drop_echoes(self, t: str) -> str:
        # a quoted reference answer labelled with its own score, up to a blank line or a header
        t = re.sub(r"(?im)^[ \t]*reference(?:\s+answer|\s+response|\s+summary)?\s*\(\s*(?:score|rating)\s*[:=]?\s*"
                   rf"{_NUM}\s*\)[^\n]*(?:\n(?![ \t]*\n)(?![ \t]*(?:#|feedback|score|rating|\[result\]))[^\n]*)*",
                   " ", t)
        t = re.sub(rf"(?i)reference(?:\s+answer|\s+response|\s+summary)?\s*\(\s*(?:score|rating)\s*[:=]?\s*{_NUM}\s*\)",
                   "reference", t)
        # a scale description: two or more lines defining scores ("Score 1: ...", "5 - excellent")
        lines = t.split("\n")
        defs = [i for i, x in enumerate(lines)
                if re.match(rf"^[ \t\->•]*(?:score\s*)?(?P<n>\d+)\s*(?:\)|:|=|-|\u2013|\u2014)\s*[A-Za-z(\"']", x,
                            re.IGNORECASE)
                and not re.match(r"^[ \t]*\d+[.)]\s", x)]
        nums = {re.match(r"^[ \t\->•]*(?:score\s*)?(\d+)", lines[i], re.IGNORECASE).group(1) for i in defs}
        if len(nums) >= 2:
            t = "\n".join(x for i, x in enumerate(lines) if i not in set(defs))
        return t

    def scale_declarations(self, t: str) -> str:
        """Remove scale declarations; raise `_Found` for a declared scale other than the rubric's."""
        pats = [rf"\(\s*(?:on\s+a\s+|scale\s*:?\s*)?(?P<x>{_NUM})\s*(?:-|\u2013|to)\s*(?P<y>{_NUM})\s*"
                rf"(?:stars?|points?|scale)?\s*\)",
                rf"(?:on\s+)?(?:a|the)\s+scale\s+(?:of|from)\s+(?P<x>{_NUM})\s*(?:-|\u2013|to)\s*(?P<y>{_NUM})",
                rf"(?:on\s+)?(?:a|the)\s+(?P<x>{_NUM})\s*(?:-|\u2013|to)\s*(?P<y>{_NUM})(?:\s*-)?\s*(?:point\s+)?scale",
                rf"\(\s*(?:on\s+a\s+scale\s+)?out\s+of\s+(?P<y>{_NUM})\s*\)"]
        for pat in pats:
            for m in list(re.finditer(pat, t, re.IGNORECASE)):
                if _number(m.group("y")) != self.hi:
                    raise _Found(ParseResult(None, f"{REASON_OTHER_SCALE} ({m.group(0).strip()}; expected "
                                             f"{self.lo:g}-{self.hi:g})", m.group(0)))
            t = re.sub(pat, " ", t, flags=re.IGNORECASE)
        return t

    # -- 4. free text -----------------------------------------------------------------------------
    def free_text(self, t: str) -> ParseResult | None:
        flags = re.IGNORECASE
        labels = ([re.escape(self.aspect.replace("_", " "))] if self.aspect else []) + [_LABEL]
        for label in labels:
            hits = []
            # overlapping: a label whose gap is no filler ("The answer is helpful ... Rating: [7]") must not
            # hide a later label inside that gap
            for h in _overlapping(rf"(?:^|(?<=[\s\-(\[]))(?:{label})\b(?P<gap>[^\n\d\u2212]{{0,40}}?)(?={_NUM})", t, flags):
                if not _plausible_label_gap(h.group("gap")) or not _starts_word(t, h.end()):
                    continue
                v = self.value_at(t, h.end())
                if v is None or _HYPOTHETICAL.match(t, v.end()):
                    continue
                if h.group("gap").rstrip().endswith("-") and v.group("a").startswith(("-", "\u2212")):
                    continue
                hits.append((h, v))
            if hits:
                h, v = hits[-1]
                return self.decide(v, t[h.start():v.end()])

        # a label in another language: "Note : 4", "Puntuación: 4", "Bewertung: 4/5", "评分：4", "得分为4分"
        hits = []
        for h in re.finditer(rf"(?:^|(?<=[\s\-(\[])|(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]))"
                             rf"{_FOREIGN_LABEL}(?:\b|(?<={_CJK.pattern}))"
                             rf"(?P<gap>\s*(?:[:=\-\u2013]|为|是|は|は|:)?\s*(?:de\s+|di\s+|von\s+)?)(?={_NUM})", t, flags):
            v = self.value_at(t, h.end())
            if v is None or not _starts_word(t, h.end()) or not _FOREIGN_END.match(t, v.end()):
                continue
            hits.append((h, v))
        if hits:
            h, v = hits[-1]
            return self.decide(v, t[h.start():v.end()])

        # a form line "Name: 4", alone on its line
        hits = []
        for h in re.finditer(r"(?m)^[ \t\-]*[A-Za-z][A-Za-z ]{0,30}?\s*[:=]\s*(?=\S)", t):
            v = self.value_at(t, h.end())
            if v is not None and re.match(r"[ \t]*(?:stars?)?[ \t.!]*$", t[v.end():].split("\n", 1)[0], flags):
                hits.append((h, v))
        if hits:
            h, v = hits[-1]
            return self.decide(v, t[h.start():v.end()])

        # "rate it 4", "I'd give this summary a 2", "deserves a 4"
        hits = []
        for h in re.finditer(r"\b(?:rate|rated|give|gave|giving|assign|assigned|award|awarded|deserves?)\b(?:\s+(?:it|this|that|them|the|its|my)(?:\s+[\w']+){0,2}?)?"
                             r"(?:\s+(?:a|an|as|at|with))?\s+(?=" + _NUM + ")", t, flags):
            v = self.value_at(t, h.end())
            if v is not None and not _HYPOTHETICAL.match(t, v.end()):
                hits.append((h, v))
        if hits:
            h, v = hits[-1]
            return self.decide(v, t[h.start():v.end()])

        # a verbal label with the number in parentheses: "Good (4)", "Rating: Very good (5/5)"
        hits = []
        for h in re.finditer(rf"(?<![\w-]){_VERBAL}\s*\(\s*(?={_NUM})", t, flags):
            v = self.value_at(t, h.end())
            if v is not None and re.match(r"\s*\)", t[v.end():]):
                hits.append((h, v))
        if hits:
            results = [self.decide(v, t[h.start():v.end() + 1]) for h, v in hits]
            if len({r.score for r in results}) > 1:
                return ParseResult(None, f"{REASON_AMBIGUOUS} (several labelled scores: "
                                   f"{', '.join(repr(r.matched) for r in results)})", results[-1].matched)
            return results[-1]

        # JudgeLM's first line of two scores ("8 7", "8, 7"): two candidate scores and no rule to choose
        pair = re.match(rf"^\s*({_DIGITS})(?:,[ \t]+|[ \t]+)({_DIGITS})[ \t]*(?:\n|$)", t)  # "4,5" is 4.5
        if pair:
            return ParseResult(None, f"{REASON_AMBIGUOUS} (two scores on the first line: '{pair.group(0).strip()}')",
                               pair.group(0).strip())

        # the answer starts with the number: "4", "4.", "4/5", "4 out of 5", "4 - good", "4 stars"
        m = re.match(r"^(?:[\s(\[]|-(?=\s))*", t)
        v = self.value_at(t, m.end()) if m else None
        if v is not None and _leading_number_is_score(t):
            return self.decide(v, t[: v.end()])

        # a number carrying the scale anywhere: "... 4/5", "... 4 out of 5", "... 4 stars"
        hits = [v for v in _VALUE.finditer(t) if v.group("d") is not None and _starts_word(t, v.start())]
        if hits:
            return self.decide(hits[-1])
        hits = [h for h in re.finditer(rf"(?={_NUM}\s+stars?\b)", t, flags) if _starts_word(t, h.start())]
        if hits:
            v = self.value_at(t, hits[-1].start())
            if v is not None:
                return self.decide(v, t[v.start():v.end()])
        stars = re.search(r"[★⭐]+[☆]*", t)
        if stars:
            return self.decide(_VALUE.match(str(len(re.findall(r"[★⭐]", stars.group(0))))), stars.group(0))
        return None


def _overlapping(pattern: str, t: str, flags: int):
    """Every match of ``pattern`` in ``t``, overlapping ones included (the next search starts one
    character after the last match's start)."""
    rx, pos = re.compile(pattern, flags), 0
    while pos <= len(t):
        m = rx.search(t, pos)
        if m is None:
            return
        yield m
        pos = m.start() + 1


def _key(name: str | None) -> str:
    """A JSON or dict key, or an aspect, compared case- and separator-blind (``logical_correctness`` =
    ``Logical Correctness``)."""
    return re.sub(r"[\s_\-]+", " ", (name or "").strip().lower())


def _python_dict(t: str, i: int) -> tuple[dict | None, int]:
    """A Python dict literal starting at ``t[i]`` (``{'coherence': 4}``: single quotes, as FLASK's judge
    writes; read with ``ast.literal_eval``, never evaluated), and where it ends; ``(None, i)`` if none."""
    import ast

    end = t.find("}", i)
    if end < 0 or "{" in t[i + 1:end]:
        return None, i
    try:
        obj = ast.literal_eval(t[i:end + 1])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None, i
    return (obj, end + 1) if isinstance(obj, dict) else (None, i)


def _starts_word(t: str, pos: int) -> bool:
    """No letter, digit or decimal mark glued before ``pos`` (CJK text has no spaces: a CJK
    character before a number is a word boundary)."""
    return pos == 0 or not ((t[pos - 1].isalnum() and not _CJK.match(t[pos - 1])) or t[pos - 1] in ".,")


def _is_row(line: str) -> bool:
    """A Markdown table row (with or without the outer pipes); a header counts only when a
    separator line (``|---|---|``) follows it."""
    return "|" in line and bool(line.strip().strip("|").strip())


def _is_separator(line: str) -> bool:
    return bool(re.match(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$", line))


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def strip_reasoning(text: str) -> tuple[str, str | None]:
    """The answer without its reasoning block (rule 0 of the module docstring), and the missing
    reason when there is no answer to read (an unclosed block, nothing after it), else None.

    >>> strip_reasoning("<think>4 or 5? The summary is clear.</think>\\nScore: 4")
    ('\\nScore: 4', None)
    """
    closes = list(re.finditer(rf"</\s*{_THINK_TAGS}\s*>", text, re.IGNORECASE))
    opens = list(re.finditer(rf"<\s*{_THINK_TAGS}\s*>", text, re.IGNORECASE))
    if opens and (not closes or opens[-1].start() > closes[-1].start()):
        return "", (f"{REASON_UNFINISHED} (a <{opens[-1].group(0).strip('<> ')}> block never closed: the answer "
                    "ended while the model was still reasoning; allow more tokens, e.g. --max-tokens)")
    if not closes:
        return text, None
    rest = text[closes[-1].end():]
    if not rest.strip():
        return "", f"{REASON_EMPTY} after the reasoning block"
    return rest, None


def parse_score(text: str | None, scale: tuple[int, int] | object, *, aspect: str | None = None) -> ParseResult:
    """Parse a score on ``scale`` from a judge's answer, by the rules of the module docstring.

    Args:
        text: the raw answer (None counts as empty).
        scale: ``(min, max)`` or an object with ``min``/``max`` (a [`csem.rubrics.Scale`][]).
        aspect: the rubric aspect (e.g. ``"coherence"``); a label or JSON key naming it is preferred.

    Returns:
        [`ParseResult`][csem.judge.parse.ParseResult]; ``score`` within ``[min, max]`` or None with ``reason``.
    """
    lo, hi = (scale.min, scale.max) if hasattr(scale, "min") else scale  # type: ignore[union-attr]
    if text is None or not text.strip():
        return ParseResult(None, REASON_EMPTY)
    text, why = strip_reasoning(text)
    if why is not None:
        return ParseResult(None, why)
    reader = _Reader(float(lo), float(hi), aspect)
    raw = text.translate(_FULLWIDTH).replace("\u2019", "'").replace("\u00a0", " ")
    r = reader.structured(raw)
    if r is not None:
        return r
    t = _clean(text)
    if not t:
        return ParseResult(None, REASON_EMPTY)
    try:
        t = reader.scale_declarations(reader.drop_echoes(t)).strip()
        marks = list(_CORRECTION.finditer(t))
        if marks:
            r = reader.free_text(t[marks[-1].end():].strip(" \t,.;:-"))
            if r is not None:
                return r
        r = reader.free_text(t)
    except _Found as found:
        return found.result
    return r if r is not None else ParseResult(None, REASON_NO_SCORE)


def _plausible_label_gap(gap: str) -> bool:
    """Between label and number only punctuation and a few filler words may stand."""
    words = re.findall(r"[A-Za-z']+", gap)
    allowed = {"is", "of", "for", "the", "this", "that", "summary", "summary's", "response", "answer", "text",
               "translation", "output", "a", "an", "i", "i'd", "give", "would", "be", "final", "overall", "my",
               "score", "rating", "stars", "star", "out", "it", "as", "here", "was", "at", "should", "level",
               "quality", "assessment", "s", "its", "between", "around", "about"}
    return all(w.lower() in allowed or re.fullmatch(_LABEL, w, re.IGNORECASE) for w in words) and len(words) <= 6


def _leading_number_is_score(t: str) -> bool:
    """True when the answer starts with a number that is not the first item of a numbered list."""
    lines = [x.strip() for x in t.splitlines() if x.strip()]
    if not lines:
        return False
    first = lines[0]
    if not re.match(rf"^[\-(\[]*{_NUM}(?:{_HALF})?\s*(?:(?:/|out\s+of)\s*{_NUM})?\s*(?:stars?)?\s*"
                    r"(?:[-:,.)\]!\u2013\u2014]|$|\s)", first, re.IGNORECASE):
        return False
    # "1. Read the article ..." followed by "2. ..." is an echoed list of steps, not a score
    numbered = [x for x in lines if re.match(r"^\d+[.)]\s+\S", x)]
    return len(numbered) < 2
