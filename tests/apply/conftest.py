"""Fixtures of the apply-layer tests: N-best lists built from SummEval articles with a known
quality order, and a real small student (frozen all-MiniLM-L6-v2, two heads) trained on them here."""

from __future__ import annotations

import json
import random

import pytest
import torch

torch.set_num_threads(1)  # the CI machine has 2 cores shared with other test areas

SMALL = dict(max_length=48, hidden_sizes=[64], dropout=0.1)


def make_nbest(shared_data, n_docs: int, offset: int = 0, seed: int = 0) -> list[dict]:
    """Four candidates per SummEval article with labels on two aspects (1-5):

    ``own`` (the article's highlight): quality 5, fluency 5; ``shuffled`` (its words shuffled):
    quality 3, fluency 1; ``other`` (another article's highlight): quality 1, fluency 5;
    ``truncated`` (its first half): quality 4, fluency 3. Each record has two references.
    """
    rows = [json.loads(line) for line in open(shared_data / "summeval" / "summeval.jsonl", encoding="utf-8")]
    docs: dict[str, dict] = {}
    for r in rows:
        docs.setdefault(r["doc_id"], r)
    docs_l = list(docs.values())
    rng = random.Random(seed)
    out = []
    for i in range(offset, offset + n_docs):
        d, other = docs_l[i], docs_l[(i + 37) % len(docs_l)]
        src = " ".join(d["source"].split()[:60])
        ref = d["references"][0]
        words = ref.split()
        rng.shuffle(words)
        half = " ".join(ref.split()[: max(3, len(ref.split()) // 2)])
        cands = [("own", ref, 5.0, 5.0), ("shuffled", " ".join(words), 3.0, 1.0),
                 ("other", other["references"][0], 1.0, 5.0), ("truncated", half, 4.0, 3.0)]
        for kind, text, q, f in cands:
            out.append({"id": f"d{i}-{kind}", "doc_id": f"d{i}", "system_id": kind, "source": src,
                        "candidate": text, "reference": d["references"][1:3], "judge.quality": q,
                        "judge.fluency": f})
    return out


@pytest.fixture(scope="session")
def nbest_train(shared_data):
    return make_nbest(shared_data, 24, offset=0)


@pytest.fixture(scope="session")
def nbest_test(shared_data):
    return make_nbest(shared_data, 8, offset=40, seed=1)


@pytest.fixture(scope="session")
def student(nbest_train, tmp_path_factory):
    """A ref-free two-head student (quality, fluency) trained head-only for 15 epochs, saved to a folder."""
    from csem.model import ModelConfig, TrainConfig, train

    out = tmp_path_factory.mktemp("apply") / "student"
    train(nbest_train, "judge.quality,judge.fluency", "ref-free", out_dir=out,
          config=ModelConfig(name="tiny", **SMALL),
          train_config=TrainConfig(max_epochs=15, frozen_epochs=15, head_lr=3e-3, batch_size=16, seed=3),
          label_range=(1, 5), judge="synthetic order", rubric="quality,fluency")
    return out
