"""OpenAI-compatible chat API (``openai:MODEL``): OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server.

Provider options (``get_model("openai:MODEL", **options)``, ``--judge-opt`` / ``--generator-opt
key=value`` on the CLI): ``base_url`` (else ``OPENAI_BASE_URL``; Azure: ``AZURE_OPENAI_ENDPOINT``),
``api_key`` (else ``OPENAI_API_KEY``, Azure: ``AZURE_OPENAI_API_KEY``; servers without auth need none),
``api_version`` (Azure, else ``OPENAI_API_VERSION``), ``azure``, ``timeout`` (seconds per request),
``top_logprobs`` (alternatives read in ``probs`` mode, default 20), ``send_top_k`` (send
``GenerateConfig.top_k`` as the ``top_k`` body field, which vLLM, llama.cpp's server and Ollama take
but OpenAI's API refuses; default: yes for a ``base_url`` that is not OpenAI's or Azure's; without it
such servers sample with their own top-k default). Concurrency (default 8),
retries, backoff and the deadline are options of the wrapper ([`csem.llm.model.Model`][]).

* One request per call (``openai.AsyncOpenAI`` with its own retries off); failures become
  [`BackendError`][csem.llm.api.BackendError], ``transient`` for 429, 5xx, timeouts and connection errors.
* ``probs``: one request with ``logprobs=True, top_logprobs=20``; p(s) is the summed probability of
  the first answer token's top alternatives whose text (stripped) is the integer ``s``. This is exact
  when (a) every score of the scale is a single token for the server's tokenizer (always for 1-5 and
  1-9; for 0-100 with tokenizers that keep numbers up to 999 whole: OpenAI's cl100k_base/o200k_base,
  Llama 3, but not Llama 2, Mistral, Qwen or SmolLM, which split numbers into digits), and (b) the
  valid scores' mass lies within the ``top_logprobs`` returned (at most 20 on OpenAI: a score outside
  them counts as 0; the judgment's ``mass`` shows what was seen). On scales beyond 9 the request
  asks for three greedy tokens; when they show a number split over several tokens
  (`splits_numbers`) the first-token distribution would only be that of the first digit, so it
  raises [`LogprobsUnsupported`][csem.llm.api.LogprobsUnsupported] and the judge falls back to ``parse`` (or
  ``sample``: ``judge_records(fallback=...)``) for the run, saying so in its summary. The in-process llama-cpp
  provider is exact on any scale (chain rule over the tokens). A server that rejects logprobs or
  returns none raises [`LogprobsUnsupported`][csem.llm.api.LogprobsUnsupported] too.
* The API key never appears in `id`; it is listed in `secrets`, which the wrapper
  removes from every error message.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from typing import Any, Sequence
from urllib.parse import parse_qsl, urlparse

from csem.errors import InputError
from csem.llm.api import BackendAuthError, BackendError, GenerationResult, LogprobsUnsupported, Messages, ScoreDistribution
from csem.llm.config import GenerateConfig
from csem.llm.redact import install_log_filter, is_secret_name, redact_url


class OpenAIBackend:
    """See the module docstring for options; a [`csem.llm.api.ModelAPI`][]."""

    max_concurrency = None
    default_concurrency = 8
    features = frozenset({"logprobs", "response_format"})

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 api_version: str | None = None, azure: bool | None = None, timeout: float = 60.0,
                 top_logprobs: int = 20, send_top_k: bool | None = None):
        if not model:
            raise InputError("openai backend needs a model name: openai:MODEL (e.g. openai:gpt-4o-mini)")
        self.model = model
        az_endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT")
        self.azure = bool(azure) if azure is not None else bool(
            (base_url and ".openai.azure.com" in base_url) or (not base_url and not os.environ.get("OPENAI_BASE_URL")
                                                                and az_endpoint))
        self.base_url = base_url or (az_endpoint if self.azure else os.environ.get("OPENAI_BASE_URL")) or None
        key = api_key or (os.environ.get("AZURE_OPENAI_API_KEY") if self.azure else None) or os.environ.get("OPENAI_API_KEY")
        self._api_key = key or "sk-no-key"  # local servers without auth still need a non-empty key
        self.secrets = (key,) if key else ()
        if self.base_url:  # a password in the URL or a signed query is a secret as much as the key
            parts = urlparse(self.base_url)
            self.secrets += tuple(x for x in (parts.password, parts.username if parts.password is None else None) if x)
            self.secrets += tuple(v for k, v in parse_qsl(parts.query) if is_secret_name(k) and v)
        self.api_version = api_version or os.environ.get("OPENAI_API_VERSION") or "2024-06-01"
        self.timeout = float(timeout)
        self.top_logprobs = int(top_logprobs)
        # the id names the endpoint through the one redaction rule (a hash stands for any credential in it)
        shown = urlparse(redact_url(self.base_url)) if self.base_url else None
        where = shown.netloc + shown.path if shown else "api.openai.com"
        host = (urlparse(self.base_url).hostname or "") if self.base_url else "api.openai.com"
        self.send_top_k = (bool(send_top_k) if send_top_k is not None
                           else not (self.azure or host == "openai.com" or host.endswith(".openai.com")))
        self.id = f"openai:{model}@{where.rstrip('/')}"
        self._loop_client: dict[int, tuple] = {}  # id(loop) -> (loop, client, closer)
        # set by a batch job (csem.judge.batch.BatchTransport): answers each request body instead of the server
        self.transport: Any = None

    async def _client(self) -> Any:
        """The client of the running event loop (made on first use in each loop). An httpx-based
        client is bound to the loop that made it, so it is closed in that loop when the loop shuts
        down (`csem.llm.sync.close_with_loop`), never garbage-collected in a later one (which
        showed as "Task exception was never retrieved ... Event loop is closed" between stages)."""
        from csem.llm.sync import close_with_loop

        loop = asyncio.get_running_loop()
        entry = self._loop_client.get(id(loop))
        if entry is None or entry[0] is not loop:
            import openai

            install_log_filter()  # httpx logs each request's URL, credentials included

            if self.azure:
                client = openai.AsyncAzureOpenAI(azure_endpoint=self.base_url, api_key=self._api_key,
                                                 api_version=self.api_version, max_retries=0, timeout=self.timeout)
            else:
                client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0,
                                            timeout=self.timeout)
            closer = await close_with_loop(client.close)
            # clients of finished loops were closed in their loop; only the live ones are kept
            self._loop_client = {k: v for k, v in self._loop_client.items() if not v[0].is_closed()}
            entry = self._loop_client[id(loop)] = (loop, client, closer)
        return entry[1]

    async def _request(self, **kwargs: Any) -> Any:
        """One chat completion, checked; openai's errors and malformed replies mapped to BackendError
        (transient where a retry may help).

        A 200 reply that is not a chat completion (a body that is not JSON, such as a proxy's HTML
        page; JSON cut off mid-way; an empty ``choices`` list or a choice without a message) is a
        transient [`BackendError`][csem.llm.BackendError] naming the backend and what was wrong with the reply. A 429
        or 503 carries the server's ``Retry-After`` (seconds or an HTTP date) as ``retry_after``.
        """
        import openai

        if self.transport is not None:  # a batch job: the same request body, answered from its results
            return await self.transport(self, kwargs)
        client = await self._client()
        try:
            raw = await client.chat.completions.with_raw_response.create(model=self.model, **kwargs)
        except openai.APIStatusError as exc:
            msg = f"{self.id}: HTTP {exc.status_code}: {_message(exc)}"
            if _mentions_logprobs(exc):
                raise LogprobsUnsupported(msg) from None
            if exc.status_code in (401, 403):
                raise BackendAuthError(f"{msg}: authentication failed; check the API key (OPENAI_API_KEY, "
                                       "AZURE_OPENAI_API_KEY or the api_key option)") from None
            transient = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            wait = retry_after_seconds(exc.response.headers) if exc.status_code in (429, 503) else None
            raise BackendError(msg, transient=transient, retry_after=wait) from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:  # APITimeoutError is a connection error
            raise BackendError(f"{self.id}: {type(exc).__name__}: {exc}", transient=True) from None
        except openai.APIResponseValidationError as exc:
            raise BackendError(f"{self.id}: malformed reply: {exc}", transient=True) from None
        except openai.OpenAIError as exc:
            raise BackendError(f"{self.id}: {type(exc).__name__}: {exc}") from None
        return self._checked(raw)

    def _checked(self, raw: Any) -> Any:
        """The parsed chat completion of a raw 200 reply, or a transient BackendError saying what is
        wrong with it (see `_request`)."""
        http = raw.http_response
        ctype = http.headers.get("content-type", "?").split(";")[0].strip() or "?"
        try:
            body = http.text
        except Exception:  # noqa: BLE001 - undecodable bytes
            body = repr(http.content[:200])
        head = " ".join(body[:120].split())

        def bad(what: str) -> BackendError:
            return BackendError(f"{self.id}: malformed reply (HTTP {http.status_code}, {ctype}): {what}; "
                                f"body starts {head!r}", transient=True)

        try:
            resp = raw.parse()
        except ValueError as exc:  # json.JSONDecodeError: a body cut off mid-way
            raise bad(f"not valid JSON ({exc})") from None
        except Exception as exc:  # noqa: BLE001 - the SDK could not build a completion from the body
            raise bad(f"not a chat completion ({type(exc).__name__}: {exc})") from None
        if isinstance(resp, (str, bytes)):  # the SDK hands back the text of a body that is not JSON
            raise bad("not JSON")
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise bad("no choices" if isinstance(choices, list) else "no 'choices' list")
        for c in choices:
            if getattr(c, "message", None) is None and getattr(c, "logprobs", None) is None:
                raise bad("a choice without a message")
        return resp

    # ------------------------------------------------------------------ protocol
    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        multi_digit = max(int(s) for s in scores) > 9
        # scales beyond 9: three greedy tokens show whether the server's tokenizer keeps a number whole
        resp = await self._request(messages=list(messages), max_tokens=3 if multi_digit else 1, temperature=0.0,
                                   logprobs=True, top_logprobs=self.top_logprobs)
        choice = resp.choices[0]
        why = refusal_reason(choice)
        if why:  # before any probability is read: a withheld reply's logprobs are not the judge's answer
            raise BackendError(f"{self.id}: {why}")
        content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
        if not content or not content[0].top_logprobs:
            raise LogprobsUnsupported(f"{self.id}: server returned no logprobs")
        if multi_digit and splits_numbers([t.token or "" for t in content]):
            lo, hi = min(int(s) for s in scores), max(int(s) for s in scores)
            raise LogprobsUnsupported(
                f"{self.id}: the server's tokenizer splits numbers into several tokens (answer "
                f"{''.join(t.token or '' for t in content)!r}), so the first token's probabilities cannot give "
                f"p(score) on a {lo}-{hi} scale")
        wanted = set(int(s) for s in scores)
        probs = {int(s): 0.0 for s in scores}
        for t in content[0].top_logprobs:
            text = (t.token or "").strip()
            if text.isdigit() and int(text) in wanted and t.logprob is not None and t.logprob > -1e9:
                probs[int(text)] += math.exp(t.logprob)
        usage = getattr(resp, "usage", None)
        return ScoreDistribution(probs=probs, mass=float(sum(probs.values())),
                                 prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0, evaluated_tokens=-1,
                                 completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                                 top=choice.message.content if choice.message is not None else None)

    def _response_format(self, schema: dict) -> dict:
        """Structured output for a JSON schema: OpenAI's and Azure's ``json_schema`` form; for other
        servers JSON mode with the schema (``{"type": "json_object", "schema": ...}``: llama.cpp's
        server turns it into a grammar, vLLM accepts it)."""
        host = (urlparse(self.base_url).hostname or "") if self.base_url else "api.openai.com"
        if self.azure or host == "openai.com" or host.endswith(".openai.com"):
            return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        return {"type": "json_object", "schema": schema}

    async def generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        """One request for ``config.n`` answers (a server may return fewer; the wrapper asks for the rest).
        ``top_k`` is not part of the OpenAI API: sent as an extra body field only with ``send_top_k``."""
        kw: dict[str, Any] = {"messages": list(messages), "max_tokens": config.max_tokens,
                              "temperature": config.temperature, "top_p": config.top_p, "n": config.n}
        if config.seed is not None:
            kw["seed"] = config.seed
        if config.stop:
            kw["stop"] = list(config.stop)
        if config.top_k and self.send_top_k:
            kw["extra_body"] = {"top_k": int(config.top_k)}
        if config.response_format:
            kw["response_format"] = self._response_format(config.response_format)
        if config.logprobs:
            kw["logprobs"] = True
            if config.top_logprobs:
                kw["top_logprobs"] = config.top_logprobs
        resp = await self._request(**kw)
        usage = getattr(resp, "usage", None)
        ptok = getattr(usage, "prompt_tokens", 0) or 0
        ctok = getattr(usage, "completion_tokens", 0) or 0
        out = []
        for c in resp.choices:
            why = refusal_reason(c)
            if why:
                raise BackendError(f"{self.id}: {why}")
            lps = None
            if config.logprobs and c.logprobs is not None and getattr(c.logprobs, "content", None):
                lps = [{"token": t.token, "logprob": t.logprob,
                        "top": {a.token: a.logprob for a in (t.top_logprobs or [])}} for t in c.logprobs.content]
            out.append(GenerationResult(text=(c.message.content or "") if c.message else "",
                                        tokens=ctok // max(len(resp.choices), 1), prompt_tokens=ptok,
                                        finish_reason=c.finish_reason, logprobs=lps))
        return out

    def close(self) -> None:
        """Drop the clients; each is closed in its own event loop (at once if that loop is still
        running, else it was closed when the loop shut down)."""
        self._loop_client = {}


def retry_after_seconds(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds a server asked to wait, from its ``Retry-After`` header (RFC 9110 Sec. 10.2.3: a
    number of seconds or an HTTP date) or OpenAI's ``retry-after-ms``; None when absent or
    unreadable. A date in the past gives 0.

    Args:
        headers: a mapping of response headers (case-insensitive, as httpx's). now: POSIX seconds
            (default: the current time), for dates.
    """
    ms = headers.get("retry-after-ms") if headers is not None else None
    if ms:
        try:
            v = float(ms) / 1000.0
            if math.isfinite(v):
                return max(0.0, v)
        except ValueError:
            pass
    value = (headers.get("retry-after") if headers is not None else None) or ""
    value = value.strip()
    if not value:
        return None
    try:
        v = float(value)
        return max(0.0, v) if math.isfinite(v) else None
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        import datetime as _dt

        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def refusal_reason(choice: Any) -> str | None:
    """Why a reply's choice is no answer to judge, or None when it is one.

    A choice is withheld or refused when its ``finish_reason`` is ``content_filter`` (Azure's and
    OpenAI's content filter, with or without partial text), its message has a non-empty ``refusal``
    (OpenAI's structured-output refusals), or its message's ``content`` is ``null``. Such a
    judgment is missing with this reason in every scoring mode, and no probability of it is read.
    """
    msg = getattr(choice, "message", None)
    if getattr(choice, "finish_reason", None) == "content_filter":
        text = (getattr(msg, "content", None) or "") if msg is not None else ""
        return ("the reply was withheld by the server's content filter (finish_reason content_filter, "
                + (f"partial text {text[:60]!r})" if text else "no text)"))
    refusal = getattr(msg, "refusal", None) if msg is not None else None
    if isinstance(refusal, str) and refusal.strip():
        return f"the model refused to answer (refusal: {' '.join(refusal.split())[:120]!r})"
    if msg is not None and getattr(msg, "content", None) is None:
        return f"the reply has no text (content null, finish_reason {getattr(choice, 'finish_reason', None)})"
    return None


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
    return str(getattr(exc, "message", exc))[:500]


def splits_numbers(tokens: Sequence[str]) -> bool:
    """True when a greedy answer's tokens show a number split over several tokens: the first token
    is all digits (after a leading space) and the next one starts with a digit (``["8", "5"]`` for
    85). ``["85", "\\n"]`` (a tokenizer that keeps numbers up to 999 whole: OpenAI's cl100k_base and
    o200k_base, Llama 3) and answers that do not start with a number give False."""
    if len(tokens) < 2:
        return False
    first = tokens[0].strip()
    return bool(first) and first.isdigit() and tokens[1][:1].isdigit()


def _mentions_logprobs(exc: Any) -> bool:
    status = getattr(exc, "status_code", 0)
    return status in (400, 422, 500, 501) and "logprob" in _message(exc).lower()


def openai_backend(target: str, **options: Any) -> OpenAIBackend:
    """``openai:MODEL`` -> `OpenAIBackend` (numeric options may come as strings from the CLI)."""
    conv = {"timeout": float, "top_logprobs": int}
    for k, f in conv.items():
        if k in options and isinstance(options[k], str):
            options[k] = f(options[k])
    for k in ("azure", "send_top_k"):
        if isinstance(options.get(k), str):
            options[k] = options[k].lower() in ("1", "true", "yes")
    return OpenAIBackend(target, **options)
