"""The learned evaluation model (CSEM, Wang et al.): encoder + Eq. 9/10 features + feed-forward heads.

Functional API::

    from csem.model import fit, EvaluationModel
    model = fit(records, "judge.coherence,judge.relevance", mode="ref-free", out_dir="my-metric",
                dev_records=dev, label_range=(1, 5))
    prediction = EvaluationModel.load("my-metric").predict(test_records)   # the one scoring method
    prediction.scores["metric.csem.coherence"], prediction.records          # columns, scored copies

Modules: ``config`` (typed configs), ``encoder`` (HF encoders, pooling, registry), ``features``
(Eq. 9 / Eq. 10), ``heads``, ``losses``, ``batching`` (each distinct text encoded once),
``module`` (the LightningModule), ``validation`` (data checks, dev correlations), ``fit`` (the one
training entry), ``train`` (its steps), ``pairs`` (preference tables),
``inference`` (the batching loop), ``scoring`` (the scoring path), ``prediction`` (its result),
``evaluation_model`` (save/load/predict), ``card`` (metric card), ``contrast``
(contrast pretraining), ``acceptability`` (the acceptability gate: real vs degenerate texts).
"""

from __future__ import annotations

from csem.model.config import LabelSpec, ModelConfig, TrainConfig
from csem.model.evaluation_model import EvaluationModel, ModelFolderError
from csem.model.prediction import Prediction
from csem.model.fit import fit
from csem.model.validation import TrainingDataError


__all__ = ["EvaluationModel", "LabelSpec", "ModelConfig", "ModelFolderError", "Prediction", "TrainConfig",
           "TrainingDataError", "fit"]
