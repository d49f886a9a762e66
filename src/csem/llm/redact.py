"""The one redaction rule for URLs, headers and backend options: no secret leaves csem.

Credentials reach a backend in four places, and each is masked the same way wherever a backend is
named (error messages, log records, missing reasons in output rows, the judgment cache's keys and
``backend`` column, provenance, metric cards, reports):

* the **userinfo** of a URL (``http://user:password@host/v1``, ``https://TOKEN@host``): the whole
  userinfo becomes ``***-<digest>``;
* **query parameters** whose name says key, token, signature, secret or password (``api-key``,
  ``access_token``, ``sig``, ``X-Amz-Signature``, ``code`` of Azure Functions ...): the value becomes
  ``***-<digest>``;
* **headers** that carry credentials (``Authorization``, ``Proxy-Authorization``, ``api-key``,
  ``x-api-key``, ``Cookie``, ``Ocp-Apim-Subscription-Key`` and any name with key/token/secret), in a
  header mapping or written ``name: value`` / ``name=value`` in a text; ``Bearer <token>`` anywhere;
* **known secrets** (the API key a provider was given): replaced by ``***`` wherever they appear.

``<digest>`` is the first 8 hex digits of PBKDF2-HMAC-SHA256 (100,000 iterations, fixed salt) of the
secret: two endpoints that differ only in their credentials keep different backend ids and so
different cache keys, while the secret itself is never stored and is slow to guess from the digest.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

#: what a secret is replaced by
MASK = "***"
#: words that make a query parameter, option or header name a credential (the name is split at - _ . and
#: camel case: ``api-key``, ``access_token``, ``X-Amz-Signature``, ``sig``, ``clientSecret``; not ``max_tokens``)
SECRET_WORDS = frozenset({"key", "apikey", "token", "accesstoken", "signature", "sig", "secret", "password", "passwd",
                          "pwd", "pass", "credential", "credentials", "auth", "authorization", "code", "session",
                          "cookie", "sas", "jwt"})
#: header names that carry credentials (lower case); any name with one of SECRET_WORDS counts too
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie",
                            "ocp-apim-subscription-key"})
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
#: a backend id's ``MODEL@userinfo@host`` (the id of a URL with credentials, written before redaction)
_ID_USERINFO = re.compile(r"(\w:[^\s@]*@)([^\s@/]+)@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{4,}")
_HEADER_TEXT = re.compile(r"(?i)(?<![\w-])((?:x-)?api[-_]?key|(?:proxy-)?authorization|ocp-apim-subscription-key|"
                          r"cookie|access[-_]?token|client[-_]?secret|password)"
                          r"([\"']?\s*[:=]\s*[\"']?)(?!\*\*\*)(?!(?:bearer|basic)\s)([^\s\"',;}&]+)")
#: loggers whose records are redacted (the HTTP and OpenAI client libraries, and csem)
LOGGERS = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "openai", "openai._base_client", "csem")


@functools.lru_cache(maxsize=256)
def digest(secret: str) -> str:
    """8 hex digits identifying ``secret`` without revealing it (PBKDF2-HMAC-SHA256, 100,000 rounds)."""
    return hashlib.pbkdf2_hmac("sha256", secret.encode("utf-8"), b"csem-redact", 100_000)[:4].hex()


def masked(secret: str) -> str:
    """``***-<digest>``: what a secret inside a URL becomes."""
    return f"{MASK}-{digest(secret)}"


def is_secret_name(name: str) -> bool:
    """True for a query parameter, option or header name that carries a credential."""
    name = name.strip()
    parts = {p.lower() for p in re.split(r"[-_.\s]+|(?<=[a-z])(?=[A-Z])", name) if p}
    return name.lower() in SECRET_HEADERS or bool(parts & SECRET_WORDS)


def redact_url(url: str) -> str:
    """``url`` with its userinfo and its credential query parameters masked (see the module docstring);
    any other text is returned as is.

    Args:
        url: an absolute URL (``scheme://[userinfo@]host[:port]/path?query``).

    Returns:
        The URL with ``userinfo`` -> ``***-<digest>`` and each secret parameter's value ->
        ``***-<digest>``; scheme, host, port, path and other parameters unchanged.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # an unparsable "URL" (bad port, brackets): mask everything after the scheme
        return re.sub(r"//[^/]*@", f"//{MASK}@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        if not userinfo.startswith(MASK):
            netloc = f"{masked(userinfo)}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(k) and not v.startswith(MASK) for k, v in pairs):
            query = "&".join(f"{quote(k, safe='-_.~')}=" + (masked(v) if is_secret_name(k) and not v.startswith(MASK)
                                                             else quote(v, safe="-_.~*:/"))
                             for k, v in pairs)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_headers(headers: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``headers`` with the value of every credential header masked (``***``)."""
    return {k: (MASK if is_secret_name(str(k)) else v) for k, v in (headers or {}).items()}


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` (an error message, a log line, a traceback) with every URL redacted
    ([`redact_url`][csem.llm.redact.redact_url]), credential headers written in it masked, bearer and
    basic tokens masked, and each of ``secrets`` (4+ characters) replaced by ``***``."""
    if not text:
        return text
    for s in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        text = text.replace(s, MASK)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _ID_USERINFO.sub(lambda m: m.group(0) if m.group(2).startswith(MASK) else
                            f"{m.group(1)}{masked(m.group(2))}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _HEADER_TEXT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def redact_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Backend options as they may be recorded (provenance, run settings): a credential option
    (``api_key``, ``token`` ...) becomes ``***-<digest>``, a ``headers`` mapping is redacted, any
    string is passed through [`redact_text`][csem.llm.redact.redact_text] (a ``base_url`` with a
    password in it)."""
    out: dict[str, Any] = {}
    for k, v in (options or {}).items():
        if isinstance(v, str) and is_secret_name(str(k)):
            out[k] = masked(v)
        elif isinstance(v, Mapping):
            out[k] = redact_headers(v) if "header" in str(k).lower() else redact_options(v)
        elif isinstance(v, str):
            out[k] = redact_text(v)
        else:
            out[k] = v
    return out


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message ([`redact_text`][csem.llm.redact.redact_text])."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose arguments do not format: leave it to logging
            return True
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


_FILTER = RedactingFilter()


#: logger names (and their children) of the libraries that log requests: httpx and httpcore under any
#: vendored name (``httpx2``, ``httpcore2``), openai, csem
_LOGGER_NAME = re.compile(r"^(?:httpx\d*|httpcore\d*|openai|csem)(?:\.|$)")


def install_log_filter(names: Iterable[str] = LOGGERS) -> None:
    """Attach the redacting filter to the loggers of the HTTP and OpenAI client libraries and csem: the
    names given and every logger already created whose name is httpx/httpcore (under any vendored name,
    such as ``httpx2``), openai or csem, children included (a logger's filter sees only its own records).
    Idempotent; the OpenAI provider calls it after importing the client library, before its first
    request."""
    known = [n for n in list(logging.root.manager.loggerDict) if _LOGGER_NAME.match(n)]
    for name in [*names, *known]:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
