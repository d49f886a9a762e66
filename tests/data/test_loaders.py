"""Loaders of the other human-judgment sets, checked against the numbers in each folder's README."""

from __future__ import annotations

from collections import defaultdict

import pytest

from csem.data.datasets import (
    dataset_names,
    load_dataset,
    load_newsroom,
    load_qags,
    load_realsumm,
    load_summeval_geval_metriceval,
    load_topical_chat,
    load_topical_chat_llm_ratings,
    load_wmt21_mqm,
    load_wmt23_da,
)
from csem.data.loaders import DatasetError
from csem.meta import correlate


def _system_means(recs, col):
    acc = defaultdict(list)
    for r in recs:
        if r[col] is not None:
            acc[r["system_id"]].append(r[col])
    return {s: sum(v) / len(v) for s, v in acc.items()}


def _check_records(recs, n, n_docs, n_systems):
    assert len(recs) == n and len({r["id"] for r in recs}) == n
    assert len({r["doc_id"] for r in recs}) == n_docs
    assert len({r["system_id"] for r in recs}) == n_systems
    for r in recs:
        assert isinstance(r["source"], str) and r["source"] and isinstance(r["candidate"], str) and r["candidate"]


def test_topical_chat(shared_data):
    recs = load_topical_chat(shared_data / "topical_chat")
    _check_records(recs, 360, 60, 6)
    assert all(r["reference"] is None and r["knowledge"] for r in recs)
    means = _system_means(recs, "human.overall")
    # README per-system means: Original Ground Truth overall 4.250, Argmax Decoding 2.756
    assert means["Original Ground Truth"] == pytest.approx(4.250, abs=5e-4)
    assert means["Argmax Decoding"] == pytest.approx(2.756, abs=5e-4)
    assert _system_means(recs, "human.naturalness")["New Human Generated"] == pytest.approx(2.922, abs=5e-4)
    assert all(len(r["scores_raw"]["coherence"]) == 3 for r in recs)


def test_newsroom(shared_data):
    recs = load_newsroom(shared_data / "newsroom")
    _check_records(recs, 420, 60, 7)
    m = {a: _system_means(recs, f"human.{a}")["lede3"] for a in ("coherence", "fluency", "informativeness", "relevance")}
    assert m == pytest.approx({"coherence": 4.078, "fluency": 4.133, "informativeness": 3.983, "relevance": 4.133},
                              abs=5e-4)
    assert all(isinstance(r["reference"], str) for r in recs)
    tok = load_newsroom(shared_data / "newsroom", tokenized=True)
    assert tok[0]["candidate"] == recs[0]["summary_tokenized"]


def test_realsumm(shared_data):
    recs = load_realsumm(shared_data / "realsumm")
    _check_records(recs, 2400, 100, 24)
    assert all(0 <= r["human.litepyramid_recall"] <= 1 for r in recs)
    means = _system_means(recs, "human.litepyramid_recall")
    assert max(means, key=means.get) == "semsim_out" and means["semsim_out"] == pytest.approx(0.562, abs=5e-4)
    assert min(means, key=means.get) == "bottom_up_out" and means["bottom_up_out"] == pytest.approx(0.317, abs=5e-4)


def test_qags(shared_data):
    recs = load_qags(shared_data / "qags")
    assert len(recs) == 474
    cnn = load_qags(shared_data / "qags", subset="cnndm")
    xsum = load_qags(shared_data / "qags", subset="xsum")
    assert (len(cnn), len(xsum)) == (235, 239)
    assert sum(r["human.consistency"] for r in cnn) / 235 == pytest.approx(0.744, abs=5e-4)
    assert sum(r["human.consistency"] for r in xsum) / 239 == pytest.approx(0.485, abs=5e-4)
    assert all(r["reference"] is None and r["sentences"] for r in recs)
    with pytest.raises(ValueError, match="subset"):
        load_qags(shared_data / "qags", subset="nyt")


def test_wmt21_mqm(shared_data):
    recs = load_wmt21_mqm(shared_data / "wmt21_ted_mqm_ende")
    _check_records(recs, 6877, 529, 13)
    assert all(r["human.mqm"] <= 0 and r["reference"] for r in recs)
    means = _system_means(recs, "human.mqm")
    # README: errors per segment, Facebook-AI 1.06, Nemo 2.14 (MQM score = minus the weighted errors)
    assert -means["Facebook-AI"] == pytest.approx(1.06, abs=5e-3)
    assert -means["Nemo"] == pytest.approx(2.14, abs=5e-3)


def test_wmt23_da(shared_data):
    recs = load_wmt23_da(shared_data / "wmt23_da_sqm_ende")
    _check_records(recs, 6588, 549, 12)
    assert all(0 <= r["human.da"] <= 100 for r in recs)
    means = _system_means(recs, "human.da")
    assert means["GPT4-5shot"] == pytest.approx(88.96, abs=5e-3)
    assert means["AIRC"] == pytest.approx(73.59, abs=5e-3)


def test_metriceval_geval_ratings_readme_correlation(shared_data):
    recs = load_summeval_geval_metriceval(shared_data / "summeval_geval_metriceval")
    assert len(recs) == 1600
    docs = [r["doc_id"] for r in recs]
    # README: G-EVAL-4 run 1, summary-level rho coherence .412, relevance .405
    for a, rho in (("coherence", 0.412), ("relevance", 0.405)):
        c = correlate([r[f"judge.{a}"] for r in recs], [r[f"human.{a}"] for r in recs], level="summary",
                      method="spearman", groups=docs)
        assert round(c.value, 3) == rho
    with pytest.raises(ValueError, match="available"):
        load_summeval_geval_metriceval(shared_data / "summeval_geval_metriceval", judge="G-EVAL-5")


def test_chiang_ratings_readme_turn_level(shared_data):
    recs = load_topical_chat_llm_ratings(shared_data / "topical_chat_llm_chiang2023", mode="geval")
    assert len(recs) == 360
    # README: geval naturalness pooled Pearson .393 / Spearman .412
    j = [r["judge.naturalness"] for r in recs]
    h = [r["human.naturalness"] for r in recs]
    assert round(correlate(j, h, level="dataset", method="pearson").value, 3) == 0.393
    assert round(correlate(j, h, level="dataset", method="spearman").value, 3) == 0.412
    rated = [r for r in recs if r["judge.naturalness"] is not None]
    assert all(len(r["judge_responses"]["naturalness"]) == 20 for r in rated)
    with pytest.raises(ValueError, match="unknown mode"):
        load_topical_chat_llm_ratings(shared_data / "topical_chat_llm_chiang2023", mode="cot")


def test_registry_names_and_errors(shared_data, tmp_path):
    for name in ("summeval", "topical_chat", "newsroom", "realsumm", "qags", "wmt21-mqm", "wmt23-da"):
        assert name in dataset_names() or name.replace("_", "-") in dataset_names()
    assert len(load_dataset("topical-chat", shared_data / "topical_chat")) == 360
    with pytest.raises(ValueError, match="unknown dataset 'imdb'"):
        load_dataset("imdb")
    with pytest.raises(FileNotFoundError, match="mt-metrics-eval"):
        load_wmt23_da(tmp_path / "missing")
    bad = tmp_path / "realsumm.jsonl"
    bad.write_text('{"doc_id": 1, "system_id": "x", "source": "a", "summary": "b"}\n{not json\n')
    with pytest.raises(DatasetError, match=r"realsumm.jsonl, line 1: field\(s\) \['reference', 'litepyramid_recall'\]"):
        load_realsumm(tmp_path)
    bad.write_text('{not json\n')
    with pytest.raises(DatasetError, match="line 1: malformed JSON"):
        load_realsumm(bad)
