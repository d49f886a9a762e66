"""Synthetic contrast pairs without an LLM: rule-made negatives of real candidates, per aspect.

Every record ``(source, candidate[, reference])`` yields within-source preference pairs
``(better = the candidate, worse = a perturbed copy)`` for each aspect, with the perturbation's name,
a severity in (0, 1] and a short description of the edit. The pairs are written in the preference-file
layout that ``csem train --pairs`` reads (`csem.model.preferences`): ``id_a``/``candidate_a`` is
the better text, ``id_b``/``candidate_b`` the worse one, and ``judge.<aspect>`` = 1.0 (``a`` is better
than ``b`` on that aspect; the other aspects' columns are absent, so a row teaches one head only)::

    csem contrasts --data train.jsonl --out contrasts.jsonl
    csem train --pairs --data contrasts.jsonl \\
        --label-col judge.coherence,judge.consistency,judge.fluency,judge.relevance --out student/

Perturbation families (each function ``f(text, rng, ctx) -> Perturbed | None`` is pure: the output
depends only on its arguments; None when the text offers nothing to perturb, never an unchanged text):

* coherence (`csem.data.contrasts.coherence`): `sentence_shuffle`, `sentence_move`, `connective_swap`,
  `connective_drop`, `connective_insert`. Source: UniEval's rule-based coherence
  negative samples (Zhong et al. 2022, "Towards a Unified Multi-Dimensional Evaluator for Text
  Generation": disordered or foreign sentences make an incoherent text) and discourse-connective
  corruption.
* consistency: `entity_swap`, `number_swap`, `date_swap`, `negation`,
  `foreign_sentence`, `subject_swap`. Source: FactCC's transformations (entity, number,
  date and pronoun swaps drawn from the source, sentence negation; Kryscinski et al. 2020,
  "Evaluating the Factual Consistency of Abstractive Text Summarization") and UniEval's
  consistency negatives (Zhong et al. 2022).
* fluency: `word_drop`, `word_double`, `word_swap`, `char_noise`,
  `sentence_cut`. Source: BLEURT's pre-training perturbations (word dropping; Sellam et al.
  2020, "BLEURT: Learning Robust Metrics for Text Generation") and SEScore's
  severity-graded insert/delete/replace/swap errors (Xu et al. 2022, "Not All Errors are Equal:
  Learning Text Generation Metrics using Stratified Error Synthesis").
* relevance: `peripheral_swap`, `redundancy`, `off_topic`, `truncation`.
  Source: UniEval's relevance negatives (Zhong et al. 2022: key content removed or replaced by
  irrelevant sentences) and SEScore's deletion errors (Xu et al. 2022).
* degenerate texts, for every aspect: `empty`, `whitespace`, `few_tokens`,
  `repeated_token`; for coherence and fluency `word_shuffle`; for relevance only
  `source_copy` (a copy of the source is consistent and fluent, but not a summary). Severity 1.
  `sanity_cases` builds the sanity suite's degenerate candidates from one real candidate.

Severity (0-1) grows with the extent of the damage: each function's docstring gives its formula
(SEScore grades errors minor/major; here the grade is continuous). It is recorded, not used by
``csem train --pairs`` (every pair has target 1.0).

Text tools (sentence splitting, word spans, surface style) live in `csem.data.text`; named entities,
numbers and dates are found as `csem.data.contrasts.consistency` describes.

Determinism: every random choice comes from a ``random.Random`` seeded with a hash of
``(seed, record key, perturbation name)`` (the record key is its ``id``, else a hash of its texts),
so a record's pairs do not depend on the order of the records. "Another article" is drawn from the
other distinct sources of the input (sorted by hash), so it depends on the set of sources only.

The package has one module per family (``coherence``, ``consistency``, ``fluency``, ``relevance``,
``degenerate``), what they share (``base``) and the pair assembly (``pairs``); every public name is
imported here, so ``csem.data.contrasts.X`` is the import path.
"""

from __future__ import annotations

from csem.data.contrasts.base import (
    ASPECTS, PREFERENCE, Perturbed, Context, PerturbFn, severity, rng_for,
)
from csem.data.contrasts.coherence import (
    sentence_shuffle, sentence_move, CONNECTIVE_SWAPS, connective_swap, connective_drop, connective_insert,
)
from csem.data.contrasts.consistency import (
    number_swap, date_swap, entity_swap, subject_swap, negation, other_sentences, foreign_sentence,
)
from csem.data.contrasts.fluency import (
    word_drop, word_double, word_swap, char_noise, sentence_cut,
)
from csem.data.contrasts.relevance import (
    peripheral_swap, redundancy, off_topic, truncation,
)
from csem.data.contrasts.degenerate import (
    empty, whitespace, few_tokens, repeated_token, source_copy, word_shuffle, truncate_mid, SANITY_CASES,
    sanity_cases,
)
from csem.data.contrasts.pairs import (
    DEGENERATE, DEGENERATE_ONLY, EMPTY_KINDS, FAMILIES, perturbations, record_key, make_pairs, reference_records,
    pairs_by_aspect, summarize,
)
from csem.data.text import split_sentences

__all__ = [
    "ASPECTS", "CONNECTIVE_SWAPS", "Context", "DEGENERATE", "DEGENERATE_ONLY", "EMPTY_KINDS", "FAMILIES",
    "PREFERENCE", "PerturbFn", "Perturbed", "SANITY_CASES", "char_noise", "connective_drop",
    "connective_insert", "connective_swap", "date_swap", "empty", "entity_swap", "few_tokens",
    "foreign_sentence", "make_pairs", "negation", "number_swap", "off_topic", "other_sentences",
    "pairs_by_aspect", "peripheral_swap", "perturbations", "record_key", "redundancy", "reference_records",
    "repeated_token", "rng_for", "sanity_cases", "sentence_cut", "sentence_move", "sentence_shuffle",
    "severity", "source_copy", "split_sentences", "subject_swap", "summarize", "truncate_mid", "truncation",
    "whitespace", "word_double", "word_drop", "word_shuffle", "word_swap",
]
