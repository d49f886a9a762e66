"""``csem judge`` and ``csem example`` end to end with SmolLM2 (in process through typer's runner)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app

_load_commands()
runner = CliRunner()


def invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


def test_list_rubrics():
    code, out = invoke("judge", "--list-rubrics")
    assert code == 0
    for rid in ("geval/summeval-coherence", "geval/summeval-fluency", "csem/mt-multi-ref-based", "csem/tst-style-ref-free"):
        assert rid in out
    from csem.rubrics.pairwise import list_pairwise_rubrics

    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in out.splitlines() if line.count("│") > 3}
    pairwise = [rid for rid, cells in rows.items() if cells[0] == "pairwise"]
    assert sorted(pairwise) == list_pairwise_rubrics() and len(pairwise) == 22  # every built-in comparison rubric
    assert rows["pairwise/summ-coherence-ref-free"][:2] == ["pairwise", "coherence"]
    assert rows["csem/summ-coherence-ref-free"][:2] == ["rating", "coherence"]


@pytest.fixture()
def data_file(tmp_path, tiny_records):
    p = tmp_path / "in.csv"
    import csv

    with p.open("w", newline="") as f:  # user column names, mapped with --source-col/--candidate-col
        w = csv.DictWriter(f, fieldnames=["article", "output", "system_id", "extra"])
        w.writeheader()
        for r in tiny_records:
            w.writerow({"article": r["source"], "output": r["candidate"], "system_id": r["system_id"], "extra": "keep me"})
    return p


def test_judge_end_to_end(tmp_path, data_file, tiny_template, smollm2_path):
    rub = tmp_path / "tiny.yaml"
    rub.write_text(yaml.safe_dump({"id": "test/tiny", "aspect": "coherence", "criteria": "reads well",
                                   "template": tiny_template, "system": None}))
    out, db = tmp_path / "out.jsonl", tmp_path / "c.sqlite"
    args = ["judge", "--data", data_file, "--rubric", f"{rub},geval/summeval-fluency", "--judge",
            f"llama-cpp:{smollm2_path}", "--out", out, "--cache", db, "--source-col", "article", "--candidate-col",
            "output", "--no-progress", "--judge-opt", "n_ctx=2048"]
    code, text = invoke(*args)
    assert code == 0, text
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 4 and all(r["extra"] == "keep me" for r in rows)
    for r in rows:
        for col, hi in (("judge.coherence", 5), ("judge.fluency", 3)):
            assert (r[col] is not None and 1 <= r[col] <= hi) or r[col + ".missing"]
    # the pivot table: aspects x systems
    assert "coherence" in text and "fluency" in text and "s0" in text and "s1" in text
    assert "judged 8, cached 0" in text
    code, text = invoke(*args)
    assert code == 0 and "judged 0, cached 8" in text


def test_judge_bad_input_names_file_line_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"source": "s", "candidate": "c"}) + "\n" + json.dumps({"source": "s2"}) + "\n")
    code, text = invoke("judge", "--data", p, "--rubric", "geval/summeval-coherence", "--judge", "llama-cpp:smollm2",
                        "--no-cache")
    assert code == 2 and "bad.jsonl, line 2" in text and "candidate" in text
    code, text = invoke("judge", "--data", p, "--rubric", "nope/nothing", "--no-cache")
    assert code == 2 and "unknown rubric 'nope/nothing'" in text
    code, text = invoke("judge", "--data", tmp_path / "missing.jsonl", "--no-cache")
    assert code == 2 and "missing.jsonl" in text


def test_example_runs_all_four_geval_aspects(tmp_path, smollm2_path):
    out = tmp_path / "ex.jsonl"
    code, text = invoke("example", "--judge", f"llama-cpp:{smollm2_path}", "--no-cache", "--no-progress", "--out", out,
                        "--judge-opt", "n_ctx=2048")
    assert code == 0, text
    for a in ("coherence", "consistency", "fluency", "relevance", "good", "poor"):
        assert a in text
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["system_id"] for r in rows] == ["good", "poor"]
    assert all(r[f"judge.{a}"] is not None for r in rows for a in ("coherence", "consistency", "fluency", "relevance"))


def test_unreachable_server_gives_clear_error_and_exit_code(tmp_path, data_file):
    import socket

    with socket.socket() as sock:  # a port that nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    out = tmp_path / "out.jsonl"
    code, text = invoke("judge", "--data", data_file, "--source-col", "article", "--candidate-col", "output",
                        "--rubric", "geval/summeval-coherence", "--judge", "openai:m", "--judge-opt", f"base_url={url}",
                        "--judge-opt", "max_retries=0", "--cache", tmp_path / "c.sqlite", "--out", out, "--no-progress")
    assert code == 1  # nothing judged because the backend never answered: a run-time failure (issue 11)
    assert "no judgment made" in text and "Connection error" in text and "failed 4" in text
    rows = [json.loads(x) for x in out.read_text().splitlines()]  # written anyway, failures recorded as missing
    assert all(r["judge.coherence"] is None and r["judge.coherence.missing"] for r in rows)


def test_empty_data_file_is_an_error(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, text = invoke("judge", "--data", empty, "--rubric", "geval/summeval-fluency", "--judge", "llama-cpp:smollm2",
                        "--no-cache", "--no-progress")
    assert code == 2 and "no rows to judge" in text
