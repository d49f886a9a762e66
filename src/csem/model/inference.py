"""Fast scoring with a trained :class:`csem.model.module.EvaluationModule`.

Every distinct text of a block of records is encoded once (a source shared by many candidates,
a reference shared by many systems), in length-bucketed encoder calls, under
``torch.inference_mode`` and, where the hardware supports it, bf16 autocast; the heads then run on
the gathered features. Results are keyed by record id and the text pool is sorted by
(length, text), so the order of the records never changes a score; the batch size changes a score
only by float rounding (< 1e-4 on a 1-5 scale in fp32).

MC dropout (``mc_dropout=N``): the heads' dropout is sampled ``N`` times over the same embeddings
(encoder dropout is not sampled, which keeps it cheap); the score is the mean and ``std`` the
standard deviation of the ``N`` samples, on the rating's scale.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from csem.model.batching import BatchBuilder


@dataclass(frozen=True)
class ScoreResult:
    """Scores of one record.

    Attributes:
        id: the record's id.
        scores: aspect -> score on the aspect's rating scale (e.g. 1-5; not clipped).
        std: aspect -> MC-dropout standard deviation (same scale), or None without MC dropout.
    """

    id: str
    scores: dict[str, float]
    std: dict[str, float] | None = None


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
    :data:`csem.model.config.PRECISIONS`; the Lightning strings ``csem train`` takes, such as
    ``bf16-mixed`` or ``32-true``, mean the same here) on ``device``; None = fp32.

    ``auto``: bf16 on a CUDA device that supports it, fp16 on other CUDA devices, fp32 on a CPU. (Until
    0.1 ``auto`` meant bf16 on CPUs with AMX or AVX512-BF16; bf16's 8-bit mantissa rounds a 1-5 score to
    steps of 1/32 to 1/64 (3.875, 3.90625), which tied candidates in reranking, so the CPU default is
    fp32: ``benchmarks/results/student_summeval.json`` under ``precision_ties`` counts the ties of both.)

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
        raise ValueError(f"unknown precision '{precision}'; choose auto, fp32, bf16 or fp16")
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return None


def predict(
    module: Any,
    records: Sequence[Mapping[str, Any]],
    *,
    batch_size: int = 64,
    mc_dropout: int = 0,
    precision: str = "auto",
    share_encodings: bool = True,
    records_per_block: int = 4096,
    device: torch.device | str | None = None,
) -> list[ScoreResult]:
    """Score ``records`` with ``module``; one :class:`ScoreResult` per record, in input order.

    Args:
        module: an :class:`EvaluationModule` (its config decides mode and aspects).
        records: csem records with the texts the mode needs.
        batch_size: most sequences per encoder call (length-bucketed).
        mc_dropout: number of MC-dropout samples of the heads (0 = off).
        precision: see :func:`resolve_precision`.
        share_encodings: False re-encodes each record's texts (the naive scorer; for benchmarks).
        records_per_block: records whose distinct texts are pooled at once (bounds memory).
        device: where to run (default: the module's device).

    Raises:
        ValueError: a record lacks a text the mode needs (names the record id).
    """
    cfg = module.config
    dev = torch.device(device) if device is not None else next(module.parameters()).device
    module.to(dev)
    module.eval()
    dtype = resolve_precision(precision, dev)
    builder = BatchBuilder(module.encoder, cfg.mode, cfg.max_length, None, share=share_encodings,
                           chunk_size=batch_size, architecture=cfg.architecture,
                           source_max_length=cfg.source_max_length, overlap=cfg.overlap_features and cfg.feature_set,
                           gate=getattr(module, "gate", None) is not None and module.gate.is_fitted)
    aspects = cfg.aspects
    results: list[ScoreResult] = []
    autocast = torch.autocast(dev.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    for start in range(0, len(records), records_per_block):
        block = records[start:start + records_per_block]
        _check_texts(block, cfg.mode)
        batch = builder(block).to(dev)
        with torch.inference_mode(), autocast:
            emb = module.embed(batch)
            if mc_dropout > 0:
                for head in module.heads.values():
                    head.train()
                samples = []
                for _ in range(mc_dropout):
                    norm, _ = module.aggregate(module.head_outputs(emb, batch).float(), batch.pair_counts)
                    samples.append(module.denormalise(norm))
                module.heads.eval()
                stack = torch.stack(samples)
                mean, std = stack.mean(0).cpu(), stack.std(0, unbiased=True).cpu() if mc_dropout > 1 \
                    else torch.zeros_like(stack[0]).cpu()
            else:
                norm, _ = module.aggregate(module.head_outputs(emb, batch).float(), batch.pair_counts)
                mean, std = module.denormalise(norm).cpu(), None
        for i, rid in enumerate(batch.ids):
            results.append(ScoreResult(
                id=rid, scores={a: float(mean[i, k]) for k, a in enumerate(aspects)},
                std={a: float(std[i, k]) for k, a in enumerate(aspects)} if std is not None else None))
    return results


def _check_texts(records: Sequence[Mapping[str, Any]], mode: str) -> None:
    from csem.data.records import references_of
    from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

    for r in records:
        if not isinstance(r.get("candidate"), str):
            raise ValueError(f"record '{r.get('id')}': no candidate text")
        if NEEDS_SOURCE[mode] and not isinstance(r.get("source"), str):
            raise ValueError(f"record '{r.get('id')}': mode '{mode}' needs a source")
        if NEEDS_REFERENCE[mode] and not references_of(r):
            raise ValueError(f"record '{r.get('id')}': mode '{mode}' needs a reference")
