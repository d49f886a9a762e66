"""OpenAI-compatible chat API judge (``openai:MODEL``): OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server.

Options (keyword arguments of :class:`OpenAIBackend`, or ``--judge-opt key=value`` on the CLI):
``base_url`` (else ``OPENAI_BASE_URL``; Azure: ``AZURE_OPENAI_ENDPOINT``), ``api_key`` (else
``OPENAI_API_KEY``, Azure: ``AZURE_OPENAI_API_KEY``; servers without auth need none),
``api_version`` (Azure, else ``OPENAI_API_VERSION``), ``concurrency`` (requests in flight, default 8),
``timeout`` (seconds per request), ``deadline`` (seconds for everything from the first request on;
afterwards requests fail as transient), ``max_retries``, ``backoff`` / ``backoff_max`` (seconds).

* Async core (``openai.AsyncOpenAI``) with a semaphore; retries with exponential backoff and full
  jitter (tenacity ``wait_random_exponential``) on 429, 5xx, timeouts and connection errors.
* ``probs``: one request with ``max_tokens=1, logprobs=True, top_logprobs=20``; p(s) is the summed
  probability of the top tokens whose text (stripped) is the integer ``s``. With a tokenizer that
  splits numbers into digits the first token of ``10`` is ``1``, so on scales beyond 9 the first-token
  distribution is an approximation (exact on the in-process llama-cpp backend). A server that rejects
  logprobs or returns none raises :class:`LogprobsUnsupported` and the runner falls back to
  ``parse`` or ``sample``.
* The API key never appears in :attr:`id`, error messages or the cache (errors are redacted).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
from typing import Any, Sequence
from urllib.parse import urlparse

from csem.judge.backends.base import (BackendError, GenerationConfig, GenerationResult, LogprobsUnsupported, Messages,
                                      ScoreDistribution, register_backend)


class OpenAIBackend:
    """See the module docstring for options. Raises BackendError on failures (``transient`` set for
    429/5xx/timeouts/connection errors after the retries are spent, and for the deadline)."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 api_version: str | None = None, azure: bool | None = None, concurrency: int = 8,
                 timeout: float = 60.0, deadline: float | None = None, max_retries: int = 4, backoff: float = 0.5,
                 backoff_max: float = 20.0, top_logprobs: int = 20):
        if not model:
            raise ValueError("openai backend needs a model name: openai:MODEL (e.g. openai:gpt-4o-mini)")
        self.model = model
        az_endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT")
        self.azure = bool(azure) if azure is not None else bool(
            (base_url and ".openai.azure.com" in base_url) or (not base_url and not os.environ.get("OPENAI_BASE_URL")
                                                                and az_endpoint))
        self.base_url = base_url or (az_endpoint if self.azure else os.environ.get("OPENAI_BASE_URL")) or None
        key = api_key or (os.environ.get("AZURE_OPENAI_API_KEY") if self.azure else None) or os.environ.get("OPENAI_API_KEY")
        self._api_key = key or "sk-no-key"  # local servers without auth still need a non-empty key
        self.api_version = api_version or os.environ.get("OPENAI_API_VERSION") or "2024-06-01"
        self.concurrency = max(1, int(concurrency))
        self.timeout, self.deadline = float(timeout), (None if deadline is None else float(deadline))
        self.max_retries, self.backoff, self.backoff_max = int(max_retries), float(backoff), float(backoff_max)
        self.top_logprobs = int(top_logprobs)
        where = urlparse(self.base_url).netloc + urlparse(self.base_url).path if self.base_url else "api.openai.com"
        self.id = f"openai:{model}@{where.rstrip('/')}"
        self._deadline_at: float | None = None
        self._loop_state: dict[int, tuple[Any, asyncio.Semaphore]] = {}
        self.logprobs_supported: bool | None = None

    # ------------------------------------------------------------------ helpers
    def redact(self, text: str) -> str:
        """``text`` with the API key (and any bearer token) replaced by ``***``."""
        out = text.replace(self._api_key, "***") if self._api_key else text
        return re.sub(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}", r"\1***", out)

    def _client(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        state = self._loop_state.get(id(loop))
        if state is None:
            import openai

            if self.azure:
                client = openai.AsyncAzureOpenAI(azure_endpoint=self.base_url, api_key=self._api_key,
                                                 api_version=self.api_version, max_retries=0, timeout=self.timeout)
            else:
                client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0,
                                            timeout=self.timeout)
            state = (client, asyncio.Semaphore(self.concurrency))
            self._loop_state = {id(loop): state}  # a new event loop (run_sync) gets a fresh client
        return state

    @staticmethod
    def _transient(exc: BaseException) -> bool:
        import openai

        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                            asyncio.TimeoutError)):
            return True
        return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500 and not _mentions_logprobs(exc)

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        if self._deadline_at is None:
            self._deadline_at = time.monotonic() + self.deadline
        return self._deadline_at - time.monotonic()

    async def _request(self, **kwargs: Any) -> Any:
        """One chat completion with retries, backoff+jitter and the overall deadline."""
        import openai
        from tenacity import (AsyncRetrying, RetryError, retry_if_exception, stop_after_attempt, stop_after_delay,
                              wait_random_exponential)

        client, sem = self._client()
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            raise BackendError(f"{self.id}: deadline of {self.deadline:g} s exceeded", transient=True)
        stop = stop_after_attempt(self.max_retries + 1)
        if remaining is not None:
            stop = stop | stop_after_delay(max(remaining, 0.0))
        try:
            async for attempt in AsyncRetrying(retry=retry_if_exception(self._transient), stop=stop, reraise=True,
                                               wait=wait_random_exponential(multiplier=self.backoff, max=self.backoff_max)):
                with attempt:
                    async with sem:
                        left = self._remaining()
                        if left is not None and left <= 0:
                            raise asyncio.TimeoutError("deadline")
                        coro = client.chat.completions.create(model=self.model, **kwargs)
                        return await (asyncio.wait_for(coro, timeout=left) if left is not None else coro)
        except RetryError as exc:  # pragma: no cover - reraise=True re-raises the last error instead
            raise BackendError(self.redact(f"{self.id}: {exc}"), transient=True) from None
        except openai.APIStatusError as exc:
            msg = self.redact(f"{self.id}: HTTP {exc.status_code}: {_message(exc)}")
            if _mentions_logprobs(exc):
                raise LogprobsUnsupported(msg) from None
            raise BackendError(msg, transient=self._transient(exc)) from None
        except asyncio.TimeoutError:
            left = self._remaining()
            what = f"deadline of {self.deadline:g} s exceeded" if left is not None and left <= 0 else "timed out"
            raise BackendError(f"{self.id}: {what}", transient=True) from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise BackendError(self.redact(f"{self.id}: {type(exc).__name__}: {exc} (after {self.max_retries} retries)"),
                               transient=True) from None
        except openai.OpenAIError as exc:
            raise BackendError(self.redact(f"{self.id}: {type(exc).__name__}: {exc}")) from None
        raise BackendError(f"{self.id}: no response")  # pragma: no cover

    # ------------------------------------------------------------------ protocol
    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        if self.logprobs_supported is False:
            raise LogprobsUnsupported(f"{self.id}: server returns no logprobs")
        resp = await self._request(messages=list(messages), max_tokens=1, temperature=0.0, logprobs=True,
                                   top_logprobs=self.top_logprobs)
        choice = resp.choices[0]
        content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
        if not content or not content[0].top_logprobs:
            self.logprobs_supported = False
            raise LogprobsUnsupported(f"{self.id}: server returned no logprobs")
        self.logprobs_supported = True
        wanted = set(int(s) for s in scores)
        probs = {int(s): 0.0 for s in scores}
        for t in content[0].top_logprobs:
            text = (t.token or "").strip()
            if text.isdigit() and int(text) in wanted and t.logprob is not None and t.logprob > -1e9:
                probs[int(text)] += math.exp(t.logprob)
        usage = getattr(resp, "usage", None)
        return ScoreDistribution(probs=probs, mass=float(sum(probs.values())),
                                 prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0, evaluated_tokens=-1,
                                 top=choice.message.content if choice.message is not None else None)

    async def generate(self, messages: Messages, config: GenerationConfig) -> list[GenerationResult]:
        def kwargs(n: int, seed: int | None) -> dict:
            kw: dict[str, Any] = {"messages": list(messages), "max_tokens": config.max_tokens,
                                  "temperature": config.temperature, "top_p": config.top_p, "n": n}
            if seed is not None:
                kw["seed"] = seed
            if config.stop:
                kw["stop"] = list(config.stop)
            return kw

        first = await self._request(**kwargs(config.n, config.seed))
        responses = [first]
        got = len(first.choices)
        if got < config.n:  # servers without n>1 (llama.cpp): the rest as single requests
            rest = await asyncio.gather(*(self._request(**kwargs(1, None if config.seed is None else config.seed + i))
                                          for i in range(got, config.n)))
            responses.extend(rest)
        out = []
        for resp in responses:
            usage = getattr(resp, "usage", None)
            ptok = getattr(usage, "prompt_tokens", 0) or 0
            ctok = getattr(usage, "completion_tokens", 0) or 0
            for c in resp.choices:
                out.append(GenerationResult(text=(c.message.content or "") if c.message else "",
                                            tokens=ctok // max(len(resp.choices), 1), prompt_tokens=ptok,
                                            finish_reason=c.finish_reason))
        return out[: config.n]

    def close(self) -> None:
        self._loop_state = {}


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
    return str(getattr(exc, "message", exc))[:500]


def _mentions_logprobs(exc: Any) -> bool:
    status = getattr(exc, "status_code", 0)
    return status in (400, 422, 500, 501) and "logprob" in _message(exc).lower()


def openai_backend(target: str, **options: Any) -> OpenAIBackend:
    """``openai:MODEL`` -> :class:`OpenAIBackend` (numeric options may come as strings from the CLI)."""
    conv = {"concurrency": int, "timeout": float, "deadline": float, "max_retries": int, "backoff": float,
            "backoff_max": float, "top_logprobs": int}
    for k, f in conv.items():
        if k in options and isinstance(options[k], str):
            options[k] = f(options[k])
    if isinstance(options.get("azure"), str):
        options["azure"] = options["azure"].lower() in ("1", "true", "yes")
    return OpenAIBackend(target, **options)


register_backend("openai", openai_backend)
