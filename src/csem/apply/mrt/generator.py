"""The generator MRT trains: URIs, loading through csem.llm's transformers backend
(`csem.llm.providers.hf.HFBackend`), the task prompt, end-of-sequence ids, atomic saving."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from csem.errors import InputError


def resolve_generator(uri: str) -> str:
    """The model path of a generator URI: ``hf:PATH`` (folder or ``.gguf``), ``smollm2`` (the packaged
    SmolLM2-135M-Instruct GGUF, converted once to fp32 under ``~/.cache/csem``) or a plain folder."""
    spec = uri[3:] if uri.startswith("hf:") else uri
    if spec in ("smollm2", "smollm2-135m"):
        from csem.assets import smollm2_gguf

        return str(smollm2_gguf())
    return spec


def load_generator(uri: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a causal transformers generator in fp32 (see [`resolve_generator`][csem.apply.mrt.generator.resolve_generator]).

    Raises:
        ValueError: a seq2seq model (MRT here supports causal generators only).
    """
    from csem.llm.providers.hf import HFBackend  # the transformers backend of csem.llm (a GGUF converted once)

    gen = HFBackend(resolve_generator(uri))
    if gen.is_seq2seq:
        raise InputError(f"{uri}: a seq2seq model; csem mrt trains causal generators")
    return gen.net, gen.tokenizer


def render_prompt(tokenizer: Any, task: str, source: str, max_source_tokens: int) -> str:
    """The chat prompt text for ``source`` (cut to ``max_source_tokens`` tokens) under ``task``."""
    from csem.collect.prompts import render_task_prompt
    from csem.llm.providers.hf import prompt_text

    ids = tokenizer(source, add_special_tokens=False)["input_ids"]
    if len(ids) > max_source_tokens:
        source = tokenizer.decode(ids[:max_source_tokens], skip_special_tokens=True)
    return prompt_text(tokenizer, render_task_prompt(task, source))


def eos_ids(tokenizer: Any, net: Any) -> list[int]:
    """The end-of-sequence token ids of a generator: the tokenizer's and the generation config's."""
    ids = {tokenizer.eos_token_id}
    gen_eos = getattr(getattr(net, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, (list, tuple)):
        ids.update(gen_eos)
    return sorted(i for i in ids if i is not None)


def save_generator(net: Any, tokenizer: Any, folder: Path) -> Path:
    """Write a loadable transformers folder atomically (``folder.partial`` then rename)."""
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    net.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.replace(folder)
    return folder

