"""csem's Azure OpenAI route (issue 20, "the seed's own client"): the G-Eval example csem grew from calls
its judge through ``openai.AzureOpenAI``. Here the real OpenAI SDK Azure clients talk to a scripted
loopback server (``fake_openai``; there is no Azure endpoint on a test machine) that answers only what
Azure answers: ``POST /openai/deployments/<deployment>/chat/completions?api-version=<version>`` with
the key in the ``api-key`` header (any other URL: 404, a missing or wrong key: 401), with Azure's
reply shape (content-filter results beside the choices). csem is checked in probs and parse modes,
through options and through Azure's environment variables, and from the CLI."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records, write_records
from csem.judge import judge_records
from csem.llm import BackendAuthError, get_model

from fake_openai import ScriptedServer, completion

_load_commands()

KEY = "azure-key-0123456789abcdef0123456789ab"
DEPLOYMENT = "gpt-4o-judge"
VERSION = "2024-06-01"
_PATH = re.compile(r"^/openai/deployments/(?P<dep>[^/?]+)/chat/completions\?(?P<query>.+)$")


def _azure_check(path: str, headers: dict):
    """Azure's answers to a request of the wrong shape (None: the request is well formed)."""
    m = _PATH.match(path)
    if m is None or m.group("dep") != DEPLOYMENT:
        return 404, {"error": {"code": "404", "message": "Resource not found"}}
    if not parse_qs(m.group("query")).get("api-version"):
        return 400, {"error": {"code": "404", "message": "Missing api-version query parameter"}}
    key = {k.lower(): v for k, v in headers.items()}.get("api-key")
    if key != KEY:
        return 401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key or wrong "
                               "API endpoint. Make sure to provide a valid key for an active subscription."}}
    return None


def _azure_reply(content: str, top=None) -> dict:
    body = completion(content, top_logprobs=top)
    body["model"] = "gpt-4o-2024-05-13"
    body["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": {}}]
    body["choices"][0]["content_filter_results"] = {"hate": {"filtered": False, "severity": "safe"}}
    return body


def _endpoint(srv: ScriptedServer) -> str:
    return srv.url.rsplit("/v1", 1)[0]


def _well_formed(srv: ScriptedServer) -> None:
    assert srv.requests and not srv.rejected, srv.rejected
    for path, headers in zip(srv.paths, srv.headers):
        m = _PATH.match(path)
        assert m and m.group("dep") == DEPLOYMENT and parse_qs(m.group("query"))["api-version"] == [VERSION]
        h = {k.lower(): v for k, v in headers.items()}
        assert h["api-key"] == KEY and KEY not in h.get("authorization", "")


def test_the_seed_client_itself_talks_to_the_server():
    """The seed's own call (``openai.AzureOpenAI(...).chat.completions.create``): the server speaks Azure."""
    import openai

    with ScriptedServer([(200, _azure_reply("4", [("4", -0.1), ("3", -2.5)]))], check=_azure_check) as srv:
        client = openai.AzureOpenAI(azure_endpoint=_endpoint(srv), api_key=KEY, api_version=VERSION, max_retries=0)
        resp = client.chat.completions.create(model=DEPLOYMENT, messages=[{"role": "user", "content": "Rate."}],
                                              max_tokens=1, logprobs=True, top_logprobs=5)
        assert resp.choices[0].message.content == "4" and resp.choices[0].logprobs.content[0].top_logprobs
        _well_formed(srv)
        bad = openai.AzureOpenAI(azure_endpoint=_endpoint(srv), api_key="wrong", api_version=VERSION, max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model=DEPLOYMENT, messages=[{"role": "user", "content": "Rate."}])


def _options(srv, **kw):
    return {"base_url": _endpoint(srv), "azure": "true", "api_key": KEY, "api_version": VERSION, "concurrency": 2, **kw}


def test_probs_mode_through_azure(tiny_rubric, tiny_records):
    top = [("4", -0.3), ("5", -1.6), ("3", -2.5), ("The", -4.0)]
    with ScriptedServer([(200, _azure_reply("4", top))], check=_azure_check) as srv:
        model = get_model(f"openai:{DEPLOYMENT}", **_options(srv))
        assert model.api.azure and KEY not in model.id
        rows, summ = judge_records(tiny_records, tiny_rubric, model, progress=False)
        _well_formed(srv)
        body = srv.requests[0]
        assert body["model"] == DEPLOYMENT and body["logprobs"] is True and body["max_tokens"] == 1
        assert "top_k" not in body  # Azure refuses unknown sampling fields
    assert summ.judged == len(tiny_records) and summ.failed == 0 and summ.fallback is None
    import math

    p = {4: math.exp(-0.3), 5: math.exp(-1.6), 3: math.exp(-2.5)}
    expected = sum(s * v for s, v in p.items()) / sum(p.values())
    for r in rows:
        assert r["judge.coherence"] == pytest.approx(expected)
        assert r["judge.coherence.mass"] == pytest.approx(sum(p.values()))


def test_parse_mode_through_azure_from_the_environment(tiny_rubric, tiny_records, monkeypatch):
    with ScriptedServer([(200, _azure_reply("Coherence: 3"))], check=_azure_check) as srv:
        for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", _endpoint(srv))
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_API_VERSION", VERSION)
        rows, summ = judge_records(tiny_records, tiny_rubric, f"openai:{DEPLOYMENT}", mode="parse", progress=False)
        _well_formed(srv)
        assert srv.requests[0]["temperature"] == 0.0 and "logprobs" not in srv.requests[0]
    assert summ.judged == len(tiny_records) and [r["judge.coherence"] for r in rows] == [3.0] * len(tiny_records)
    assert all(r["judge.coherence.raw"] == "Coherence: 3" for r in rows)


def test_json_rubric_asks_azure_for_a_json_schema(tiny_records):
    from csem.rubrics import Rubric

    rub = Rubric(id="test/json", aspect="coherence", criteria="reads well", scale={"min": 1, "max": 5},
                 template="Rate {{ candidate }}", system=None, answer_format="json")
    with ScriptedServer([(200, _azure_reply('{"score": 2}'))], check=_azure_check) as srv:
        rows, summ = judge_records(tiny_records[:1], rub, f"openai:{DEPLOYMENT}", mode="parse", progress=False,
                                   backend_options=_options(srv))
        _well_formed(srv)
        fmt = srv.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["properties"]["score"]
    assert rows[0]["judge.coherence"] == 2.0


def test_a_reply_withheld_by_the_content_filter_is_a_named_failure(tiny_rubric, tiny_records):
    filtered = _azure_reply("")
    filtered["choices"][0].update({"finish_reason": "content_filter", "message": {"role": "assistant", "content": None}})
    step = lambda body: filtered if "Mill bridge" in json.dumps(body) else _azure_reply("Coherence: 4")  # noqa: E731
    with ScriptedServer([lambda body: (200, step(body))], check=_azure_check) as srv:
        rows, summ = judge_records(tiny_records, tiny_rubric, f"openai:{DEPLOYMENT}", mode="parse", progress=False,
                                   backend_options=_options(srv))
    assert summ.failed == 1 and summ.judged == 3
    bad = [r for r in rows if r["judge.coherence"] is None]
    assert len(bad) == 1 and "content filter" in bad[0]["judge.coherence.missing"]


def test_wrong_azure_key_stops_the_run(tiny_rubric, tiny_records):
    with ScriptedServer([(200, _azure_reply("4"))], check=_azure_check) as srv:
        with pytest.raises(BackendAuthError, match="HTTP 401") as err:
            judge_records(tiny_records, tiny_rubric, f"openai:{DEPLOYMENT}", mode="parse", progress=False,
                          backend_options=_options(srv, api_key="azure-wrong-key-999999999", concurrency=1))
        assert "azure-wrong-key-999999999" not in str(err.value) and len(srv.rejected) == 1


def test_cli_judge_and_annotate_through_azure(tmp_path, tiny_template, tiny_records):
    rubric = tmp_path / "tiny.yaml"
    rubric.write_text(yaml.safe_dump({"id": "test/tiny", "aspect": "coherence", "criteria": "reads well",
                                      "template": tiny_template, "system": None}))
    data = write_records(tiny_records, tmp_path / "in.jsonl")
    with ScriptedServer([(200, _azure_reply("4", [("4", -0.05), ("5", -3.0)]))], check=_azure_check) as srv:
        opts = [x for k, v in _options(srv).items() for x in ("--judge-opt", f"{k}={v}")]
        res = CliRunner().invoke(app, ["annotate", "--data", str(data), "--rubric", str(rubric), "--out",
                                       str(tmp_path / "lab.jsonl"), "--judge", f"openai:{DEPLOYMENT}", *opts])
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(app, ["judge", "--data", str(data), "--rubric", str(rubric), "--judge",
                                       f"openai:{DEPLOYMENT}", "--mode", "parse", "--no-cache", "--no-progress", *opts])
        assert res.exit_code == 0, res.output
        _well_formed(srv)
    assert all(3.9 < r["judge.coherence"] <= 4.1 for r in read_records(tmp_path / "lab.jsonl"))
    prov = json.loads((tmp_path / "lab.jsonl.judge.json").read_text())
    assert KEY not in json.dumps(prov)
