"""Stage i on a real generator: SmolLM2-135M through llama.cpp (plumbing-grade text, real sampling)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from csem.collect.sampler import GeneratorSpec, collect_candidates, sample_seed
from csem.data.records import read_records, write_records
from csem.llm import GenerateConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "csem" / "pipeline" / "examples"
SHORT = GenerateConfig(max_tokens=16)


@pytest.fixture(scope="module")
def sources():
    return read_records(EXAMPLES / "news_sources.jsonl", required=("source",))[:3]


def _texts(recs):
    return {r["id"]: r["candidate"] for r in recs}


@pytest.mark.slow  # samples from SmolLM2
def test_collect_is_deterministic_and_order_free(sources):
    gens = [GeneratorSpec(uri="llama-cpp:smollm2", name="smol", num_samples=2)]
    a, sa = collect_candidates(sources, gens, decoding=SHORT, seed=7, progress=False)
    b, _ = collect_candidates(list(reversed(sources)), gens, decoding=SHORT, seed=7, progress=False)
    assert _texts(a) == _texts(b)
    assert sa.generated == 6 and sa.references == 3
    gen_ids = [r["id"] for r in a if r["system_id"] == "smol"]
    assert len(gen_ids) + sa.dropped == 6
    # provenance is recorded on every generated candidate
    for r in a:
        if r["system_id"] == "smol":
            assert r["collect.generator"] == "llama-cpp:smollm2"
            assert r["collect.decoding"] == {"max_tokens": 16, "temperature": 1.0, "top_k": 50, "top_p": 1.0}
            assert r["collect.seed"] == sample_seed(7, r["doc_id"], "smol", r["collect.sample"])
            assert "smollm2" in r["collect.checkpoint"].lower()
        else:
            assert r["system_id"] == "reference" and r["candidate"] == r["reference"]
    c, _ = collect_candidates(sources, gens, decoding=SHORT, seed=8, progress=False)
    assert _texts(c) != _texts(a), "a different seed must give different samples"


@pytest.mark.slow  # samples from SmolLM2
def test_duplicates_counted_and_dropped_or_kept(sources):
    # top_k=1 makes sampling greedy: every sample of a source is the same text
    greedy = GenerateConfig(top_k=1, max_tokens=12)
    gens = [GeneratorSpec(uri="llama-cpp:smollm2", name="smol", num_samples=3)]
    dropped, s1 = collect_candidates(sources[:2], gens, decoding=greedy, include_reference=False, progress=False)
    assert s1.duplicates == 4 and s1.dropped == 4 and len(dropped) == 2
    kept, s2 = collect_candidates(sources[:2], gens, decoding=greedy, include_reference=False,
                                  duplicates="keep", progress=False)
    assert s2.duplicates == 4 and s2.dropped == 0 and len(kept) == 6
    assert sum(r.get("collect.flag") == "duplicate" for r in kept) == 4


@pytest.mark.slow  # samples from SmolLM2
def test_per_generator_decoding_and_stale_partial_samples(sources, tmp_path):
    """A checkpoint can bring its own decoding (a hotter stand-in for a weaker system); a resumed
    sample is reused only when it was made with the same decoding settings."""
    hot = GenerateConfig(temperature=1.6, max_tokens=16)
    gens = [GeneratorSpec(uri="llama-cpp:smollm2", name="smol", num_samples=1),
            GeneratorSpec(uri="llama-cpp:smollm2", name="smol-hot", num_samples=1, decoding=hot)]
    partial = tmp_path / "p.jsonl"
    recs, s = collect_candidates(sources[:2], gens, decoding=SHORT, include_reference=False, duplicates="keep",
                                 partial_path=partial, progress=False)
    dec = {r["system_id"]: r["collect.decoding"]["temperature"] for r in recs}
    assert dec == {"smol": 1.0, "smol-hot": 1.6} and s.generated == 4
    gens[1] = GeneratorSpec(uri="llama-cpp:smollm2", name="smol-hot", num_samples=1,
                            decoding=GenerateConfig(temperature=1.3, max_tokens=16))
    again, s2 = collect_candidates(sources[:2], gens, decoding=SHORT, include_reference=False, duplicates="keep",
                                   partial_path=partial, progress=False)
    assert (s2.resumed, s2.generated) == (2, 2), "only the samples whose decoding changed are made again"
    assert {r["collect.decoding"]["temperature"] for r in again if r["system_id"] == "smol-hot"} == {1.3}


@pytest.mark.slow  # samples from SmolLM2
def test_keep_one_per_source(sources):
    gens = [GeneratorSpec(uri="llama-cpp:smollm2", name="smol", num_samples=2)]
    one, s = collect_candidates(sources, gens, decoding=SHORT, keep="one", progress=False)
    assert sorted(r["doc_id"] for r in one) == sorted(r["id"] for r in sources)
    again, _ = collect_candidates(sources, gens, decoding=SHORT, keep="one", progress=False)
    assert [r["id"] for r in one] == [r["id"] for r in again]


@pytest.mark.slow  # loads SmolLM2 to learn what it supports
def test_bad_sources_are_named(sources):
    gens = [GeneratorSpec(uri="llama-cpp:smollm2", num_samples=1)]
    with pytest.raises(ValueError, match="empty or missing 'source'"):
        collect_candidates([{"id": "a", "source": "  "}], gens, progress=False)
    with pytest.raises(ValueError, match="repeats"):
        collect_candidates([sources[0], sources[0]], gens, progress=False)
    with pytest.raises(ValueError, match="needs a transformers generator"):
        collect_candidates(sources[:1], gens, decoding=GenerateConfig(num_beams=4), progress=False)
    with pytest.raises(ValueError, match="names must differ"):
        collect_candidates(sources, gens + gens, progress=False)


@pytest.mark.slow  # samples from SmolLM2
def test_killed_collect_resumes_without_repeating(tmp_path, sources):
    """A `csem collect` process killed mid-run keeps its finished samples; the re-run generates only the rest
    and ends with exactly the candidates of an uninterrupted run."""
    src = tmp_path / "src.jsonl"
    write_records(sources, src)
    out = tmp_path / "cands.jsonl"
    partial = tmp_path / "cands.jsonl.partial.jsonl"
    cmd = [sys.executable, "-m", "csem", "collect", "--sources", str(src), "--generator", "smol=llama-cpp:smollm2",
           "-J", "4", "--max-tokens", "24", "--out", str(out), "--seed", "3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 600  # generous: the shared CI machine can be slow
    while time.time() < deadline:
        if partial.exists() and len(partial.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len([l for l in partial.read_text().splitlines() if l.strip()])
    assert 3 <= done_before < 12, "the kill must land mid-run for this test to mean anything"
    assert not out.exists()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    import re

    resumed_n = int(re.search(r"resumed\s+(\d+)", res.stdout).group(1))
    assert done_before - 1 <= resumed_n <= done_before, "every complete line of the partial file is reused"
    resumed = read_records(out)
    fresh, _ = collect_candidates(sources, [GeneratorSpec(uri="llama-cpp:smollm2", name="smol", num_samples=4)],
                                  decoding=GenerateConfig(max_tokens=24), seed=3, progress=False)
    assert _texts(resumed) == _texts(fresh)
    assert int(re.search(r"generated\s+(\d+)", res.stdout).group(1)) == 12 - resumed_n, \
        "no finished sample generated twice"
    assert len({r["id"] for r in resumed if r["system_id"] == "smol"}) == 12
    assert not partial.exists(), "the partial file is removed once the output is complete"


@pytest.mark.slow  # samples from SmolLM2
def test_samples_cut_at_max_tokens_are_kept_trimmed_or_dropped(sources, tmp_path):
    gens = [GeneratorSpec(uri="llama-cpp:smollm2", name="smol", num_samples=2)]
    from csem.collect.sampler import trim_to_sentence

    # the seeded samples differ between CPUs (llama.cpp's kernels): take the first length at which some
    # sample is cut after a complete sentence, so the trim branch runs on real samples on every machine
    for max_tokens in (32, 48, 64, 96):
        MID = GenerateConfig(max_tokens=max_tokens)
        partial = tmp_path / f"c{max_tokens}.partial.jsonl"
        kept, sk = collect_candidates(sources, gens, decoding=MID, include_reference=False, duplicates="keep",
                                      partial_path=partial, progress=False)
        cut = [r for r in kept if r["collect.finish_reason"] == "length"]
        if any(trim_to_sentence(r["candidate"]) not in (None, r["candidate"]) for r in cut):
            break
    assert cut and sk.truncated == len(cut) == sk.kept_cut and sk.trimmed == 0
    assert all(r.get("collect.flag") == "truncated" for r in cut)
    assert all(r["collect.finish_reason"] == "stop" for r in kept if r not in cut)
    # trim: from the same samples (the partial log; nothing is generated again)
    trimmed, st = collect_candidates(sources, gens, decoding=MID, include_reference=False, duplicates="keep",
                                     truncated="trim", partial_path=partial, progress=False)
    assert st.generated == 0 and st.resumed == 6 and st.truncated == sk.truncated
    raw = {r["id"]: r["candidate"] for r in kept}
    n_trimmed = 0
    for r in trimmed:
        if "collect.untrimmed" in r:
            n_trimmed += 1
            assert r["collect.untrimmed"] == raw[r["id"]] and raw[r["id"]].startswith(r["candidate"])
            assert len(r["candidate"]) < len(raw[r["id"]]) and r["candidate"][-1] in ".!?\"')"
        else:
            assert r["candidate"] == raw[r["id"]]
    assert n_trimmed == st.trimmed >= 1  # the trim branch ran on real samples
    assert st.kept_cut == sum(r.get("collect.flag") == "truncated" for r in trimmed) <= st.truncated - st.trimmed
    dropped, sd = collect_candidates(sources, gens, decoding=MID, include_reference=False, duplicates="keep",
                                     truncated="drop", partial_path=partial, progress=False)
    assert sd.dropped == sk.truncated and len(dropped) == 6 - sk.truncated
    assert all(r["collect.finish_reason"] == "stop" for r in dropped)
    with pytest.raises(ValueError, match="truncated must be one of keep, trim, drop"):
        collect_candidates(sources, gens, truncated="cut", progress=False)
