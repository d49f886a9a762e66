"""`EvaluationModel.predict`, the one scoring method, and its `Prediction`.

Fast tier: the tiny RANDOM 2-layer encoder (shapes, keys, exactness; not what the encoder knows).
"""

from __future__ import annotations

import statistics

import pytest
import torch

from csem.data.records import write_records
from csem.model import EvaluationModel, ModelConfig, Prediction, TrainConfig, fit
from csem.model.card import settings_hash

SMALL = dict(max_length=40, hidden_sizes=[32], dropout=0.0)
TC = dict(max_epochs=1, lr=1e-2, head_lr=1e-2, batch_size=16, train_layers=1, feature_prefit_steps=0)


def test_prediction_fields_and_keys(tiny_trained, test_records):
    model, _ = tiny_trained
    pred = model.predict(test_records, precision="fp32")
    assert isinstance(pred, Prediction) and len(pred) == len(test_records)
    col = "metric.tiny.quality"
    assert pred.columns == [col] and list(pred.scores) == [col]
    assert pred.ids == [r["id"] for r in test_records]
    assert pred.std is None and pred.source is None  # one student, no MC dropout, no cascade
    values = pred.scores[col]
    assert all(1.0 <= v <= 5.0 for v in values)
    assert pred.system_score[col] == pytest.approx(statistics.fmean(values))
    assert pred.hash == settings_hash(model, ["quality"], precision="fp32")
    assert [r[col] for r in pred.records] == values
    assert all(r["source"] == t["source"] and col not in t for r, t in zip(pred.records, test_records))
    # keyed, not positional: reversed input, same score per id
    rev = model.predict(list(reversed(test_records)), precision="fp32")
    for rid in pred.ids:
        assert rev.by_id(rid)[col] == pytest.approx(pred.by_id(rid)[col], abs=1e-5)
    with pytest.raises(KeyError, match="no record"):
        pred.by_id("nope")


def test_ids_by_position_duplicates_and_empty_input(tiny_trained, test_records):
    model, _ = tiny_trained
    rows = [{k: v for k, v in r.items() if k != "id"} for r in test_records[:3]]
    pred = model.predict(rows + [dict(test_records[0], id="x"), dict(test_records[1], id="x")], precision="fp32")
    assert pred.ids == ["0", "1", "2", "x", "x"]
    assert pred.by_id("1")["metric.tiny.quality"] == pred.scores["metric.tiny.quality"][1]
    with pytest.raises(KeyError, match="2 records"):
        pred.by_id("x")
    empty = model.predict([])
    assert empty.ids == [] and empty.scores == {"metric.tiny.quality": []}
    assert empty.system_score == {"metric.tiny.quality": None} and empty.records == []


def test_mc_dropout_std_columns_and_degenerate_floor(tiny_trained, test_records):
    model, _ = tiny_trained
    rows = test_records[:4] + [dict(test_records[0], id="empty", candidate="  ")]
    pred = model.predict(rows, mc_dropout=4, precision="fp32", name="s")
    assert set(pred.std) == {"metric.s.quality"}
    assert pred.by_id("empty") == {"metric.s.quality": 1.0}
    assert pred.std["metric.s.quality"][-1] == 0.0
    assert [r["metric.s.quality.std"] for r in pred.records] == pred.std["metric.s.quality"]
    assert set(pred.written()) == {"metric.s.quality", "metric.s.quality.std"}


def test_predict_reads_a_records_file(tiny_trained, test_records, tmp_path):
    model, _ = tiny_trained
    path = write_records(test_records[:5], tmp_path / "new.jsonl")
    assert model.predict(path, precision="fp32").scores == model.predict(test_records[:5], precision="fp32").scores


def test_missing_source_is_one_error_naming_record_and_field(tiny_trained, test_records):
    model, _ = tiny_trained
    with pytest.raises(ValueError, match=r"record 'bad' \(position 1\): field 'source' is missing"):
        model.predict([test_records[0], {"id": "bad", "candidate": "text"}])


@pytest.fixture(scope="module")
def ensemble(tiny_encoder, train_records):
    """Three members trained with only the top layer (train_layers=1) over a shared frozen lower layer."""
    cfg = ModelConfig(name="e", encoder=str(tiny_encoder), members=3, **SMALL)
    return fit(train_records, "judge.quality", "ref-free", config=cfg, train_config=TrainConfig(seed=5, **TC),
               label_range=(1, 5))


def _member_scores(model, records):
    return [model.member(i).predict(records, precision="fp32").scores["metric.e.quality"]
            for i in range(len(model.members))]


def test_shared_lower_layers_run_once_and_give_the_member_mean(ensemble, test_records, monkeypatch):
    assert ensemble.shared_layers == 1  # embeddings + layer 0 identical in every member
    singles = _member_scores(ensemble, test_records)
    calls = {"lower": 0, "upper": 0}
    enc_type = type(ensemble.members[0].encoder)
    for name in calls:
        orig = getattr(enc_type, name)

        def counted(self, *a, _orig=orig, _name=name, **k):
            calls[_name] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(enc_type, name, counted)
    pred = ensemble.predict(test_records, precision="fp32")
    assert calls["lower"] >= 1 and calls["upper"] == 3 * calls["lower"]  # lower once per chunk, top per member
    mean = [statistics.fmean(col) for col in zip(*singles)]
    assert pred.scores["metric.e.quality"] == pytest.approx(mean, abs=1e-5)
    spread = [statistics.pstdev(col) for col in zip(*singles)]
    assert pred.std["metric.e.quality"] == pytest.approx(spread, abs=1e-5)
    assert max(spread) > 0  # the members differ: the mean is not one member's copy


def test_members_with_different_lower_layers_are_scored_whole(ensemble, test_records):
    import copy

    other = EvaluationModel(ensemble.members[0], ensemble.card,
                            members=[copy.deepcopy(m) for m in ensemble.members])
    with torch.no_grad():
        next(iter(other.members[2].encoder.model.embeddings.parameters())).add_(0.01)
    assert other.shared_layers is None
    mean = [statistics.fmean(col) for col in zip(*_member_scores(other, test_records))]
    assert other.predict(test_records, precision="fp32").scores["metric.e.quality"] == pytest.approx(mean, abs=1e-5)


def test_whole_encoder_shared_embeds_once(ensemble, test_records):
    import copy

    members = [copy.deepcopy(ensemble.members[0]) for _ in range(2)]
    with torch.no_grad():
        for p in members[1].heads.parameters():
            p.mul_(1.5)
    both = EvaluationModel(members[0], ensemble.card, members=members)
    assert both.shared_layers == -1
    mean = [statistics.fmean(col) for col in zip(*_member_scores(both, test_records))]
    assert both.predict(test_records, precision="fp32").scores["metric.e.quality"] == pytest.approx(mean, abs=1e-5)
