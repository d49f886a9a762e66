"""Generation with transformers models (``hf:MODEL``; seq2seq or causal; local folder or hub id).

Offers what llama.cpp cannot: beam search and diverse beam search (Vijayakumar et al. 2016,
``num_beam_groups`` + ``diversity_penalty`` in ``transformers.GenerationConfig``), besides top-k and
top-p sampling, behind the same :class:`csem.llm.api.ModelAPI` as every other backend. Loading a hub
id needs network access; a local folder (or a GGUF file read by transformers with the ``gguf``
package) works offline. No token probabilities for scoring (the judge falls back to ``parse``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any, Sequence

from csem.llm.api import GenerationResult, LogprobsUnsupported, Messages, ScoreDistribution
from csem.llm.config import GenerateConfig


class HFBackend:
    """A transformers model in this process; requests are served one at a time.

    Args:
        model: a local folder, a hub id, a ``.gguf`` file, or ``FOLDER::FILE.gguf`` to read a GGUF
            through transformers (dequantised to fp32 at load, converted once into the csem cache).
        device: ``cpu`` (default), ``cuda`` or ``auto``.
        trust_remote_code: allow code fetched from the Hugging Face hub to run (default False).
            Loading never runs a model folder's own code (``trust_remote_code=False`` is passed to
            every ``from_pretrained``). Diverse beam search (``num_beam_groups > 1``) needs it: since
            transformers 4.56 group beam search is a hub-hosted ``custom_generate`` recipe
            (``transformers-community/group-beam-search``), so it runs only with this option set
            (``--judge-opt trust_remote_code=true`` or the generator's options), with a warning, and
            only with network access.
    """

    max_concurrency = 1
    default_concurrency = 1
    features = frozenset({"beam_search"})

    def __init__(self, model: str, *, device: str = "cpu", trust_remote_code: bool = False):
        if not model:
            raise ValueError("hf backend needs a model: hf:FOLDER_OR_HUB_ID or hf:FILE.gguf")
        self.model, self.device, self.trust_remote_code = model, device, bool(trust_remote_code)
        self.id = f"hf:{model}"
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        kwargs: dict[str, Any] = {}
        path = self.model
        if "::" in path:
            path, gguf = path.split("::", 1)
            kwargs["gguf_file"] = gguf
        elif path.endswith(".gguf"):
            p = Path(path)
            path, kwargs["gguf_file"] = str(p.parent), p.name
        converted = None
        if "gguf_file" in kwargs:
            # transformers dequantises a GGUF at every load (slow): convert once into the cache
            from csem.assets import cache_dir, sha256_file

            gguf_path = Path(path) / kwargs["gguf_file"]
            converted = cache_dir() / "hf-from-gguf" / sha256_file(gguf_path)[:16]
            if (converted / ".complete").exists():
                path, kwargs = str(converted), {}
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, **kwargs)
        config = AutoConfig.from_pretrained(path, trust_remote_code=False, **kwargs)
        self.is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        cls = AutoModelForSeq2SeqLM if self.is_seq2seq else AutoModelForCausalLM
        self.net = cls.from_pretrained(path, dtype=torch.float32, trust_remote_code=False, **kwargs).eval()
        if converted is not None and kwargs:
            tmp = converted.with_name(converted.name + ".partial")
            # the weights are already dequantised to fp32: drop the GGUF marker so they can be saved
            self.net.hf_quantizer = None
            if hasattr(self.net.config, "quantization_config"):
                del self.net.config.quantization_config
            self.net.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            (tmp / ".complete").write_text("ok")
            import shutil

            shutil.rmtree(converted, ignore_errors=True)
            tmp.replace(converted)
        if self.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.net.to(self.device)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def _encode(self, messages: Messages):
        text = prompt_text(self.tokenizer, messages, seq2seq=self.is_seq2seq)
        return self.tokenizer(text, return_tensors="pt", truncation=True).to(self.device)

    def _generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        """``config.n`` answers: sampling (top-k / top-p / temperature), or the ``n`` best beams when
        ``num_beams > 1`` (diverse when ``num_beam_groups > 1``; beam search ignores the seed)."""
        import torch
        from transformers import GenerationConfig

        inputs = self._encode(messages)
        common = dict(max_new_tokens=config.max_tokens, num_return_sequences=config.n,
                      pad_token_id=self.tokenizer.pad_token_id)
        extra: dict[str, Any] = {}
        if not config.beam_search:
            if config.temperature == 0:
                cfg = GenerationConfig(do_sample=False, **common)
            else:
                cfg = GenerationConfig(do_sample=True, temperature=config.temperature, top_k=config.top_k,
                                       top_p=config.top_p, **common)
        elif (config.num_beam_groups or 1) <= 1:
            cfg = GenerationConfig(do_sample=False, num_beams=max(config.num_beams, config.n), **common)
        else:
            # transformers >= 4.56 moved group (diverse) beam search to a hub-hosted
            # ``custom_generate`` recipe: it needs network access and trust_remote_code, so it is opt-in.
            if not self.trust_remote_code:
                raise ValueError(
                    f"{self.id}: diverse beam search (num_beam_groups > 1) runs code fetched from the hub "
                    "('transformers-community/group-beam-search', transformers >= 4.56); allow it explicitly with "
                    "the backend option trust_remote_code=true, or use plain beam search (num_beam_groups 1)")
            import warnings

            warnings.warn(f"{self.id}: running hub code 'transformers-community/group-beam-search' for diverse "
                          "beam search (trust_remote_code=True was set)", UserWarning, stacklevel=2)
            groups = config.num_beam_groups
            beams = max(config.num_beams, config.n, groups)
            beams += (-beams) % groups
            cfg = GenerationConfig(do_sample=False, num_beams=beams, num_beam_groups=groups,
                                   diversity_penalty=config.diversity_penalty or 0.0, **common)
            extra = {"custom_generate": "transformers-community/group-beam-search", "trust_remote_code": True}
        seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little")
        torch.manual_seed(seed)
        with torch.inference_mode():
            try:
                out = self.net.generate(**inputs, generation_config=cfg, **extra)
            except OSError as exc:
                raise RuntimeError("diverse beam search in transformers >= 4.56 is fetched from the hub "
                                   "('transformers-community/group-beam-search'); it is unavailable offline: "
                                   f"{exc}") from exc
        prompt_len = int(inputs["input_ids"].shape[1])
        if not self.is_seq2seq:
            out = out[:, prompt_len:]
        results = []
        for seq, text in zip(out, self.tokenizer.batch_decode(out, skip_special_tokens=True)):
            finish = "length"
            if config.stop and any(s in text for s in config.stop):
                text, finish = text[: min(text.index(s) for s in config.stop if s in text)], "stop"
            elif self.tokenizer.eos_token_id is not None and bool((seq == self.tokenizer.eos_token_id).any()):
                finish = "stop"
            n_tok = int((seq != self.tokenizer.pad_token_id).sum()) if self.tokenizer.pad_token_id is not None else len(seq)
            results.append(GenerationResult(text=text, tokens=n_tok, prompt_tokens=prompt_len, finish_reason=finish))
        return results

    def _locked(self, fn, *args):
        with self._lock:
            return fn(*args)

    async def generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        return await asyncio.to_thread(self._locked, self._generate, messages, config)

    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        raise LogprobsUnsupported(f"{self.id}: the transformers backend offers no score distribution")

    def close(self) -> None:
        with self._lock:
            self.net = None


def prompt_text(tokenizer: Any, messages: Messages, *, seq2seq: bool = False) -> str:
    """The text a transformers generator reads for chat ``messages``: the tokenizer's chat template
    with the generation prompt (causal models that have one), else the non-system contents joined by
    blank lines. One home for :class:`HFBackend` and MRT's prompts (:func:`csem.apply.mrt.render_prompt`)."""
    if not seq2seq and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages if m["role"] != "system")


def hf_backend(target: str, **options: Any) -> HFBackend:
    """``hf:MODEL`` -> :class:`HFBackend` (options: ``device``)."""
    return HFBackend(target, **options)
