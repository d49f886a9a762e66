"""Settings of MRT training ([`MRTConfig`][csem.apply.mrt.config.MRTConfig])."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MRTConfig(BaseModel):
    """Settings of [`train_mrt`][csem.apply.mrt.train_mrt] (defaults: the paper and Shen et al. 2016 where they say).

    Attributes:
        lam: Eq. 12's lambda (0.7; 0 = MLE only: no samples are drawn or scored; 1 = MRT only).
            alpha: Eq. 6 (5e-3).
        num_samples: S samples per source (5). top_k: sampling (50). temperature: sampling.
        max_new_tokens: sample length cap. max_source_tokens: the source is cut to this many tokens
            before the task prompt is rendered. max_target_tokens: reference tokens in the MLE term.
        task: the task prompt (`csem.collect.prompts.TASK_PROMPTS` or a template).
        batch_size: sources per step; accumulate: gradient accumulation (Lightning).
        lr, weight_decay, gradient_clip: AdamW. max_steps: optimiser steps.
        reward_scale: the reward is multiplied by this. weights: per metric column (default: mean).
        checkpoint_every: steps between checkpoints (transformers folder + Lightning state);
        keep_checkpoints: transformers folders kept. seed. precision/accelerator/devices: Lightning.
        threads: torch CPU threads (None: leave as is).
        share_prompt: encode each prompt once per step and share its key/value cache between the
            sampling, the samples' and the reference's log-probabilities (True, the same values); False
            re-encodes it for every sample (the plain two-stage pass; kept to measure the difference).
    """

    model_config = ConfigDict(extra="forbid")
    lam: float = Field(0.7, ge=0, le=1)
    alpha: float = Field(5e-3, gt=0)
    num_samples: int = Field(5, ge=1)
    top_k: int = Field(50, ge=1)
    temperature: float = Field(1.0, gt=0)
    max_new_tokens: int = Field(64, ge=1)
    max_source_tokens: int = Field(384, ge=8)
    max_target_tokens: int = Field(96, ge=1)
    task: str = "summarize"
    batch_size: int = Field(2, ge=1)
    accumulate: int = Field(1, ge=1)
    lr: float = Field(1e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    gradient_clip: float = Field(1.0, ge=0)
    max_steps: int = Field(20, ge=1)
    reward_scale: float = 1.0
    weights: dict[str, float] | None = None
    checkpoint_every: int = Field(10, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    seed: int = 0
    precision: str = "32-true"
    accelerator: str = "cpu"
    devices: int | str = 1
    threads: int | None = Field(None, ge=1)
    share_prompt: bool = True

