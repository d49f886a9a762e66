"""Candidate generation through a judge backend (``local``, ``llama-cpp:...``, ``openai:...``).

The same backends that judge also generate (:meth:`csem.judge.backends.base.Backend.generate`), so
the embedded llama.cpp models serve as generators with no extra code. They sample (top-k / top-p);
beam search needs a transformers generator (``hf:MODEL``).
"""

from __future__ import annotations

from typing import Any

from csem.judge.backends.base import GenerationConfig, get_backend, run_sync


class BackendGenerator:
    """Wraps a judge backend as a candidate generator (see :class:`csem.collect.sampler.Generator`)."""

    def __init__(self, uri: str, **options: Any):
        self.uri = uri
        self.backend = get_backend(uri, **options)
        self.identity = self.backend.id

    def generate(self, messages: list[dict[str, str]], *, n: int, seed: int, strategy: str = "top_k",
                 top_k: int = 50, top_p: float = 1.0, temperature: float = 1.0, max_tokens: int = 64,
                 **_: Any) -> list[str]:
        """``n`` sampled candidates; ``strategy`` ``top_k`` (top_p = 1) or ``top_p`` (top_k off).

        Raises:
            ValueError: ``beam``/``diverse_beam`` (not offered by sampling backends; use ``hf:``).
            csem.judge.backends.base.BackendError: the backend failed.
        """
        if strategy not in ("top_k", "top_p"):
            raise ValueError(f"decoding strategy '{strategy}' needs a transformers generator (hf:MODEL); "
                             f"'{self.uri}' samples only (top_k, top_p)")
        cfg = GenerationConfig(n=n, max_tokens=max_tokens, temperature=temperature,
                               top_k=top_k if strategy == "top_k" else 0,
                               top_p=top_p if strategy == "top_p" else 1.0, seed=seed)
        return [r.text.strip() for r in run_sync(self.backend.generate(messages, cfg))]

    def close(self) -> None:
        self.backend.close()
