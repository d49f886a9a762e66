"""What judging costs: tokens and US dollars, estimated before a run (a dry run) and counted after it.

Before a run, [`estimate`][csem.judge.cost.estimate] counts the prompt tokens of every judgment that
is not cached with the judge's own tokenizer where csem has it: the llama.cpp model's ``tokenize``
over its chat template (the count the judge reports when it evaluates the prompt), a transformers
model's tokenizer, and for ``openai:`` models ``tiktoken`` (the optional extra ``csem[tiktoken]``)
with the chat-format count of OpenAI's cookbook (3 tokens per message, 3 to prime the reply).
Without a tokenizer the count is an estimate of about 4 characters per token, and says so.
Completion tokens are what the request allows: 1 per judgment in ``probs`` mode (one answer
token's probabilities), ``n * max_tokens`` (``sample``) or ``max_tokens`` (``parse``) as an upper
bound otherwise.

After a run the tokens are the provider's ``usage`` (summed in the judge summary) and
[`Prices.cost`][csem.judge.cost.Prices.cost] turns them into dollars, with the batch discount
(50% at OpenAI and Azure OpenAI) for requests sent as a batch job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from csem.errors import InputError

#: the share of the price a batch job saves at OpenAI and Azure OpenAI
BATCH_DISCOUNT = 0.5


class Prices(BaseModel):
    """A judge's prices.

    Attributes:
        input: US dollars per million prompt tokens (>= 0).
        output: US dollars per million completion tokens (>= 0).
        batch_discount: the share a batch job saves, in [0, 1] (default 0.5).
    """

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    batch_discount: float = Field(BATCH_DISCOUNT, ge=0, le=1)

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float:
        """US dollars for the tokens: ``(prompt * input + completion * output) / 1e6``, times
        ``1 - batch_discount`` for a batch job."""
        usd = (prompt_tokens * self.input + completion_tokens * self.output) / 1e6
        return usd * (1.0 - self.batch_discount) if batch else usd


def prices_from(price_in: float | None, price_out: float | None) -> Prices | None:
    """``Prices`` from the two command-line values (both or neither).

    Raises:
        InputError: only one of them given, or a negative price.
    """
    if price_in is None and price_out is None:
        return None
    if price_in is None or price_out is None:
        raise InputError("give both --price-in and --price-out (US dollars per million prompt / completion tokens)")
    if price_in < 0 or price_out < 0:
        raise InputError(f"prices must be >= 0, got --price-in {price_in} --price-out {price_out}")
    return Prices(input=price_in, output=price_out)


@dataclass
class TokenCounter:
    """Counts a chat's prompt tokens. ``label`` names how; ``exact``: False for the character estimate."""

    count: Callable[[Sequence[dict]], int]
    label: str
    exact: bool = True


def _estimate_count(messages: Sequence[dict]) -> int:
    return sum(4 + math.ceil(len(str(m.get("content") or "")) / 4) for m in messages) + 3


def _tiktoken_counter(model: str) -> TokenCounter | None:
    """OpenAI's chat count (cookbook "How to count tokens with tiktoken": 3 tokens per message plus
    its fields' tokens, 3 to prime the reply), or None when tiktoken or its encoding is unavailable."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        try:
            enc = tiktoken.encoding_for_model(model)
        except KeyError:
            enc = tiktoken.get_encoding("o200k_base")
        enc.encode("probe")
    except Exception:  # noqa: BLE001 - the encoding file cannot be fetched (offline)
        return None

    def count(messages: Sequence[dict]) -> int:
        n = 3
        for m in messages:
            n += 3 + sum(len(enc.encode(str(v))) for v in m.values()) + (1 if "name" in m else 0)
        return n

    return TokenCounter(count, f"tiktoken {enc.name} (OpenAI's chat count)")


def token_counter(api: Any) -> TokenCounter:
    """The best prompt-token counter csem has for a provider (see the module docstring)."""
    if callable(getattr(api, "prompt_tokens", None)):  # llama.cpp: the tokens it evaluates
        return TokenCounter(lambda m: len(api.prompt_tokens(m)), "the llama.cpp judge's tokenizer")
    if callable(getattr(api, "prompt_ids", None)):  # transformers
        return TokenCounter(lambda m: len(api.prompt_ids(m)), "the transformers judge's tokenizer")
    model = getattr(api, "model", None)
    if isinstance(model, str) and str(getattr(api, "id", "")).startswith("openai:"):
        found = _tiktoken_counter(model)
        if found is not None:
            return found
        return TokenCounter(_estimate_count, "ESTIMATE, about 4 characters per token (install csem[tiktoken] "
                            "for OpenAI's own count)", exact=False)
    return TokenCounter(_estimate_count, "ESTIMATE, about 4 characters per token (no tokenizer for this judge)",
                        exact=False)


def completion_bound(mode: str, *, n: int, max_tokens: int, scale_max: int = 5, api: Any = None) -> int:
    """Completion tokens one judgment may take: 1 (``probs``; 3 for an ``openai:`` judge on a scale
    beyond 9, which asks for three tokens to see whether a number is split), ``n * max_tokens``
    (``sample``), ``max_tokens`` (``parse``)."""
    if mode == "probs":
        return 3 if scale_max > 9 and str(getattr(api, "id", "")).startswith("openai:") else 1
    return n * max_tokens if mode == "sample" else max_tokens


@dataclass
class Estimate:
    """A dry run's figures.

    Attributes:
        judgments: requested. cached: found in the cache (cost nothing). to_send: the rest.
        prompt_tokens: summed over ``to_send``. completion_tokens: expected (probs) or the bound.
        tokenizer: how the prompt tokens were counted; exact: False for the character estimate.
        mode: the scoring mode. prices: when given, the costs below are set.
        cost, cost_batch: US dollars synchronously and as a batch job (None without prices).
    """

    judgments: int
    cached: int
    to_send: int
    prompt_tokens: int
    completion_tokens: int
    tokenizer: str
    exact: bool
    mode: str
    prices: Prices | None = None

    @property
    def cost(self) -> float | None:
        return None if self.prices is None else self.prices.cost(self.prompt_tokens, self.completion_tokens)

    @property
    def cost_batch(self) -> float | None:
        return None if self.prices is None else self.prices.cost(self.prompt_tokens, self.completion_tokens,
                                                                 batch=True)

    def as_dict(self) -> dict:
        return {"judgments": self.judgments, "cached": self.cached, "to_send": self.to_send,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "completion_tokens_are": "expected" if self.mode == "probs" else "upper bound",
                "tokenizer": self.tokenizer, "exact": self.exact, "mode": self.mode,
                "prices": self.prices.model_dump() if self.prices else None, "cost_usd": self.cost,
                "cost_batch_usd": self.cost_batch}

    def __str__(self) -> str:
        what = "expected" if self.mode == "probs" else "at most"
        lines = [f"dry run (nothing sent): {self.judgments} judgments, {self.cached} cached, {self.to_send} to send",
                 f"prompt tokens {self.prompt_tokens} (counted with {self.tokenizer})",
                 f"completion tokens {what} {self.completion_tokens} (mode {self.mode})"]
        if self.prices is not None:
            lines.append(f"cost at ${self.prices.input:g} / ${self.prices.output:g} per million tokens: "
                         f"${self.cost:.4f} synchronous, ${self.cost_batch:.4f} as a batch job "
                         f"({self.prices.batch_discount:.0%} off)")
        else:
            lines.append("cost: give --price-in and --price-out (US dollars per million tokens) to price it")
        return "\n".join(lines)


def estimate(messages: Sequence[Sequence[dict]], *, judgments: int, api: Any, mode: str, n: int, max_tokens: int,
             prices: Prices | None = None, scale_max: Sequence[int] | None = None) -> Estimate:
    """The dry-run figures of the chats that would be sent (``messages``: one per uncached judgment).

    Args:
        messages: the rendered chats to send. judgments: all requested (cached ones included).
        api: the judge's provider (its tokenizer counts). mode, n, max_tokens: the run's settings.
        prices: optional prices. scale_max: per chat, the top of its rubric's scale (default 5).
    """
    counter = token_counter(api)
    prompt = sum(counter.count(m) for m in messages)
    tops = list(scale_max) if scale_max is not None else [5] * len(messages)
    completion = sum(completion_bound(mode, n=n, max_tokens=max_tokens, scale_max=t, api=api) for t in tops)
    return Estimate(judgments=judgments, cached=judgments - len(messages), to_send=len(messages),
                    prompt_tokens=prompt, completion_tokens=completion, tokenizer=counter.label,
                    exact=counter.exact, mode=mode, prices=prices)
