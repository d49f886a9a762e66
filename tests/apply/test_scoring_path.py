"""One scoring path (issue 21) and degenerate text (issue 24) over a multi-judge student.

The student has three heads on a tiny RANDOM encoder (fast tier): ``quality@fine`` (1-5),
``quality@coarse`` (1-3) and ``fluency`` (1-5), and its card declares the ensemble aspect ``quality``
(the mean of the two quality heads on [0, 1]), as ``csem train --combine heads`` writes it. Every
consumer (csem score, rerank, MRT's reward, the TRL reward, csem serve) must see the same columns
and the same values; before the one scoring path, rerank/MRT/serve/TRL saw only the heads and
``DIR#quality`` raised.
"""

from __future__ import annotations

import math

import httpx
import pytest
from typer.testing import CliRunner

from csem.apply.metrics import StudentMetric, load_metric
from csem.data.records import read_records, write_records

SCALES = {"quality@fine": (1.0, 5.0), "quality@coarse": (1.0, 3.0), "fluency": (1.0, 5.0), "quality": (0.0, 1.0)}


def _recs(nbest_test, n=8):
    return [{k: r[k] for k in ("id", "doc_id", "source", "candidate")} for r in nbest_test[:n]]


def test_output_and_default_aspects(multi_judge):
    from csem.model import EvaluationModel

    m = EvaluationModel.load(multi_judge)
    assert m.output_aspects == SCALES
    assert m.default_aspects == ["quality", "fluency"]  # the ensemble in place of its heads


def test_every_consumer_sees_the_same_ensemble_scores(multi_judge, nbest_test, tmp_path):
    """csem score, load_metric('DIR'), 'DIR#quality', rerank, MRT's reward, the TRL reward and the
    server: one set of columns, one value per record."""
    from csem.apply.mrt import metric_reward
    from csem.apply.reranking import score_specs
    from csem.apply.reward import trl_reward
    from csem.apply.server import BackgroundServer
    from csem.cli import _load_commands, app
    from csem.model import EvaluationModel

    _load_commands()
    recs = _recs(nbest_test)
    data, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_records(recs, data)
    res = CliRunner().invoke(app, ["score", "--model", str(multi_judge), "--data", str(data), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = read_records(out)
    file_q = [r["metric.mj.quality"] for r in rows]
    # the ensemble column is the mean of its heads mapped to [0, 1]
    for r in rows:
        assert r["metric.mj.quality"] == pytest.approx(((r["metric.mj.quality@fine"] - 1) / 4
                                                        + (r["metric.mj.quality@coarse"] - 1) / 2) / 2, abs=1e-6)
    default = load_metric(str(multi_judge))
    assert default.columns == ["metric.mj.quality", "metric.mj.fluency"]
    direct = default.score(recs)
    assert direct["metric.mj.quality"] == pytest.approx(file_q, abs=1e-5)
    assert direct["metric.mj.fluency"] == pytest.approx([r["metric.mj.fluency"] for r in rows], abs=1e-5)
    only = load_metric(f"{multi_judge}#quality")  # raised 'no head for aspect' before
    assert only.columns == ["metric.mj.quality"] and only.score(recs)["metric.mj.quality"] == pytest.approx(file_q, abs=1e-5)
    head = load_metric(f"{multi_judge}#quality@coarse")
    assert head.columns == ["metric.mj.quality@coarse"]
    assert head.score(recs)["metric.mj.quality@coarse"] == pytest.approx([r["metric.mj.quality@coarse"] for r in rows],
                                                                        abs=1e-5)
    # rerank scores through the same columns
    scored, cols = score_specs(recs, f"{multi_judge}#quality")
    assert cols == ["metric.mj.quality"] and [r["metric.mj.quality"] for r in scored] == pytest.approx(file_q, abs=1e-5)
    # MRT's reward and the TRL reward
    assert metric_reward(only)(recs) == pytest.approx(file_q, abs=1e-5)
    reward = trl_reward(multi_judge, aspects=["quality"])
    assert reward(prompts=[r["source"] for r in recs], completions=[r["candidate"] for r in recs]) == pytest.approx(
        file_q, abs=1e-5)
    # the server
    with BackgroundServer(default, max_batch=16, max_wait_ms=1) as srv:
        got = httpx.post(f"{srv.url}/score", json={"records": recs}, timeout=60).json()
    assert got["columns"] == default.columns
    assert [x["scores"]["metric.mj.quality"] for x in got["results"]] == pytest.approx(file_q, abs=1e-5)
    # and EvaluationModel.predict, the one scoring method, carries the ensemble aspect too
    res = EvaluationModel.load(multi_judge).predict(recs)
    assert res.scores["metric.mj.quality"] == pytest.approx(file_q, abs=1e-5)
    assert res.columns == [f"metric.mj.{a}" for a in SCALES]


def test_results_are_keyed_whatever_the_ids_and_order(multi_judge, nbest_test):
    metric = StudentMetric(multi_judge, precision="fp32")
    recs = _recs(nbest_test)
    base = metric.score(recs)["metric.mj.quality"]
    same_ids = [dict(r, id="x") for r in recs]  # repeated ids
    assert metric.score(same_ids)["metric.mj.quality"] == pytest.approx(base, abs=1e-5)
    no_ids = [{k: v for k, v in r.items() if k != "id"} for r in reversed(recs)]
    assert metric.score(no_ids)["metric.mj.quality"] == pytest.approx(base[::-1], abs=1e-5)


def test_unknown_aspect_names_what_the_model_scores(multi_judge):
    with pytest.raises(ValueError, match=r"no aspect \['coherence'\].*'quality'"):
        load_metric(f"{multi_judge}#coherence")


# ----------------------------------------------------------------------------- degenerate text (issue 24)

DEGENERATE = ["", "   \n\t ", "a real-looking summary\x00 with a NUL"]


def test_degenerate_candidates_get_each_scales_minimum(multi_judge, nbest_test):
    from csem.model import EvaluationModel

    m = EvaluationModel.load(multi_judge)
    real = _recs(nbest_test, 2)
    recs = real + [dict(real[0], id=f"bad{i}", candidate=c) for i, c in enumerate(DEGENERATE)]
    res = m.predict(recs)
    for r in recs[2:]:
        assert res.by_id(r["id"]) == {f"metric.mj.{a}": lo for a, (lo, _) in SCALES.items()}
    for r in recs[:2]:  # real candidates stay strictly inside each scale, so the floor is below every one
        got = res.by_id(r["id"])
        assert all(lo < got[f"metric.mj.{a}"] < hi for a, (lo, hi) in SCALES.items()), got
    # the real candidates are scored as without the degenerate ones beside them
    alone = m.predict(real)
    for c in res.columns:
        assert res.scores[c][:2] == pytest.approx(alone.scores[c], abs=1e-5)
    std = m.predict(recs, mc_dropout=2).std
    assert std["metric.mj.quality@fine"][2:] == [0.0, 0.0, 0.0]


def test_degenerate_error_mode_names_record_and_field(multi_judge, nbest_test):
    from csem.model.scoring import DegenerateTextError

    metric = StudentMetric(multi_judge, degenerate="error")
    recs = _recs(nbest_test, 2) + [dict(_recs(nbest_test, 1)[0], id="empty-one", candidate=" ")]
    with pytest.raises(DegenerateTextError, match=r"record 'empty-one' \(position 2\): field 'candidate' is whitespace"):
        metric.score(recs)


def test_empty_or_nul_source_is_an_error_not_a_score(multi_judge, nbest_test):
    metric = StudentMetric(multi_judge)
    rec = _recs(nbest_test, 1)[0]
    with pytest.raises(ValueError, match=r"record 'd40-own' \(position 0\): field 'source' is empty"):
        metric.score([dict(rec, source="")])
    with pytest.raises(ValueError, match="field 'source' contains a NUL"):
        metric.score([dict(rec, source="an article\x00")])


def test_trl_reward_floors_degenerate_completions(multi_judge, nbest_test):
    from csem.apply.reward import trl_reward

    reward = trl_reward(multi_judge, weights={"quality": 0.5, "fluency": 0.5})
    assert reward.floor == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)
    recs = _recs(nbest_test, 2)
    got = reward(prompts=[recs[0]["source"]] * 5, completions=[recs[0]["candidate"], recs[1]["candidate"], *DEGENERATE])
    assert got[2:] == [reward.floor] * 3 and all(math.isfinite(x) for x in got)
    # conversational completions with empty content too
    conv = reward(prompts=[[{"role": "user", "content": recs[0]["source"]}]],
                  completions=[[{"role": "assistant", "content": ""}]])
    assert conv == [reward.floor]


def test_mrt_reward_cache_floors_degenerate_samples(multi_judge, nbest_test, tmp_path):
    from csem.apply.mrt import RewardCache, metric_reward

    metric = StudentMetric(multi_judge, ["quality"])
    cache = RewardCache(metric_reward(metric), tmp_path / "rewards.jsonl", "ns")
    rec = _recs(nbest_test, 1)[0]
    got = cache([dict(rec, candidate=""), dict(rec, candidate=" "), rec])
    assert got[:2] == [0.0, 0.0] and got[2] is not None


def test_server_rejects_degenerate_text_with_422(multi_judge, nbest_test):
    from csem.apply.server import BackgroundServer

    metric = load_metric(str(multi_judge))
    rec = _recs(nbest_test, 1)[0]
    with BackgroundServer(metric, max_batch=16, max_wait_ms=1) as srv:
        for i, bad in enumerate(DEGENERATE):
            r = httpx.post(f"{srv.url}/score", json={"records": [rec, dict(rec, candidate=bad)]}, timeout=60)
            assert r.status_code == 422, (i, r.text)
            body = r.json()
            assert body["record"] == "records[1]" and body["field"] == "candidate", body


def test_judge_metric_floors_degenerate_candidates_without_asking_the_judge(fake_llm, nbest_test):
    """MRT with a judge reward: an empty sample gets the rubric's scale minimum, no LLM call (FAKE
    backend; a metric that judged nothing has no run summary)."""
    metric = load_metric(f"judge:geval/summeval-coherence@{fake_llm}")
    assert metric.scales == {"judge.coherence": (1.0, 5.0)}
    rec = _recs(nbest_test, 1)[0]
    got = metric.score([dict(rec, id="a", candidate=""), dict(rec, id="b", candidate="\x00"), dict(rec, id="c")])
    assert got["judge.coherence"][:2] == [1.0, 1.0]
    assert got["judge.coherence"][2] is not None and 1.0 <= got["judge.coherence"][2] <= 5.0
    assert metric.last_summary is not None  # the real candidate was judged
    only_bad = load_metric(f"judge:geval/summeval-coherence@{fake_llm}")
    assert only_bad.score([dict(rec, candidate="  ")]) == {"judge.coherence": [1.0]}
    assert only_bad.last_summary is None  # nothing was sent to the judge
