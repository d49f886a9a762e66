"""benchmarks/gpu_teacher_pool.py: the judgments a stopped run left in its cache are found again from the
prompts alone (the cache keys csem annotate computes), and the agreement figures. The judge here is
tests/fake_llm.py's fake provider (named as fake: the keys, not the scores, are under test); the real
GPU run is recorded in benchmarks/data/teacher_pool/forms/hf-bf16/."""

import json

import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def gtp():
    yield from load_benchmark("gpu_teacher_pool")


def test_from_cache_finds_what_annotate_judged(gtp, tmp_path):
    from fake_llm import FakeLLM

    from csem.judge import judge_records

    recs = [{"id": f"c{i}", "doc_id": "s1" if i < 3 else "s2", "source": f"Source {i // 3}: the bridge closes.",
             "candidate": f"Candidate {i} about the bridge."} for i in range(5)]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    cache = tmp_path / "cache.sqlite"
    fake = FakeLLM("gpu-run")
    out, _ = judge_records(recs[:4], gtp.RUBRIC, fake, mode="probs", cache=cache, progress=False)
    got = gtp.from_cache(data, cache, fake.id)
    assert [r["id"] for r in got] == ["c0", "c1", "c2", "c3"], "the unjudged c4 is not found"
    for r, o in zip(got, out):
        assert r["score"] == pytest.approx(o["judge.relevance"]) and r["missing"] is None
    assert gtp.from_cache(data, cache, "fake:another-backend") == []
    t = gtp.cache_timing(cache, fake.id)
    assert t["judgments"] == 4 and t["pauses"] == 0 and t["active_seconds"] <= t["span_seconds"]


def test_agreement_pairs_candidates_both_judged(gtp):
    cands = [{"id": f"c{i}", "source_id": f"s{i // 3}", "system_id": str(i % 3), "split": "test"} for i in range(6)]
    cpu = {f"c{i}": {"score": 3.0 + 0.1 * i} for i in range(6)}
    gpu = {f"c{i}": {"score": 3.05 + 0.1 * i} for i in range(5)}
    gpu["c1"] = {"score": None}
    a = gtp.agreement(gpu, cpu, cands)
    assert a["candidates"] == 4 and a["pearson"] == pytest.approx(1.0)
    assert a["mean_abs_difference"] == pytest.approx(0.05) and a["summary_spearman_test"] == pytest.approx(1.0)
