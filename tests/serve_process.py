"""``csem serve`` as a real child process on a free loopback port, for the tests that exercise the
command itself (its flags, environment and start-up), not :class:`csem.apply.server.BackgroundServer`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def csem_serve(*args: str, env: dict | None = None, timeout_s: float = 120) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start ``python -m csem serve ARGS --port P`` offline, wait until ``/health`` answers 200 and yield
    ``(base URL, process)``; the process is terminated on exit. Fails the test (with the server's
    stderr) if the process dies or does not come up within ``timeout_s`` seconds."""
    port = free_port()
    full_env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "csem", "serve", *args, "--port", str(port)],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, env=full_env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.time() < deadline, "csem serve did not come up"
            time.sleep(0.5)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
