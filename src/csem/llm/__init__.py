"""LLM calls for every stage: one async protocol, one generation config, one request policy.

Layers (dependencies point down; ``judge`` and ``collect`` use only this package's public names):

* `csem.llm.config`: [`GenerateConfig`][csem.llm.GenerateConfig] (inspect_ai-style: n, max_tokens, temperature,
  top_k, top_p, seed, stop, logprobs/top_logprobs, beam search), shared by judge and collect.
* `csem.llm.api`: [`ModelAPI`][csem.llm.ModelAPI], what a provider implements (``score_distribution``,
  ``generate``, one request each), its result types and errors.
* `csem.llm.model`: [`Model`][csem.llm.Model], the one wrapper every provider is used through: retries
  (tenacity), deadline, concurrency (semaphore), abort after repeated failures, logprobs fallback,
  API-key redaction.
* `csem.llm.registry`: backends by URI (``local``, ``llama-cpp:PATH``, ``openai:MODEL``,
  ``hf:MODEL``, plug-ins), from the ``csem.llm_backends`` entry-point group.
* `csem.llm.providers`: the built-in providers; `csem.llm.server`: a llama.cpp
  OpenAI-compatible server on loopback.

>>> from csem.llm import GenerateConfig, get_model, run_sync
>>> model = get_model("llama-cpp:smollm2")
>>> run_sync(model.generate(messages, GenerateConfig(n=2, temperature=1.0, seed=0)))
"""

from __future__ import annotations

from csem.llm.api import (NOT_ATTEMPTED, BackendAuthError, BackendError, BackendUnavailable, GenerationResult,
                          LogprobsUnsupported, Messages, ModelAPI, ScoreDistribution)
from csem.llm.config import DEFAULTS, GenerateConfig
from csem.llm.model import Model, gather_all
from csem.llm.registry import ENTRY_POINT_GROUP, backend_schemes, get_api, get_model, register_backend
from csem.llm.sync import run_sync

__all__ = ["NOT_ATTEMPTED", "BackendAuthError", "BackendError", "BackendUnavailable", "GenerationResult", "LogprobsUnsupported",
           "Messages", "ModelAPI", "ScoreDistribution", "DEFAULTS", "GenerateConfig", "Model", "gather_all",
           "ENTRY_POINT_GROUP", "backend_schemes", "get_api", "get_model", "register_backend", "run_sync"]
