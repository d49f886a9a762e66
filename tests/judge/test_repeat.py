"""The judge's repeatability while annotating (csem.judge.repeat): a seeded share of the sources judged again
under the rubric's paraphrase (or a second rubric file, or in sample mode a second set of samples), the second
score in the side field judge.<aspect>.repeat, r with its interval over sources and sqrt(r); the second labels
never reach training.

Fast tier: the FAKE in-process backend (tests/fake_llm.py; its scores are a hash of the prompt, so a paraphrased
prompt gives another score) and the tiny RANDOM encoder; what is tested is the plumbing and the statistics'
wiring, not what a real judge does (the slow test below runs SmolLM2)."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from typer.testing import CliRunner

import csem
from csem.data.columns import score_columns
from csem.data.records import read_records, write_records
from csem.judge.repeat import repeat_sources, second_rendering
from csem.meta.repeatability import repeatability
from csem.rubrics import load_rubric, load_rubrics

RUBRICS = ["csem/summ-coherence-ref-free", "csem/summ-relevance-ref-free"]
WORDS = "the council voted to close the old bridge for eighteen months while crews repair it".split()


def records(n_docs: int = 10, per_doc: int = 4) -> list[dict]:
    rows = []
    for d in range(n_docs):
        src = f"Story {d}: " + " ".join(WORDS[(d + k) % len(WORDS)] for k in range(30)) + "."
        for k in range(per_doc):
            cand = " ".join(WORDS[(d * 3 + k * 5 + j) % len(WORDS)] for j in range(6 + 2 * k)) + "."
            rows.append({"id": f"d{d}-c{k}", "doc_id": f"d{d}", "system_id": f"s{k}", "source": src, "candidate": cand})
    return rows


def test_the_share_of_sources_is_seeded_and_whole():
    recs = records()
    chosen = repeat_sources(recs, 0.2, seed=0)
    assert chosen == repeat_sources(list(reversed(recs)), 0.2, seed=0) and len(chosen) == 2
    assert repeat_sources(recs, 0.2, seed=1) != chosen or len(set(map(tuple, [repeat_sources(recs, 0.2, s)
                                                                           for s in range(5)]))) > 1
    assert len(repeat_sources(recs, 0.05, 0)) == 2  # at least 2 sources: an interval over sources exists
    assert repeat_sources(recs, 0.0, 0) == [] and len(repeat_sources(recs, 1.0, 0)) == 10
    with pytest.raises(ValueError, match="share of the sources"):
        repeat_sources(recs, 1.5)


def test_annotate_rejudges_a_share_under_the_paraphrase(fake_llm, tmp_path):
    out = tmp_path / "labelled.jsonl"
    summary = csem.annotate(records(), RUBRICS, fake_llm, out=out, repeatability=0.3, repeat_seed=4)
    assert summary["judged"] == 80 and summary["repeat"]["judged"] == 3 * 4 * 2 and summary["failed"] == 0
    rows = read_records(out)
    rep = json.loads((tmp_path / "labelled.jsonl.repeatability.json").read_text())
    assert rep["rendering"] == "paraphrase" and rep["rubrics"] == [f"{r}~paraphrase" for r in RUBRICS]
    assert rep["sources"] == repeat_sources(rows, 0.3, 4) and rep["candidates"] == 12
    again = [r for r in rows if r.get("judge.coherence.repeat") is not None]
    assert {r["doc_id"] for r in again} == set(rep["sources"])
    # the fake judge's score is a function of the prompt: the paraphrase is another prompt, another score
    assert any(r["judge.coherence.repeat"] != r["judge.coherence"] for r in again)
    # a side field, never a score column: no stage takes it for a label
    assert set(score_columns(rows, ("judge",))) == {"judge.coherence", "judge.relevance"}
    for col in ("judge.coherence", "judge.relevance"):
        f = rep["columns"][col]
        want = repeatability([r.get(col) for r in rows], [r.get(col + ".repeat") for r in rows],
                             [r["doc_id"] for r in rows])
        assert f == json.loads(json.dumps(want))  # the one evaluator's figures, as stored
        s = f["summary"]
        assert f["n_candidates"] == 12 and s["n_sources"] + s["n_skipped"] == 3
        if s["r"] is not None:
            assert s["sqrt_r"] == (pytest.approx(math.sqrt(s["r"])) if s["r"] > 0 else None)
            assert s["ci"] is None or -1 <= s["ci"][0] <= s["ci"][1] <= 1
    # a re-run judges nothing again (both passes come from the judge cache) and writes the same file
    again_summary = csem.annotate(records(), RUBRICS, fake_llm, out=out, repeatability=0.3, repeat_seed=4)
    assert again_summary["judged"] == 0 and again_summary["repeat"]["judged"] == 0
    assert read_records(out) == rows


def test_repeatability_of_identical_scores_is_one_and_of_noise_is_small():
    groups = [d for d in range(8) for _ in range(5)]
    x = [float((d * 7 + k * 3) % 5) for d in range(8) for k in range(5)]
    same = repeatability(x, x, groups, bootstrap=200)
    assert same["summary"]["r"] == pytest.approx(1.0) and same["summary"]["sqrt_r"] == pytest.approx(1.0)
    assert same["summary"]["ci"] == pytest.approx([1.0, 1.0])
    flipped = repeatability(x, [-v for v in x], groups, bootstrap=0)
    assert flipped["summary"]["r"] == pytest.approx(-1.0) and flipped["summary"]["sqrt_r"] is None
    none = repeatability([1.0, None], [None, 2.0], [0, 0])
    assert none["n_candidates"] == 0 and none["summary"]["r"] is None


def test_a_second_rubric_file_and_sample_mode(fake_llm, tmp_path):
    first = load_rubric("csem/summ-coherence-ref-free")
    data = first.model_dump(exclude={"paraphrase"})
    data.update(id="my-coherence-2", intro="Rate this summary's coherence.", criteria="does it read as one account?")
    (tmp_path / "second.yaml").write_text(yaml.safe_dump(data))
    second, what = second_rendering([first], "probs", [str(tmp_path / "second.yaml")])
    assert what == "rubric files" and second[0].id == "my-coherence-2"
    assert second_rendering([first], "sample")[1] == "second samples"
    bad = dict(data, aspect="fluency", id="bad")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ValueError, match="must rate the aspects"):
        second_rendering([first], "probs", [str(tmp_path / "bad.yaml")])
    no_para = dict(data, id="plain")
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(no_para))
    with pytest.raises(ValueError, match="has no paraphrase"):
        second_rendering(load_rubrics([str(tmp_path / "plain.yaml")]), "probs")
    out = tmp_path / "l.jsonl"
    csem.annotate(records(4, 3), "csem/summ-coherence-ref-free", fake_llm, out=out, repeatability=0.5,
                  repeat_rubrics=str(tmp_path / "second.yaml"))
    rep = json.loads((tmp_path / "l.jsonl.repeatability.json").read_text())
    assert rep["rendering"] == "rubric files" and rep["rubrics"] == ["my-coherence-2"] and rep["candidates"] == 6


def test_cli_repeatability_prints_r(fake_llm, tmp_path):
    from csem.cli import _load_commands, app

    _load_commands()
    src = tmp_path / "c.jsonl"
    write_records(records(6, 4), src)
    res = CliRunner().invoke(app, ["annotate", "--data", str(src), "--rubric", RUBRICS[0], "--judge", fake_llm,
                                   "--out", str(tmp_path / "o.jsonl"), "--repeatability", "0.5"])
    assert res.exit_code == 0, res.output
    assert "the judge agrees with itself (paraphrase, 12 candidates of 3 sources)" in " ".join(res.output.split())
    bad = CliRunner().invoke(app, ["annotate", "--data", str(src), "--rubric", RUBRICS[0], "--judge", fake_llm,
                                   "--out", str(tmp_path / "o2.jsonl"), "--repeatability", "2"])
    assert bad.exit_code == 2


def test_second_labels_never_reach_training(fake_llm, tiny_encoder, tmp_path):
    """The same student, weights and card, whether or not the labelled file carries judge.<aspect>.repeat."""
    out = tmp_path / "labelled.jsonl"
    csem.annotate(records(8, 4), RUBRICS[0], fake_llm, out=out, repeatability=0.5)
    rows = read_records(out)
    assert any(r.get("judge.coherence.repeat") is not None for r in rows)
    stripped = [{k: v for k, v in r.items() if not k.endswith(".repeat")} for r in rows]
    tiny = dict(encoder=str(tiny_encoder), max_length=40, source_max_length=40, hidden_sizes=[16], dropout=0.0,
                max_epochs=1, batch_size=8, seed=3)
    with_rep = csem.train(rows, "judge.coherence", out_dir=tmp_path / "a", **tiny)
    without = csem.train(stripped, "judge.coherence", out_dir=tmp_path / "b", **tiny)
    assert with_rep.card["training"]["data_sha256"] == without.card["training"]["data_sha256"]
    from safetensors.torch import load_file

    a, b = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)
    # and a pipeline's label columns never include it
    from csem.pipeline.annotate import read_repeatability

    assert read_repeatability(out)["columns"].keys() == {"judge.coherence"}
