"""The main job's seed ensemble (``package:summarization.yaml``'s train section) fine-tunes only the
top encoder layer, so its members share the embeddings and every other layer: scoring runs those once
per text and each member's top layer on the result, and the score is still the mean of the members'
own scores. Slow tier: real MiniLM (6 layers), two members trained on a few real-text rows."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml

from csem.model import ModelConfig, TrainConfig, fit

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "csem" / "pipeline" / "examples"


@pytest.mark.slow
def test_main_job_ensemble_shares_all_but_the_top_layer(train_records, test_records, small_model, monkeypatch):
    train = yaml.safe_load((EXAMPLES / "summarization.yaml").read_text())["train"]
    config = ModelConfig(encoder=train["encoder"], mode=train["mode"],
                         **{**train["model"], **small_model, "name": "e", "members": 2})
    model = fit(train_records, "judge.quality", config.mode, config=config,
                train_config=TrainConfig(**{**train["options"], "num_threads": 1}), label_range=(1, 5))
    n_layers = model.members[0].encoder.n_layers
    assert n_layers == 6 and train["options"]["train_layers"] == 1
    assert model.shared_layers == n_layers - 1  # embeddings and layers 0-4 identical in both members

    singles = [model.member(i).predict(test_records, precision="fp32").scores["metric.e.quality"] for i in range(2)]
    calls = {"lower": 0, "upper": 0}
    enc_type = type(model.members[0].encoder)
    for name in calls:
        orig = getattr(enc_type, name)

        def counted(self, *a, _orig=orig, _name=name, **k):
            calls[_name] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(enc_type, name, counted)
    pred = model.predict(test_records, precision="fp32")
    assert calls["lower"] >= 1 and calls["upper"] == 2 * calls["lower"]  # lower layers once, the top per member
    assert pred.scores["metric.e.quality"] == pytest.approx([statistics.fmean(c) for c in zip(*singles)], abs=1e-5)
    assert max(abs(a - b) for a, b in zip(*singles)) > 0  # the members differ: the mean is not one member's copy
