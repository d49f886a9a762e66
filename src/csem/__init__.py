"""csem: turn an LLM judge into a fast, customised, learned evaluation metric.

Two ideas, end to end: the G-Eval LLM judge (rubric -> prompt -> probability-weighted score) and
CSEM (Wang et al.): collect candidates, annotate them with the judge, train a small encoder
model on the judge's ratings, meta-evaluate it against human judgments, and apply it.

The public API, one function per stage ([`csem.api`][]; imported on first use, so ``import csem``
loads neither torch nor llama.cpp)::

    import csem
    labelled, summary = csem.judge(records, "geval/summeval-coherence", "local")
    csem.annotate("cands.jsonl", "csem/summ-coherence-ref-free", "local", out="labelled.jsonl")
    model = csem.train("labelled.jsonl", "judge.coherence", out_dir="my-metric")
    result = csem.load_metric("my-metric").predict(new_records)   # .scores, .system_score, .hash
    table = csem.evaluate(scored_records)                       # meta-evaluation
    chosen = csem.rerank(nbest_records, ["my-metric"]).chosen

``csem.judge`` is also the package [`csem.judge`][] (``csem.judge.judge_records`` ...); calling it
calls [`csem.api.judge`][].
"""

from __future__ import annotations

import sys
import types
from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API = ("annotate", "evaluate", "load_metric", "rerank", "train")
__all__ = ["__version__", "judge", *_API]


class _CallableJudgePackage(types.ModuleType):
    """The package [`csem.judge`][], callable as [`csem.api.judge`][]."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from csem.api import judge

        return judge(*args, **kwargs)


class _CsemModule(types.ModuleType):
    # the import system binds each subpackage as an attribute of its parent; the one named like an
    # API function (csem.judge) is made callable when it is bound
    def __setattr__(self, name: str, value: Any) -> None:
        if name == "judge" and type(value) is types.ModuleType:
            value.__class__ = _CallableJudgePackage
        super().__setattr__(name, value)


def __getattr__(name: str) -> Any:  # lazy: the API and the judge package load on first use
    if name == "judge":
        return import_module("csem.judge")
    if name in _API:
        return getattr(import_module("csem.api"), name)
    raise AttributeError(f"module 'csem' has no attribute '{name}'")


sys.modules[__name__].__class__ = _CsemModule
