"""issue 11: a failure is never reported as success. Exit codes and summaries of `csem judge` and
`csem annotate` with real faults: a wrong API key (a real llama.cpp server with a key; the scripted
server counts the requests), a prompt longer than the local judge's context, an unreachable judge, a
corrupt GGUF file, bad backend options, an output path checked before any work, a directory as input."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.cli.judge import run_outcome
from csem.data.records import write_records

_load_commands()

KEY = "sk-right-key-0123456789"
WRONG = "sk-wrong-key-9876543210"


def _invoke(*args, env=None):
    res = CliRunner().invoke(app, [str(a) for a in args], env=env)
    return res.exit_code, res.output


@pytest.fixture()
def data(tmp_path):
    rows = [{"id": f"r{i}", "source": f"Article {i // 2}: the river flooded the old mill on Monday.",
             "candidate": f"Summary {i}: the mill flooded.", "system_id": f"s{i % 2}"} for i in range(6)]
    return write_records(rows, tmp_path / "in.jsonl")


@pytest.fixture()
def rubric(tmp_path, tiny_template):
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump({"id": "test/tiny", "aspect": "coherence", "criteria": "reads well",
                                 "template": tiny_template, "system": None}))
    return p


def test_run_outcome_codes(capsys):
    assert run_outcome(total=4, judged=4, cached=0, failed=0, errors=[]) == 0
    assert run_outcome(total=4, judged=1, cached=0, failed=3, errors=["boom"]) == 3
    assert run_outcome(total=4, judged=0, cached=2, failed=2, errors=["boom"]) == 3  # the cached ones are kept
    assert run_outcome(total=4, judged=0, cached=0, failed=4, errors=["connection refused"]) == 1
    err = capsys.readouterr().err
    assert "3 of 4 judgments failed" in err and "no judgment made" in err and "connection refused" in err


def test_wrong_api_key_stops_at_once_and_never_shows_the_key(tmp_path, data, rubric, llama_server_factory,
                                                             smollm2_path):
    from fake_openai import ScriptedServer, error

    out = tmp_path / "out.jsonl"
    # a real llama.cpp server that requires a key, asked with the wrong one
    server = llama_server_factory(smollm2_path, api_key=KEY).start()
    try:
        code, text = _invoke("judge", "--data", data, "--rubric", rubric, "--judge", "openai:smollm2", "--judge-opt",
                             f"base_url={server.url}", "--judge-opt", f"api_key={WRONG}", "--mode", "parse",
                             "--no-cache", "--no-progress", "--out", out)
    finally:
        server.stop()
    assert code == 1, text
    assert "HTTP 401" in text and "authentication failed" in text and f"openai:smollm2@127.0.0.1:{server.port}" in text
    assert WRONG not in text and KEY not in text
    assert "judged" not in text and not out.exists()  # stopped: no summary, no output file
    # "at once": one request with concurrency 1, never retried (the scripted server counts them)
    with ScriptedServer([error(401, "Invalid API key")]) as fake:
        code, text = _invoke("judge", "--data", data, "--rubric", rubric, "--judge", "openai:m", "--judge-opt",
                             f"base_url={fake.url}", "--judge-opt", f"api_key={WRONG}", "--judge-opt", "concurrency=1",
                             "--mode", "parse", "--no-cache", "--no-progress")
        assert code == 1 and len(fake.requests) == 1, (text, len(fake.requests))
        assert WRONG not in text


def test_prompt_longer_than_the_context_is_a_partial_run(tmp_path, rubric, smollm2_path):
    rows = [{"id": f"r{i}", "source": "The river flooded the mill.", "candidate": f"Summary {i}.", "system_id": "s"}
            for i in range(3)]
    rows.append({"id": "long", "source": "The river flooded the mill. " * 400, "candidate": "Long.", "system_id": "s"})
    data = write_records(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    judge = ["--judge", f"llama-cpp:{smollm2_path}", "--judge-opt", "n_ctx=512"]
    code, text = _invoke("judge", "--data", data, "--rubric", rubric, *judge, "--no-cache", "--no-progress",
                         "--out", out)
    assert code == 3, text
    assert "judged 3, cached 0, failed 1, missing 1 of 4" in text and "1 of 4 judgments failed" in text
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert got["long"]["judge.coherence"] is None and "more than the context" in got["long"]["judge.coherence.missing"]
    # csem annotate counts and exits the same way (and its cache resumes only what failed)
    lab = tmp_path / "labelled.jsonl"
    code, text = _invoke("annotate", "--data", data, "--rubric", rubric, "--out", lab, *judge)
    assert code == 3 and "(3 judged, 0 cached, 1 failed)" in text, text
    code, text = _invoke("annotate", "--data", data, "--rubric", rubric, "--out", lab, *judge)
    assert code == 3 and "(0 judged, 3 cached, 1 failed)" in text, text


def test_unreachable_judge_with_nothing_judged_exits_1(tmp_path, data, rubric):
    code, text = _invoke("judge", "--data", data, "--rubric", rubric, "--judge", "openai:m", "--judge-opt",
                         "base_url=http://127.0.0.1:9/v1", "--judge-opt", "max_retries=0", "--mode", "parse",
                         "--no-cache", "--no-progress")
    assert code == 1, text
    assert "judged 0, cached 0, failed 6" in text and "no judgment made" in text
    lab = tmp_path / "lab.jsonl"
    code, text = _invoke("annotate", "--data", data, "--rubric", rubric, "--out", lab, "--judge", "openai:m",
                         "--judge-opt", "base_url=http://127.0.0.1:9/v1", "--judge-opt", "max_retries=0",
                         "--mode", "parse")
    assert code == 1 and "no judgment made" in text, text


def test_corrupt_gguf_is_a_run_time_failure(tmp_path, data, rubric):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    code, text = _invoke("judge", "--data", data, "--rubric", rubric, "--judge", f"llama-cpp:{bad}", "--no-cache",
                         "--no-progress")
    assert code == 1 and "broken.gguf: cannot load the model" in text, text


@pytest.mark.parametrize("opt, message", [
    ("concurrency=abc", "concurrency='abc' must be a number"),
    ("n_ctx=lots", "n_ctx='lots' for 'llama-cpp:smollm2' must be int"),
    ("colour=blue", "unknown backend option(s) ['colour'] for 'llama-cpp:smollm2'; valid options: block_size"),
])
def test_bad_judge_option_is_named_with_the_valid_ones(data, rubric, opt, message):
    code, text = _invoke("judge", "--data", data, "--rubric", rubric, "--judge", "llama-cpp:smollm2", "--judge-opt",
                         opt, "--no-cache", "--no-progress")
    assert code == 2 and message in text, text
    if opt.startswith("colour"):
        assert "n_ctx" in text and "concurrency" in text


def test_output_checked_before_work_and_directory_named(tmp_path, data, rubric):
    # a judge that does not exist: the output path is refused before any model is looked at
    code, text = _invoke("judge", "--data", data, "--rubric", rubric, "--judge", f"llama-cpp:{tmp_path}/no.gguf",
                         "--out", tmp_path / "out.xlsx", "--no-cache")
    assert code == 2 and "unknown file format" in text, text
    (tmp_path / "file").write_text("x")
    code, text = _invoke("annotate", "--data", data, "--rubric", rubric, "--judge", f"llama-cpp:{tmp_path}/no.gguf",
                         "--out", tmp_path / "file" / "lab.jsonl")
    assert code == 2 and "is a file, not a folder" in text, text
    for d in (tmp_path / "data.jsonl", tmp_path / "folder"):
        d.mkdir()
        code, text = _invoke("judge", "--data", d, "--rubric", rubric, "--no-cache")
        assert code == 2 and "is a directory" in text and "Errno" not in text, text
    code, text = _invoke("judge", "--data", tmp_path / "folder", "--rubric", rubric, "--no-cache",
                         env={"CSEM_DEBUG": "1"})
    assert code == 2 and "Traceback (most recent call last)" in text
