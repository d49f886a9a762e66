"""Backends by URI: built-in and third-party backends come from the same entry-point group, and a
scheme registered at run time works the same way."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import entry_points

import pytest

from csem.judge import judge_records
from csem.llm import ENTRY_POINT_GROUP, backend_schemes, get_model, register_backend
from csem.llm import registry


def test_builtin_backends_are_declared_as_entry_points():
    declared = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert {"local", "llama-cpp", "openai", "hf"} <= set(declared), "reinstall csem (pip install -e .) to refresh them"
    assert declared["openai"] == "csem.llm.providers.openai:openai_backend"
    assert {"local", "llama-cpp", "openai", "hf"} <= set(backend_schemes())


def test_a_third_party_package_adds_a_scheme_by_entry_point(tmp_path, monkeypatch, smol, tiny_rubric, tiny_records):
    """A real installed distribution (a dist-info folder on sys.path) declaring ``csem.llm_backends``."""
    (tmp_path / "csem_echo_plugin.py").write_text(textwrap.dedent('''
        SEEN = {}

        def factory(target, **options):
            from csem.llm.providers.llama_cpp import llama_cpp_backend
            SEEN.update(target=target, **options)
            return llama_cpp_backend(options.pop("path"), n_ctx=2048, n_threads=2)
    '''))
    info = tmp_path / "csem_echo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: csem-echo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\necho = csem_echo_plugin:factory\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_scanned", False)
    monkeypatch.setattr(registry, "_ENTRY_POINTS", {})
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    assert "echo" in backend_schemes() and "csem_echo_plugin" not in sys.modules, "loaded only when used"
    rows, _ = judge_records(tiny_records[:1], tiny_rubric, "echo:some/model", progress=False,
                            backend_options={"path": str(smol.model_path), "concurrency": 4})
    import csem_echo_plugin

    assert csem_echo_plugin.SEEN == {"target": "some/model", "path": str(smol.model_path)}, \
        "wrapper options (concurrency) stay with the wrapper"
    assert rows[0]["judge.coherence"] is not None


def test_plugin_backends_register_a_uri_scheme_at_run_time(smol, tiny_rubric, tiny_records, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    seen = {}

    def factory(target, **options):
        seen.update(target=target, **options)
        return smol

    register_backend("test-plugin", factory)
    assert {"local", "llama-cpp", "openai", "test-plugin"} <= set(backend_schemes())
    rows, _ = judge_records(tiny_records[:1], tiny_rubric, "test-plugin:some/model", progress=False,
                            backend_options={"flavour": "x"})
    assert seen == {"target": "some/model", "flavour": "x"} and rows[0]["judge.coherence"] is not None


def test_unknown_scheme_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'nope:x'.*llama-cpp:\\.\\.\\..*openai:\\.\\.\\."):
        get_model("nope:x")
    with pytest.raises(ValueError, match="takes no model name"):
        get_model("local:x")
