"""Human-judgment datasets by name: the one registry ([`DATASETS`][csem.data.datasets.DATASETS]), [`load_dataset`][csem.data.datasets.load_dataset], and
every loader re-exported (one import place).

Every loader lives in `csem.data.loaders` (SummEval and its published LLM ratings in
`csem.data.loaders.summeval`; dialogue, MT and other summarisation sets beside it), takes a
local path (a file, or the dataset's folder) and defaults to the folder of the same name under
[`default_data_dir`][csem.data.datasets.default_data_dir] (``$CSEM_DATA``, else ``../shared/data`` beside the checkout). Nothing is
downloaded: each docstring says where to get the data. Records follow [`csem.data.records`][]
(``id``, ``doc_id``, ``system_id``, ``source``, ``candidate``, ``reference``, score columns);
dataset-specific fields (raw annotations, tokenised texts) are kept under their own names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from csem.data.loaders import (
    SUMMEVAL_ASPECTS,
    SUMMEVAL_SYSTEMS,
    DatasetError,
    default_data_dir,
    load_newsroom,
    load_qags,
    load_realsumm,
    load_summeval,
    load_summeval_geval_metriceval,
    load_summeval_llm_ratings,
    load_topical_chat,
    load_topical_chat_llm_ratings,
    load_wmt21_mqm,
    load_wmt23_da,
)
from csem.errors import InputError

DATASETS: dict[str, Callable[..., list[dict]]] = {
    "summeval": load_summeval,
    "summeval-shen2023": load_summeval_llm_ratings,
    "summeval-geval-metriceval": load_summeval_geval_metriceval,
    "topical_chat": load_topical_chat,
    "topical-chat-chiang2023": load_topical_chat_llm_ratings,
    "newsroom": load_newsroom,
    "realsumm": load_realsumm,
    "qags": load_qags,
    "wmt21-mqm": load_wmt21_mqm,
    "wmt23-da": load_wmt23_da,
}
"""CLI name (``csem meta-eval --data NAME``) -> loader ``f(path=None, **options) -> records``."""

__all__ = ["DATASETS", "SUMMEVAL_ASPECTS", "SUMMEVAL_SYSTEMS", "DatasetError", "dataset_names", "default_data_dir",
           "load_dataset", "load_newsroom", "load_qags", "load_realsumm", "load_summeval",
           "load_summeval_geval_metriceval", "load_summeval_llm_ratings", "load_topical_chat",
           "load_topical_chat_llm_ratings", "load_wmt21_mqm", "load_wmt23_da"]


def _key(name: str) -> str:
    return name.lower().replace("_", "-")


def dataset_names() -> list[str]:
    """Names accepted by [`load_dataset`][csem.data.datasets.load_dataset] and ``csem meta-eval --data``."""
    return sorted(DATASETS)


def load_dataset(name: str, path: str | Path | None = None, **kwargs: Any) -> list[dict]:
    """Load a dataset by its CLI name (``summeval``, ``topical_chat``, ``wmt21-mqm`` ...; ``_`` and ``-``
    are interchangeable).

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    norm = {_key(k): v for k, v in DATASETS.items()}
    if _key(name) not in norm:
        raise InputError(f"unknown dataset '{name}'; known: {dataset_names()}")
    return norm[_key(name)](path, **kwargs)
