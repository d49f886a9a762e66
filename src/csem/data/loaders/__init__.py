"""Loaders of the human-judgment sets, one module per family; each takes a local path (file or
folder) as first argument and returns csem records with ``human.<aspect>`` scores. The registry of
CLI names is [`csem.data.datasets.DATASETS`][].
"""

from __future__ import annotations

from csem.data.loaders._io import DatasetError, default_data_dir
from csem.data.loaders.dialogue import load_topical_chat, load_topical_chat_llm_ratings
from csem.data.loaders.mt import load_wmt21_mqm, load_wmt23_da
from csem.data.loaders.summarization import load_newsroom, load_qags, load_realsumm, load_summeval_geval_metriceval
from csem.data.loaders.summeval import SUMMEVAL_ASPECTS, SUMMEVAL_SYSTEMS, load_summeval, load_summeval_llm_ratings

__all__ = ["SUMMEVAL_ASPECTS", "SUMMEVAL_SYSTEMS", "DatasetError", "default_data_dir", "load_newsroom", "load_qags",
           "load_realsumm", "load_summeval", "load_summeval_geval_metriceval", "load_summeval_llm_ratings",
           "load_topical_chat", "load_topical_chat_llm_ratings", "load_wmt21_mqm", "load_wmt23_da"]
