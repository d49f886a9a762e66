"""Candidates with a known quality order, built from real SummEval articles (shared by the model and
apply test fixtures).

Per article: ``own`` (its highlight), ``shuffled`` (the highlight's words shuffled), ``other``
(another article's highlight) and, optionally, ``truncated`` (the highlight's first half). The
source is the article's first 60 words; each record carries two further highlights as references.
The labels are the caller's (a map from kind to value per column).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Mapping


def summeval_candidates(shared_data: Path, n_docs: int, labels: Mapping[str, Mapping[str, float]],
                        offset: int = 0, seed: int = 0) -> list[dict]:
    """Records ``d<i>-<kind>`` for articles ``offset .. offset + n_docs - 1`` (one per kind in
    ``labels``, which maps kind -> {column: value}).
    """
    from csem.data.datasets import load_summeval

    docs: dict[str, dict] = {}
    for r in load_summeval(shared_data / "summeval"):
        docs.setdefault(r["doc_id"], r)
    docs_l = list(docs.values())
    rng = random.Random(seed)
    out = []
    for i in range(offset, offset + n_docs):
        d, other = docs_l[i], docs_l[(i + 37) % len(docs_l)]
        ref = d["reference"][0]
        words = ref.split()
        rng.shuffle(words)
        texts = {"own": ref, "shuffled": " ".join(words), "other": other["reference"][0],
                 "truncated": " ".join(ref.split()[: max(3, len(ref.split()) // 2)])}
        for kind, cols in labels.items():
            out.append({"id": f"d{i}-{kind}", "doc_id": f"d{i}", "system_id": kind,
                        "source": " ".join(d["source"].split()[:60]), "candidate": texts[kind],
                        "reference": d["reference"][1:3], **cols})
    return out


def summeval_system_records(shared_data: Path, doc_indices) -> list[dict]:
    """SummEval's real system summaries of the articles at ``doc_indices`` (in the loader's document
    order), with the expert means as ``human.<aspect>``: ``id`` ``<doc>-<system>``, ``doc_id``,
    ``system_id``, ``source``, ``candidate``."""
    from csem.data.datasets import load_summeval

    by_doc: dict[str, list[dict]] = {}
    for r in load_summeval(shared_data / "summeval"):
        by_doc.setdefault(r["doc_id"], []).append(r)
    docs = list(by_doc)
    return [{"id": f"{docs[i]}-{r['system_id']}", "doc_id": docs[i], "system_id": r["system_id"],
             "source": r["source"], "candidate": r["candidate"],
             **{k: v for k, v in r.items() if k.startswith("human.")}}
            for i in doc_indices for r in by_doc[docs[i]]]
