"""SummEval and Shen et al. (2023) LLM-rating loaders on the real shared data."""

from __future__ import annotations

import json
import shutil

import pytest

from csem.data.datasets import (
    SUMMEVAL_ASPECTS,
    DatasetError,
    default_data_dir,
    load_dataset,
    load_summeval,
    load_summeval_llm_ratings,
)
from csem.meta.correlation import correlate


@pytest.fixture(scope="module")
def summeval(shared_data):
    return load_summeval(shared_data / "summeval")


def test_summeval_counts_and_fields(summeval):
    # README: 1600 rows = 100 docs x 16 systems, 3 experts, 11 references
    assert len(summeval) == 1600
    assert len({r["doc_id"] for r in summeval}) == 100
    assert len({r["system_id"] for r in summeval}) == 16
    r = summeval[0]
    assert r["id"] == f"{r['doc_id']}/{r['system_id']}"
    for rec in summeval:
        assert isinstance(rec["candidate"], str) and rec["candidate"]
        assert len(rec["reference"]) == 11 and len(rec["references_tokenized"]) == 11
        assert len(rec["expert_annotations"]) == 3
        for a in SUMMEVAL_ASPECTS:
            assert 1.0 <= rec[f"human.{a}"] <= 5.0
    # untokenised article by default; tokenised one kept
    assert "( CNN )" in r["source_tokenized"] and r["source"].startswith("(CNN)")
    extractive = [x for x in summeval if x["system_id"] in ("M0", "M1", "M2", "M5")]
    assert len(extractive) == 400 and all(x["turker_annotations"] is None for x in extractive)
    assert all(len(x["turker_annotations"]) == 5 for x in summeval if x["system_id"] not in ("M0", "M1", "M2", "M5"))


def test_summeval_expert_mean_is_mean_of_raw(summeval):
    for rec in summeval:
        for a in SUMMEVAL_ASPECTS:
            raw = [e[a] for e in rec["expert_annotations"]]
            assert rec[f"human.{a}"] == pytest.approx(sum(raw) / 3)


def test_summeval_readme_means(summeval):
    # README "Verification done": overall means coherence 3.413, consistency 4.660, fluency 4.673, relevance 3.777
    means = {a: sum(r[f"human.{a}"] for r in summeval) / len(summeval) for a in SUMMEVAL_ASPECTS}
    assert means == pytest.approx({"coherence": 3.413, "consistency": 4.660, "fluency": 4.673,
                                   "relevance": 3.777}, abs=5e-4)


def test_summeval_tokenized_source_and_turker_target(shared_data):
    recs = load_summeval(shared_data / "summeval" / "summeval.jsonl", source_field="source_tokenized",
                         target="turker")
    assert recs[0]["source"].startswith("( CNN )")
    m0 = [r for r in recs if r["system_id"] == "M0"]
    assert all(r["human.coherence"] is None for r in m0)  # no crowd scores for extractive systems
    m8 = next(r for r in recs if r["system_id"] == "M8")
    assert m8["human.coherence"] == pytest.approx(sum(t["coherence"] for t in m8["turker_annotations"]) / 5)


def test_summeval_official_release_format(shared_data, summeval):
    folder = shared_data / "summeval" / "original" / "llm_summeval"
    official = load_summeval(folder)
    assert len(official) == 1200
    assert {r["system_id"] for r in official} == {"M8", "M9", "M10", "M11", "M12", "M13", "M14", "M15",
                                                   "M17", "M20", "M22", "M23"}
    by_id = {r["id"]: r for r in summeval}
    for r in official:
        conv = by_id[r["id"]]  # same keys as the converted file
        assert r["source"] == conv["source"]
        assert r["candidate"] == conv["summary_raw"]
        assert r["reference"] == conv["reference"]
        for a in SUMMEVAL_ASPECTS:
            assert r[f"human.{a}"] == pytest.approx(conv[f"human.{a}"])
    # a single official file works too
    one = load_summeval(folder / "M8_outputs_annotations.jsonl")
    assert len(one) == 100 and {r["system_id"] for r in one} == {"M8"}


def test_summeval_bad_input_errors(tmp_path, shared_data):
    with pytest.raises(FileNotFoundError, match="Yale-LILY/SummEval"):
        load_summeval(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"foo": 1}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl, line 1: not a SummEval row"):
        load_summeval(bad)
    row = json.loads((shared_data / "summeval" / "summeval.jsonl").open().readline())
    dup = tmp_path / "dup.jsonl"
    dup.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match="line 2.*repeats"):
        load_summeval(dup)
    del row["references"]
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=r"\['references'\] missing"):
        load_summeval(missing)
    with pytest.raises(ValueError, match="source_field"):
        load_summeval(shared_data / "summeval", source_field="article")


def test_default_data_dir_env(monkeypatch, tmp_path, shared_data):
    monkeypatch.setenv("CSEM_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match="CSEM_DATA"):
        load_summeval()
    shutil.copytree(shared_data / "summeval" / "original" / "llm_summeval", tmp_path / "summeval")
    assert len(load_dataset("summeval")) == 1200  # a folder of official files under CSEM_DATA
    monkeypatch.delenv("CSEM_DATA")
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside the working directory: the checkout's neighbour
    from csem.data.loaders._io import _repo_root

    assert default_data_dir() == _repo_root().parent / "shared" / "data"
    beside = tmp_path / "work"
    (tmp_path / "shared" / "data").mkdir(parents=True)
    beside.mkdir()
    monkeypatch.chdir(beside)  # ../shared/data beside the working directory comes first
    assert default_data_dir() == (tmp_path / "shared" / "data").resolve()


def test_llm_ratings_gpt4_join_and_missing(shared_data):
    recs = load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023")
    assert len(recs) == 1200 and len({r["id"] for r in recs}) == 1200
    r = recs[0]
    assert r["judge_name"] == "gpt-4-0314" and r["judge_method"] == "rts"
    for a in SUMMEVAL_ASPECTS:
        assert a in r["judge_responses"] and isinstance(r["judge_responses"][a][-1], str)
        assert f"human.{a}" in r and len(r["reference"]) == 11
    missing = [x for x in recs if any(x[f"judge.{a}"] is None for a in SUMMEVAL_ASPECTS)]
    # README: GPT-4 states no score in 2 consistency responses; recorded as None with raw text kept
    assert len(missing) == 2
    for x in missing:
        assert x["judge.consistency"] is None and x["judge_score_rule"]["consistency"] == "unparsed"
        assert x["judge_responses"]["consistency"][0].strip()
    scored = [x[f"judge.{a}"] for x in recs for a in SUMMEVAL_ASPECTS if x[f"judge.{a}"] is not None]
    assert min(scored) >= 1 and max(scored) <= 5


# README table of summeval_llm_shen2023 (summary level, rho / tau-b, `score`)
README_GPT4 = {"coherence": (.451, .393), "consistency": (.603, .576), "fluency": (.537, .501),
               "relevance": (.433, .378)}
README_DOCS = {"consistency": 78, "relevance": 81}


def test_llm_ratings_gpt4_reproduces_readme_summary_level(shared_data):
    recs = load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023")
    docs = [r["doc_id"] for r in recs]
    for a, (rho, tau) in README_GPT4.items():
        j = [r[f"judge.{a}"] for r in recs]
        h = [r[f"human.{a}"] for r in recs]
        s = correlate(j, h, level="summary", method="spearman", groups=docs)
        k = correlate(j, h, level="summary", method="kendall", groups=docs)
        assert round(s.value, 3) == rho, a
        assert round(k.value, 3) == tau, a
        if a in README_DOCS:
            assert s.n_groups == README_DOCS[a] and s.n_skipped == 100 - README_DOCS[a]


def test_llm_ratings_other_judge_and_errors(shared_data):
    recs = load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023", judge="gpt-3.5-turbo-0301",
                                     method="mcq", summeval_path=shared_data / "summeval")
    assert len(recs) == 1200
    docs = [r["doc_id"] for r in recs]
    s = correlate([r["judge.coherence"] for r in recs], [r["human.coherence"] for r in recs],
                  level="summary", method="spearman", groups=docs)
    assert round(s.value, 3) == .427  # README table, gpt-3.5 mcq coherence
    with pytest.raises(ValueError, match="available.*gpt-4-0314"):
        load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023", judge="gpt-5")
