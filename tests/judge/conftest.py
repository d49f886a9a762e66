"""Fixtures of the judge tests: SmolLM2 through llama-cpp (plumbing only), a short rubric, records."""

from __future__ import annotations

import pytest

from csem.rubrics import Rubric

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
    from csem.judge.backends.llama_cpp import llama_cpp_backend

    return llama_cpp_backend(str(smollm2_path), n_ctx=2048, n_threads=2)


@pytest.fixture(scope="session")
def tiny_template() -> str:
    return TINY_TEMPLATE
