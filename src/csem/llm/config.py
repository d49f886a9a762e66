"""One generation config for every LLM call in csem (judge sampling, candidate collection).

Modelled on inspect_ai's ``GenerateConfig``: every field is optional, ``None`` meaning "not set
here", so configs compose with [`GenerateConfig.merge`][csem.llm.config.GenerateConfig.merge] (a stage's defaults, then the run's
settings, then one generator's own). [`GenerateConfig.resolved`][csem.llm.config.GenerateConfig.resolved] fills what is still unset from
`DEFAULTS` before a provider sees it; a provider that cannot honour a field that is set
(beam search on a sampling server, token logprobs on an in-process model) makes the wrapper raise
``ValueError`` before any request ([`csem.llm.model.Model.check`][]).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from csem.errors import InputError

# the fields a judgment's cache key always carried (kept so existing judgment caches stay valid)
_KEY_FIELDS = ("n", "max_tokens", "temperature", "top_k", "top_p", "seed", "stop")


class GenerateConfig(BaseModel):
    """Decoding parameters of one request (all optional; ``None`` = unset, see the module docstring).

    Attributes:
        n: answers per request (>= 1; OpenAI's ``n``, inspect_ai's ``num_choices``).
        max_tokens: answer length limit in tokens (>= 1).
        temperature: >= 0; 0 is greedy.
        top_k: sample among the k most probable tokens (0 = off; CSEM collects with k = 50).
        top_p: nucleus sampling, in (0, 1] (1 = off).
        seed: sampling seed; ``None`` = a random seed. Answer i of a request uses ``seed + i``.
        stop: strings that end the answer (not included in it).
        logprobs, top_logprobs: return each generated token's log-probability and the
            ``top_logprobs`` (0-20) most probable alternatives (providers that can).
        num_beams, num_beam_groups, diversity_penalty: beam search (``num_beams`` > 1) and diverse
            beam search (Vijayakumar et al. 2016; ``num_beam_groups`` > 1), for providers that offer it
            (transformers, ``hf:``); sampling fields are then ignored.
        response_format: structured output: a JSON schema the answer must follow (e.g. a judge's
            ``{"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum":
            5}}, "required": ["score"]}``), for providers with the ``response_format`` feature
            (OpenAI-compatible servers: JSON mode / ``response_format``).
    """

    model_config = ConfigDict(extra="forbid")

    n: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1, le=32768)
    temperature: float | None = Field(None, ge=0)
    top_k: int | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    stop: list[str] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    num_beams: int | None = Field(None, ge=1)
    num_beam_groups: int | None = Field(None, ge=1)
    diversity_penalty: float | None = Field(None, ge=0)
    response_format: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _check(self) -> "GenerateConfig":
        if self.num_beam_groups is not None and self.num_beam_groups > 1 and (self.num_beams or 1) <= 1:
            raise InputError("num_beam_groups > 1 (diverse beam search) needs num_beams > 1")
        if self.top_logprobs and not self.logprobs:
            raise InputError("top_logprobs needs logprobs=true")
        return self

    def merge(self, other: "GenerateConfig | None") -> "GenerateConfig":
        """A copy of this config with every field that ``other`` sets (not None) taken from ``other``."""
        if other is None:
            return self.model_copy()
        data = self.model_dump()
        data.update({k: v for k, v in other.model_dump().items() if v is not None})
        return GenerateConfig(**data)

    def resolved(self) -> "GenerateConfig":
        """`DEFAULTS` merged with this config: what a provider receives (no ``None`` among the
        sampling fields; ``seed`` may stay None = random)."""
        return DEFAULTS.merge(self)

    @property
    def beam_search(self) -> bool:
        return (self.num_beams or 1) > 1

    def cache_params(self) -> dict[str, Any]:
        """The parameters that identify a result in a cache: n, max_tokens, temperature, top_k,
        top_p, seed and stop (always, resolved), plus every other field that is set."""
        r = self.resolved()
        out: dict[str, Any] = {k: getattr(r, k) for k in _KEY_FIELDS}
        out["stop"] = list(out["stop"] or [])
        out.update({k: v for k, v in self.model_dump(exclude=set(_KEY_FIELDS)).items() if v is not None})
        return out


#: what an unset field means: one answer of at most 64 tokens, sampled from the full distribution
#: (temperature 1, no top-k, no top-p), random seed, no stop strings.
DEFAULTS = GenerateConfig(n=1, max_tokens=64, temperature=1.0, top_k=0, top_p=1.0, stop=[])
