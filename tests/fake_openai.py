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

    A step is ``(status, body_dict)`` or ``("sleep", seconds, status, body)``. ``requests`` keeps the
    JSON bodies and the Authorization headers received; ``max_in_flight`` is the largest number of
    requests the server was answering at the same time.
    """

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                with lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    self._answer()
                finally:
                    with lock:
                        outer.in_flight -= 1

            def _answer(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with lock:
                    outer.requests.append(body)
                    outer.auth.append(self.headers.get("Authorization", ""))
                    step = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                if callable(step):
                    step = step(body)
                if step[0] == "sleep":
                    time.sleep(step[1])
                    step = step[2:]
                status, payload = step
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
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
