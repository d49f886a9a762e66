"""llama.cpp's extra buffer types (AMX / weight repacking): the child-process probe, its cache, the
fallback load with ``use_extra_bufts=False``, and the server wrapper.

The crash itself (a SIGSEGV in a batched decode on Intel AMX CPUs) cannot be produced on every machine,
so the probe's crash branch is tested with a child that really dies by SIGSEGV (a NULL read through
ctypes) standing in for llama.cpp's; the fallback load and scoring run the real model."""

from __future__ import annotations

import json
import sys

import pytest

from csem.llm.providers import llama_cpp_kernels as K

SEGFAULT = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]  # a real SIGSEGV in a child
CLEAN = [sys.executable, "-c", "print('ok')"]
FAILS = [sys.executable, "-c", "import sys; sys.exit('cannot load model')"]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CSEM_CACHE", str(tmp_path))
    monkeypatch.delenv("CSEM_LLAMA_EXTRA_BUFTS", raising=False)
    return tmp_path


def test_probe_reports_a_crashing_child_as_a_crash():
    r = K.run_probe("unused.gguf", command=SEGFAULT)
    assert r["ok"] is False
    assert r["outcome"] == "crash (SIGSEGV)"


def test_crash_turns_extra_bufts_off_and_is_cached_per_machine_build_model(cache):
    first = K.extra_bufts_usable("m.gguf", "a" * 64, command=SEGFAULT)
    assert first["use_extra_bufts"] is False and first["source"] == "probe"
    # the cached answer is used without running a child (this one would say "works")
    again = K.extra_bufts_usable("m.gguf", "a" * 64, command=CLEAN)
    assert again["use_extra_bufts"] is False and again["source"] == "cache"
    assert again["outcome"] == "crash (SIGSEGV)"
    stored = json.loads((cache / "llama-kernels.json").read_text())
    assert list(stored) == [K.probe_key("a" * 64)]
    # another model file is probed on its own
    other = K.extra_bufts_usable("n.gguf", "b" * 64, command=CLEAN)
    assert other["use_extra_bufts"] is True and other["source"] == "probe"
    # refresh re-probes
    assert K.extra_bufts_usable("m.gguf", "a" * 64, command=CLEAN, refresh=True)["use_extra_bufts"] is True


def test_ordinary_probe_error_is_not_cached_and_keeps_defaults(cache):
    r = K.extra_bufts_usable("m.gguf", "c" * 64, command=FAILS)
    assert r["use_extra_bufts"] is True and r["outcome"] == "error: cannot load model"
    assert not (cache / "llama-kernels.json").exists()


def test_environment_overrides_the_probe(cache, monkeypatch):
    monkeypatch.setenv("CSEM_LLAMA_EXTRA_BUFTS", "0")
    assert K.extra_bufts_usable("m.gguf", "d" * 64, command=CLEAN)["use_extra_bufts"] is False
    monkeypatch.setenv("CSEM_LLAMA_EXTRA_BUFTS", "1")
    assert K.extra_bufts_usable("m.gguf", "d" * 64, command=SEGFAULT)["use_extra_bufts"] is True
    monkeypatch.setenv("CSEM_LLAMA_EXTRA_BUFTS", "maybe")
    with pytest.raises(ValueError, match="CSEM_LLAMA_EXTRA_BUFTS"):
        K.extra_bufts_usable("m.gguf", "d" * 64)


def test_probe_key_changes_with_the_model_and_names_cpu_flags():
    assert K.probe_key("a" * 64) != K.probe_key("b" * 64)
    info = K.cpu_info()
    assert set(info["flags"]) <= set(K._KERNEL_FLAGS)
    assert K.has_amx({"flags": ["amx_int8"]}) and not K.has_amx({"flags": ["avx2"]})


def test_model_params_override_sets_the_field_only_inside_the_block():
    import llama_cpp.llama_cpp as lc

    assert lc.llama_model_default_params().use_extra_bufts is True
    with K.model_params_override(use_extra_bufts=False):
        assert lc.llama_model_default_params().use_extra_bufts is False
    assert lc.llama_model_default_params().use_extra_bufts is True


def test_server_command_goes_through_the_wrapper_when_off():
    assert K.server_command(["--model", "m"], True)[1:3] == ["-m", "llama_cpp.server"]
    assert K.server_command(["--model", "m"], False)[1:4] == ["-m", "csem.llm.providers.llama_cpp_kernels", "serve-noxb"]


@pytest.mark.slow
def test_real_probe_and_fallback_load_score_the_same(smollm2_path, cache):
    """The real child probe on SmolLM2 answers (ok here; a crash on an AMX machine), and a model loaded
    with the extra buffer types off scores a rubric prompt with the same distribution, up to kernel
    rounding, as the default load (compared only where the probe says the default works)."""
    import asyncio

    from csem.llm.config import GenerateConfig
    from csem.llm.providers.llama_cpp import LlamaCppBackend

    decision = K.extra_bufts_usable(smollm2_path, "smollm2-test")
    assert decision["source"] == "probe"
    assert decision["outcome"] == "ok" or decision["outcome"].startswith("crash")
    msgs = [{"role": "user", "content": "Rate the summary 'The cat sat.' of 'A cat sat on a mat.' from 1 to 5. "
                                        "Answer with one number."}]
    off = LlamaCppBackend(smollm2_path, n_ctx=512, extra_bufts=False)
    assert off.id.endswith("/noxb") and off.extra_bufts is False
    d_off = asyncio.run(off.score_distribution(msgs, [1, 2, 3, 4, 5]))
    gen = asyncio.run(off.generate(msgs, GenerateConfig(n=1, max_tokens=4, temperature=0.0, top_k=0, top_p=1.0,
                                                        seed=1)))
    assert gen[0].tokens >= 1
    off.close()
    assert d_off.mass > 0.01
    if decision["use_extra_bufts"]:
        on = LlamaCppBackend(smollm2_path, n_ctx=512, extra_bufts=True)
        assert not on.id.endswith("/noxb")
        d_on = asyncio.run(on.score_distribution(msgs, [1, 2, 3, 4, 5]))
        on.close()
        for s in range(1, 6):
            assert d_off.probs[s] == pytest.approx(d_on.probs[s], abs=0.03)


@pytest.mark.slow
def test_openai_server_runs_with_extra_bufts_off(smollm2_path, cache, monkeypatch):
    """llama_cpp.server has no use_extra_bufts setting: csem's LlamaServer starts it through the wrapper."""
    import httpx

    from csem.llm.server import LlamaServer

    monkeypatch.setenv("CSEM_LLAMA_EXTRA_BUFTS", "0")
    server = LlamaServer(smollm2_path, n_ctx=512)
    assert "serve-noxb" in server.command()
    with server:
        r = httpx.post(server.url + "/chat/completions", timeout=60,
                       json={"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] is not None
