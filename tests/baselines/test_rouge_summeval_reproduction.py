"""Acceptance: ROUGE-1/2/L on SummEval reproduce the published summary-level Spearman per aspect.

Published (G-Eval Table 1 = UniEval Table 2 = CSEM Table V), coherence/consistency/fluency/relevance:
ROUGE-1 .167/.160/.115/.326, ROUGE-2 .184/.187/.159/.290, ROUGE-L .128/.115/.105/.311.
They come from SummEval's Perl ROUGE-1.5.5 (``-m``: Porter stemming; ``-f A``: score averaged over
the 11 references; F-score; ROUGE-L = summary-level union LCS over sentences). With rouge-score that
is ``reduce="mean"``, ``use_stemmer=True``, ``rougeLsum`` with one sentence per line.
"""

from __future__ import annotations

import pytest

from csem.baselines import rouge_scores
from csem.data.datasets import SUMMEVAL_ASPECTS, load_summeval
from csem.meta import correlate

pytestmark = pytest.mark.slow  # ROUGE of 1600 summaries against 11 references each: minutes on 2 cores

PUBLISHED = {
    "rouge1": (0.167, 0.160, 0.115, 0.326),
    "rouge2": (0.184, 0.187, 0.159, 0.290),
    "rougeLsum": (0.128, 0.115, 0.105, 0.311),
}


def test_summeval_rouge_reproduces_published_spearman(shared_data):
    recs = load_summeval(shared_data / "summeval")
    assert all(len(r["reference"]) == 11 for r in recs)
    scores = rouge_scores(recs, tuple(PUBLISHED), reduce="mean", use_stemmer=True)
    docs = [r["doc_id"] for r in recs]
    got = {}
    for variant, published in PUBLISHED.items():
        got[variant] = tuple(
            correlate(scores[variant], [r[f"human.{a}"] for r in recs], level="summary", method="spearman",
                      groups=docs).value
            for a in SUMMEVAL_ASPECTS)
    for variant, published in PUBLISHED.items():
        for a, g, p in zip(SUMMEVAL_ASPECTS, got[variant], published):
            # measured here: every cell within 0.006 of the paper; the issue allows 0.03
            assert g == pytest.approx(p, abs=0.01), (variant, a, round(g, 3), p)
