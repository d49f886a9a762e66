"""`csem serve` limits, authentication, JSON-only bodies and the readers' validation (issue 20), on a real
loopback server (uvicorn + FastAPI) with the tiny multi-judge student (fast tier)."""

from __future__ import annotations

import httpx
import pytest

from csem.apply.metrics import load_metric
from csem.apply.server import BackgroundServer, ServerLimits
from serve_process import csem_serve

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def limited(multi_judge):
    limits = ServerLimits(max_body_bytes=20_000, max_records=4, max_text_chars=2_000, max_concurrency=16)
    with BackgroundServer(load_metric(str(multi_judge)), max_batch=8, max_wait_ms=1, limits=limits,
                          token=TOKEN) as srv:
        yield srv


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _rec(i=0, **kw):
    return {"id": f"r{i}", "source": "The council met on Monday and voted to close the old bridge for repairs.",
            "candidate": "The council voted to close the bridge.", **kw}


def _post(srv, body=None, headers=AUTH, **kw):
    return httpx.post(f"{srv.url}/score", json=body, headers=headers, timeout=60, **kw)


def test_a_good_request_is_scored(limited):
    r = _post(limited, {"records": [_rec(0), _rec(1)]})
    assert r.status_code == 200 and [x["id"] for x in r.json()["results"]] == ["r0", "r1"]


def test_bearer_token_is_required(limited):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        r = _post(limited, {"records": [_rec()]}, headers=headers)
        assert r.status_code == 401 and "bearer token" in r.json()["error"]
        assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{limited.url}/health").json()["auth"] is True


def test_only_json_bodies_are_accepted(limited):
    raw = b'{"records": [{"source": "a b c", "candidate": "a b"}]}'
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = dict(AUTH, **({"Content-Type": ctype} if ctype else {}))
        r = httpx.post(f"{limited.url}/score", content=raw, headers=headers, timeout=60)
        assert r.status_code == 415, (ctype, r.text)
        assert "application/json" in r.json()["error"]
    r = httpx.post(f"{limited.url}/score", content=raw, headers=dict(AUTH, **{"Content-Type": "application/json; "
                                                                                 "charset=utf-8"}), timeout=60)
    assert r.status_code == 200


def test_size_limits_answer_413(limited):
    r = _post(limited, {"records": [_rec(i) for i in range(5)]})  # 5 > max_records 4
    assert r.status_code == 413 and "limit is 4" in r.json()["error"]
    big = {"records": [_rec(0, padding="x" * 30_000)]}  # body over 20,000 bytes
    r = _post(limited, big)
    assert r.status_code == 413 and "20,000" in r.json()["error"]

    def chunks():  # no Content-Length: the body is cut at the limit while it streams in
        yield b'{"records": [{"source": "'
        for _ in range(40):
            yield b"y" * 1000
        yield b'", "candidate": "c"}]}'

    r = httpx.post(f"{limited.url}/score", content=chunks(), headers=dict(AUTH, **{"Content-Type": "application/json"}),
                   timeout=60)
    assert r.status_code == 413


def test_text_length_limit_names_record_and_field(limited):
    r = _post(limited, {"records": [_rec(0), _rec(1, candidate="word " * 500)]})
    assert r.status_code == 422
    body = r.json()
    assert body["record"] == "records[1]" and body["field"] == "candidate" and "2,000" in body["error"]


@pytest.mark.parametrize("field,value,why", [
    ("candidate", "", "empty"), ("candidate", " \n\t", "empty"), ("candidate", "a\x00b", "NUL"),
    ("source", "   ", "empty"), ("source", "x\x00", "NUL"), ("candidate", 3, "string"), ("source", None, "missing"),
])
def test_reader_validation_gives_422_naming_record_and_field(limited, field, value, why):
    rec = _rec(1)
    rec[field] = value
    r = _post(limited, {"records": [_rec(0), rec]})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["record"] == "records[1]" and body["field"] == field and why in body["error"], body


def test_malformed_bodies(limited):
    r = httpx.post(f"{limited.url}/score", content=b"{not json", headers=dict(AUTH, **{"Content-Type": "application/json"}))
    assert r.status_code == 400 and r.json()["error"]
    r = httpx.post(f"{limited.url}/score", content=b"\xff\xfe", headers=dict(AUTH, **{"Content-Type": "application/json"}))
    assert r.status_code == 400
    assert _post(limited, [1, 2]).status_code == 422
    assert _post(limited, {"records": []}).status_code == 422


def test_health_hides_the_model_path(limited, multi_judge):
    h = httpx.get(f"{limited.url}/health").json()
    text = str(h)
    assert str(multi_judge) not in text and "/tmp" not in text
    assert h["metric"].startswith("student mj (sha256 ") and h["limits"]["max_records"] == 4


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="max_records"):
        ServerLimits(max_records=0)


def test_csem_serve_token_from_environment(multi_judge):
    with csem_serve("--model", str(multi_judge), "--threads", "1", "--max-records", "2",
                    env={"CSEM_SERVE_TOKEN": TOKEN}) as (url, proc):
        assert httpx.post(f"{url}/score", json={"records": [_rec()]}, timeout=60).status_code == 401
        assert httpx.post(f"{url}/score", json={"records": [_rec()]}, headers=AUTH, timeout=60).status_code == 200
        assert httpx.post(f"{url}/score", json={"records": [_rec(i) for i in range(3)]}, headers=AUTH,
                          timeout=60).status_code == 413
    assert str(multi_judge) not in proc.stderr.read().decode()  # the start-up line names no path either
