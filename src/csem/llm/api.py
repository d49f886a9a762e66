"""What a provider implements ([`ModelAPI`][csem.llm.api.ModelAPI]), its result types and its errors.

A provider holds only provider code: how to turn chat messages into a score distribution or into
answers with one request, and how to map its failures to [`BackendError`][csem.llm.api.BackendError] (``transient`` when a
later retry may succeed). Everything around a request (retries with backoff, the deadline, the
concurrency limit, giving up after repeated failures, remembering that logprobs are unsupported, API
key redaction) is done once for all providers by [`csem.llm.model.Model`][] (inspect_ai's
``ModelAPI`` / ``Model`` split).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from csem.llm.config import GenerateConfig

Messages = Sequence[dict]  # [{"role": "system"|"user"|"assistant", "content": str}, ...]

#: the missing reason of a judgment not attempted because the backend gave up (see ``Model``)
NOT_ATTEMPTED = "not attempted: backend unavailable"


class BackendError(RuntimeError):
    """A backend failed to answer.

    Attributes:
        transient: True when retrying later may succeed (connection refused, 5xx, 429, timeout,
            deadline, a malformed 200 reply): the wrapper retries such failures, and the judge
            records them as missing but never caches them, so a re-run retries.
        retry_after: seconds the server asked the client to wait before retrying (its
            ``Retry-After`` header on a 429 or 503), or None; the wrapper waits that long (bounded
            by its ``retry_after_max``) instead of its own backoff.
    """

    def __init__(self, message: str, *, transient: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


class BackendAuthError(BackendError):
    """The backend refused the credentials (HTTP 401/403: wrong or missing API key). Never transient:
    a run stops at once (every other request would be refused too) and the CLI exits 1. The message
    names the backend, never the key."""

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message, transient=False)


class LogprobsUnsupported(BackendError):
    """The backend cannot return token probabilities (the judge then falls back to sample/parse)."""


class BackendUnavailable(BackendError):
    """Not attempted: the wrapper gave up on this backend after repeated transient failures."""

    def __init__(self, message: str = NOT_ATTEMPTED):
        super().__init__(message, transient=True)


@dataclass
class ScoreDistribution:
    """Probability of each score of a scale from one forward pass.

    Attributes:
        probs: ``{score: p}`` with p in [0, 1]: the probability that the answer is exactly that
            number (chain rule over its tokens, see the provider's docstring). Not renormalised.
        mass: ``sum(probs.values())`` in [0, 1]: the probability mass that fell on valid scores.
        prompt_tokens: prompt length in tokens; evaluated_tokens: tokens actually computed for this
            request (smaller than ``prompt_tokens`` when a cached prefix was reused; -1 if unknown).
        top: the most probable next token's text (kept as the judgment's raw output).
        completion_tokens: tokens the provider billed as generated (its ``usage``; 0 in process).
    """

    probs: dict[int, float]
    mass: float
    prompt_tokens: int = 0
    evaluated_tokens: int = -1
    top: str | None = None
    completion_tokens: int = 0


@dataclass
class GenerationResult:
    """One generated answer.

    Attributes:
        text: the answer (stop string excluded). tokens: completion tokens. prompt_tokens: prompt
        length (0 if unknown). finish_reason: ``stop`` | ``length`` | provider-specific.
        logprobs: with ``GenerateConfig.logprobs``: per generated token ``{"token", "logprob",
        "top": {token: logprob}}`` (natural log); None otherwise.
    """

    text: str
    tokens: int = 0
    prompt_tokens: int = 0
    finish_reason: str | None = None
    logprobs: list[dict] | None = None


@runtime_checkable
class ModelAPI(Protocol):
    """A provider: one request per call, no retries, no concurrency control (the wrapper does that).

    Attributes:
        id: stable identity of provider + model, including the model file hash where there is one
            (part of every cache key; never contains an API key).
        max_concurrency: requests the provider can serve at once (1 for in-process models: they are
            then served in submission order, which keeps a source's prefix cached); None = no limit.
        default_concurrency: requests in flight when the user sets none.
        features: optional capabilities: ``"beam_search"``, ``"logprobs"`` (token logprobs in
            [`generate`][csem.llm.api.ModelAPI.generate]), ``"response_format"`` (answers constrained to a JSON schema, JSON mode).
            Optional attribute; absent means none.
        secrets: strings the wrapper removes from every error message (API keys). Optional.
    """

    id: str
    max_concurrency: int | None
    default_concurrency: int

    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        """p(score) for each of ``scores`` as the first thing the assistant writes.

        Raises:
            LogprobsUnsupported: the provider exposes no logits/logprobs.
            BackendError: any other failure (``transient`` set when a retry may succeed).
        """
        ...

    async def generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        """Up to ``config.n`` answers to ``messages`` (``config`` is resolved: no unset sampling field).

        A provider may return fewer than ``n`` answers (a server without ``n > 1``); the wrapper
        then asks again for the rest.

        Raises:
            BackendError: the request failed (``transient`` set when a retry may succeed).
        """
        ...

    def close(self) -> None:
        """Release the model / connections."""
        ...
