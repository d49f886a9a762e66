"""The CPU scoring default is fp32 (bf16 rounds 1-5 scores to 1/32 steps and ties candidates)."""

import torch

from csem.model.inference import resolve_precision


def test_auto_is_fp32_on_cpu():
    assert resolve_precision("auto", torch.device("cpu")) is None


def test_bf16_rounds_scores_into_ties_that_fp32_keeps_apart():
    scores = torch.tensor([3.871, 3.874, 3.876, 3.879], dtype=torch.float32)
    assert len(set(scores.tolist())) == 4
    assert len(set(scores.to(torch.bfloat16).float().tolist())) < 4
