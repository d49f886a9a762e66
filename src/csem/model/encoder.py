"""Text encoders: an abstract `Encoder`, the transformers implementation `HFEncoder`,
and a registry (the shape of COMET's ``comet/encoders/base.py``).

An encoder maps a padded batch of token ids ``[N, T]`` to pooled sentence embeddings ``[N, d]``:

* ``cls``: the first token's last-layer vector (the CSEM paper's choice);
* ``mean``: masked mean of the last layer (how sentence-transformers trained all-MiniLM-L6-v2 and
  all-mpnet-base-v2);
* ``layerwise-mix``: COMET's layer-wise attention (Rei et al. 2020, after Peters et al. 2018's
  scalar mix): ``gamma * sum_l softmax(w)_l * H_l`` over the embedding output and every layer,
  then masked mean.
"""

from __future__ import annotations

import abc
import contextlib
import re
from pathlib import Path
from typing import Callable, Iterator

import torch
from torch import Tensor, nn

from csem.errors import InputError

ENCODERS: dict[str, type["Encoder"]] = {}


def register_encoder(kind: str) -> Callable[[type["Encoder"]], type["Encoder"]]:
    """Class decorator: make an encoder available to `build_encoder` under ``kind``."""

    def deco(cls: type[Encoder]) -> type[Encoder]:
        ENCODERS[kind] = cls
        return cls

    return deco


class Encoder(nn.Module, abc.ABC):
    """Abstract encoder: tokenise texts and embed padded batches into ``[N, d]`` vectors."""

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Embedding width ``d``."""

    @property
    @abc.abstractmethod
    def max_positions(self) -> int:
        """Longest input (tokens) the encoder accepts."""

    @abc.abstractmethod
    def tokenize(self, texts: list[str], max_length: int) -> list[list[int]]:
        """Token ids (with special tokens, truncated to ``max_length``) of each text."""

    @abc.abstractmethod
    def pad(self, ids: list[list[int]]) -> dict[str, Tensor]:
        """Pad token-id lists into ``input_ids`` / ``attention_mask`` tensors ``[N, T]``."""

    @abc.abstractmethod
    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Pooled embeddings ``[N, d]``."""

    @abc.abstractmethod
    def layer_groups(self) -> list[list[nn.Parameter]]:
        """Encoder parameters from the bottom (embeddings) to the top layer, for layer-wise lr decay."""

    @abc.abstractmethod
    def save_files(self, folder: Path) -> None:
        """Write the encoder's configuration and tokenizer (no weights) into ``folder``."""

    # ---- optional: split forward for partial fine-tuning, and joint (cross-encoder) inputs ----------
    @property
    def n_layers(self) -> int:
        """Number of transformer layers (0 when the encoder cannot be split)."""
        return 0

    def lower_parameters(self, k: int) -> list[nn.Parameter]:
        """Parameters of the embedding layer and of layers ``0..k-1``."""
        raise NotImplementedError(f"{type(self).__name__} cannot run its layers separately")

    def lower(self, input_ids: Tensor, attention_mask: Tensor, k: int) -> Tensor:
        """Token states ``[N, T, d]`` after the embeddings and the first ``k`` layers."""
        raise NotImplementedError(f"{type(self).__name__} cannot run its layers separately")

    def upper(self, hidden: Tensor, attention_mask: Tensor, k: int) -> Tensor:
        """Pooled embeddings ``[N, d]`` from token states after layer ``k`` (runs layers ``k..L-1``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot run its layers separately")

    def tokenize_joint(self, segments: list[list[str]], max_length: int) -> list[list[int]]:
        """Token ids of several texts joined into one sequence per row (for the unified cross-encoder)."""
        raise NotImplementedError(f"{type(self).__name__} cannot join texts into one input")


class LayerwiseMix(nn.Module):
    """Softmax-weighted sum of ``n_layers`` hidden states times a scalar ``gamma`` (COMET's LayerwiseAttention)."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, hidden_states: tuple[Tensor, ...]) -> Tensor:
        w = torch.softmax(self.weights, dim=0)
        stacked = torch.stack(hidden_states, dim=0)  # [L, N, T, d]
        return self.gamma * (w.view(-1, 1, 1, 1).to(stacked.dtype) * stacked).sum(0)


def masked_mean(hidden: Tensor, mask: Tensor) -> Tensor:
    """Mean over positions where ``mask`` is 1. Shapes: ``[N, T, d], [N, T] -> [N, d]``."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


@register_encoder("hf")
class HFEncoder(Encoder):
    """Any transformers ``AutoModel`` with its ``AutoTokenizer``.

    Args:
        name_or_path: a local folder or hub id; ``minilm`` / ``mpnet`` resolve to the packaged,
            offline copies through `csem.assets.resolve_encoder`.
        pooling: ``cls`` | ``mean`` | ``layerwise-mix``.
        load_weights: False builds the architecture from its config only (weights come from a
            saved model's safetensors file).

    Raises:
        ValueError: unknown pooling. OSError: the folder/hub id cannot be loaded.
    """

    def __init__(self, name_or_path: str, pooling: str = "mean", load_weights: bool = True):
        super().__init__()
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from csem.assets import resolve_encoder

        if pooling not in ("cls", "mean", "layerwise-mix"):
            raise InputError(f"unknown pooling '{pooling}'; choose cls, mean or layerwise-mix")
        path = resolve_encoder(name_or_path)
        self.pooling = pooling
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        cfg = AutoConfig.from_pretrained(path, trust_remote_code=False)
        # the pooler of BERT-likes is unused here: leave it out where the architecture allows
        kw = {"add_pooling_layer": False} if cfg.model_type in _WITH_POOLER else {}
        # fp32 master weights whatever dtype the checkpoint was saved in: transformers >= 5 loads a
        # half-precision checkpoint in half precision, and AdamW on fp16 weights turns them into NaN
        # at the first step (seen on an H200 with an fp16 copy of MiniLM). Mixed precision is
        # Lightning's autocast, not the storage dtype.
        import torch
        import transformers
        from packaging.version import Version

        dtype_kw = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
        if load_weights:
            kw[dtype_kw] = torch.float32
        from transformers.utils import logging as hf_logging

        level = hf_logging.get_verbosity()
        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()  # the unused pooler's weights would be reported as "unexpected"
        hf_logging.disable_progress_bar()  # no "Loading weights" bar among csem's own progress bars
        try:
            self.model = (AutoModel.from_pretrained(path, trust_remote_code=False, **kw) if load_weights
                          else AutoModel.from_config(cfg, trust_remote_code=False, **kw))
        finally:
            hf_logging.set_verbosity(level)
            if bar:
                hf_logging.enable_progress_bar()
        n_layers = int(self.model.config.num_hidden_layers) + 1
        self.mix = LayerwiseMix(n_layers) if pooling == "layerwise-mix" else None

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def max_positions(self) -> int:
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        # RoBERTa/MPNet reserve padding_idx + 1 positions
        offset = 2 if getattr(self.model.config, "model_type", "") in ("roberta", "mpnet", "xlm-roberta") else 0
        return int(limit) - offset

    def tokenize(self, texts: list[str], max_length: int) -> list[list[int]]:
        enc = self.tokenizer(texts, truncation=True, max_length=min(max_length, self.max_positions),
                             add_special_tokens=True)
        return enc["input_ids"]

    def pad(self, ids: list[list[int]]) -> dict[str, Tensor]:
        out = self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt")
        return {"input_ids": out["input_ids"], "attention_mask": out["attention_mask"]}

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         output_hidden_states=self.mix is not None)
        if self.pooling == "cls":
            return out.last_hidden_state[:, 0]
        hidden = self.mix(out.hidden_states) if self.mix is not None else out.last_hidden_state
        return masked_mean(hidden, attention_mask)

    # ---- split forward: lower layers (frozen, cached) and upper layers (trained) -------------------
    @property
    def n_layers(self) -> int:
        layers = self._layer_list()
        return len(layers) if layers is not None else 0

    def _layer_list(self) -> nn.ModuleList | None:
        layers = getattr(getattr(self.model, "encoder", None), "layer", None)
        return layers if isinstance(layers, nn.ModuleList) else None

    @contextlib.contextmanager
    def _only_layers(self, lo: int, hi: int, skip_embeddings: bool) -> Iterator[None]:
        """Temporarily run only layers ``lo..hi-1`` (and, with ``skip_embeddings``, no embedding layer).

        The same parameters are used, so gradients reach the real weights. Needs the
        BERT/RoBERTa/MPNet layout (``encoder.layer`` list, ``embeddings(inputs_embeds=...)``).
        """
        layers = self._layer_list()
        if layers is None:
            raise NotImplementedError(f"encoder {type(self.model).__name__} has no encoder.layer list")
        enc, emb = self.model.encoder, self.model.embeddings
        enc.layer = nn.ModuleList(list(layers)[lo:hi])
        if skip_embeddings:
            self.model.embeddings = _PassThrough()
        try:
            yield
        finally:
            enc.layer = layers
            self.model.embeddings = emb

    def lower_parameters(self, k: int) -> list[nn.Parameter]:
        layers = self._layer_list()
        if layers is None:
            raise NotImplementedError(f"encoder {type(self.model).__name__} has no encoder.layer list")
        return list(self.model.embeddings.parameters()) + [p for layer in list(layers)[:k] for p in layer.parameters()]

    def lower(self, input_ids: Tensor, attention_mask: Tensor, k: int) -> Tensor:
        with self._only_layers(0, k, skip_embeddings=False):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state

    def upper(self, hidden: Tensor, attention_mask: Tensor, k: int) -> Tensor:
        if self.mix is not None:
            raise InputError("layerwise-mix pooling needs every layer's output: train all layers with it")
        with self._only_layers(k, self.n_layers, skip_embeddings=True):
            out = self.model(inputs_embeds=hidden, attention_mask=attention_mask)
        if self.pooling == "cls":
            return out.last_hidden_state[:, 0]
        return masked_mean(out.last_hidden_state, attention_mask)

    def tokenize_joint(self, segments: list[list[str]], max_length: int) -> list[list[int]]:
        """One sequence per row: ``[CLS] seg_1 [SEP] seg_2 [SEP] ... seg_S [SEP]``.

        COMET's UnifiedMetric (COMET-Kiwi), BLEURT and UniEval put candidate, reference and source
        into one input. RoBERTa-style encoders (RoBERTa, MPNet, XLM-R) separate parts with two
        separators, as their pair template does. Truncation keeps each segment's start: every
        segment but the last (the candidate, the reference) keeps at most a quarter of
        ``max_length`` tokens, and the last (the source) gets what is left.

        Shapes: ``R`` rows of ``S`` texts -> ``R`` token-id lists of at most ``max_length`` ids.
        """
        limit = min(max_length, self.max_positions)
        n_seg = len(segments[0]) if segments else 0
        flat = [t for row in segments for t in row]
        ids = self.tokenizer(flat, add_special_tokens=False, truncation=True, max_length=limit)["input_ids"]
        tok = self.tokenizer
        n_sep = 2 if self.model.config.model_type in ("roberta", "mpnet", "xlm-roberta") else 1
        cls_id = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        sep_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        quarter = max(1, limit // 4)
        out = []
        for r in range(len(segments)):
            parts = ids[r * n_seg:(r + 1) * n_seg]
            seq = [cls_id]
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                room = limit - len(seq) - 1 - (0 if last else (n_sep - 1))
                if not last:
                    room = min(room, quarter)
                seq += part[: max(0, room)] + ([sep_id] if last else [sep_id] * n_sep)
            out.append(seq[:limit])
        return out

    def layer_groups(self) -> list[list[nn.Parameter]]:
        n = int(self.model.config.num_hidden_layers)
        groups: list[list[nn.Parameter]] = [[] for _ in range(n + 2)]  # embeddings, layers 0..n-1, top
        pat = re.compile(r"(?:^|\.)layers?\.(\d+)\.")
        for name, p in self.model.named_parameters():
            m = pat.search(name)
            if m:
                groups[int(m.group(1)) + 1].append(p)
            elif "embed" in name:
                groups[0].append(p)
            else:
                groups[-1].append(p)
        if self.mix is not None:
            groups[-1].extend(self.mix.parameters())
        return [g for g in groups if g]

    def save_files(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.model.config.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)


_WITH_POOLER = ("bert", "roberta", "xlm-roberta", "mpnet")


class _PassThrough(nn.Module):
    """Stands in for the embedding layer while the upper layers run on cached token states."""

    def forward(self, input_ids: Tensor | None = None, inputs_embeds: Tensor | None = None, **kwargs: object) -> Tensor:
        return inputs_embeds


def build_encoder(kind: str, name_or_path: str, pooling: str, load_weights: bool = True) -> Encoder:
    """Instantiate a registered encoder.

    Raises:
        ValueError: ``kind`` is not registered.
    """
    if kind not in ENCODERS:
        raise InputError(f"unknown encoder kind '{kind}'; registered: {sorted(ENCODERS)}")
    return ENCODERS[kind](name_or_path, pooling=pooling, load_weights=load_weights)
