"""Start llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) on loopback.

A real OpenAI-API peer for the ``openai:`` backend without network access: the tests use it, and so
does ``benchmarks/bench_collect_concurrency.py``. Needs ``pip install 'llama-cpp-python[server]'``.

>>> with LlamaServer(csem.assets.smollm2_gguf()) as srv:
...     model = csem.llm.get_model("openai:smollm2", base_url=srv.url)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from csem.errors import InputError


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A ``llama_cpp.server`` subprocess on 127.0.0.1; ``url`` is the OpenAI base URL (``.../v1``).

    Args:
        model: GGUF file. api_key: require this key (None: no auth). n_ctx: context per request.
        n_threads: CPU threads of the server's model. extra: further ``llama_cpp.server`` arguments
            (e.g. ``("--logits_all", "false")``). nice: niceness added to the server process.
        workers: server processes sharing the port. llama-cpp-python 0.3.36's server has no parallel
            slots (no ``n_parallel``; one global lock serves one request at a time), so ``workers > 1``
            runs its app under ``uvicorn --workers N --factory llama_cpp.server.app:create_app``: N
            processes, each with its own copy of the model, settings from the environment (``MODEL``,
            ``N_CTX``, ...); ``extra`` must then be empty.

    ``start()`` waits until ``GET /v1/models`` answers (raises RuntimeError with the server's log
    tail if it exits or does not come up in ``timeout`` s); ``stop()`` kills it (SIGKILL: also the
    "server died" case); ``start()`` again reuses the same port. Usable as a context manager.
    """

    def __init__(self, model: str | Path, *, api_key: str | None = None, extra: tuple[str, ...] = (),
                 n_ctx: int = 2048, n_threads: int = 1, nice: int = 0, workers: int = 1):
        self.model, self.api_key, self.extra, self.n_ctx = Path(model), api_key, tuple(extra), n_ctx
        self.n_threads, self.nice, self.workers = int(n_threads), int(nice), int(workers)
        if self.workers > 1 and self.extra:
            raise InputError("extra server arguments are not passed with workers > 1")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None

    def extra_bufts(self) -> bool:
        """Whether the server may load the model with llama.cpp's extra buffer types: the same cached
        child-process probe as the in-process backend
        (`csem.llm.providers.llama_cpp_kernels.extra_bufts_usable`), which says no on CPUs where a
        batched decode crashes in them (Intel AMX)."""
        from csem.llm.providers.llama_cpp import _file_sha256
        from csem.llm.providers.llama_cpp_kernels import extra_bufts_usable

        if not self.model.is_file():
            return True  # the server itself reports the missing file
        return bool(extra_bufts_usable(self.model, _file_sha256(self.model))["use_extra_bufts"])

    def command(self) -> list[str]:
        from csem.llm.providers.llama_cpp_kernels import server_command

        xb = self.extra_bufts()
        if self.workers > 1:
            factory = "llama_cpp.server.app:create_app" if xb else "csem.llm.providers.llama_cpp_kernels:server_app_noxb"
            cmd = [sys.executable, "-m", "uvicorn", "--factory", factory, "--host", "127.0.0.1",
                   "--port", str(self.port), "--workers", str(self.workers), "--log-level", "warning"]
        else:
            cmd = server_command(["--model", str(self.model), "--host", "127.0.0.1",
                                  "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
                                  "--n_threads_batch", str(self.n_threads), *self.extra], xb)
            if self.api_key:
                cmd += ["--api_key", self.api_key]
        return (["nice", "-n", str(self.nice)] if self.nice else []) + cmd

    def environment(self) -> dict[str, str]:
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        if self.workers > 1:  # llama_cpp.server's settings are pydantic BaseSettings: read from the environment
            env.update(MODEL=str(self.model), N_CTX=str(self.n_ctx), N_THREADS=str(self.n_threads),
                       N_THREADS_BATCH=str(self.n_threads), HOST="127.0.0.1", PORT=str(self.port))
            if self.api_key:
                env["API_KEY"] = self.api_key
        return env

    def start(self, timeout: float = 180.0) -> "LlamaServer":
        fd, name = tempfile.mkstemp(prefix="llama_server_", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                                         start_new_session=self.workers > 1)
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
            if self.workers > 1:  # the workers are children of the uvicorn supervisor: kill its process group
                import signal

                os.killpg(self.proc.pid, signal.SIGKILL)
            else:
                self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def __enter__(self) -> "LlamaServer":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
