"""A filtered or refused reply is never scored: ``finish_reason: content_filter`` (with or without partial
text), a ``refusal`` field, or ``content: null`` makes the judgment missing with its reason in every
scoring mode (probs, parse, sample), before any probability is read, and the run exits 3 (partial).
The replies come from a scripted OpenAI-compatible server on loopback (``fake_openai``: a FAKE server,
since no real server filters on demand) through the real ``openai`` client."""

from __future__ import annotations

import copy

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records, write_records
from csem.judge import judge_records

from fake_openai import ScriptedServer, completion

_load_commands()

TOP = [("3", -0.05), ("2", -3.5), ("4", -4.0)]


def _filtered(content=None, refusal=None, finish="content_filter", logprobs=True) -> dict:
    body = completion("3", top_logprobs=TOP if logprobs else None)
    choice = body["choices"][0]
    choice["finish_reason"] = finish
    choice["message"]["content"] = content
    if refusal is not None:
        choice["message"]["refusal"] = refusal
    return body


REPLIES = {
    "content filter, no text": (_filtered(), "withheld by the server's content filter"),
    "content filter, partial text": (_filtered(content="3 - the summ"), "withheld by the server's content filter"),
    "refusal field": (_filtered(refusal="I can't help with that.", finish="stop"), "the model refused to answer"),
    "content null": (_filtered(finish="stop"), "the reply has no text (content null"),
}
RECORDS = [{"id": "r0", "source": "The mill flooded on Monday.", "candidate": "The mill flooded."}]


@pytest.mark.parametrize("mode", ["probs", "parse", "sample"])
@pytest.mark.parametrize("kind", list(REPLIES))
def test_a_withheld_reply_is_missing_in_every_mode(kind, mode):
    reply, reason = REPLIES[kind]
    with ScriptedServer([(200, copy.deepcopy(reply))]) as srv:
        rows, summary = judge_records(RECORDS, "csem/summ-coherence-ref-free", "openai:m", mode=mode, n=3,
                                      cache=None, progress=False, fallback="none",
                                      backend_options={"base_url": srv.url, "max_retries": 0})
        assert srv.requests  # the server was asked
    row = rows[0]
    assert row["judge.coherence"] is None, (kind, mode, row)  # never the 2.99 the logprobs would give
    assert "judge.coherence.mass" not in row  # no probability was read
    assert reason in row["judge.coherence.missing"], row["judge.coherence.missing"]
    assert summary.failed == 1


def test_the_cli_exits_3_for_a_filtered_reply_among_good_ones(tmp_path):
    """One filtered reply among good ones in probs mode: the good ones are kept, the filtered one is
    missing with its reason, exit 3 (the documented partial run)."""
    data = write_records([{"id": f"r{i}", "source": f"The mill flooded on day {i}.", "candidate": f"FLAG{i}"}
                          for i in range(3)], tmp_path / "c.jsonl")

    def step(body):
        return (200, _filtered()) if "FLAG1" in str(body["messages"]) else (200, completion("3", top_logprobs=TOP))

    with ScriptedServer([step]) as srv:
        res = CliRunner().invoke(app, ["judge", "--data", str(data), "--rubric", "csem/summ-coherence-ref-free",
                                       "--judge", "openai:m", "--judge-opt", f"base_url={srv.url}", "--no-cache",
                                       "--out", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 3, res.output
    rows = {r["id"]: r for r in read_records(tmp_path / "out.jsonl")}
    assert rows["r0"]["judge.coherence"] is not None and rows["r2"]["judge.coherence"] is not None
    assert rows["r1"]["judge.coherence"] is None
    assert "content filter" in rows["r1"]["judge.coherence.missing"]
