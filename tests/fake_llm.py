"""A FAKE in-process LLM backend for the fast test tier: judge and collect plumbing without a model.

:class:`FakeLLM` implements :class:`csem.llm.ModelAPI` with no model behind it: every answer is a
deterministic function of the prompt text (sha256), so a test can check caching, resuming, keyed
results, missing values, counts and the CLI without loading a GGUF file. Its scores mean nothing;
tests about what a real model does (probabilities, prefix reuse, sampling) use SmolLM2 and are
marked ``slow``.

* ``score_distribution``: a distribution over the asked scores peaked on ``peak(prompt)``, with
  90% of the mass on valid scores.
* ``generate``: ``n`` answers ``"<score>. <words of the prompt>"`` (a parseable rating, and a
  candidate-like text for collect), varied by the config's seed and the answer index; to a
  comparison prompt (a pairwise rubric's ``answer ONLY "A" or "B"`` form) one of the two labels.
* ``fail_on``: a prompt containing this text raises :class:`csem.llm.BackendError` (a permanent
  failure unless ``transient``), to test partial runs; ``logprobs=False`` raises
  :class:`csem.llm.LogprobsUnsupported` from ``score_distribution``.

URI: ``fake:<name>`` once :func:`register` has run (the ``fake_llm`` fixture does it); options
``fail_on``, ``transient``, ``logprobs``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

from csem.llm import BackendError, GenerateConfig, GenerationResult, LogprobsUnsupported, ScoreDistribution

SCHEME = "fake"


def _h(*parts: object) -> int:
    return int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:12], 16)


class FakeLLM:
    """A fake provider (see the module docstring). ``calls`` counts requests of each kind."""

    max_concurrency = None
    default_concurrency = 4
    features = ("logprobs",)

    def __init__(self, name: str = "test", *, fail_on: str | None = None, transient: bool = False,
                 logprobs: bool = True):
        self.id = f"{SCHEME}:{name}"
        self.fail_on, self.transient, self.logprobs = fail_on, bool(transient), logprobs
        self.calls = {"score_distribution": 0, "generate": 0}

    @staticmethod
    def _text(messages) -> str:
        return "\n".join(str(m.get("content", "")) for m in messages)

    def _check(self, text: str) -> None:
        if self.fail_on and self.fail_on in text:
            raise BackendError(f"fake backend: refused a prompt containing {self.fail_on!r}", transient=self.transient)

    async def score_distribution(self, messages, scores: Sequence[int]) -> ScoreDistribution:
        self.calls["score_distribution"] += 1
        text = self._text(messages)
        self._check(text)
        if not self.logprobs:
            raise LogprobsUnsupported("fake backend: no logprobs")
        scores = list(scores)
        peak = _h(text) % len(scores)
        weights = [1.0 / (1 + 3 * abs(i - peak)) for i in range(len(scores))]
        total = sum(weights)
        probs = {s: 0.9 * w / total for s, w in zip(scores, weights)}
        n_tok = len(text.split())
        return ScoreDistribution(probs=probs, mass=sum(probs.values()), prompt_tokens=n_tok, evaluated_tokens=n_tok,
                                 top=str(scores[peak]))

    async def generate(self, messages, config: GenerateConfig) -> list[GenerationResult]:
        self.calls["generate"] += 1
        text = self._text(messages)
        self._check(text)
        words = text.split() or ["empty"]
        choice = re.search(r'answer ONLY "([^"]+)" or "([^"]+)"', text)  # a comparison prompt
        out = []
        for i in range(max(1, int(config.n or 1))):
            h = _h(text, config.seed, i)
            if choice:
                answer = choice.group(1 + h % 2)
                out.append(GenerationResult(text=answer, tokens=1, prompt_tokens=len(words), finish_reason="stop"))
                continue
            k = 3 + h % 6
            start = (h // 7) % len(words)
            body = " ".join(words[(start + j) % len(words)] for j in range(k))
            answer = f"{1 + h % 5}. {body}"
            if config.max_tokens:
                answer = " ".join(answer.split()[: int(config.max_tokens)])
            out.append(GenerationResult(text=answer, tokens=len(answer.split()), prompt_tokens=len(words),
                                        finish_reason="stop"))
        return out

    def close(self) -> None:
        pass


def fake_backend(target: str = "", **options) -> FakeLLM:
    """Factory of the ``fake`` scheme: ``fake:<name>`` -> :class:`FakeLLM` (options as its keywords;
    strings from ``--judge-opt`` are converted)."""
    for k in ("transient", "logprobs"):
        if isinstance(options.get(k), str):
            options[k] = options[k].lower() in ("1", "true", "yes")
    return FakeLLM(target or "test", **options)


def register() -> str:
    """Register the ``fake`` scheme with csem's backend registry; returns a usable URI."""
    from csem.llm import register_backend

    register_backend(SCHEME, fake_backend)
    return f"{SCHEME}:test"
