"""Reranking (Eq. 7 / Eq. 8), z-scores, MBR and the metric shapes, on a real small student trained here."""

from __future__ import annotations

import random

import numpy as np
import pytest

from csem.apply.mbr import mbr_select
from csem.apply.metrics import BaselineMetric, StudentMetric, load_metric, load_metrics
from csem.apply.reranking import parse_weights, rerank, rerank_scored, score_specs, zscore_within
from csem.apply.tune import tune_weights_report


def _mean_label(rows, col):
    return float(np.mean([r[col] for r in rows]))


def test_student_metric_scores_keyed_and_in_order(student, nbest_test):
    m = load_metric(str(student))
    assert isinstance(m, StudentMetric) and m.columns == ["metric.tiny.quality", "metric.tiny.fluency"]
    a = m.score(nbest_test)
    b = m.score(list(reversed(nbest_test)))
    assert a["metric.tiny.quality"] == pytest.approx(list(reversed(b["metric.tiny.quality"])), abs=1e-4)
    one = load_metric(f"{student}#fluency")
    assert one.columns == ["metric.tiny.fluency"]
    # records without ids, or with repeated ids, are still scored one per record
    no_ids = [{k: v for k, v in r.items() if k != "id"} for r in nbest_test[:3]] + [dict(nbest_test[0], id="x"),
                                                                                     dict(nbest_test[1], id="x")]
    s = m.score(no_ids)["metric.tiny.quality"]
    assert len(s) == 5 and s[3] == pytest.approx(s[0], abs=1e-4) and s[4] == pytest.approx(s[1], abs=1e-4)
    with pytest.raises(ValueError, match="no aspect \\['nonsense'\\]; it scores"):
        load_metric(f"{student}#nonsense")


def test_eq7_rerank_by_the_trained_student_picks_better_candidates(student, nbest_test):
    res = rerank(nbest_test, [load_metric(f"{student}#quality")])
    assert len(res.chosen) == 8 and not res.no_choice
    for r in res.chosen:  # the chosen candidate is the argmax of its list
        group = [x for x in res.scored if x["doc_id"] == r["doc_id"]]
        assert r["metric.tiny.quality"] == max(x["metric.tiny.quality"] for x in group)
        assert sum(x["rerank.chosen"] for x in group) == 1
    chosen_q, all_q = _mean_label(res.chosen, "judge.quality"), _mean_label(nbest_test, "judge.quality")
    print(f"true quality of the student's pick {chosen_q:.2f} vs a random pick's expectation {all_q:.2f}")
    assert chosen_q >= all_q + 0.5
    fl = rerank(nbest_test, [load_metric(f"{student}#fluency")])
    assert _mean_label(fl.chosen, "judge.fluency") >= _mean_label(nbest_test, "judge.fluency") + 0.5


def test_eq8_weights_order_invariance_and_zscore(student, nbest_test):
    rows, cols = score_specs(nbest_test, str(student))
    only_q = rerank_scored(rows, cols, [1.0, 0.0])
    assert [r["id"] for r in only_q.chosen] == [r["id"] for r in rerank_scored(rows, ["metric.tiny.quality"]).chosen]
    both = rerank_scored(rows, cols, "metric.tiny.quality=0.5,metric.tiny.fluency=0.5", normalize="zscore")
    for r in both.chosen:
        group = [x for x in both.scored if x["doc_id"] == r["doc_id"]]
        f = zscore_within(np.array([[x[c] for c in cols] for x in group]))
        assert r["rerank.score"] == pytest.approx(float((f @ [0.5, 0.5]).max()))
    shuffled = list(rows)
    random.Random(0).shuffle(shuffled)
    again = rerank_scored(shuffled, cols, [0.5, 0.5], normalize="zscore")
    assert sorted(r["id"] for r in again.chosen) == sorted(r["id"] for r in both.chosen)


def test_zscore_ties_and_missing_scores():
    f = np.array([[1.0, 5.0], [3.0, 5.0], [np.nan, 5.0]])
    z = zscore_within(f)
    assert z[:2, 0].tolist() == [-1.0, 1.0] and np.isnan(z[2, 0]) and (z[:, 1] == 0).all()
    rows = [{"id": "a", "doc_id": "1", "candidate": "x", "m.s": 2.0}, {"id": "b", "doc_id": "1", "candidate": "y",
                                                                      "m.s": 2.0},
            {"id": "c", "doc_id": "2", "candidate": "z", "m.s": None}]
    rows = [{**r, "metric.s": r.pop("m.s")} for r in rows]
    res = rerank_scored(rows, ["metric.s"])
    assert [r["id"] for r in res.chosen] == ["a"]  # ties: the first candidate
    assert res.no_choice == ["2"]  # every candidate missing: no choice, reported


def test_weights_errors():
    cols = ["metric.a", "metric.b"]
    assert parse_weights("1,2", cols).tolist() == [1.0, 2.0]
    assert parse_weights({"metric.b": 3}, cols).tolist() == [0.0, 3.0]
    with pytest.raises(ValueError, match="2 score column"):
        parse_weights("1", cols)
    with pytest.raises(ValueError, match="no metric writes"):
        parse_weights("metric.c=1", cols)
    with pytest.raises(ValueError, match="numbers"):
        parse_weights("a,b", cols)


def test_baselines_and_metric_specs(nbest_test):
    ms = load_metrics("chrf,rouge1")
    assert [m.columns for m in ms] == [["metric.chrf"], ["metric.rouge1"]] and all(m.needs_reference for m in ms)
    with pytest.raises(ValueError, match="unknown metric"):
        load_metric("not-a-metric")
    with pytest.raises(ValueError, match="judge:RUBRIC"):
        load_metric("judge:local")
    judge = load_metric("judge:geval/summeval-coherence@local")  # loading does not start the model
    assert judge.columns == ["judge.coherence"] and not judge.needs_reference
    no_ref = [{k: v for k, v in r.items() if k != "reference"} for r in nbest_test[:2]]
    with pytest.raises(ValueError, match="reference-based"):
        rerank(no_ref, [BaselineMetric("chrf")])
    # a score column already in the file is used as it is
    rows, cols = score_specs(nbest_test, "judge.quality,chrf")
    assert cols == ["judge.quality", "metric.chrf"]
    res = rerank_scored(rows, ["judge.quality"])
    assert all(r["system_id"] == "own" for r in res.chosen)


def test_mbr_with_chrf_picks_the_consensus():
    recs = [{"id": f"{i}", "doc_id": "d", "source": "s", "candidate": c} for i, c in enumerate(
        ["the cat sat on the mat", "a cat sat on the mat", "the cat sat on a mat today", "stock markets fell sharply"])]
    res = mbr_select(recs, BaselineMetric("chrf"))
    assert res.chosen[0]["candidate"] != "stock markets fell sharply"
    assert min(r["mbr.score"] for r in res.scored) == next(r["mbr.score"] for r in res.scored if r["id"] == "3")
    with pytest.raises(ValueError, match="reference-based utility"):
        mbr_select(recs, type("M", (), {"needs_reference": False, "name": "ref-free"})())


def test_tune_weights_report_on_the_student(student, nbest_test):
    rep = tune_weights_report(nbest_test, str(student), "judge.quality", normalize="zscore", restarts=2, seed=0)
    rows = {r["selection"].split(" (")[0]: r["value"] for r in rep["table"]}
    assert rep["columns"] == ["metric.tiny.quality", "metric.tiny.fluency"] and rep["sources"] == 8
    assert rep["value"] >= max(v for k, v in rows.items() if not k.startswith("oracle")) - 1e-12
    assert rep["value"] <= rows["oracle"]
    assert rep["mert"]["evaluations"] == rep["random"]["evaluations"]  # random search at the same budget
