"""A FAKE of OpenAI's Files and Batches endpoints (and of chat completions, answered by the same
function) on loopback, for the batch transport's tests: a real HTTP server that the real ``openai``
and ``AzureOpenAI`` clients talk to, because no real Batches API can be run offline.

Paths: ``/v1/...`` (OpenAI) and ``/openai/...`` (Azure OpenAI: ``?api-version=``; chat completions
under ``/openai/deployments/<name>/chat/completions``).

* ``POST files`` (multipart upload, purpose ``batch``), ``GET files/<id>``, ``GET files/<id>/content``;
* ``POST batches`` (counted in :attr:`FakeBatchServer.creations`), ``GET batches``, ``GET
  batches/<id>`` (each retrieve moves the batch one step along its plan: by default
  ``validating -> in_progress -> finalizing -> completed``), ``POST batches/<id>/cancel``;
* ``POST chat/completions``: :func:`answer` of the body (the synchronous path, for comparison).

A batch's result lines are made when it reaches its last state: ``completed`` answers every request
(``errors`` turns chosen requests into error-file lines; ``malformed`` inserts a broken line into the
output file); ``expired`` and ``cancelled`` answer only the first ``partial`` requests; ``failed``
answers none and carries ``errors.data``.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse


def probs_for(messages: list) -> dict[str, float]:
    """A deterministic distribution over the scores 1-5 from the chat's text (sums to 0.9: the rest
    falls on a non-score token, as a real model's would)."""
    h = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    w = [1 + h[i] for i in range(5)]
    z = sum(w)
    return {str(i + 1): 0.9 * w[i] / z for i in range(5)}


def answer(body: dict) -> dict:
    """The chat completion the fake gives for a request body: top logprobs of the scores when
    ``logprobs`` is asked, else ``n`` answers ``Score: <most probable>``; usage from the text size."""
    msgs = body.get("messages") or []
    probs = probs_for(msgs)
    best = max(probs, key=probs.get)
    prompt_tokens = sum(len(str(m.get("content", "")).split()) + 4 for m in msgs) + 3
    choices = []
    for i in range(int(body.get("n") or 1)):
        choice = {"index": i, "message": {"role": "assistant", "content": best if body.get("logprobs") else
                                          f"Score: {best}"}, "finish_reason": "stop", "logprobs": None}
        if body.get("logprobs"):
            k = int(body.get("top_logprobs") or 0)
            tops = [(t, math.log(p)) for t, p in sorted(probs.items(), key=lambda x: -x[1])] + [("The", math.log(0.1))]
            tops = tops[:k] if k else tops[:1]
            choice["logprobs"] = {"content": [{"token": best, "logprob": math.log(probs[best]), "bytes": None,
                                               "top_logprobs": [{"token": t, "logprob": lp, "bytes": None}
                                                                for t, lp in tops]}]}
        choices.append(choice)
    completion = 1 if body.get("logprobs") else 3 * len(choices)
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
            "choices": choices, "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                                          "total_tokens": prompt_tokens + completion}}


class FakeBatchServer:
    """See the module docstring.

    Args:
        plan: the states a new batch goes through, one per retrieve (the last one is final).
        errors: ``errors(body) -> (status, message) | None``: the requests it names go to the error file.
        malformed: put a broken line into the output file (in place of the first request's line).
        partial: how many requests an expired or cancelled batch answered.
        key: when set, a request without ``Authorization: Bearer <key>`` gets a 401.

    Attributes:
        creations: batches created. uploads: files uploaded. chat_bodies: bodies of the synchronous
        chat requests. batch_bodies: ``{custom_id: body}`` of every request of every uploaded batch file.
        retrieves: status requests served. served: the status of each retrieve, in order.
    """

    def __init__(self, *, plan=("validating", "in_progress", "finalizing", "completed"), errors=None,
                 malformed=False, partial=0, key=None):
        self.plan = list(plan)
        self.errors = errors
        self.malformed = malformed
        self.partial = partial
        self.key = key
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.steps: dict[str, int] = {}
        self.creations = 0
        self.uploads = 0
        self.retrieves = 0
        self.served: list[str] = []
        self.chat_bodies: list[dict] = []
        self.batch_bodies: dict[str, dict] = {}
        self.paths: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *a):
                pass

            def _send(self, status: int, payload, ctype="application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refused(self) -> bool:
                if outer.key is None or self.headers.get("Authorization") == f"Bearer {outer.key}" \
                        or self.headers.get("api-key") == outer.key:
                    return False
                self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
                return True

            def _route(self) -> list[str]:
                path = urlparse(self.path).path
                with outer.lock:
                    outer.paths.append(self.path)
                parts = [p for p in path.split("/") if p]
                return parts[1:] if parts and parts[0] in ("v1", "openai") else parts

            def do_GET(self):
                parts = self._route()
                if self._refused():
                    return None
                with outer.lock:
                    if parts[:1] == ["files"] and len(parts) == 3 and parts[2] == "content":
                        f = outer.files.get(parts[1])
                        return self._send(200, f["data"], "application/octet-stream") if f else self._404()
                    if parts[:1] == ["files"] and len(parts) == 2:
                        f = outer.files.get(parts[1])
                        return self._send(200, f["object"]) if f else self._404()
                    if parts == ["batches"]:
                        data = list(reversed(list(outer.batches.values())))
                        return self._send(200, {"object": "list", "data": data, "has_more": False,
                                                "first_id": data[0]["id"] if data else None,
                                                "last_id": data[-1]["id"] if data else None})
                    if parts[:1] == ["batches"] and len(parts) == 2 and parts[1] in outer.batches:
                        outer.retrieves += 1
                        b = outer._advance(parts[1])
                        outer.served.append(b["status"])
                        return self._send(200, b)
                return self._404()

            def do_POST(self):
                parts = self._route()
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self._refused():
                    return None
                with outer.lock:
                    if parts == ["files"]:
                        return self._send(200, outer._upload(self.headers.get("Content-Type", ""), raw))
                    body = json.loads(raw or b"{}")
                    if parts == ["batches"]:
                        return self._send(200, outer._create(body))
                    if parts[:1] == ["batches"] and parts[-1:] == ["cancel"]:
                        b = outer.batches[parts[1]]
                        b["status"] = "cancelling"
                        outer.steps[b["id"]] = 10 ** 6
                        return self._send(200, b)
                    if parts[-2:] == ["chat", "completions"]:
                        outer.chat_bodies.append(body)
                        return self._send(200, answer(body))
                return self._404()

            def _404(self):
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        self.azure_endpoint = f"http://127.0.0.1:{port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # ------------------------------------------------------------------ the fake's state (under lock)
    def _new_file(self, data: bytes, purpose: str, name: str) -> dict:
        fid = f"file-{len(self.files) + 1:04d}"
        obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()), "filename": name,
               "purpose": purpose, "status": "processed"}
        self.files[fid] = {"object": obj, "data": data}
        return obj

    def _upload(self, ctype: str, raw: bytes) -> dict:
        msg = email.message_from_bytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw,
                                       policy=email.policy.HTTP)
        fields, data, name = {}, b"", "upload.jsonl"
        for part in msg.iter_parts():
            key = part.get_param("name", header="content-disposition")
            if key == "file":
                data = part.get_payload(decode=True)
                name = part.get_filename() or name
            else:
                fields[key] = part.get_payload(decode=True).decode()
        self.uploads += 1
        for line in data.decode().splitlines():
            if line.strip():
                req = json.loads(line)
                self.batch_bodies[req["custom_id"]] = req["body"]
        return self._new_file(data, fields.get("purpose", "batch"), name)

    def _create(self, body: dict) -> dict:
        self.creations += 1
        bid = f"batch_{self.creations:04d}"
        lines = [json.loads(t) for t in self.files[body["input_file_id"]]["data"].decode().splitlines() if t.strip()]
        b = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "input_file_id": body["input_file_id"],
             "completion_window": body["completion_window"], "status": self.plan[0], "created_at": int(time.time()),
             "metadata": body.get("metadata"), "output_file_id": None, "error_file_id": None, "errors": None,
             "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
        self.batches[bid] = b
        self.steps[bid] = 0
        return b

    def _advance(self, bid: str) -> dict:
        b = self.batches[bid]
        if b["status"] in ("completed", "failed", "expired", "cancelled"):
            return b
        self.steps[bid] = min(self.steps[bid] + 1, len(self.plan) - 1)
        b["status"] = self.plan[self.steps[bid]] if b["status"] != "cancelling" else "cancelled"
        if b["status"] in ("completed", "failed", "expired", "cancelled"):
            self._finish(b)
        elif b["status"] == "in_progress":
            b["request_counts"]["completed"] = b["request_counts"]["total"] // 2
        return b

    def _finish(self, b: dict) -> None:
        lines = [json.loads(t) for t in self.files[b["input_file_id"]]["data"].decode().splitlines() if t.strip()]
        if b["status"] == "failed":
            refusal = {"code": "invalid_request", "message": "the fake refused the file", "line": None, "param": None}
            b["errors"] = {"object": "list", "data": [refusal]}
            b["request_counts"] = {"total": len(lines), "completed": 0, "failed": 0}
            return
        total = len(lines)
        if b["status"] in ("expired", "cancelled"):
            lines = lines[: self.partial]
        out, err = [], []
        for i, req in enumerate(lines):
            cid = req["custom_id"]
            fault = self.errors(req["body"]) if self.errors is not None else None
            if fault is not None:
                status, message = fault
                err.append({"id": f"req_{i}", "custom_id": cid, "error": None,
                            "response": {"status_code": status, "request_id": f"r{i}",
                                         "body": {"error": {"message": message, "type": "invalid_request_error"}}}})
            else:
                out.append({"id": f"req_{i}", "custom_id": cid, "error": None,
                            "response": {"status_code": 200, "request_id": f"r{i}", "body": answer(req["body"])}})
        text = [json.dumps(x) for x in out]
        if self.malformed and text:
            text[0] = text[0][: len(text[0]) // 2]  # cut off mid-way
        if text:
            b["output_file_id"] = self._new_file(("\n".join(text) + "\n").encode(), "batch_output", "out.jsonl")["id"]
        if err:
            b["error_file_id"] = self._new_file(("\n".join(json.dumps(x) for x in err) + "\n").encode(),
                                                "batch_output", "err.jsonl")["id"]
        b["request_counts"] = {"total": total, "completed": len(out), "failed": len(err)}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
