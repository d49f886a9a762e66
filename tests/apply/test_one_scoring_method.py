"""Every consumer of a student scores through `EvaluationModel.predict`, the one scoring method.

Each consumer runs on a tiny RANDOM-encoder student (fast tier) while `EvaluationModel.predict` is
wrapped by a counter; a consumer that scored some other way would leave the count at zero.
"""

from __future__ import annotations

import httpx
import pytest

import csem
from csem.model import EvaluationModel, ModelConfig, TrainConfig

CONSUMERS = ["load_metric", "train", "csem score", "csem serve", "csem rerank", "rerank api", "MBR", "MRT reward",
             "TRL reward", "Ray engine"]


@pytest.fixture(scope="module")
def ref_student(nbest_train, tiny_encoder, tmp_path_factory):
    """A reference-based student (every consumer, MBR included, can use it), saved to a folder."""
    out = tmp_path_factory.mktemp("one_way") / "student"
    csem.train(nbest_train[:24], "judge.quality", mode="ref-based", out_dir=out, label_range=(1, 5),
               config=ModelConfig(name="rb", encoder=str(tiny_encoder), max_length=32, hidden_sizes=[16]),
               train_config=TrainConfig(max_epochs=1, batch_size=16, seed=0))
    return out


@pytest.fixture()
def calls(monkeypatch):
    counter = {"n": 0}
    real = EvaluationModel.predict

    def counted(self, *args, **kwargs):
        counter["n"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(EvaluationModel, "predict", counted)
    return counter


def _run(name, student, records, tmp_path, tiny_encoder):
    from typer.testing import CliRunner

    from csem.cli import _load_commands, app
    from csem.data.records import write_records

    if name == "load_metric":
        model = csem.load_metric(student)
        assert isinstance(model, EvaluationModel)
        model.predict(records)
    elif name == "train":
        model = csem.train(records, "judge.quality", mode="ref-based", label_range=(1, 5),
                           config=ModelConfig(name="t", encoder=str(tiny_encoder), max_length=32, hidden_sizes=[8]),
                           train_config=TrainConfig(max_epochs=1, batch_size=16, seed=0))
        assert isinstance(model, EvaluationModel)
        model.predict(records)
    elif name in ("csem score", "csem rerank"):
        _load_commands()
        data = write_records(records, tmp_path / "in.jsonl")
        args = (["score", "--model", str(student)] if name == "csem score"
                else ["rerank", "--metric", str(student)])
        res = CliRunner().invoke(app, [*args, "--data", str(data), "--out", str(tmp_path / "out.jsonl")])
        assert res.exit_code == 0, res.output
    elif name == "csem serve":
        from csem.apply.metrics import load_metric
        from csem.apply.server import BackgroundServer

        with BackgroundServer(load_metric(str(student)), max_batch=8, max_wait_ms=1) as srv:
            body = {"records": [{k: r[k] for k in ("id", "source", "candidate", "reference")} for r in records]}
            assert httpx.post(f"{srv.url}/score", json=body, timeout=60).status_code == 200
    elif name == "rerank api":
        assert len(csem.rerank(records, [csem.load_metric(student)]).chosen) == len({r["doc_id"] for r in records})
    elif name == "MBR":
        from csem.apply.mbr import mbr_select
        from csem.apply.metrics import load_metric

        assert mbr_select(records, load_metric(str(student))).chosen
    elif name == "MRT reward":
        from csem.apply.metrics import load_metric
        from csem.apply.mrt.rewards import metric_reward

        assert len(metric_reward(load_metric(str(student)))(records)) == len(records)
    elif name == "TRL reward":
        from csem.apply.reward import trl_reward

        reward = trl_reward(student)
        out = reward(prompts=[r["source"] for r in records], completions=[r["candidate"] for r in records],
                     reference=[r["reference"] for r in records])
        assert len(out) == len(records)
    elif name == "Ray engine":
        pa = pytest.importorskip("pyarrow")
        pytest.importorskip("ray")
        from csem.engines.ray import RayScorer  # the actor class, called in this process

        table = RayScorer(str(student))(pa.Table.from_pylist(records))
        assert "metric.rb.quality" in table.column_names
    else:  # pragma: no cover - a consumer listed without a runner
        raise AssertionError(f"no runner for {name}")


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_consumer_calls_predict(consumer, calls, ref_student, nbest_test, tmp_path, tiny_encoder):
    records = [{k: r[k] for k in ("id", "doc_id", "source", "candidate", "reference", "judge.quality")}
               for r in nbest_test[:8]]
    _run(consumer, ref_student, records, tmp_path, tiny_encoder)
    assert calls["n"] >= 1, f"{consumer} scored without EvaluationModel.predict"


def test_the_removed_scoring_paths_are_gone():
    import csem.api
    import csem.model
    import csem.model.scoring

    for gone in ("score", "score_columns", "score_records"):
        assert not hasattr(EvaluationModel, gone)
    assert not hasattr(csem.model, "score") and not hasattr(csem.model, "ScoreResult")
    assert not hasattr(csem.model.scoring, "score_columns") and not hasattr(csem.model.scoring, "score_results")
    assert not hasattr(csem.api, "LearnedMetric") and not hasattr(csem.api, "MetricScores")
