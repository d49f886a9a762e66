"""Which llama.cpp CPU kernels work on this machine: a one-time probe in a child process.

llama.cpp's CPU backend can hold weights in *extra buffer types* (``llama_model_params.use_extra_bufts``):
the AMX buffer on Intel CPUs with AMX (``amx_int8``) and the weight-repacking buffer
(``ggml-cpu/repack.cpp``) elsewhere. On some machines (seen on Intel Xeons with ``amx_tile amx_int8
amx_bf16``, llama-cpp-python 0.3.36) every decode of a batch of two or more tokens in those buffers dies
with a segmentation fault, which no ``try`` can catch. A one-token decode works, and loading the model
with ``use_extra_bufts=False`` makes every decode work (plain ggml kernels on mmap'd weights).

So before a model is loaded in this process, `extra_bufts_usable` asks a **child process** to load
the same GGUF with llama.cpp's defaults and decode a 32-token batch, then a 1-token batch (the two shapes
csem's judge and generator use). If the child dies by a signal (SIGSEGV, SIGILL, SIGBUS) or hangs, the
parent loads with ``use_extra_bufts=False``; if it exits cleanly, with llama.cpp's defaults. The answer is
cached per (CPU, llama.cpp build, model file) in ``~/.cache/csem/llama-kernels.json`` (see
`csem.assets.cache_dir`), so the probe runs once per machine, build and model (about 1-3 s).

The extra buffer types are one switch in llama.cpp's API: the AMX and repacking buffers cannot be turned
off separately at run time without rebuilding llama.cpp (``CMAKE_ARGS=-DGGML_AMX_INT8=OFF``), so the
fallback loses both. ``benchmarks/bench_llama_kernels.py`` measures what that costs in judge throughput
where both paths work.

``CSEM_LLAMA_EXTRA_BUFTS`` overrides the probe: ``1`` (llama.cpp's default, no probe), ``0`` (always off),
``auto`` (default: probe). The same choice is the ``extra_bufts`` backend option
(``--judge-opt extra_bufts=false``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from csem.errors import InputError

# CPU flags that select llama.cpp's CPU kernels (x86 /proc/cpuinfo names; ARM 'Features' names)
_KERNEL_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                 "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve", "sve2", "i8mm", "bf16", "dotprod")
PROBE_TIMEOUT_S = 300.0
_LOCK = threading.Lock()
_PATCH_LOCK = threading.Lock()


def cpu_info() -> dict:
    """This machine's CPU: ``{"model": str, "machine": str, "flags": [kernel-relevant flags, sorted]}``.
    Reads /proc/cpuinfo on Linux; elsewhere only ``platform.processor()``."""
    model, flags = platform.processor() or "", set()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and not model:
            model = value.strip()
        elif key in ("flags", "features"):
            flags.update(value.split())
    return {"model": model, "machine": platform.machine(), "flags": sorted(f for f in flags if f in _KERNEL_FLAGS)}


def has_amx(info: dict | None = None) -> bool:
    """True where the CPU reports AMX (``amx_int8``), the case where the crash was seen."""
    return "amx_int8" in (info or cpu_info())["flags"]


def build_info() -> dict:
    """The llama.cpp build in use: ``{"version": llama-cpp-python version, "libs": sha1 of the shared
    libraries' names, sizes and mtimes}`` (a rebuild or upgrade changes it); ``{}`` if not installed."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return {}
    pkg = Path(spec.origin).parent
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("llama_cpp_python")
    except PackageNotFoundError:  # pragma: no cover - a source checkout
        ver = "unknown"
    h = hashlib.sha1()
    for lib in sorted(pkg.glob("lib/*")):
        st = lib.stat()
        h.update(f"{lib.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    return {"version": ver, "libs": h.hexdigest()[:16]}


def probe_key(model_sha256: str) -> str:
    """Cache key of a probe result: CPU model and flags, llama.cpp build, model file hash."""
    blob = json.dumps([cpu_info(), build_info(), model_sha256], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _cache_path() -> Path:
    from csem.assets import cache_dir

    return cache_dir() / "llama-kernels.json"


def _read_cache() -> dict:
    try:
        return json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(key: str, entry: dict) -> None:
    path = _cache_path()
    data = _read_cache()
    data[key] = entry
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def probe_command(model_path: str | Path) -> list[str]:
    """The child's command line: this module's ``__main__`` probe on ``model_path``."""
    return [sys.executable, "-m", "csem.llm.providers.llama_cpp_kernels", "probe", str(model_path)]


def run_probe(model_path: str | Path, *, command: list[str] | None = None,
              timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Run the probe child once (no cache). Returns ``{"ok": bool, "outcome": str, "returncode": int|None,
    "seconds": float}``; ``outcome`` is ``ok``, ``crash (SIGSEGV)`` and the like, ``timeout`` or
    ``error: <last line of stderr>``. ``command`` replaces the child's command line (tests)."""
    import time

    cmd = command or probe_command(model_path)
    env = dict(os.environ, CSEM_LLAMA_EXTRA_BUFTS="1")  # the child tests llama.cpp's defaults
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"ok": False, "outcome": "timeout", "returncode": None, "seconds": round(time.perf_counter() - t0, 2)}
    seconds = round(time.perf_counter() - t0, 2)
    rc = proc.returncode
    if rc == 0:
        return {"ok": True, "outcome": "ok", "returncode": 0, "seconds": seconds}
    if rc < 0 or rc in (128 + signal.SIGSEGV, 128 + signal.SIGILL, 128 + signal.SIGBUS, 128 + signal.SIGABRT):
        signum = -rc if rc < 0 else rc - 128
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return {"ok": False, "outcome": f"crash ({name})", "returncode": rc, "seconds": seconds}
    last = (proc.stderr.strip().splitlines() or [f"exit {rc}"])[-1][:300]
    return {"ok": False, "outcome": f"error: {last}", "returncode": rc, "seconds": seconds}


def extra_bufts_usable(model_path: str | Path, model_sha256: str, *, command: list[str] | None = None,
                       refresh: bool = False) -> dict:
    """Whether ``model_path`` may be loaded with llama.cpp's extra buffer types on this machine.

    Returns ``{"use_extra_bufts": bool, "source": "env"|"cache"|"probe", "outcome": str, ...}``. Order:
    ``CSEM_LLAMA_EXTRA_BUFTS`` (``0``/``1``), else the cached probe for (CPU, build, model), else a new
    probe (`run_probe`), cached. A probe that crashed or hung means ``False``. A probe that failed
    with an ordinary error (a file llama.cpp cannot load) is not cached and means ``True``: loading in this
    process then raises the same error as a [`BackendError`][csem.llm.api.BackendError].
    """
    env = os.environ.get("CSEM_LLAMA_EXTRA_BUFTS", "auto").strip().lower()
    if env in ("0", "false", "no", "off"):
        return {"use_extra_bufts": False, "source": "env", "outcome": "CSEM_LLAMA_EXTRA_BUFTS=0"}
    if env in ("1", "true", "yes", "on"):
        return {"use_extra_bufts": True, "source": "env", "outcome": "CSEM_LLAMA_EXTRA_BUFTS=1"}
    if env not in ("", "auto"):
        raise InputError(f"CSEM_LLAMA_EXTRA_BUFTS must be 0, 1 or auto, got {env!r}")
    key = probe_key(model_sha256)
    with _LOCK:
        cached = None if refresh else _read_cache().get(key)
        if cached is not None:
            return {**cached, "source": "cache"}
        result = run_probe(model_path, command=command)
        entry = {"use_extra_bufts": result["ok"] or result["outcome"].startswith("error"),
                 "outcome": result["outcome"], "seconds": result["seconds"], "model": Path(model_path).name,
                 "cpu": cpu_info()["model"], "build": build_info().get("version", ""), "probed_at": time.time()}
        if not result["outcome"].startswith("error"):
            _write_cache(key, entry)
        return {**entry, "source": "probe"}


@contextlib.contextmanager
def model_params_override(**fields):
    """Inside the block, ``llama_cpp.Llama(...)`` builds its ``llama_model_params`` with ``fields`` set
    (e.g. ``use_extra_bufts=False``). llama-cpp-python 0.3.x does not expose these fields as ``Llama``
    arguments; it reads ``llama_cpp.llama_cpp.llama_model_default_params()`` once in ``__init__``, which
    this wraps (serialised by a lock, restored on exit)."""
    if not fields:
        yield
        return
    import llama_cpp.llama_cpp as lc

    with _PATCH_LOCK:
        original = lc.llama_model_default_params

        def patched():
            params = original()
            for name, value in fields.items():
                setattr(params, name, value)
            return params

        lc.llama_model_default_params = patched
        try:
            yield
        finally:
            lc.llama_model_default_params = original


def _probe_main(model_path: str) -> int:  # pragma: no cover - runs in the child process
    from llama_cpp import Llama

    llm = Llama(model_path=model_path, n_ctx=256, n_batch=64, n_threads=min(2, os.cpu_count() or 1),
                verbose=False, seed=0)
    tokens = llm.tokenize(b"The quick brown fox jumps over the lazy dog. " * 8, add_bos=True)[:32]
    llm.eval(tokens)  # a batch of 32 tokens: the shape that crashed
    llm.eval([tokens[-1]])  # and a batch of one (generation)
    print(json.dumps({"ok": True, "tokens": len(tokens)}))
    return 0


def server_app_noxb():  # pragma: no cover - runs in llama_cpp.server's uvicorn workers
    """``uvicorn --factory`` target: llama-cpp-python's OpenAI server app with the extra buffer types off."""
    from llama_cpp.server.app import create_app

    with model_params_override(use_extra_bufts=False):
        return create_app()


def server_command(argv: list[str], use_extra_bufts: bool) -> list[str]:
    """The command line of ``python -m llama_cpp.server ARGV``, run through this module with the extra
    buffer types off when ``use_extra_bufts`` is False (``llama_cpp.server`` has no such setting)."""
    if use_extra_bufts:
        return [sys.executable, "-m", "llama_cpp.server", *argv]
    return [sys.executable, "-m", "csem.llm.providers.llama_cpp_kernels", "serve-noxb", *argv]


if __name__ == "__main__":  # pragma: no cover - the probe child and the server wrapper
    if len(sys.argv) >= 3 and sys.argv[1] == "probe":
        sys.exit(_probe_main(sys.argv[2]))
    if len(sys.argv) >= 2 and sys.argv[1] == "serve-noxb":
        import runpy

        sys.argv = ["llama_cpp.server", *sys.argv[2:]]
        with model_params_override(use_extra_bufts=False):
            runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
        sys.exit(0)
    sys.exit("usage: python -m csem.llm.providers.llama_cpp_kernels probe MODEL.gguf | serve-noxb SERVER-ARGS...")
