"""Sampling for MRT: ``S`` samples per prompt from its shared key/value cache, the seeded batches of
each step, and batched generation of texts (greedy or sampled) for evaluation and N-best lists."""

from __future__ import annotations

import hashlib
import math
from typing import Any, Sequence

import torch

from csem.apply.mrt.generator import render_prompt
from csem.apply.mrt.losses import _cache_arg, prompt_cache, select_cache


def sample_continuations(net: Any, tokenizer: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         num_samples: int, *, cache: Any = None, **decoding: Any) -> torch.Tensor:
    """``num_samples`` generations per left-padded prompt, the prompt encoded once (not once per sample).

    The prompts' cache (``cache`` from [`prompt_cache`][csem.apply.mrt.prompt_cache], else computed here without gradients) is
    cut to ``P - 1`` positions and repeated ``num_samples`` times; ``generate`` then starts from the
    last prompt token. Row ``b * num_samples + s`` is sample ``s`` of prompt ``b``, as with
    ``num_return_sequences``.

    Returns:
        ``[B * num_samples, P + new]`` token ids (prompt then generation), like ``generate``.
    """
    p = input_ids.shape[1]
    rows = torch.arange(input_ids.shape[0], device=input_ids.device).repeat_interleave(num_samples)
    with torch.no_grad():
        if cache is None:
            cache, _ = prompt_cache(net, input_ids, attention_mask)
        kv = select_cache(cache, rows, length=p - 1, detach=True)
        return net.generate(input_ids=input_ids.index_select(0, rows), attention_mask=attention_mask.index_select(0, rows),
                            num_return_sequences=1, pad_token_id=tokenizer.pad_token_id, **{_cache_arg(net): kv},
                            **decoding)


def generate_texts(net: Any, tokenizer: Any, sources: Sequence[str], *, task: str = "summarize",
                   max_source_tokens: int = 384, max_new_tokens: int = 64, sample: bool = False,
                   num_samples: int = 1, top_k: int = 50, temperature: float = 1.0, seed: int = 0,
                   batch_size: int = 4) -> list[list[str]]:
    """Generate ``num_samples`` texts per source (greedy when ``sample`` is False): one list per source."""
    tokenizer.padding_side = "left"
    out: list[list[str]] = []
    net.eval()
    for start in range(0, len(sources), batch_size):
        chunk = sources[start:start + batch_size]
        prompts = [render_prompt(tokenizer, task, s, max_source_tokens) for s in chunk]
        enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(net.device)
        torch.manual_seed(seed + start)
        decoding = dict(do_sample=sample, top_k=top_k if sample else None, temperature=temperature if sample else None,
                        top_p=None, max_new_tokens=max_new_tokens)
        with torch.inference_mode():
            if num_samples > 1:  # the prompt encoded once, its cache repeated for the samples
                gen = sample_continuations(net, tokenizer, enc["input_ids"], enc["attention_mask"], num_samples,
                                           **decoding)
            else:
                gen = net.generate(**enc, **decoding, pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        for b in range(len(chunk)):
            out.append([t.strip() for t in texts[b * num_samples:(b + 1) * num_samples]])
    return out


def step_seed(seed: int, step: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}|{step}".encode()).digest()[:4], "little") & 0x7FFFFFFF


def batch_for_step(n_sources: int, batch_size: int, seed: int, step: int) -> list[int]:
    """Source positions of optimiser step ``step`` (epoch-wise seeded permutations; a pure function,
    so a resumed run sees the same batches)."""
    per_epoch = max(1, math.ceil(n_sources / batch_size))
    epoch, j = divmod(step, per_epoch)
    g = torch.Generator().manual_seed(step_seed(seed, -1 - epoch))
    perm = torch.randperm(n_sources, generator=g).tolist()
    return perm[j * batch_size:(j + 1) * batch_size]

