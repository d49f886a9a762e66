"""Apply a metric to improve generators (CSEM Sec. III-C, III-D, IV-E, V-C).

Built on the scoring API of the learned model (load once, score many batches, keyed results; the
shape of COMET's ``estimate()`` that ``comet-mbr`` reuses):

* [`metrics`][csem.apply.metrics]: one [`Metric`][csem.apply.metrics.Metric] shape over a student folder, the judge and the
  baselines ([`load_metric`][csem.apply.metrics.load_metric]).
* [`reranking`][csem.apply.reranking]: N-best reranking by one metric (Eq. 7) or a weighted sum (Eq. 8),
  optional per-source z-scores.
* [`tune`][csem.apply.tune]: Och's MERT for the Eq. 8 weights (exact line search), random search.
* [`mbr`][csem.apply.mbr]: MBR selection with a reference-based utility (chrF, a student).
* [`mrt`][csem.apply.mrt]: minimum risk training mixed with MLE (Eq. 5, 6, 12) in Lightning.
* [`reward`][csem.apply.reward]: [`trl_reward`][csem.apply.reward.trl_reward], a TRL reward function over a student.
* [`server`][csem.apply.server]: an HTTP scoring endpoint with dynamic batching, and a load test.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Metric": "metrics", "StudentMetric": "metrics", "JudgeMetric": "metrics", "BaselineMetric": "metrics",
    "load_metric": "metrics", "load_metrics": "metrics", "score_all": "metrics",
    "rerank": "reranking", "rerank_scored": "reranking", "RerankResult": "reranking", "build_nbest": "reranking",
    "zscore_within": "reranking",
    "mert": "tune", "random_search": "tune", "line_search": "tune", "envelope": "tune", "objective": "tune",
    "TuneResult": "tune",
    "mbr_select": "mbr", "MBRResult": "mbr",
    "train_mrt": "mrt", "MRTConfig": "mrt", "MRTResult": "mrt", "mrt_loss": "mrt", "q_distribution": "mrt",
    "mixed_loss": "mrt",
    "trl_reward": "reward", "TRLReward": "reward",
    "create_app": "server", "serve": "server", "load_test": "server", "BackgroundServer": "server",
}


def __getattr__(name: str) -> Any:  # lazy: importing csem.apply does not import torch
    if name in _EXPORTS:
        return getattr(import_module(f"csem.apply.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'csem.apply' has no attribute '{name}'")


__all__ = sorted(_EXPORTS)
