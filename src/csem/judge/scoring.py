"""The three G-Eval scoring modes over any backend: ``probs``, ``sample``, ``parse``.

* ``probs`` (Liu et al. 2023, G-Eval Eq. 1): ``score = sum_s p(s) * s / sum_s p(s)`` over the
  integer scores ``s`` of the scale, from one forward pass; ``mass = sum_s p(s)`` in [0, 1] is the
  probability that fell on valid scores. Below ``min_mass`` the judgment is missing.
* ``sample`` (G-Eval's GPT-4 procedure, Sec. 2.3): ``n`` answers at ``temperature``; the score is
  the mean of the answers that parse ([`csem.judge.parse.parse_score`][]); missing if none does.
* ``parse``: one greedy answer (temperature 0), parsed.

Every function returns a [`Judgment`][csem.judge.scoring.Judgment]; an unparseable answer is missing with its raw text,
never 0 and never NaN.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Sequence

from csem.llm import GenerateConfig, Messages, Model
from csem.judge.parse import kept_raw, parse_score

MODES = ("probs", "sample", "parse")


@dataclass
class Judgment:
    """One judge decision.

    Attributes:
        score: in [scale.min, scale.max] (fractional for probs/sample) or None when missing.
        missing: reason when ``score`` is None.
        raw: the answer text (sample: JSON list of the n answers; probs: the top next token).
        mass: probs mode: valid-score probability mass in [0, 1]. probs: ``{score: p}``.
        mode: the mode that produced it. prompt_tokens/completion_tokens: token counts.
        evaluated_tokens: prompt tokens actually computed (prefix reuse makes it smaller).
        latency_s: wall seconds of the backend call. cached: served from the cache.
        transient: the failure may go away on retry (never cached).
    """

    score: float | None
    missing: str | None = None
    raw: str | None = None
    mass: float | None = None
    probs: dict[int, float] | None = None
    mode: str = "probs"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    evaluated_tokens: int = -1
    latency_s: float = 0.0
    cached: bool = False
    transient: bool = False


def weighted_score(probs: dict[int, float], *, min_mass: float = 0.0) -> tuple[float | None, float, str | None]:
    """G-Eval's probability-weighted score from ``{score: p}``.

    Returns:
        ``(score, mass, missing_reason)``: score = sum p(s) s / mass (None when mass <= min_mass
        or mass == 0), mass = sum p(s) in [0, 1].
    """
    mass = float(sum(probs.values()))
    if mass <= 0.0 or mass < min_mass:
        return None, mass, f"valid-score probability mass {mass:.3g} below min_mass {min_mass:g}"
    return float(sum(int(s) * p for s, p in probs.items()) / mass), mass, None


async def score_probs(backend: Model, messages: Messages, scale: Sequence[int], *, min_mass: float = 0.0) -> Judgment:
    """Probability-weighted score over ``scale`` (a list of integer scores). Raises BackendError."""
    t0 = time.perf_counter()
    dist = await backend.score_distribution(messages, list(scale))
    dt = time.perf_counter() - t0
    score, mass, reason = weighted_score(dist.probs, min_mass=min_mass)
    return Judgment(score=score, missing=reason, raw=kept_raw(dist.top), mass=mass, probs=dict(dist.probs), mode="probs",
                    prompt_tokens=dist.prompt_tokens, completion_tokens=dist.completion_tokens,
                    evaluated_tokens=dist.evaluated_tokens, latency_s=dt)


async def score_sample(backend: Model, messages: Messages, scale: tuple[int, int], config: GenerateConfig,
                       *, aspect: str | None = None) -> Judgment:
    """Mean of the parsed scores of ``config.n`` sampled answers. Raises BackendError."""
    t0 = time.perf_counter()
    outs = await backend.generate(messages, config)
    dt = time.perf_counter() - t0
    parsed = [parse_score(o.text, scale, aspect=aspect) for o in outs]
    good = [p.score for p in parsed if p.score is not None]
    texts = [kept_raw(o.text) for o in outs]  # parsed whole above; what is kept is capped
    config = config.resolved()
    mode = "sample" if config.n > 1 or config.temperature > 0 else "parse"
    base = dict(raw=json.dumps(texts, ensure_ascii=False) if mode == "sample" else texts[0], mode=mode,
                prompt_tokens=max((o.prompt_tokens for o in outs), default=0),
                completion_tokens=sum(o.tokens for o in outs), latency_s=dt)
    if not good:
        reasons = sorted({p.reason for p in parsed if p.reason})
        what = f"no parsable score in {len(outs)} answers" if mode == "sample" else "unparseable answer"
        return Judgment(score=None, missing=f"{what}: {'; '.join(reasons)}", **base)
    return Judgment(score=float(sum(good) / len(good)), **base)

