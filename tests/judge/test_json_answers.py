"""issue 11: judges that answer in JSON. A rubric with ``answer_format: json`` asks for ``{"score": N}``;
on an OpenAI-compatible server csem requests structured output (JSON mode with the answer's schema) and
reads the field. The scripted server shows the request; a real llama.cpp server (SmolLM2) shows that
the constrained answers parse."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import write_records
from csem.rubrics import load_rubrics

_load_commands()


def _rubric(tmp_path, tiny_template, fmt: str):
    p = tmp_path / f"tiny-{fmt}.yaml"
    p.write_text(yaml.safe_dump({"id": f"test/tiny-{fmt}", "aspect": "coherence", "criteria": "reads well",
                                 "template": tiny_template, "system": None, "answer_format": fmt}))
    return p


def _data(tmp_path):
    return write_records([{"id": f"r{i}", "source": "The river flooded the old mill on Monday.",
                           "candidate": f"Summary {i}: the mill flooded.", "system_id": f"s{i % 2}"} for i in range(4)],
                         tmp_path / "in.jsonl")


def test_json_rubric_prompt_and_schema(tmp_path, tiny_template):
    r = load_rubrics(str(_rubric(tmp_path, tiny_template, "json")))[0]
    msgs = r.render({"id": "1", "source": "s", "candidate": "c"})
    assert msgs[-1]["content"].endswith('Answer with a JSON object only: {"score": <an integer from 1 to 5>}')
    assert r.answer_schema() == {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1,
                                                                           "maximum": 5}}, "required": ["score"]}
    assert load_rubrics(str(_rubric(tmp_path, tiny_template, "text")))[0].answer_schema() is None


def test_structured_output_requested_and_field_parsed(tmp_path, tiny_template):
    from fake_openai import ScriptedServer, completion

    out = tmp_path / "out.jsonl"
    with ScriptedServer([(200, completion('{"score": 4, "reason": "clear"}'))]) as srv:
        code = CliRunner().invoke(app, ["judge", "--data", str(_data(tmp_path)), "--rubric",
                                        str(_rubric(tmp_path, tiny_template, "json")), "--judge", "openai:m",
                                        "--judge-opt", f"base_url={srv.url}", "--mode", "parse", "--no-cache",
                                        "--no-progress", "--out", str(out)])
        assert code.exit_code == 0, code.output
        assert len(srv.requests) == 4
        fmt = srv.requests[0]["response_format"]
        assert fmt["type"] == "json_object" and fmt["schema"]["properties"]["score"] == {
            "type": "integer", "minimum": 1, "maximum": 5}
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["judge.coherence"] for r in rows] == [4.0] * 4
    # a text rubric asks for no structured output
    with ScriptedServer([(200, completion("Score: 3"))]) as srv:
        res = CliRunner().invoke(app, ["judge", "--data", str(_data(tmp_path)), "--rubric",
                                       str(_rubric(tmp_path, tiny_template, "text")), "--judge", "openai:m",
                                       "--judge-opt", f"base_url={srv.url}", "--mode", "parse", "--no-cache",
                                       "--no-progress"])
        assert res.exit_code == 0 and all("response_format" not in b for b in srv.requests)


def test_json_mode_on_a_real_llama_cpp_server(tmp_path, tiny_template, llama_server):
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(app, ["judge", "--data", str(_data(tmp_path)), "--rubric",
                                   str(_rubric(tmp_path, tiny_template, "json")), "--judge", "openai:smollm2",
                                   "--judge-opt", f"base_url={llama_server.url}", "--mode", "parse", "--max-tokens",
                                   "16", "--no-cache", "--no-progress", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    for r in rows:  # the grammar-constrained answers are JSON with an in-scale integer score, and read as such
        assert json.loads(r["judge.coherence.raw"])["score"] == r["judge.coherence"], r
        assert 1 <= r["judge.coherence"] <= 5


def test_nul_bytes_never_reach_a_prompt(tmp_path, tiny_template):
    import pytest

    r = load_rubrics(str(_rubric(tmp_path, tiny_template, "text")))[0]
    with pytest.raises(ValueError, match="record 7: 'candidate' contains a NUL byte"):
        r.render({"id": "7", "source": "s", "candidate": "c\x00d"})
