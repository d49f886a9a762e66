"""The loss math of MRT (CSEM Eq. 5, 6, 12; Shen et al. 2016) and the sequence log-probabilities it needs.

Pure tensor functions: [`q_distribution`][csem.apply.mrt.losses.q_distribution] (Eq. 6), [`mrt_loss`][csem.apply.mrt.losses.mrt_loss] (Eq. 5 with the cost
``-reward``), [`mixed_loss`][csem.apply.mrt.losses.mixed_loss] (Eq. 12), the batched log-probabilities of continuations
([`sequence_logprobs`][csem.apply.mrt.losses.sequence_logprobs] over ``[prompt | target]``; [`prompt_cache`][csem.apply.mrt.losses.prompt_cache] +
[`continuation_logprobs`][csem.apply.mrt.losses.continuation_logprobs] from a prompt's shared key/value cache, the same values),
[`completion_mask`][csem.apply.mrt.losses.completion_mask] and [`fill_missing`][csem.apply.mrt.losses.fill_missing] (a missing reward takes its source's mean).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch


def q_distribution(seq_logprobs: torch.Tensor, alpha: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 6: ``Q = P^alpha`` renormalised over the samples of each source.

    Args:
        seq_logprobs: ``[B, S]`` sequence log-probabilities ``log P(y_s | x_b)`` (natural log).
        alpha: the sharpness (> 0).
        mask: optional ``[B, S]`` bool, False for padding samples (they get Q = 0).

    Returns:
        ``[B, S]``, each row sums to 1.
    """
    z = alpha * seq_logprobs
    if mask is not None:
        z = z.masked_fill(~mask, float("-inf"))
    return torch.softmax(z, dim=-1)


def mrt_loss(seq_logprobs: torch.Tensor, rewards: torch.Tensor, alpha: float,
             mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 5 with the cost ``Delta = -reward``: ``mean_b sum_s Q(y_s|x_b) * (-reward_bs)``.

    Args:
        seq_logprobs: ``[B, S]`` (with gradients). rewards: ``[B, S]`` (no gradient needed).
        alpha: Eq. 6's alpha. mask: optional ``[B, S]`` valid samples.

    Returns:
        A scalar: the expected cost under Q (lower is better).
    """
    q = q_distribution(seq_logprobs, alpha, mask)
    r = rewards.to(q.dtype).detach()
    if mask is not None:
        r = r.masked_fill(~mask, 0.0)
    return -(q * r).sum(-1).mean()


def mixed_loss(l_mrt: torch.Tensor, l_mle: torch.Tensor | None, lam: float) -> torch.Tensor:
    """Eq. 12: ``lambda * L_MRT + (1 - lambda) * L_MLE`` (just ``L_MRT`` when there is no MLE term;
    ``lambda = 0`` gives MLE-only fine-tuning)."""
    if l_mle is None:
        return l_mrt
    return lam * l_mrt + (1.0 - lam) * l_mle


def sequence_logprobs(net: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int,
                      target_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Token log-probabilities of the targets after a left-padded prompt, in one forward pass.

    Args:
        net: a transformers causal LM.
        input_ids: ``[N, P + T]``: prompts left-padded to length ``P``, then targets right-padded.
        attention_mask: ``[N, P + T]`` (0 on padding).
        prompt_len: ``P``.
        target_mask: ``[N, T]`` bool, True on the target tokens that count.

    Returns:
        ``(sum, count)``: ``[N]`` summed log-probabilities of the counted target tokens, and
        ``[N]`` their number. Only the last ``T + 1`` positions' logits are computed.
    """
    t = input_ids.shape[1] - prompt_len
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = net(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
              logits_to_keep=t + 1, use_cache=False)
    logits = out.logits[:, :-1].float()  # positions P-1 .. P+T-2 predict target tokens 0 .. T-1
    targets = input_ids[:, prompt_len:]
    lp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    m = target_mask.to(lp.dtype)
    return (lp * m).sum(-1), m.sum(-1)


def prompt_cache(net: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """One forward pass over left-padded prompts: their key/value cache and the last position's logits.

    The cache is shared by every continuation of a prompt (its S samples, its reference), so the
    prompt, by far the longest part of a summarization input, is encoded once per source instead of
    once per sample; with gradients enabled, they flow back through the cache into the prompt.

    Args:
        net: a transformers causal LM. input_ids, attention_mask: ``[B, P]``, left-padded.

    Returns:
        ``(cache, last_logits)``: a transformers cache over the ``P`` positions, and ``[B, V]`` logits
        at position ``P - 1`` (they predict the first continuation token).
    """
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = net(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True,
              logits_to_keep=1)
    return getattr(out, "cache", None) or out.past_key_values, out.logits[:, -1]


def _cache_arg(net: Any) -> str:
    """The keyword of the key/value cache: ``cache`` (transformers >= 5.2x) or ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(net.forward).parameters else "past_key_values"


def _cache_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))  # pragma: no cover - older transformers


def select_cache(cache: Any, rows: torch.Tensor, *, length: int | None = None, detach: bool = False) -> Any:
    """A new cache holding rows ``rows`` (a ``[M]`` index, repeats allowed) of ``cache``, optionally only
    its first ``length`` positions and detached from the graph; ``cache`` itself is left unchanged."""
    from transformers import DynamicCache

    data = []
    for k, v in _cache_tensors(cache):
        if length is not None:
            k, v = k[:, :, :length], v[:, :, :length]
        k, v = k.index_select(0, rows), v.index_select(0, rows)
        data.append((k.detach(), v.detach()) if detach else (k, v))
    try:
        return DynamicCache(ddp_cache_data=data)
    except TypeError:  # pragma: no cover - older transformers
        return DynamicCache.from_legacy_cache(tuple(data))


def continuation_logprobs(net: Any, cache: Any, prompt_mask: torch.Tensor, last_logits: torch.Tensor,
                          rows: torch.Tensor, targets: torch.Tensor,
                          target_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequence log-probabilities of continuations of cached prompts, in one batched forward pass.

    Equal to [`sequence_logprobs`][csem.apply.mrt.losses.sequence_logprobs] over ``[prompt | target]`` rows, but the prompt positions come
    from ``cache`` ([`prompt_cache`][csem.apply.mrt.losses.prompt_cache]), so only the ``T`` target positions are computed.

    Args:
        net: the causal LM that made ``cache``. cache: over ``[B, P]`` prompts.
        prompt_mask: ``[B, P]`` their attention mask (left padding). last_logits: ``[B, V]`` from
            [`prompt_cache`][csem.apply.mrt.losses.prompt_cache]. rows: ``[M]`` the prompt of each target row.
        targets: ``[M, T]`` token ids (right-padded). target_mask: ``[M, T]`` bool, True on the tokens
            that count (also the attention mask of the targets).

    Returns:
        ``(sum, count)``: ``[M]`` summed natural-log probabilities of the counted target tokens, and
        ``[M]`` their number.
    """
    p, t = prompt_mask.shape[1], targets.shape[1]
    kv = select_cache(cache, rows)
    attn = torch.cat([prompt_mask.index_select(0, rows), target_mask.to(prompt_mask.dtype)], dim=1)
    position_ids = (attn.long().cumsum(-1) - 1).clamp(min=0)[:, p:]
    cache_position = torch.arange(p, p + t, device=targets.device)
    logits = net(input_ids=targets, attention_mask=attn, position_ids=position_ids, cache_position=cache_position,
                 use_cache=True, **{_cache_arg(net): kv}).logits
    # position P-1 (the prompt's last) predicts target 0; target position j predicts target j + 1
    logits = torch.cat([last_logits.index_select(0, rows).unsqueeze(1), logits[:, :-1]], dim=1).float()
    lp = -torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    m = target_mask.to(lp.dtype)
    return (lp * m).sum(-1), m.sum(-1)


def completion_mask(tokens: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """``[N, T]`` bool: True up to and including the first end-of-sequence token of each row."""
    is_eos = torch.zeros_like(tokens, dtype=torch.bool)
    for e in eos_ids:
        is_eos |= tokens == e
    before = torch.cumsum(is_eos.long(), dim=-1) - is_eos.long()  # eos tokens strictly before
    return before == 0


def fill_missing(r: torch.Tensor) -> torch.Tensor:
    """Missing rewards (NaN) take their source's mean reward (no push either way); all missing -> 0."""
    mean = torch.nanmean(r, dim=1, keepdim=True).nan_to_num(0.0)
    return torch.where(torch.isnan(r), mean.expand_as(r), r)

