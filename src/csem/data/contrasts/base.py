"""What every contrast family shares: the aspects, the result of a perturbation (`Perturbed`),
what it may draw from besides the text (`Context`), severities, and the seeded random draws
(`rng_for`: SHA-256 of ``(seed, record key, name)``, so a record's pairs do not depend on the order
of the records)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Callable

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


def severity(x: float) -> float:
    """``x`` rounded to 3 places and kept in [0.01, 1]: a perturbation's severity."""
    return round(min(1.0, max(0.01, x)), 3)


def rng_for(seed: int, *parts: Any) -> random.Random:
    """A ``random.Random`` seeded from ``seed`` and ``parts`` through SHA-256 (stable across runs and
    Python processes, unlike ``hash``)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in (seed, *parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(h[:8], "big"))
