"""Minimum risk training (MRT) of a transformers generator with a metric as the reward, mixed with MLE.

CSEM (Wang et al., Sec. III-D, Eq. 5, 6, 12), after Shen et al. (2016, "Minimum Risk Training for
Neural Machine Translation"):

* Eq. 6: for ``S`` samples ``y_1..y_S`` of source ``x``,
  ``Q(y_s | x; theta, alpha) = P(y_s | x; theta)^alpha / sum_s' P(y_s' | x; theta)^alpha``,
  i.e. a softmax of ``alpha * log P`` over the samples ([`q_distribution`][csem.apply.mrt.q_distribution]; Shen et al. use
  ``alpha = 5e-3``).
* Eq. 5: ``L_MRT = sum_s Q(y_s | x) * Delta(y_s)`` with the cost ``Delta = -reward`` (the metric's
  score of the sample); averaged over the sources of a batch ([`mrt_loss`][csem.apply.mrt.mrt_loss]).
* Eq. 12: ``L = lambda * L_MRT + (1 - lambda) * L_MLE`` ([`mixed_loss`][csem.apply.mrt.mixed_loss]), ``L_MLE`` the
  token-level negative log-likelihood of the references (default ``lambda = 0.7``).

Two-stage sampling (as in the paper): ``S`` top-k samples per source are generated without
gradients, then their sequence log-probabilities are computed with gradients in one batched
forward pass over the samples ([`continuation_logprobs`][csem.apply.mrt.continuation_logprobs]). Each source's prompt is encoded
once per step, with gradients ([`prompt_cache`][csem.apply.mrt.prompt_cache]); its key/value cache, detached, starts the
sampling and, with gradients, serves the samples' and the reference's forward passes, so the prompt
(the long part of a summarization input) costs one pass instead of ``S + 2``; the result equals a
pass over ``[left-padded prompt | sample]`` ([`sequence_logprobs`][csem.apply.mrt.sequence_logprobs]). Rewards are
cached per (source id, candidate text), in memory and in ``rewards.jsonl`` (a resumed run does not
re-score). Training runs in Lightning (devices, precision, gradient accumulation), seeded: the
sources and the sampling seed of step ``t`` are pure functions of ``(seed, t)``, so a run resumed
from ``lightning/last.ckpt`` after a kill continues exactly. Checkpoints are loadable transformers
folders (``checkpoint-<step>/``, and ``final/`` at the end); ``train_log.csv`` has one row per
step (reward, MRT and MLE loss, mean sample length in tokens, wall and CPU seconds since the start).

Modules: `losses` (Eq. 5, 6, 12 and the log-probability passes),
`sampling` (samples from a shared prompt cache, seeded batches, batched
generation), `rewards` (metric reward, reward cache keyed by content),
`generator` (loading through `csem.llm.providers.hf.HFBackend`, prompts,
saving), `module` (the Lightning module), `config`
([`MRTConfig`][csem.apply.mrt.MRTConfig]) and `train` ([`train_mrt`][csem.apply.mrt.train_mrt]).
"""

from __future__ import annotations

from csem.apply.mrt.config import MRTConfig
from csem.apply.mrt.generator import eos_ids, load_generator, render_prompt, resolve_generator, save_generator
from csem.apply.mrt.losses import (completion_mask, continuation_logprobs, fill_missing, mixed_loss, mrt_loss,
                                   prompt_cache, q_distribution, select_cache, sequence_logprobs)
from csem.apply.mrt.module import LOG_FIELDS
from csem.apply.mrt.rewards import RewardCache, metric_reward, reward_identity
from csem.apply.mrt.sampling import batch_for_step, generate_texts, sample_continuations, step_seed
from csem.apply.mrt.train import MRTResult, log_summary, train_mrt

__all__ = ["LOG_FIELDS", "MRTConfig", "MRTResult", "RewardCache", "batch_for_step", "completion_mask",
           "continuation_logprobs", "eos_ids", "fill_missing", "generate_texts", "load_generator", "log_summary",
           "metric_reward", "mixed_loss", "mrt_loss", "prompt_cache", "q_distribution", "render_prompt",
           "resolve_generator", "reward_identity", "sample_continuations", "save_generator", "select_cache",
           "sequence_logprobs", "step_seed", "train_mrt"]
