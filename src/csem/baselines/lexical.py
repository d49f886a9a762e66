"""Lexical baselines that could explain a student with lexical features: extractiveness, and the
student's own lexical features fitted alone to the training labels (no encoder).

* [`length`][csem.baselines.lexical.length]: the candidate's number of words (whitespace-separated). Nothing is fitted.
* [`extractiveness`][csem.baselines.lexical.extractiveness]: the share of the candidate's trigrams found in its source, i.e.
  ``1 - novel trigram share`` of `csem.model.features.overlap_features` (See et al. 2017;
  Grusky et al. 2018). Nothing is fitted.
* [`overlap_least_squares`][csem.baselines.lexical.overlap_least_squares]: per label column, ordinary least squares (with an intercept) of
  the training labels on the ``overlap`` features (novel 1/2/3-gram shares against the source,
  trigram repetition, length: `csem.model.features.overlap_features`).
* [`lexical_mlp`][csem.baselines.lexical.lexical_mlp]: the ``lexical`` student's wide part alone: its feature MLP
  (`csem.model.module.EvaluationModule`, ``feature_set="lexical"``) pre-fitted on the
  training labels exactly as before the student trains (``init_overlap_heads``), then applied to
  the test records; no encoder output is used.

Every function reads ``candidate`` and ``source`` strings from csem records and never modifies
them; a record without either raises ``ValueError`` naming its ``id``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from csem.errors import InputError


def _texts(records: Sequence[Mapping[str, Any]], what: str) -> list[tuple[str, str]]:
    out = []
    for i, r in enumerate(records):
        for field in ("candidate", "source"):
            if not isinstance(r.get(field), str):
                raise InputError(f"{what}: record {r.get('id', i)!r} has no {field!r} string")
        out.append((r["candidate"], r["source"]))
    return out


def _columns(labels: str | Sequence[str]) -> list[str]:
    cols = [labels] if isinstance(labels, str) else list(labels)
    if not cols:
        raise InputError("no label column given")
    return cols


def length(records: Sequence[Mapping[str, Any]]) -> list[float]:
    """Number of whitespace-separated words of each candidate (0 for an empty one): the first thing a
    judge's scores may track (LLM judges favour longer answers; Dubois et al. 2024, length-controlled
    AlpacaEval).

    Args:
        records: csem records with a ``candidate`` string.

    Returns:
        One float per record, >= 0.

    Raises:
        ValueError: a record without a ``candidate`` string (names its ``id``).
    """
    out = []
    for i, r in enumerate(records):
        if not isinstance(r.get("candidate"), str):
            raise InputError(f"length: record {r.get('id', i)!r} has no 'candidate' string")
        out.append(float(len(r["candidate"].split())))
    return out


def extractiveness(records: Sequence[Mapping[str, Any]]) -> list[float]:
    """Share of each candidate's word trigrams that occur in its source (csem's tokens: lower-cased
    ``\\w+|[^\\w\\s]``), in [0, 1]; 1 = every trigram copied. ``1 - novel_3`` of
    `csem.model.features.overlap_features`; a candidate of fewer than 3 tokens scores 1.

    Args:
        records: csem records with ``candidate`` and ``source`` strings.

    Returns:
        One float per record.

    Raises:
        ValueError: a record without a ``candidate`` or ``source`` string (names its ``id``).
    """
    from csem.model.features import overlap_features

    return [1.0 - overlap_features(cand, [src])[2] for cand, src in _texts(records, "extractiveness")]


def overlap_least_squares(train: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]],
                          labels: str | Sequence[str], feature_set: str = "overlap") -> dict[str, list[float]]:
    """The ``overlap`` features alone, fitted to the training labels by least squares.

    For each label column: ``w = argmin ||X w - y||^2`` over the training rows that carry a label,
    ``X`` = the 5 features of `csem.model.features.overlap_features` (candidate against its
    source; ``feature_set="novelty"``: the 4 without the length, the student's ``novelty`` set) plus a
    constant 1 (``numpy.linalg.lstsq``); the test rows get ``X_test w``.

    Args:
        train: records with ``candidate``, ``source`` and the label columns (None/NaN = no label).
        test: records with ``candidate`` and ``source``.
        labels: one label column or several (one fit each).
        feature_set: ``overlap`` (default) or ``novelty`` (`csem.model.features.FEATURE_SETS`).

    Returns:
        ``{label column: [score per test record]}`` on the labels' scale (unbounded: a linear fit).

    Raises:
        ValueError: a record without ``candidate``/``source``; a label that is not a number; a
            column with fewer labelled training rows than the 6 (novelty: 5) coefficients; another
            feature set.
    """
    import numpy as np

    from csem.model.features import pair_features
    from csem.model.validation import label_value

    if feature_set not in ("overlap", "novelty"):
        raise InputError(f"overlap least squares: feature set '{feature_set}' is not one of overlap, novelty")
    x_tr = np.array([pair_features(feature_set, c, [s]) + [1.0] for c, s in _texts(train, "overlap least squares")])
    x_te = np.array([pair_features(feature_set, c, [s]) + [1.0] for c, s in _texts(test, "overlap least squares")])
    out = {}
    for col in _columns(labels):
        y = np.array([np.nan if (v := label_value(r.get(col), f"training record {r.get('id', i)!r}, column {col!r}"))
                      is None else v for i, r in enumerate(train)], dtype=float)
        ok = ~np.isnan(y)
        if int(ok.sum()) < x_tr.shape[1]:
            raise InputError(f"overlap least squares: {int(ok.sum())} training rows labelled in {col!r}, "
                             f"fewer than the {x_tr.shape[1]} coefficients")
        w, *_ = np.linalg.lstsq(x_tr[ok], y[ok], rcond=None)
        out[col] = [float(v) for v in (x_te @ w if len(x_te) else [])]
    return out


def lexical_mlp(train: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]],
                labels: str | Sequence[str], *, label_range: tuple[float, float] | None = None,
                encoder: str | None = None, seed: int = 12) -> dict[str, list[float]]:
    """The ``lexical`` student's feature MLP alone, pre-fitted on the training labels, no encoder.

    Builds an `csem.model.module.EvaluationModule` with ``feature_set="lexical"`` (one head
    per label column, ``ref-free``), standardises the 28 features of
    `csem.model.features.lexical_features` with the training rows' means and deviations,
    fits every column's feature MLP jointly with the student's loss (``init_overlap_heads``:
    ``TrainConfig.feature_prefit_steps`` AdamW steps) and scores ``test`` through those MLPs only,
    mapped back to the label scale (``denormalise``). The encoder is built (its tokenizer is used
    to batch the records) but its output is not.

    Args:
        train: records with ``candidate``, ``source`` and the label columns.
        test: records with ``candidate`` and ``source``.
        labels: the label columns (fitted together, as the student's heads are).
        label_range: ``(min, max)`` of the labels' scale; default the training labels' observed
            range (over all columns).
        encoder: the [`csem.model.ModelConfig`][] encoder (default its default, MiniLM).
        seed: seeds the MLPs' initialisation (``lightning.seed_everything``).

    Returns:
        ``{label column: [score per test record]}``, inside ``label_range``.

    Raises:
        ValueError: a record without ``candidate``/``source``; a label that is not a number; no
            labelled training row; an empty label range.
    """
    import lightning as L
    import torch

    from csem.model import LabelSpec, ModelConfig, TrainConfig
    from csem.model.batching import BatchBuilder
    from csem.model.module import EvaluationModule
    from csem.model.validation import aspect_name, label_value

    cols = _columns(labels)
    _texts(train, "lexical MLP")
    _texts(test, "lexical MLP")
    seen = [v for col in cols for i, r in enumerate(train)
            if (v := label_value(r.get(col), f"training record {r.get('id', i)!r}, column {col!r}")) is not None]
    if not seen:
        raise InputError(f"lexical MLP: no training record has a label in {cols}")
    if label_range is None:
        label_range = (min(seen), max(seen))
    lo, hi = map(float, label_range)
    if not hi > lo:
        raise InputError(f"lexical MLP: empty label range {label_range}")
    L.seed_everything(seed, verbose=False)
    specs = [LabelSpec(aspect=aspect_name(c, cols), column=c, min=lo, max=hi) for c in cols]
    cfg = ModelConfig(name="lexmlp", feature_set="lexical", labels=specs, **({"encoder": encoder} if encoder else {}))
    module = EvaluationModule(cfg, TrainConfig(seed=seed))
    build = lambda recs, specs_: BatchBuilder(module.encoder, "ref-free", 32, specs_, overlap="lexical")(recs)  # noqa: E731
    module.init_overlap_heads(build(train, specs))
    module.eval()
    if not test:
        return {c: [] for c in cols}
    with torch.no_grad():
        lex = (build(test, None).overlap - module.lex_mean) / module.lex_std
        out = module.denormalise(torch.cat([module.overlap_heads[s.aspect](lex) for s in specs], dim=1))
    return {c: [float(v) for v in out[:, k]] for k, c in enumerate(cols)}
