"""Loaders of the human-judgment sets other than SummEval (which lives in :mod:`csem.data.datasets`).

:data:`REGISTRY` maps the CLI dataset names to the loader functions; each takes a local path
(file or folder) as first argument and returns csem records with ``human.<aspect>`` scores.
"""

from __future__ import annotations

from csem.data.loaders._io import DatasetError, default_data_dir
from csem.data.loaders.dialogue import load_topical_chat, load_topical_chat_llm_ratings
from csem.data.loaders.mt import load_wmt21_mqm, load_wmt23_da
from csem.data.loaders.summarization import load_newsroom, load_qags, load_realsumm, load_summeval_geval_metriceval

REGISTRY = {
    "topical_chat": load_topical_chat,
    "topical-chat-chiang2023": load_topical_chat_llm_ratings,
    "newsroom": load_newsroom,
    "realsumm": load_realsumm,
    "qags": load_qags,
    "summeval-geval-metriceval": load_summeval_geval_metriceval,
    "wmt21-mqm": load_wmt21_mqm,
    "wmt23-da": load_wmt23_da,
}

__all__ = ["REGISTRY", "DatasetError", "default_data_dir", "load_newsroom", "load_qags", "load_realsumm",
           "load_summeval_geval_metriceval", "load_topical_chat", "load_topical_chat_llm_ratings",
           "load_wmt21_mqm", "load_wmt23_da"]
