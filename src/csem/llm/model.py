"""The wrapper every provider is used through: [`Model`][csem.llm.model.Model] (inspect_ai's ``Model`` over ``ModelAPI``).

It owns, once for all providers, what used to be spread over the OpenAI backend and the judge runner:

* **concurrency**: at most ``concurrency`` requests in flight (an ``asyncio.Semaphore``; capped at
  the provider's ``max_concurrency``, 1 for in-process models, whose requests are then served in
  submission order);
* **retries**: transient failures (429, 5xx, timeouts, connection errors: ``BackendError.transient``)
  are retried up to ``max_retries`` times with exponential backoff and full jitter (tenacity
  ``wait_random_exponential(multiplier=backoff, max=backoff_max)``); a server that says how long
  to wait (``Retry-After`` on a 429 or 503: ``BackendError.retry_after``) is waited for that long
  instead, at most ``retry_after_max`` seconds and never past the deadline; the semaphore is
  released while waiting;
* **deadline**: ``deadline`` seconds for everything from the first request on; afterwards every call
  fails at once as transient (``deadline of D s exceeded``);
* **abort**: after ``max_consecutive_failures`` transient failures in a row (retries spent) the
  backend is given up: later calls raise [`BackendUnavailable`][csem.llm.BackendUnavailable] without a request;
* **fallback**: once the provider said it has no token probabilities, [`score_distribution`][csem.llm.model.Model.score_distribution]
  raises [`LogprobsUnsupported`][csem.llm.LogprobsUnsupported] at once (the judge then scores by ``parse`` or ``sample``); a
  provider that returns fewer than ``n`` answers (a server without ``n > 1``) is asked again for the
  rest, one at a time, with the seeds continued;
* **redaction**: every error message leaves through the one redaction rule
  ([`csem.llm.redact`][]: credentials in URLs and headers, bearer tokens) with the provider's
  secrets (API keys) replaced by ``***``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from csem.errors import InputError
from csem.llm.api import (NOT_ATTEMPTED, BackendError, BackendUnavailable, GenerationResult, LogprobsUnsupported,
                          Messages, ModelAPI, ScoreDistribution)
from csem.llm.config import GenerateConfig
from csem.llm.redact import redact_text

T = TypeVar("T")

#: keyword options of [`csem.llm.get_model`][] that configure the wrapper (the rest go to the provider)
WRAPPER_OPTIONS = {"concurrency": int, "max_retries": int, "backoff": float, "backoff_max": float,
                   "deadline": float, "max_consecutive_failures": int, "retry_after_max": float}


class _DeadlineHit(Exception):
    pass


def _retryable(exc: BaseException) -> bool:
    return (isinstance(exc, BackendError) and exc.transient
            and not isinstance(exc, (LogprobsUnsupported, BackendUnavailable)))


class Model:
    """A provider ([`csem.llm.api.ModelAPI`][]) with the request policy of the module docstring.

    Args:
        api: the provider.
        concurrency: requests in flight (default: the provider's ``default_concurrency``).
        max_retries: retries of a transient failure (0 = none). backoff, backoff_max: seconds
            (multiplier and cap of the exponential backoff).
        deadline: seconds for all requests from the first on (None = no deadline).
        max_consecutive_failures: give up after this many transient failures in a row (None = never).
        retry_after_max: the longest wait, in seconds, a server's ``Retry-After`` is honoured for
            (a longer request waits this long).

    Attributes:
        id: the provider's id (part of every cache key). concurrency: the effective limit.
        logprobs_supported: None until known, then whether [`score_distribution`][csem.llm.model.Model.score_distribution] works.
        stats: ``requests`` sent, ``retries``, ``failures`` (after retries).
    """

    def __init__(self, api: ModelAPI, *, concurrency: int | None = None, max_retries: int = 4, backoff: float = 0.5,
                 backoff_max: float = 20.0, deadline: float | None = None,
                 max_consecutive_failures: int | None = None, retry_after_max: float = 60.0):
        self.api = api
        wanted = int(concurrency) if concurrency is not None else int(getattr(api, "default_concurrency", 1) or 1)
        limit = getattr(api, "max_concurrency", None)
        self.concurrency = max(1, min(wanted, int(limit)) if limit else wanted)
        self.max_retries, self.backoff, self.backoff_max = int(max_retries), float(backoff), float(backoff_max)
        self.deadline = None if deadline is None else float(deadline)
        self.max_consecutive_failures = max_consecutive_failures
        self.retry_after_max = float(retry_after_max)
        self.logprobs_supported: bool | None = None
        self.aborted = False
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self._deadline_at: float | None = None
        self._consecutive = 0
        self._gave_up = NOT_ATTEMPTED
        self._loop_sem: dict[int, asyncio.Semaphore] = {}

    @property
    def id(self) -> str:
        return self.api.id

    def settings(self) -> dict:
        """The wrapper options this model was built with (``Model(api, **settings)`` rebuilds it)."""
        return {"concurrency": self.concurrency, "max_retries": self.max_retries, "backoff": self.backoff,
                "backoff_max": self.backoff_max, "deadline": self.deadline,
                "max_consecutive_failures": self.max_consecutive_failures, "retry_after_max": self.retry_after_max}

    def __repr__(self) -> str:
        return f"Model({self.id!r}, concurrency={self.concurrency})"

    # ------------------------------------------------------------------ policy helpers
    def redact(self, text: str) -> str:
        """``text`` through the one redaction rule ([`csem.llm.redact.redact_text`][]: URL credentials,
        credential headers, bearer tokens) with the provider's secrets replaced by ``***``."""
        return redact_text(text, getattr(self.api, "secrets", ()) or ())

    def check(self, config: GenerateConfig) -> None:
        """Raise ``ValueError`` when ``config`` asks for something the provider cannot do."""
        features = set(getattr(self.api, "features", ()) or ())
        if config.beam_search and "beam_search" not in features:
            raise InputError(f"beam search (num_beams > 1) needs a transformers generator (hf:MODEL); "
                             f"{self.id} samples only (top_k, top_p, temperature)")
        if config.logprobs and "logprobs" not in features:
            raise InputError(f"{self.id} cannot return the logprobs of generated tokens")
        if config.response_format and "response_format" not in features:
            raise InputError(f"{self.id} cannot constrain answers to a JSON schema (response_format)")

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._loop_sem.get(id(loop))
        if sem is None:  # a new event loop (run_sync) gets its own semaphore
            sem = asyncio.Semaphore(self.concurrency)
            self._loop_sem = {id(loop): sem}
        return sem

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        if self._deadline_at is None:
            self._deadline_at = time.monotonic() + self.deadline
        return self._deadline_at - time.monotonic()

    def _failed(self, exc: BackendError | None) -> None:
        self.stats["failures"] += 1
        self._consecutive += 1
        if self.max_consecutive_failures is not None and self._consecutive >= self.max_consecutive_failures:
            if not self.aborted:
                last = self.redact(str(exc)) if exc is not None else f"deadline of {self.deadline:g} s exceeded"
                self._gave_up = (f"{NOT_ATTEMPTED} (given up after {self._consecutive} failed calls in a row; "
                                 f"the last: {last})")
            self.aborted = True

    def _redacted(self, exc: BackendError) -> BackendError:
        return _with_message(exc, self.redact(str(exc)))

    def _wait(self, retry_state: Any) -> float:
        """Seconds before the next attempt: the server's ``Retry-After`` (bounded by
        ``retry_after_max``) when it sent one, else exponential backoff with full jitter; never past
        the deadline."""
        from tenacity import wait_random_exponential

        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        asked = getattr(exc, "retry_after", None)
        if asked is not None:
            wait = min(float(asked), self.retry_after_max)
        else:
            wait = wait_random_exponential(multiplier=self.backoff, max=self.backoff_max)(retry_state)
        left = self._remaining()
        return max(0.0, min(wait, left)) if left is not None else wait

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """One provider call under the semaphore, with retries, the deadline and the abort rule."""
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_after_delay

        if self.aborted:
            raise BackendUnavailable(self._gave_up)
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            raise BackendError(f"{self.id}: deadline of {self.deadline:g} s exceeded", transient=True)
        stop = stop_after_attempt(self.max_retries + 1)
        if remaining is not None:
            stop = stop | stop_after_delay(max(remaining, 0.0))
        sem = self._semaphore()
        result: Any = None
        sent, last = 0, None  # requests this call sent, and the last failure
        try:
            async for attempt in AsyncRetrying(retry=retry_if_exception(_retryable), stop=stop, reraise=True,
                                               wait=self._wait):
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        self.stats["retries"] += 1
                    async with sem:
                        if self.aborted:
                            raise BackendUnavailable(self._gave_up)
                        left = self._remaining()
                        if left is not None and left <= 0:
                            raise _DeadlineHit()
                        self.stats["requests"] += 1
                        sent += 1
                        coro = fn(*args)
                        try:
                            result = await (asyncio.wait_for(coro, timeout=left) if left is not None else coro)
                        except BackendError as exc:
                            last = exc
                            raise
        except BackendUnavailable:
            if sent and last is not None:  # this call was sent and failed before the backend was given up
                raise self._redacted(BackendError(f"{last} (failed after {sent} attempt{'s' * (sent > 1)}, then the "
                                                  "backend was given up)", transient=True)) from None
            raise
        except LogprobsUnsupported as exc:
            self.logprobs_supported = False
            raise self._redacted(exc) from None
        except BackendError as exc:
            if exc.transient:
                self._failed(exc)
                if sent > 1:
                    exc = _with_message(exc, f"{exc} (failed after {sent} attempts)")
            raise self._redacted(exc) from None
        except (asyncio.TimeoutError, _DeadlineHit):
            self._failed(None)
            raise BackendError(f"{self.id}: deadline of {self.deadline:g} s exceeded", transient=True) from None
        self._consecutive = 0
        return result

    # ------------------------------------------------------------------ the protocol, with the policy
    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        """p(score) for each of ``scores`` (see [`csem.llm.api.ModelAPI.score_distribution`][]).

        Raises:
            LogprobsUnsupported: the provider has no token probabilities (remembered).
            BackendUnavailable: given up after repeated failures. BackendError: the call failed.
        """
        if self.logprobs_supported is False:
            raise LogprobsUnsupported(f"{self.id}: backend gives no token probabilities")
        dist = await self._call(self.api.score_distribution, messages, list(scores))
        self.logprobs_supported = True
        return dist

    async def generate(self, messages: Messages, config: GenerateConfig | None = None) -> list[GenerationResult]:
        """``config.n`` answers to ``messages`` (``config`` resolved against `csem.llm.config.DEFAULTS`).

        Raises:
            ValueError: the provider cannot honour ``config`` ([`check`][csem.llm.model.Model.check]).
            BackendUnavailable: given up after repeated failures. BackendError: a call failed.
        """
        cfg = (config or GenerateConfig()).resolved()
        self.check(cfg)
        out = list(await self._call(self.api.generate, messages, cfg))[: cfg.n]
        if len(out) < cfg.n:  # a server without n > 1: the rest as single requests, seeds continued
            singles = [cfg.model_copy(update={"n": 1, "seed": None if cfg.seed is None else cfg.seed + i})
                       for i in range(len(out), cfg.n)]
            for answers in await gather_all([self._call(self.api.generate, messages, c) for c in singles]):
                out.extend(answers[:1])
        return out[: cfg.n]

    def close(self) -> None:
        """Close the provider (an in-process model is unloaded)."""
        self.api.close()


def _with_message(exc: BackendError, msg: str) -> BackendError:
    """A copy of ``exc`` (same type, ``transient`` and ``retry_after``) with message ``msg``."""
    try:
        new = type(exc)(msg, transient=exc.transient)
    except TypeError:  # a subclass with another signature
        new = BackendError(msg, transient=exc.transient)
    new.retry_after = getattr(exc, "retry_after", None)
    return new


async def gather_all(aws: Sequence[Awaitable[T]]) -> list[T]:
    """Like ``asyncio.gather`` (results in order), but the first failure cancels the others before it
    is raised, so no request keeps running after the caller has failed."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
