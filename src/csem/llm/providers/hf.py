"""Candidate generation with transformers models (seq2seq or causal; local folder or hub id).

Supports what llama.cpp cannot: beam search and diverse beam search (Vijayakumar et al. 2016,
``num_beam_groups`` + ``diversity_penalty`` in ``transformers.GenerationConfig``), besides top-k and
top-p sampling. Loading a hub id needs network access; a local folder (or a GGUF file read by
transformers with the ``gguf`` package) works offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class HFGenerator:
    """A transformers generator.

    Args:
        model: a local folder, a hub id, or ``FOLDER::FILE.gguf`` to read a GGUF through
            transformers (dequantised to fp32 at load).
        device: ``cpu`` (default), ``cuda`` or ``auto``.
    """

    model: str
    device: str = "cpu"

    def __post_init__(self) -> None:
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
        self.tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        config = AutoConfig.from_pretrained(path, **kwargs)
        self.is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        cls = AutoModelForSeq2SeqLM if self.is_seq2seq else AutoModelForCausalLM
        self.net = cls.from_pretrained(path, dtype=torch.float32, **kwargs).eval()
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

    @property
    def identity(self) -> str:
        return f"hf:{self.model}"

    def _encode(self, messages: list[dict[str, str]]):
        if not self.is_seq2seq and getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            text = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
        return self.tokenizer(text, return_tensors="pt", truncation=True).to(self.device)

    def generate(self, messages: list[dict[str, str]], *, n: int, seed: int, strategy: str = "top_k",
                 top_k: int = 50, top_p: float = 1.0, temperature: float = 1.0, max_tokens: int = 64,
                 num_beams: int = 4, num_beam_groups: int = 2, diversity_penalty: float = 0.5) -> list[str]:
        """Return ``n`` candidates for one prompt (deterministic for a given ``seed``).

        ``strategy``: ``top_k`` | ``top_p`` (sampling), ``beam`` (the ``n`` best beams; needs
        ``num_beams >= n``) or ``diverse_beam``.
        """
        import torch
        from transformers import GenerationConfig

        inputs = self._encode(messages)
        common = dict(max_new_tokens=max_tokens, num_return_sequences=n,
                      pad_token_id=self.tokenizer.pad_token_id)
        if strategy in ("top_k", "top_p"):
            cfg = GenerationConfig(do_sample=True, temperature=temperature,
                                   top_k=top_k if strategy == "top_k" else 0,
                                   top_p=top_p if strategy == "top_p" else 1.0, **common)
        elif strategy == "beam":
            cfg = GenerationConfig(do_sample=False, num_beams=max(num_beams, n), **common)
        elif strategy == "diverse_beam":
            # transformers >= 4.56 moved group (diverse) beam search to a hub-hosted
            # ``custom_generate`` recipe: it needs network access and trust_remote_code.
            beams = max(num_beams, n, num_beam_groups)
            beams += (-beams) % num_beam_groups
            cfg = GenerationConfig(do_sample=False, num_beams=beams, num_beam_groups=num_beam_groups,
                                   diversity_penalty=diversity_penalty, **common)
            extra = {"custom_generate": "transformers-community/group-beam-search", "trust_remote_code": True}
        else:
            raise ValueError(f"unknown decoding strategy '{strategy}'")
        if strategy != "diverse_beam":
            extra = {}
        torch.manual_seed(seed)
        with torch.inference_mode():
            try:
                out = self.net.generate(**inputs, generation_config=cfg, **extra)
            except OSError as exc:
                raise RuntimeError("diverse beam search in transformers >= 4.56 is fetched from the hub "
                                   "('transformers-community/group-beam-search'); it is unavailable offline: "
                                   f"{exc}") from exc
        if not self.is_seq2seq:
            out = out[:, inputs["input_ids"].shape[1]:]
        return [t.strip() for t in self.tokenizer.batch_decode(out, skip_special_tokens=True)]
