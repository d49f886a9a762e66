"""The G-Eval LLM judge: prompt rendering (rubrics), scoring (probs | sample | parse), cache, runner.

>>> from csem.judge import judge_records
>>> rows, summary = judge_records(records, "geval/summeval-coherence", "local")

Judges are chosen by backend URI (``local``, ``llama-cpp:PATH``, ``openai:MODEL``); the backends,
their generation config and request policy live one layer down, in [`csem.llm`][].
"""

from __future__ import annotations

from csem.judge.cache import JudgmentCache, judgment_key
from csem.judge.parse import ParseResult, parse_score
from csem.judge.runner import (JudgeSummary, ajudge_records, estimate_records, judge_records, rating_cache_key,
                               rubric_columns)
from csem.judge.scoring import MODES, Judgment, score_probs, score_sample, weighted_score

__all__ = ["JudgmentCache", "judgment_key", "ParseResult", "parse_score", "JudgeSummary", "ajudge_records",
           "estimate_records", "judge_records", "rating_cache_key", "rubric_columns", "MODES", "Judgment", "score_probs", "score_sample",
           "weighted_score"]
