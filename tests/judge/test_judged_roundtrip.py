"""issue 11: a judged file reads back intact. `csem judge` writes judge.<aspect> with its side fields
(.missing, .raw, .mass); reading it back (read_records, so also `csem judge` on a judged file and
`csem meta-eval`) keeps the reasons and raw answers, and meta-evaluation evaluates exactly the score
columns. End to end with a real (tiny) local judge, SmolLM2-135M through llama.cpp."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.columns import score_columns
from csem.data.records import read_records, write_records

_load_commands()

SOURCES = ["The river flooded the old mill on Monday. Nobody was hurt, but the bridge is closed.",
           "A new bakery opened on Main Street. It sells bread, cakes and coffee from 7 am.",
           "The city council voted to plant two hundred trees along the harbour next spring."]
CANDIDATES = [["The river flooded the mill; the bridge is closed.", "Mill bridge Monday river.", "A flood happened."],
              ["A bakery selling bread, cakes and coffee opened on Main Street.", "Street main cake the.",
               "A shop opened."],
              ["The council will plant 200 trees by the harbour next spring.", "Trees council harbour vote.",
               "Something about trees."]]


def _invoke(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


def test_judge_read_back_meta_eval(tmp_path, smollm2_path, tiny_template):
    rows = []
    for d, (src, cands) in enumerate(zip(SOURCES, CANDIDATES)):
        for s, cand in enumerate(cands):
            rows.append({"id": f"d{d}-s{s}", "doc_id": f"d{d}", "system_id": f"s{s}", "source": src, "candidate": cand,
                         "human.coherence": float(3 - s), "human.fluency": float(3 - s) if s != 1 else 1.5})
    data = write_records(rows, tmp_path / "in.jsonl")
    coh = tmp_path / "coherence.yaml"
    coh.write_text(yaml.safe_dump({"id": "test/coherence", "aspect": "coherence", "criteria": "reads well",
                                   "template": tiny_template, "system": None}))
    flu = tmp_path / "fluency.yaml"
    flu.write_text(yaml.safe_dump({"id": "test/fluency", "aspect": "fluency", "criteria": "fluent English",
                                   "scale": {"min": 1, "max": 3}, "uses_source": False,
                                   "template": tiny_template, "system": None}))
    judge = ["--judge", f"llama-cpp:{smollm2_path}", "--judge-opt", "n_ctx=2048", "--no-cache", "--no-progress"]
    # 1. probs mode writes judge.coherence and judge.coherence.mass
    a = tmp_path / "a.jsonl"
    code, out = _invoke("judge", "--data", data, "--rubric", coh, "--out", a, *judge)
    assert code == 0, out
    # 2. the judged file is itself the input of a parse-mode run: judge.fluency with .raw (and .missing where the
    #    tiny model's answer has no score)
    b = tmp_path / "b.jsonl"
    code, out = _invoke("judge", "--data", a, "--rubric", flu, "--mode", "parse", "--max-tokens", "4", "--out", b,
                        *judge)
    assert code == 0, out
    written = [json.loads(line) for line in b.read_text().splitlines()]
    back = read_records(b)
    assert len(back) == len(written) == 9
    for w, r in zip(written, back):
        assert w.keys() == r.keys()
        for k, v in w.items():
            assert r[k] == v, (k, v, r[k])  # every side field survives: reasons and raw answers as text
        assert isinstance(r["judge.coherence.mass"], float) and isinstance(r["judge.fluency.raw"], str)
        if r["judge.fluency"] is None:
            assert isinstance(r["judge.fluency.missing"], str) and r["judge.fluency.missing"]
        assert r["human.coherence"] == w["human.coherence"]
    assert score_columns(back, ("judge",)) == ["judge.coherence", "judge.fluency"]
    # 3. meta-evaluation evaluates exactly the score columns, never .mass (or .raw/.missing)
    prefix = tmp_path / "meta"
    code, out = _invoke("meta-eval", "--data", b, "--level", "dataset", "--bootstrap", "0", "--out", prefix)
    assert code == 0, out
    result = json.loads(prefix.with_name("meta.json").read_text())
    assert {r["column"] for r in result["rows"]} == {"judge.coherence", "judge.fluency"}
    assert {(r["column"], r["aspect"]) for r in result["rows"]} == {("judge.coherence", "coherence"),
                                                                     ("judge.fluency", "fluency")}
    assert all(r["n_pairs"] + r["n_missing"] == 9 for r in result["rows"])
    # 4. and as --pred beside the human data: the same two columns, joined by id
    humans = write_records([{k: v for k, v in r.items() if not k.startswith("judge.")} for r in back],
                           tmp_path / "humans.jsonl")
    code, out = _invoke("meta-eval", "--data", humans, "--pred", b, "--level", "dataset", "--bootstrap", "0",
                        "--out", tmp_path / "meta2")
    assert code == 0, out
    rows2 = json.loads((tmp_path / "meta2.json").read_text())["rows"]
    assert {r["column"] for r in rows2} == {"judge.coherence", "judge.fluency"}


def test_shared_aspect_columns_carry_the_rubric_tag_and_read_back(tmp_path, fake_llm, tiny_template):
    """Two rubrics scoring the same aspect: judge.<aspect>@<rubric id>, side fields after the tag."""
    rubs = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({"id": f"test/{name}", "aspect": "coherence", "criteria": f"criteria {name}",
                                     "template": tiny_template, "system": None}))
        rubs.append(str(p))
    data = write_records([{"id": str(i), "source": f"Source {i}.", "candidate": f"Candidate {i}."} for i in range(3)],
                         tmp_path / "in.jsonl")
    out = tmp_path / "out.csv"
    code, text = _invoke("judge", "--data", data, "--rubric", ",".join(rubs), "--judge", fake_llm, "--no-cache",
                         "--no-progress", "--out", out)
    assert code == 0, text
    back = read_records(out)
    assert score_columns(back, ("judge",)) == ["judge.coherence@test/a", "judge.coherence@test/b"]
    assert all(isinstance(r["judge.coherence@test/a.mass"], float) for r in back)
