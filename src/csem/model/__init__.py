"""The learned evaluation model (CSEM, Wang et al.): encoder + Eq. 9/10 features + feed-forward heads.

Functional API::

    from csem.model import train, score, EvaluationModel
    model = train(records, "judge.coherence,judge.relevance", mode="ref-free", out_dir="my-metric",
                  dev_records=dev, label_range=(1, 5))
    results = score(test_records, "my-metric")          # one ScoreResult per record
    EvaluationModel.load("my-metric").score_records(test_records)   # adds metric.<name>.<aspect>

Modules: ``config`` (typed configs), ``encoder`` (HF encoders, pooling, registry), ``features``
(Eq. 9 / Eq. 10), ``heads``, ``losses``, ``batching`` (each distinct text encoded once),
``module`` (the LightningModule), ``validation`` (data checks, dev correlations), ``train``,
``inference``, ``evaluation_model`` (save/load/score), ``card`` (metric card), ``contrast``
(contrast pretraining), ``acceptability`` (the acceptability gate: real vs degenerate texts).
"""

from __future__ import annotations

from csem.model.config import LabelSpec, ModelConfig, TrainConfig
from csem.model.evaluation_model import EvaluationModel, ModelFolderError, score
from csem.model.inference import ScoreResult
from csem.model.train import train
from csem.model.validation import TrainingDataError


__all__ = ["EvaluationModel", "LabelSpec", "ModelConfig", "ModelFolderError", "ScoreResult", "TrainConfig",
           "TrainingDataError", "score", "train"]
