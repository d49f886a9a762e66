"""A tiny real HTTP server speaking the chat-completions API with scripted failures (429, 5xx, slow,
logprobs rejected). It is a real server on loopback, used for faults a healthy llama.cpp server cannot
produce on demand."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(content: str = "Score: 4", *, top_logprobs: list[tuple[str, float]] | None = None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
              "logprobs": None}
    if top_logprobs is not None:
        choice["logprobs"] = {"content": [{"token": top_logprobs[0][0], "logprob": top_logprobs[0][1], "bytes": None,
                                           "top_logprobs": [{"token": t, "logprob": lp, "bytes": None}
                                                            for t, lp in top_logprobs]}]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "fake", "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


class ScriptedServer:
    """Answers POST /v1/chat/completions with ``script[i]`` for the i-th request (the last one repeats).

    A step is ``(status, body)`` or ``(status, body, headers)`` or ``("sleep", seconds, status, body)``;
    ``body`` is a dict (sent as JSON) or ``str``/``bytes`` sent as they are (a malformed reply: an HTML
    page, JSON cut off), ``headers`` extra response headers (``Retry-After``, ``Content-Type``). A step
    may be a callable of the request body returning a step. ``requests`` keeps the JSON bodies and
    the Authorization headers received, ``times`` the ``time.monotonic()`` of each request's
    arrival, ``paths`` its path with query string, ``headers`` all its headers; ``max_in_flight`` is
    the largest number of requests the server was answering at the same time. ``check(path,
    headers)``, when given, may return a step that answers instead of the script (a 404 for a URL
    of the wrong shape, a 401 for a missing key) without counting the request as a script step.
    ``keep_alive``: answer with HTTP/1.1 and keep connections open (a client then holds them in
    its pool, as with a real server).
    """

    def __init__(self, script, *, check=None, keep_alive=False):
        self.script = list(script)
        self.check = check
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.times: list[float] = []
        self.paths: list[str] = []
        self.headers: list[dict] = []
        self.rejected: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"  # 1.1: connections stay open, as a real server's

            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                with lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                self._counted = True
                try:
                    self._answer()
                finally:
                    self._done()

            def _done(self):
                # a request stops counting before its reply is sent: a client that got the reply may
                # send its next request before this thread would run a `finally`
                if getattr(self, "_counted", False):
                    self._counted = False
                    with lock:
                        outer.in_flight -= 1

            def _answer(self):
                arrived = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                refusal = outer.check(self.path, dict(self.headers)) if outer.check is not None else None
                if refusal is not None:
                    with lock:
                        outer.rejected.append(self.path)
                    step = refusal
                else:
                    with lock:
                        outer.requests.append(body)
                        outer.auth.append(self.headers.get("Authorization", ""))
                        outer.times.append(arrived)
                        outer.paths.append(self.path)
                        outer.headers.append(dict(self.headers))
                        step = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                if callable(step):
                    step = step(body)
                if step[0] == "sleep":
                    time.sleep(step[1])
                    step = step[2:]
                status, payload = step[0], step[1]
                extra = dict(step[2]) if len(step) > 2 else {}
                if isinstance(payload, (str, bytes)):
                    data = payload.encode() if isinstance(payload, str) else payload
                else:
                    data = json.dumps(payload).encode()
                ctype = extra.pop("Content-Type", "application/json")
                self._done()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    for k, v in extra.items():
                        self.send_header(k, str(v))
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def error(status: int, message: str) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": "error", "param": None, "code": None}}
