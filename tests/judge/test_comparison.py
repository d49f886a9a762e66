"""Comparison ranking (csem.judge.comparison, csem.rubrics.pairwise): pair selection, A/B parsing,
built-in pairwise rubrics, and real judging with SmolLM2 through llama.cpp (in process and through
a real OpenAI-compatible server), both orders, SQLite resume, `csem annotate --compare`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from csem.data.records import read_records, write_records
from csem.judge.comparison import compare_records, parse_choice, preference_scores, select_pairs
from csem.rubrics import list_rubrics, load_rubric
from csem.rubrics.loader import RubricError
from csem.rubrics.pairwise import PairwiseRubric, list_pairwise_rubrics, load_pairwise_rubric


def _recs():
    out = []
    for s in range(2):
        for c in range(4):
            out.append({"id": f"s{s}c{c}", "doc_id": f"s{s}", "system_id": f"m{c}", "source": f"source {s}",
                        "candidate": f"candidate {c} of {s}", "judge.coherence": float(c if s == 0 else 4 - c)})
    return out


def test_select_pairs_balanced_covers_every_candidate_evenly():
    from collections import Counter

    recs = [{"id": f"d{d}-{i}", "source": f"doc {d}", "candidate": f"c{i}"} for d in range(3) for i in range(16)]
    one = select_pairs(recs, "balanced", per_source=8, seed=3)
    assert len(one) == 24 and len(set(one)) == 24
    assert all(recs[i]["source"] == recs[j]["source"] and i < j for i, j in one)
    assert set(Counter(i for p in one for i in p).values()) == {1}  # one rating pass's budget: each once
    two = select_pairs(recs, "balanced", per_source=16, seed=3)
    assert set(Counter(i for p in two for i in p).values()) == {2} and len(set(two)) == 48
    assert one == select_pairs(recs, "balanced", per_source=8, seed=3) != select_pairs(recs, "balanced",
                                                                                        per_source=8, seed=4)
    odd = select_pairs(recs[:5], "balanced", per_source=4, seed=0)  # 5 candidates: counts differ by at most 1
    counts = Counter(i for p in odd for i in p)
    assert len(odd) == 4 and max(counts.values()) - min(counts.get(i, 0) for i in range(5)) <= 1
    assert len(select_pairs(recs[:4], "balanced", per_source=99)) == 6  # all pairs when fewer
    # the random strategy at the same budget leaves candidates out (why balanced exists)
    rnd = select_pairs(recs, "random", per_source=8, seed=3)
    assert len({i for p in rnd for i in p}) < 48
    with pytest.raises(ValueError, match="balanced"):
        select_pairs(recs, "balanced")


def test_select_pairs_strategies():
    recs = _recs()
    assert len(select_pairs(recs, "all")) == 12  # 6 per source
    assert all(recs[i]["source"] == recs[j]["source"] and i < j for i, j in select_pairs(recs, "all"))
    r2 = select_pairs(recs, "random", per_source=2, seed=1)
    assert len(r2) == 4 and r2 == select_pairs(recs, "random", per_source=2, seed=1)  # seeded
    # a source's random pairs do not depend on the other sources
    assert [p for p in r2 if p[0] < 4] == select_pairs(recs[:4], "random", per_source=2, seed=1)
    assert len(select_pairs(recs, "random", per_source=99)) == 12
    # adjacent: sorted by the rating (descending), neighbours paired: n - 1 pairs per source
    adj = select_pairs(recs, "adjacent", rating_col="judge.coherence")
    assert adj[:3] == [(2, 3), (1, 2), (0, 1)] and adj[3:] == [(4, 5), (5, 6), (6, 7)]
    with pytest.raises(ValueError, match="per_source"):
        select_pairs(recs, "random")
    with pytest.raises(ValueError, match="--rating-col"):
        select_pairs(recs, "adjacent")
    bad = _recs()
    bad[5]["judge.coherence"] = None
    with pytest.raises(ValueError, match="record 's1c1' has no rating"):
        select_pairs(bad, "adjacent", rating_col="judge.coherence")
    with pytest.raises(ValueError, match="unknown pair strategy"):
        select_pairs(recs, "best")


def test_parse_choice():
    assert parse_choice("B") == 1
    assert parse_choice(" A.") == 0
    assert parse_choice("Summary B is better") == 1
    assert parse_choice("**A**") == 0
    assert parse_choice("As both are fine") is None  # 'A' inside a word does not count
    assert parse_choice("") is None and parse_choice(None) is None


def test_builtin_pairwise_rubrics():
    ids = list_pairwise_rubrics()
    assert "pairwise/summ-coherence-ref-free" in ids and "pairwise/mt-accuracy-ref-based" in ids
    assert len(ids) == 22  # one per single-aspect CSEM rubric
    assert not any(i.startswith("pairwise/") for i in list_rubrics())  # rating rubrics only there
    rub = load_pairwise_rubric("csem/summ-relevance-ref-based")  # the rating rubric's id names it too
    assert rub.id == "pairwise/summ-relevance-ref-based" and rub.uses_reference
    rec_a = {"id": "a", "source": "SRC", "candidate": "FIRST", "reference": ["R1", "R2"]}
    rec_b = {"id": "b", "source": "SRC", "candidate": "SECOND", "reference": ["R1", "R2"]}
    text = rub.render(rec_a, rec_b)[-1]["content"]
    assert text.index("SRC") < text.index("1. R1") < text.index("Summary A:\n\nFIRST") < text.index("Summary B:\n\nSECOND")
    assert text.endswith('Evaluation Form (answer ONLY "A" or "B"):\n\n- Which summary has the better relevance?')
    with pytest.raises(KeyError, match="needs 'reference' but record b"):
        rub.render(rec_b | {"reference": None}, rec_a)
    with pytest.raises(RubricError, match="unknown pairwise rubric"):
        load_pairwise_rubric("pairwise/summ-nothing")
    with pytest.raises(RubricError, match="is a pairwise .*csem annotate --compare"):  # not a rating rubric
        load_rubric("pairwise/summ-coherence-ref-free")
    with pytest.raises(ValueError, match="candidate_b"):
        PairwiseRubric(id="x", aspect="q", criteria="c", template="{{ candidate_a }}")


def test_multi_aspect_id_names_the_pairwise_twins_of_its_aspects():
    from csem.rubrics.pairwise import load_pairwise_rubrics

    for rid in ("csem/summ-multi-ref-free", "pairwise/summ-multi-ref-free"):
        twins = load_pairwise_rubrics(rid)
        assert [r.id for r in twins] == [f"pairwise/summ-{a}-ref-free" for a in
                                         load_rubric("csem/summ-multi-ref-free").aspect_names]
    assert [r.aspect for r in load_pairwise_rubrics("csem/mt-multi-ref-based")] == \
        load_rubric("csem/mt-multi-ref-based").aspect_names
    assert all(r.uses_reference for r in load_pairwise_rubrics("csem/tst-multi-ref-based"))
    assert [r.id for r in load_pairwise_rubrics("csem/summ-fluency-ref-free")] == ["pairwise/summ-fluency-ref-free"]
    with pytest.raises(RubricError, match="unknown"):
        load_pairwise_rubrics("csem/summ-multi-nothing")


def test_preference_scores():
    rows = [{"id_a": "x", "id_b": "y", "judge.q": 0.8}, {"id_a": "y", "id_b": "z", "judge.q": 0.6},
            {"id_a": "x", "id_b": "z", "judge.q": None}]
    s = preference_scores(rows, "judge.q")
    assert s == pytest.approx({"x": 0.8, "y": (0.2 + 0.6) / 2, "z": 0.4})


# ------------------------------------------------------------------------------- real judging
TINY_PAIRWISE = ("Which summary of the article reads better?\nArticle: {{ source }}\n"
                 "Summary A: {{ candidate_a }}\nSummary B: {{ candidate_b }}\nAnswer A or B:")


@pytest.fixture(scope="module")
def tiny_pairwise():
    return PairwiseRubric(id="test/tiny-pairwise", aspect="coherence", criteria="how well it reads",
                          template=TINY_PAIRWISE, system=None)


def _small():
    return [{"id": f"c{i}", "doc_id": "d0", "system_id": f"m{i}",
             "source": "The river flooded the old mill on Monday. Nobody was hurt, but the bridge is closed.",
             "candidate": t} for i, t in enumerate(["The river flooded the mill; the bridge is closed.",
                                                     "Mill bridge Monday river.", "Nobody was hurt in the flood."])]


def test_compare_in_process_both_orders_and_resume(smollm2_path, tiny_pairwise, tmp_path):
    cache = tmp_path / "c.sqlite"
    rows, s = compare_records(_small(), tiny_pairwise, f"llama-cpp:{smollm2_path}", cache=cache, progress=False)
    assert s.pairs == 3 and s.calls == 6 and s.judged == 6 and s.cached == 0
    for r in rows:
        ab, ba = r["order_ab.coherence"], r["order_ba.coherence"]
        assert 0.0 <= ab <= 1.0 and 0.0 <= ba <= 1.0
        assert r["judge.coherence"] == pytest.approx((ab + 1 - ba) / 2)  # position bias cancels
        assert 0.0 < r["judge.coherence.mass"] <= 1.0 + 1e-9
    assert [(r["id_a"], r["id_b"]) for r in rows] == [("c0", "c1"), ("c0", "c2"), ("c1", "c2")]
    again, s2 = compare_records(_small(), tiny_pairwise, f"llama-cpp:{smollm2_path}", cache=cache, progress=False)
    assert s2.cached == 6 and s2.judged == 0
    assert [r["judge.coherence"] for r in again] == [r["judge.coherence"] for r in rows]


def test_compare_parse_mode(smollm2_path, tiny_pairwise):
    rows, s = compare_records(_small()[:2], tiny_pairwise, f"llama-cpp:{smollm2_path}", mode="parse", progress=False)
    r = rows[0]
    # a greedy answer is A (1), B (0) or unparseable (missing with its raw text), never a made-up value
    if r["judge.coherence"] is None:
        assert r["judge.coherence.missing"] and "judge.coherence.raw" in r
    else:
        assert r["judge.coherence"] in (0.0, 0.5, 1.0)


def test_compare_through_openai_server_reads_first_token_logprobs(llama_server, tiny_pairwise):
    rows, s = compare_records(_small()[:2], tiny_pairwise, "openai:smollm2", progress=False,
                              backend_options={"base_url": llama_server.url})
    assert s.calls == 2 and s.fallback is None
    r = rows[0]
    assert r["judge.coherence"] is not None or r["judge.coherence.missing"].startswith("no probability")


def test_cli_annotate_compare(smollm2_path, tmp_path):
    import csem.cli.annotate  # noqa: F401
    from csem.cli import app

    data, out = tmp_path / "cands.jsonl", tmp_path / "pairs.jsonl"
    recs = _small() + [dict(r, id=r["id"] + "x", doc_id="d1", source="A new bakery opened on Main Street.")
                       for r in _small()]
    write_records(recs, data)
    args = ["annotate", "--data", str(data), "--rubric", "csem/summ-coherence-ref-free", "--compare", "--pairs",
            "random", "--pairs-per-source", "1", "--judge", f"llama-cpp:{smollm2_path}", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "2 pairs, 4 judge calls (4 new, 0 cached)" in " ".join(res.output.split())  # rich wraps lines
    rows = read_records(out, required=())
    assert len(rows) == 2 and {r["doc_id"] for r in rows} == {"d0", "d1"}
    prov = json.loads((tmp_path / "pairs.jsonl.judge.json").read_text())
    assert prov["comparison"] is True and prov["columns"]["judge.coherence"]["scale"] == [0, 1]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "(0 new, 4 cached)" in " ".join(res.output.split())
    res = CliRunner().invoke(app, args[:-2] + ["--mode", "sample", "--out", str(out)])
    assert res.exit_code == 2 and "--compare takes --mode probs or parse" in res.output


def test_cli_compare_unreachable_judge_exits_1(tmp_path):
    """A backend that answers nothing: every pair missing, nothing cached, exit 1 (as `csem annotate`)."""
    import csem.cli.annotate  # noqa: F401
    from csem.cli import app

    data, out = tmp_path / "cands.jsonl", tmp_path / "pairs.jsonl"
    write_records(_small(), data)
    res = CliRunner().invoke(app, ["annotate", "--data", str(data), "--rubric", "csem/summ-coherence-ref-free",
                                   "--compare", "--judge", "openai:x", "--judge-opt", "base_url=http://127.0.0.1:9/v1",
                                   "--judge-opt", "max_retries=0", "--out", str(out)])
    assert res.exit_code == 1, res.output
    assert "no judgment made" in res.output
    rows = read_records(out, required=())
    assert all(r["judge.coherence"] is None and r["judge.coherence.missing"].startswith("backend error") for r in rows)
