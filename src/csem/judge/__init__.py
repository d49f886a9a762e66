"""The G-Eval LLM judge: prompt rendering (rubrics), scoring (probs | sample | parse), cache, runner.

>>> from csem.judge import judge_records
>>> rows, summary = judge_records(records, "geval/summeval-coherence", "local")  # doctest: +SKIP

Backends are chosen by URI (``local``, ``llama-cpp:PATH``, ``openai:MODEL``); see
:mod:`csem.judge.backends`.
"""

from __future__ import annotations

from csem.judge.backends.base import (Backend, BackendError, GenerationConfig, GenerationResult, LogprobsUnsupported,
                                      ScoreDistribution, get_backend, register_backend, run_sync)
from csem.judge.cache import JudgmentCache, judgment_key
from csem.judge.parse import ParseResult, parse_score
from csem.judge.runner import JudgeSummary, ajudge_records, judge_records, score_columns
from csem.judge.scoring import MODES, Judgment, score_parse, score_probs, score_sample, weighted_score

__all__ = ["Backend", "BackendError", "GenerationConfig", "GenerationResult", "LogprobsUnsupported",
           "ScoreDistribution", "get_backend", "register_backend", "run_sync", "JudgmentCache", "judgment_key",
           "ParseResult", "parse_score", "JudgeSummary", "ajudge_records", "judge_records", "score_columns", "MODES",
           "Judgment", "score_parse", "score_probs", "score_sample", "weighted_score"]
