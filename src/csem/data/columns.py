"""The one grammar of score column names: parse, format, and list the score columns of records.

Every module that reads or writes score columns goes through this one.

Grammar (``<aspect>`` and ``<name>`` never contain ``.`` or ``@``)::

    column     := kind "." body [ "@" tag ] [ "." side ]
    kind       := "human" | "judge" | "metric"
    body       := <aspect>                  (human, judge)
                | <name> [ "." <aspect> ]   (metric)
    side       := "missing" | "raw" | "mass" | "std" | "repeat" | "provenance"

* ``human.coherence``: a human judgment of an aspect.
* ``judge.coherence``: an LLM judge's score; ``judge.coherence@geval/summeval-coherence`` when two
  rubrics of one run share an aspect name; ``judge.coherence@gpt4`` when ``csem meta-eval`` joins
  a second prediction file with the same column (the tag is the file stem, it may contain dots).
* ``metric.rouge1`` (a metric without aspect: a baseline) and ``metric.csem.coherence`` (a learned
  metric's score of one aspect).
* Side fields describe a score column and are never scores themselves: ``.missing`` (text: why
  the judge gave no score), ``.raw`` (text: the judge's answer), ``.mass`` (number in [0, 1]:
  valid-score probability mass, ``probs`` mode), ``.std`` (number: MC-dropout standard deviation
  of a learned metric), ``.repeat`` (number: the judge's second, independent score of the same
  candidate under a second rendering of the rubric, [`csem.judge.repeat`][]; a measurement of the
  judge's repeatability, never a training label), ``.provenance`` (text: ``student`` or ``judge``,
  which of the two gave a cascade's combined score, [`csem.apply.cascade`][]). They come last,
  after the tag:
  ``judge.coherence@x.missing``.

A name whose last segment is a side-field name is always read as a side field, so no aspect or
metric may be called ``missing``, ``raw``, ``mass``, ``std``, ``repeat`` or ``provenance``
([`format_column`][csem.data.columns.format_column] refuses).
Score columns hold a float or None; text side fields hold a string or None.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from csem.errors import InputError

KINDS = ("human", "judge", "metric")
#: side fields: name -> value type ("text" or "number")
SIDE_FIELDS = {"missing": "text", "raw": "text", "mass": "number", "std": "number", "repeat": "number",
               "provenance": "text"}


@dataclass(frozen=True)
class Column:
    """A parsed column name.

    Attributes:
        kind: ``human`` | ``judge`` | ``metric``.
        aspect: the aspect (``coherence``), or None for a metric without aspect (``metric.rouge1``).
        name: the metric name (``rouge1``, ``csem``); None for human and judge columns.
        tag: the text after ``@`` (rubric id or prediction file stem), or None.
        side: the side field (``missing``, ``raw``, ``mass``, ``std``), or None for a score column.
    """

    kind: str
    aspect: str | None = None
    name: str | None = None
    tag: str | None = None
    side: str | None = None

    @property
    def is_score(self) -> bool:
        """True for a score column, False for a side field."""
        return self.side is None

    @property
    def score(self) -> "Column":
        """The score column this column belongs to (itself when it is one)."""
        return replace(self, side=None)

    def with_side(self, side: str | None) -> "Column":
        """The same column with another side field (None: the score column)."""
        return replace(self, side=side)

    def with_tag(self, tag: str | None) -> "Column":
        """The same column with another ``@`` tag."""
        return replace(self, tag=tag)

    def __str__(self) -> str:
        return format_column(self.kind, self.aspect, name=self.name, tag=self.tag, side=self.side)


def _check_segment(value: str, what: str) -> None:
    if not value or "." in value or "@" in value:
        raise InputError(f"{what} {value!r} must be non-empty and contain neither '.' nor '@'")
    if value in SIDE_FIELDS:
        raise InputError(f"{what} {value!r} is reserved for a side field ({', '.join(SIDE_FIELDS)})")


def format_column(kind: str, aspect: str | None = None, *, name: str | None = None, tag: str | None = None,
                  side: str | None = None) -> str:
    """The column name of a kind/aspect/metric name/tag/side.

    ``format_column("judge", "coherence")`` -> ``judge.coherence``;
    ``format_column("metric", "coherence", name="csem", side="std")`` -> ``metric.csem.coherence.std``.

    Raises:
        ValueError: unknown kind or side; a human/judge column without aspect; a metric column
            without name; a segment containing ``.``/``@`` or named like a side field.
    """
    if kind not in KINDS:
        raise InputError(f"unknown score column kind {kind!r}; choose from {', '.join(KINDS)}")
    if side is not None and side not in SIDE_FIELDS:
        raise InputError(f"unknown side field {side!r}; choose from {', '.join(SIDE_FIELDS)}")
    parts = [kind]
    if kind == "metric":
        if name is None:
            raise InputError("a metric column needs a metric name (metric.<name>[.<aspect>])")
        _check_segment(name, "metric name")
        parts.append(name)
    elif aspect is None:
        raise InputError(f"a {kind} column needs an aspect ({kind}.<aspect>)")
    elif name is not None:
        raise InputError(f"a {kind} column has no metric name (got {name!r})")
    if aspect is not None:
        _check_segment(aspect, "aspect")
        parts.append(aspect)
    out = ".".join(parts)
    if tag:
        out += "@" + tag
    if side:
        out += "." + side
    return out


def metric_column(name: str, aspect: str | None = None, *, side: str | None = None) -> str:
    """The column of a learned metric's aspect; an aspect that carries a judge tag (a head of a
    multi-judge student, ``coherence@gpt-4``) keeps it as the column's tag.

    ``metric_column("csem", "coherence")`` -> ``metric.csem.coherence``;
    ``metric_column("csem", "coherence@gpt-4", side="std")`` -> ``metric.csem.coherence@gpt-4.std``.

    Raises:
        ValueError: as [`format_column`][csem.data.columns.format_column].
    """
    base, at, tag = (aspect or "").partition("@")
    return format_column("metric", base or None, name=name, tag=tag if at else None, side=side)


def parse_column(column: str) -> Column | None:
    """Parse a column name; None when it is not a score column or side field (``source``, ``id``,
    ``judge_name``, ``human.`` with nothing after the dot, ...).

    Examples: ``judge.coherence`` -> ``Column("judge", "coherence")``;
    ``metric.csem.coherence.std`` -> ``Column("metric", "coherence", "csem", side="std")``;
    ``judge.fluency@gpt4.missing`` -> ``Column("judge", "fluency", tag="gpt4", side="missing")``.
    """
    if not isinstance(column, str):
        return None
    kind, dot, rest = column.partition(".")
    if not dot or kind not in KINDS or not rest:
        return None
    side = None
    head, dot, last = rest.rpartition(".")
    if dot and last in SIDE_FIELDS and head:
        rest, side = head, last
    rest, at, tag = rest.partition("@")
    if not rest or (at and not tag):
        return None
    if kind == "metric":
        name, sep, aspect = rest.partition(".")
        if not name or (sep and not aspect):
            return None
        return Column(kind, aspect or None, name=name, tag=tag or None, side=side)
    return Column(kind, rest, tag=tag or None, side=side)


def is_score_column(column: str, kinds: Iterable[str] = KINDS) -> bool:
    """True when ``column`` is a score column (not a side field) of one of ``kinds``."""
    c = parse_column(column)
    return c is not None and c.is_score and c.kind in tuple(kinds)


def is_side_column(column: str) -> bool:
    """True when ``column`` is a side field (``judge.coherence.missing`` ...)."""
    c = parse_column(column)
    return c is not None and not c.is_score


def side_kind(column: str) -> str | None:
    """``"score"`` for a score column, ``"text"``/``"number"`` for a side field, None otherwise:
    the type a reader converts the column's values to."""
    c = parse_column(column)
    if c is None:
        return None
    return "score" if c.side is None else SIDE_FIELDS[c.side]


def aspect_of(column: str) -> str | None:
    """The aspect of a column (``judge.coherence@x`` -> ``coherence``; ``metric.rouge1`` -> None);
    None for a name outside the grammar."""
    c = parse_column(column)
    return None if c is None else c.aspect


def score_columns(records: Iterable[Mapping[str, Any]], kinds: Iterable[str] = KINDS) -> list[str]:
    """The score columns (side fields excluded) of ``kinds`` present in any record, in first-seen order.

    Args:
        records: csem records (dicts). kinds: subset of `KINDS`, e.g. ``("human",)``.
    """
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise InputError(f"unknown score column kind(s) {bad}; choose from {', '.join(KINDS)}")
    seen: dict[str, bool] = {}
    out: list[str] = []
    for r in records:
        for k in r:
            if k in seen:
                continue
            seen[k] = is_score_column(k, kinds)
            if seen[k]:
                out.append(k)
    return out
