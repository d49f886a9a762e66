"""A trained evaluation model as a folder: save, load (no network, no pickle) and score.

Folder layout::

    model.safetensors   encoder + layer mix + heads weights (safetensors, no pickle); a seed
                        ensemble (``ModelConfig.members`` > 1) holds each member's under
                        ``members.<i>.``; a base-relative folder (``save(base_relative=True)``,
                        metadata ``csem_base_encoder``) only those that differ from that encoder's
    config.json         csem ModelConfig: mode, features, pooling, aspects with their scales,
                        head sizes, loss, and the encoder reference it was trained from
    encoder/            the encoder's transformers config and tokenizer files (no weights)
    metric_card.json    provenance and validation figures (see csem.model.card)
    metric_card.md      the same, for people

Scoring: [`EvaluationModel.predict`][csem.model.EvaluationModel.predict] (records in, a
[`csem.model.prediction.Prediction`][] out), the one scoring method.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from csem.data.jsonio import write_json
from csem.errors import InputError
from csem.model.card import write_card
from csem.model.config import ModelConfig
from csem.model.prediction import Prediction

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
ENCODER_DIR = "encoder"


class ModelFolderError(InputError):
    """A model folder is missing a file or holds an unreadable one; the message names it."""


class EvaluationModel:
    """A learned evaluation metric (encoder + heads) with its config and metric card.

    Attributes:
        module: the `csem.model.module.EvaluationModule` (a torch module); of a seed ensemble,
            its first member.
        members: every member module (``[module]`` for one student); scores are their mean
            ([`EvaluationModel.predict`][csem.model.EvaluationModel.predict]).
        config: the [`ModelConfig`][csem.model.ModelConfig] (``members`` = ``len(members)``); card: the metric card
            dict (empty if none).
    """

    def __init__(self, module: Any, card: Mapping[str, Any] | None = None, members: Sequence[Any] | None = None):
        self.members = list(members) if members else [module]
        self.module = self.members[0]
        self.config: ModelConfig = self.module.config.model_copy(update={"members": len(self.members)})
        self.card = dict(card or {})

    @classmethod
    def ensemble(cls, models: Sequence["EvaluationModel"], seeds: Sequence[int] | None = None) -> "EvaluationModel":
        """A seed ensemble of trained students with one config (``ModelConfig.members``): the first
        one's card, with ``members`` (each member's seed and validation figures) added.

        Raises:
            ValueError: no models, or students whose configs differ beyond ``members``.
        """
        if not models:
            raise InputError("an ensemble needs at least one model")
        first = models[0].config.model_copy(update={"members": 1})
        for m in models[1:]:
            if m.config.model_copy(update={"members": 1}) != first:
                raise InputError("the members of an ensemble must share one config (encoder, mode, heads, scales)")
        card = dict(models[0].card)
        if isinstance(card.get("model"), dict):  # the card's config is the ensemble's, not the first member's
            card["model"] = {**card["model"], "members": len(models)}
        if len(models) > 1:
            card["members"] = [{"seed": None if seeds is None else int(seeds[i]),
                                "validation": m.card.get("validation")} for i, m in enumerate(models)]
        return cls(models[0].module, card, members=[mod for m in models for mod in m.members])

    def member(self, i: int) -> "EvaluationModel":
        """Member ``i`` of a seed ensemble as a model of its own (its ensemble's card)."""
        card = {k: v for k, v in self.card.items() if k != "members"}
        return EvaluationModel(self.members[i], card)

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
        try:
            from safetensors import safe_open

            with safe_open(str(folder / WEIGHTS), framework="pt") as f:
                base = (f.metadata() or {}).get("csem_base_encoder")
            state = load_file(str(folder / WEIGHTS), device="cpu")
        except Exception as exc:
            raise ModelFolderError(f"{folder / WEIGHTS}: cannot read the safetensors file: {exc}") from exc
        if base is not None and base != config.encoder:
            raise ModelFolderError(f"{folder / WEIGHTS}: stored relative to the encoder '{base}', but the config "
                                   f"names '{config.encoder}'")
        if config.members > 1:
            stray = [k for k in state if not (k.startswith("members.") and k.split(".")[1].isdigit()
                                              and int(k.split(".")[1]) < config.members)]
            if stray:
                raise ModelFolderError(f"{folder / WEIGHTS}: weights outside the {config.members} members of "
                                       f"the config: {stray[:5]}")
        modules = []
        for i in range(config.members):
            if base is None:
                module = EvaluationModule(config, encoder_path=str(folder / ENCODER_DIR), load_encoder_weights=False)
            else:  # base-relative weights (save(base_relative=True)): the base encoder's, then the stored ones
                module = EvaluationModule(config, encoder_path=config.encoder, load_encoder_weights=True)
            prefix = _member_prefix(i, config.members)
            part = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
            own = module.state_dict()
            part = {k: (v.to(own[k].dtype) if k in own else v) for k, v in part.items()}
            missing, unexpected = module.load_state_dict(part, strict=False)
            if base is not None:
                missing = [k for k in missing if not k.startswith("encoder.")]
            if missing or unexpected:
                raise ModelFolderError(f"{folder / WEIGHTS}: weights do not fit the config "
                                       f"(member {i}: missing {missing[:5]}, unexpected {unexpected[:5]})")
            modules.append(module.to(device).eval())
        card_path = folder / "metric_card.json"
        card = json.loads(card_path.read_text(encoding="utf-8")) if card_path.exists() else {}
        return cls(modules[0], card, members=modules)

    def save(self, folder: str | Path, *, base_relative: bool = False) -> Path:
        """Write the model folder (see the module docstring); returns it.

        Args:
            base_relative: store only the weights that differ from the encoder ``config.encoder`` names
                (e.g. the packaged ``minilm``), in float16; loading fills the rest from that encoder.
                For students shipped inside csem (`csem.model.pretrained`): a MiniLM student with
                its top 2 layers trained takes ~9 MB instead of ~90 MB. The float16 rounding moved the
                scores of the shipped ``news-relevance-minilm`` by at most 0.009 (mean 0.0005) on its 1-5
                scale over 300 test candidates (Spearman with the float32 scores 0.9999996).
        """
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        metadata = {"format": "pt", "csem_config": CONFIG}
        base: dict = {}
        if base_relative:
            from csem.model.encoder import build_encoder

            encoder = build_encoder(self.config.encoder_kind, self.config.encoder, self.config.pooling)
            base = {"encoder." + k: v for k, v in encoder.state_dict().items()}
            metadata["csem_base_encoder"] = self.config.encoder
        state = {}
        for i, module in enumerate(self.members):
            for k, v in module.state_dict().items():
                v = v.detach().cpu().contiguous()
                if k in base and torch.equal(v, base[k].to(v.dtype)):
                    continue  # the base encoder's own weight
                state[_member_prefix(i, len(self.members)) + k] = v.half() if base_relative and v.is_floating_point() else v
        save_file(state, str(folder / WEIGHTS), metadata=metadata)
        write_json(folder / CONFIG, self.config.model_dump(mode="json"))  # the one JSON writer: atomic, strict
        self.module.encoder.save_files(folder / ENCODER_DIR)
        if self.card:
            write_card(folder, self.card)
        return folder

    @property
    def output_aspects(self) -> dict[str, tuple[float, float]]:
        """Every aspect this model scores -> its scale: the heads, then the card's ensemble aspects
        (a multi-judge student with one head per judge); see `csem.model.scoring`."""
        from csem.model.scoring import output_aspects

        return output_aspects(self)

    @property
    def default_aspects(self) -> list[str]:
        """The aspects a consumer (rerank, MRT, serve, the TRL reward) scores when it names none."""
        from csem.model.scoring import default_aspects

        return default_aspects(self)

    @property
    def shared_layers(self) -> int | None:
        """How much of the encoder the members of a seed ensemble share (``None`` for one student),
        found once by comparing their weights (`csem.model.inference.shared_depth`): ``-1`` the
        whole encoder, ``k`` > 0 the embedding layer and layers ``0..k-1``, computed once per text
        when scoring."""
        if not hasattr(self, "_shared_layers"):
            from csem.model.inference import shared_depth

            self._shared_layers = shared_depth(self.members)
        return self._shared_layers

    def predict(self, records: Any, *, aspects: Sequence[str] | None = None, batch_size: int = 64,
                mc_dropout: int = 0, precision: str = "auto", name: str | None = None,
                degenerate: str = "floor", share_encodings: bool = True, defer: float | None = None,
                defer_budget: int | None = None, defer_by: str | None = None, judge: str | None = None,
                rubric: str | Sequence[str] | None = None, **cascade: Any) -> Prediction:
        """Score records: the one scoring method, which every consumer calls (COMET's ``predict``).

        Args:
            records: dicts with ``candidate`` and the texts the model's mode needs (``source``,
                ``reference``: one or a list); ``id`` keys the results (records without one are keyed
                by position; ids need not be unique, but [`Prediction.by_id`][csem.model.prediction.Prediction.by_id]
                needs them to be). A records file (JSONL, CSV/TSV, Parquet), a ``package:NAME``
                sample file or a dataset name is read with `csem.read_data`.
            aspects: output aspects to score (default: every one: each head, on its label scale,
                and each multi-judge ensemble aspect, on [0, 1]).
            batch_size: most sequences per encoder call (length-bucketed).
            mc_dropout: MC-dropout samples of the heads (0 = off); adds ``std``.
            precision: ``auto`` | ``fp32`` | ``bf16`` | ``fp16`` (`csem.model.inference.resolve_precision`).
            name: metric name in the columns (default ``config.name``).
            degenerate: ``floor``: an empty, whitespace-only or NUL-containing candidate gets each
                scale's minimum (std 0) without reaching the encoder | ``error``: it raises.
            share_encodings: False re-encodes every record's texts (the naive scorer, for benchmarks).
            defer, defer_budget: a cascade ([`csem.apply.cascade`][]): the share (0-1) or number of
                records the student is least sure of that go to ``judge`` on ``rubric``; the result's
                scores combine the two, ``source`` says which gave each row, ``cascade`` reports it.
            defer_by: the deferral rule (``std`` | ``mc`` | ``neighbours`` | ``random``; default
                ``std`` for a seed ensemble, else ``mc``). judge: the judge URI. rubric: rubric id(s).
            cascade: further settings of [`csem.apply.cascade.predict_deferred`][] (``judge_cache``,
                ``judge_rescale``, ``judge_options``, ``dry_run`` ...).

        Returns:
            A [`Prediction`][csem.model.prediction.Prediction]: columns ``metric.<name>.<aspect>``,
            one score per record in input order (the order of the records never changes a score),
            ``std`` (seed-ensemble members' deviation, or MC dropout), system scores, settings hash.

        Raises:
            csem.model.scoring.DegenerateTextError: ``degenerate="error"`` and a degenerate candidate.
            ValueError: an aspect the model does not score; unknown ``degenerate`` or precision; a
                source or reference the mode needs is missing, empty or holds a NUL character (names
                the record and field).
        """
        from csem.model.scoring import predict

        if isinstance(records, (str, Path)):
            from csem.api import read_data

            records = read_data(records)
        pred = predict(self, records, aspects=aspects, name=name, batch_size=batch_size, mc_dropout=mc_dropout,
                       precision=precision, share_encodings=share_encodings, degenerate=degenerate)
        if defer is None and defer_budget is None:
            return pred
        from csem.apply.cascade import predict_deferred

        options = dict(aspects=aspects, name=name, batch_size=batch_size, precision=precision,
                       share_encodings=share_encodings, degenerate=degenerate)
        return predict_deferred(self, records, pred, defer=defer, defer_budget=defer_budget, defer_by=defer_by,
                                judge=judge, rubric=rubric, mc_dropout=mc_dropout, score_options=options, **cascade)


def _member_prefix(i: int, members: int) -> str:
    """The weight-name prefix of member ``i`` in ``model.safetensors`` (none for one student)."""
    return f"members.{i}." if members > 1 else ""

