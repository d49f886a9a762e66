"""Judge backends behind one protocol (:class:`csem.judge.backends.base.Backend`), chosen by URI.

* ``local``, ``llama-cpp:PATH_OR_ALIAS``: :mod:`csem.judge.backends.llama_cpp` (in process).
* ``openai:MODEL``: :mod:`csem.judge.backends.openai` (OpenAI, Azure OpenAI, vLLM, Ollama,
  llama.cpp's server).
"""

from __future__ import annotations

from csem.judge.backends.base import (Backend, BackendError, GenerationConfig, GenerationResult, LogprobsUnsupported,
                                      ScoreDistribution, backend_schemes, get_backend, register_backend, run_sync)

__all__ = ["Backend", "BackendError", "GenerationConfig", "GenerationResult", "LogprobsUnsupported",
           "ScoreDistribution", "backend_schemes", "get_backend", "register_backend", "run_sync"]
