"""A tiny RANDOM causal generator for the fast test tier: MRT plumbing without a real language model.

:func:`tiny_generator` builds a 2-layer, 16-wide Llama with random weights (seeded) and the real
SmolLM2 tokenizer (read from the packaged GGUF; no network), so the training loop (Lightning, Eq. 12,
the log, checkpoints) runs at unit-test cost; :func:`build_tiny_generator` writes it as a transformers
folder that ``load_generator("hf:FOLDER")`` loads. What it generates means nothing: tests about what
the real 135M model does are marked ``slow``.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path


@functools.lru_cache(maxsize=None)
def _tokenizer_folder() -> Path:
    """SmolLM2's tokenizer read from the packaged GGUF once per process (parsing the GGUF's metadata
    takes seconds) and saved as a transformers folder, removed when the process exits."""
    from transformers import AutoTokenizer

    from csem.apply.mrt import resolve_generator

    g = Path(resolve_generator("smollm2"))
    folder = Path(tempfile.mkdtemp(prefix="csem-tiny-tokenizer-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name).save_pretrained(folder)
    return folder


def tiny_generator(seed: int = 0):
    """``(model, tokenizer)``: the tiny random Llama and SmolLM2's tokenizer (pad = eos)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(_tokenizer_folder()))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    torch.manual_seed(seed)
    net = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    return net, tok


def build_tiny_generator(folder: Path, seed: int = 0) -> Path:
    """Write the tiny generator (config, safetensors weights, tokenizer) into ``folder``; return it."""
    net, tok = tiny_generator(seed)
    folder = Path(folder)
    net.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
