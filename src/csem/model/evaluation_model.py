"""A trained evaluation model as a folder: save, load (no network, no pickle) and score.

Folder layout::

    model.safetensors   encoder + layer mix + heads weights (safetensors, no pickle)
    config.json         csem ModelConfig: mode, features, pooling, aspects with their scales,
                        head sizes, loss, and the encoder reference it was trained from
    encoder/            the encoder's transformers config and tokenizer files (no weights)
    metric_card.json    provenance and validation figures (see csem.model.card)
    metric_card.md      the same, for people

Functional API: :func:`score` (records in, one :class:`ScoreResult` per record out);
object API: :class:`EvaluationModel`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from csem.data.jsonio import write_json
from csem.model.card import write_card
from csem.model.config import ModelConfig
from csem.model.inference import ScoreResult

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
ENCODER_DIR = "encoder"


class ModelFolderError(ValueError):
    """A model folder is missing a file or holds an unreadable one; the message names it."""


class EvaluationModel:
    """A learned evaluation metric (encoder + heads) with its config and metric card.

    Attributes:
        module: the :class:`csem.model.module.EvaluationModule` (a torch module).
        config: its :class:`ModelConfig`; card: the metric card dict (empty if none).
    """

    def __init__(self, module: Any, card: Mapping[str, Any] | None = None):
        self.module = module
        self.config: ModelConfig = module.config
        self.card = dict(card or {})

    @property
    def aspects(self) -> list[str]:
        return self.config.aspects

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device = "cpu") -> "EvaluationModel":
        """Load a saved model folder offline.

        Raises:
            ModelFolderError: the folder, ``config.json``, ``encoder/`` or ``model.safetensors`` is
                missing or unreadable.
        """
        from safetensors.torch import load_file

        from csem.model.module import EvaluationModule

        folder = Path(folder)
        for name in (CONFIG, WEIGHTS, ENCODER_DIR):
            if not (folder / name).exists():
                raise ModelFolderError(f"{folder}: no '{name}' (is this a csem model folder written by `csem train`?)")
        try:
            raw = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
            # folders saved before source_max_length existed encoded whole sources: keep scoring them so
            raw.setdefault("source_max_length", None)
            raw.setdefault("overlap_features", False)  # and had no overlap features
            raw.setdefault("feature_set", "overlap")  # or only the first, linear, overlap set
            raw.setdefault("acceptability_gate", False)  # and no acceptability gate
            config = ModelConfig.model_validate(raw)
        except Exception as exc:
            raise ModelFolderError(f"{folder / CONFIG}: not a valid csem model config: {exc}") from exc
        module = EvaluationModule(config, encoder_path=str(folder / ENCODER_DIR), load_encoder_weights=False)
        try:
            state = load_file(str(folder / WEIGHTS), device="cpu")
        except Exception as exc:
            raise ModelFolderError(f"{folder / WEIGHTS}: cannot read the safetensors file: {exc}") from exc
        missing, unexpected = module.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ModelFolderError(f"{folder / WEIGHTS}: weights do not fit the config "
                                   f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
        module.to(device).eval()
        card_path = folder / "metric_card.json"
        card = json.loads(card_path.read_text(encoding="utf-8")) if card_path.exists() else {}
        return cls(module, card)

    def save(self, folder: str | Path) -> Path:
        """Write the model folder (see the module docstring); returns it."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}
        save_file(state, str(folder / WEIGHTS), metadata={"format": "pt", "csem_config": CONFIG})
        write_json(folder / CONFIG, self.config.model_dump(mode="json"))  # the one JSON writer: atomic, strict
        self.module.encoder.save_files(folder / ENCODER_DIR)
        if self.card:
            write_card(folder, self.card)
        return folder

    @property
    def output_aspects(self) -> dict[str, tuple[float, float]]:
        """Every aspect this model scores -> its scale: the heads, then the card's ensemble aspects
        (a multi-judge student with one head per judge); see :mod:`csem.model.scoring`."""
        from csem.model.scoring import output_aspects

        return output_aspects(self)

    @property
    def default_aspects(self) -> list[str]:
        """The aspects a consumer (rerank, MRT, serve, the TRL reward) scores when it names none."""
        from csem.model.scoring import default_aspects

        return default_aspects(self)

    def score(self, records: Sequence[Mapping[str, Any]], batch_size: int = 64, mc_dropout: int = 0,
              precision: str = "auto", share_encodings: bool = True, *, aspects: Sequence[str] | None = None,
              degenerate: str = "floor") -> list[ScoreResult]:
        """Score records: one :class:`ScoreResult` (id, aspect -> score) per record, in input order,
        for every output aspect (heads on their label scale, ensemble aspects on [0, 1]); an empty,
        whitespace or NUL-containing candidate gets each scale's minimum (``degenerate="error"``:
        :class:`csem.model.scoring.DegenerateTextError`).

        The one scoring path: :func:`csem.model.scoring.score_results` (arguments and errors there).
        """
        from csem.model.scoring import score_results

        return score_results(self, records, aspects=aspects, degenerate=degenerate, batch_size=batch_size,
                             mc_dropout=mc_dropout, precision=precision, share_encodings=share_encodings)

    def score_columns(self, records: Sequence[Mapping[str, Any]], *, aspects: Sequence[str] | None = None,
                      name: str | None = None, **kwargs: Any) -> dict[str, list[float | None]]:
        """``{metric.<name>.<aspect>: one score per record}`` (:func:`csem.model.scoring.score_columns`)."""
        from csem.model.scoring import score_columns

        return score_columns(self, records, aspects=aspects, name=name, **kwargs)

    def score_records(self, records: Sequence[Mapping[str, Any]], name: str | None = None,
                      **kwargs: Any) -> list[dict]:
        """Copies of ``records`` with ``metric.<name>.<aspect>`` columns for every output aspect (and
        ``...<aspect>.std`` with MC dropout); ``name`` defaults to the model's ``config.name``. Other
        columns are kept. Keyword arguments: :meth:`score`'s."""
        from csem.model.scoring import add_columns

        return add_columns(records, self.score_columns(records, name=name, **kwargs))


def score(records: Sequence[Mapping[str, Any]], model: str | Path | EvaluationModel, **kwargs: Any) -> list[ScoreResult]:
    """Functional API: score ``records`` with a model folder (or a loaded :class:`EvaluationModel`).

    Keyword arguments go to :meth:`EvaluationModel.score`.
    """
    m = model if isinstance(model, EvaluationModel) else EvaluationModel.load(model)
    return m.score(records, **kwargs)
