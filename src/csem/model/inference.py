"""The one batching loop of scoring: `head_scores`, under
[`csem.model.EvaluationModel.predict`][] (the one scoring method).

Every distinct text of a block of records is encoded once (a source shared by many candidates,
a reference shared by many systems), in length-bucketed encoder calls, under
``torch.inference_mode`` (and autocast where ``precision`` asks for it); the heads then run on the
gathered features. The text pool is sorted by (length, text), so the order of the records never
changes a score; the batch size changes a score only by float rounding (< 1e-4 on a 1-5 scale in fp32).

A seed ensemble whose members share their lower encoder layers (the default student trains only the
top layers over frozen lower ones; `shared_depth` finds the
shared depth by comparing the weights) runs those layers once per text and each member's top layers
and heads on the result: an ensemble of 5 costs far less than 5 students.

MC dropout (``mc_dropout=N``): the heads' dropout is sampled ``N`` times over the same embeddings
(encoder dropout is not sampled, which keeps it cheap); the score is the mean and ``std`` the
standard deviation of the ``N`` samples, on the rating's scale.
"""

from __future__ import annotations

import contextlib
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from csem.errors import InputError
from csem.model.batching import Batch, BatchBuilder


def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bf16 matrix instructions (AVX512-BF16 or AMX)."""
    try:
        flags = open("/proc/cpuinfo", encoding="ascii", errors="ignore").read()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


_LIGHTNING_NAMES = {"32-true": "fp32", "32": "fp32", "bf16-mixed": "bf16", "bf16-true": "bf16", "16-mixed": "fp16",
                    "16-true": "fp16", "16": "fp16"}


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """Autocast dtype for ``precision`` (``auto`` | ``fp32`` | ``bf16`` | ``fp16``, the names of
    `csem.model.config.PRECISIONS`; the Lightning strings ``csem train`` takes, such as
    ``bf16-mixed`` or ``32-true``, mean the same here) on ``device``; None = fp32.

    ``auto``: bf16 on a CUDA device that supports it, fp16 on other CUDA devices, fp32 on a CPU. (Until
    0.1 ``auto`` meant bf16 on CPUs with AMX or AVX512-BF16; bf16's 8-bit mantissa rounds a 1-5 score to
    steps of 1/32 to 1/64 (3.875, 3.90625), which tied candidates in reranking, so the CPU default is
    fp32: ``research/student_summeval_stages/student_summeval.json`` under ``precision_ties`` counts the ties of both.)

    Raises:
        ValueError: unknown precision.
    """
    precision = _LIGHTNING_NAMES.get(precision, precision)
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        return torch.float16
    if precision != "auto":
        raise InputError(f"unknown precision '{precision}'; choose auto, fp32, bf16 or fp16")
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return None


def shared_depth(members: Sequence[Any]) -> int | None:
    """How much of the encoder every member of a seed ensemble shares, found by comparing weights.

    Returns:
        None when the members share nothing the scorer can reuse (one member, or different
        embedding layers, or an encoder that cannot be split); ``-1`` when the whole encoder is
        identical (embed once, heads per member); else ``k`` > 0: the embedding layer and the
        encoder layers ``0..k-1`` are identical (the default student trains only the top layers
        over frozen lower ones), so their token states are computed once per text and each
        member runs only its layers ``k..L-1``.
    """
    if len(members) < 2:
        return None
    encoders = [m.encoder for m in members]
    states = [e.state_dict() for e in encoders]
    if all(_same(states[0], s, states[0]) for s in states[1:]):
        return -1
    first = encoders[0]
    if first.n_layers == 0 or getattr(first, "mix", None) is not None:
        return None

    by_id = {id(p): n for n, p in first.named_parameters()}
    seen: set[str] = set()
    depth = None
    for k in range(0, first.n_layers):  # the embedding layer (k = 0), then one layer more each step
        keys = [by_id[id(p)] for p in first.lower_parameters(k) if by_id[id(p)] not in seen]
        if not all(_same(states[0], s, keys) for s in states[1:]):
            break
        seen.update(keys)
        depth = k
    return depth or None


def _same(a: Mapping[str, Tensor], b: Mapping[str, Tensor], keys: Any) -> bool:
    return all(k in b and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in keys)


def head_scores(
    members: Sequence[Any],
    records: Sequence[Mapping[str, Any]],
    *,
    batch_size: int = 64,
    mc_dropout: int = 0,
    precision: str = "auto",
    share_encodings: bool = True,
    records_per_block: int = 4096,
    device: torch.device | str | None = None,
    shared: int | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The one batching loop: every member's head scores of ``records``, on each head's scale.

    Records are taken in blocks of ``records_per_block``; each block's distinct texts are pooled,
    tokenised once and length-bucketed (`csem.model.batching.BatchBuilder`), and run under
    ``torch.inference_mode`` (and autocast, see `resolve_precision`). A seed ensemble whose
    members share lower encoder layers (``shared``, from `shared_depth`) computes them once
    per text and runs only each member's top layers and heads.

    Args:
        members: `csem.model.module.EvaluationModule` objects of one config (one for a single
            student). records: records already checked (texts the mode needs present).
        batch_size: most sequences per encoder call. mc_dropout: MC-dropout samples of the heads
            (0 = off). precision: see `resolve_precision`. share_encodings: False re-encodes
            every record's texts (the naive scorer). records_per_block: records pooled at once
            (bounds memory). device: where to run (default: the first member's device).
        shared: the shared depth (`shared_depth`); None runs each member whole.

    Returns:
        ``(mean, std)``: ``[M, N, A]`` float tensors on the CPU (members, records in input order,
        heads in config order); ``std`` is the MC-dropout deviation or None without MC dropout.
    """
    first = members[0]
    cfg = first.config
    dev = torch.device(device) if device is not None else next(first.parameters()).device
    for m in members:
        m.to(dev)
        m.eval()
    dtype = resolve_precision(precision, dev)
    gate = any(getattr(m, "gate", None) is not None and m.gate.is_fitted for m in members)
    builder = BatchBuilder(first.encoder, cfg.mode, cfg.max_length, None, share=share_encodings,
                           chunk_size=batch_size, architecture=cfg.architecture,
                           source_max_length=cfg.source_max_length, overlap=cfg.overlap_features and cfg.feature_set,
                           gate=gate)
    autocast = torch.autocast(dev.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    means, stds = [], []
    for start in range(0, len(records), records_per_block):
        batch = builder(records[start:start + records_per_block]).to(dev)
        with torch.inference_mode(), autocast:
            outs = [_heads(m, emb, batch, mc_dropout) for m, emb in zip(members, _embed(members, batch, shared))]
        means.append(torch.stack([o[0] for o in outs]))
        if mc_dropout > 0:
            stds.append(torch.stack([o[1] for o in outs]))
    if not means:
        empty = torch.zeros((len(members), 0, len(cfg.aspects)))
        return empty, (empty.clone() if mc_dropout > 0 else None)
    return torch.cat(means, dim=1), (torch.cat(stds, dim=1) if mc_dropout > 0 else None)


def _embed(members: Sequence[Any], batch: Batch, shared: int | None) -> list[Tensor]:
    """Each member's pooled embeddings ``[n_texts, d]`` of the batch's pool (see `head_scores`)."""
    if shared is None:
        return [m.embed(batch) for m in members]
    if shared == -1:
        return [members[0].embed(batch)] * len(members)
    outs: list[list[Tensor]] = [[] for _ in members]
    for chunk in batch.chunks:
        mask = chunk["attention_mask"]
        hidden = members[0].encoder.lower(chunk["input_ids"], mask, shared)
        for out, m in zip(outs, members):
            out.append(m.encoder.upper(hidden, mask, shared).float())
    return [torch.cat(o, dim=0) for o in outs]


def _heads(module: Any, emb: Tensor, batch: Batch, mc_dropout: int) -> tuple[Tensor, Tensor | None]:
    """One member's per-record head scores ``[B, A]`` on each head's scale (and MC-dropout std)."""
    if mc_dropout <= 0:
        norm, _ = module.aggregate(module.head_outputs(emb, batch).float(), batch.pair_counts)
        return module.denormalise(norm).float().cpu(), None
    for head in module.heads.values():
        head.train()
    try:
        samples = []
        for _ in range(mc_dropout):
            norm, _ = module.aggregate(module.head_outputs(emb, batch).float(), batch.pair_counts)
            samples.append(module.denormalise(norm).float())
    finally:
        module.heads.eval()
    stack = torch.stack(samples)
    std = stack.std(0, unbiased=True) if mc_dropout > 1 else torch.zeros_like(stack[0])
    return stack.mean(0).cpu(), std.cpu()
