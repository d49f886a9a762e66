"""Choose a training recipe by grouped k-fold cross-validation on the training data only.

A *recipe* is a `ModelConfig` (architecture, encoder, pooling, loss, lengths) plus a
`TrainConfig` (learning rates, epochs, layers trained). `cross_validate` splits the
training records into ``k`` folds by group (``doc_id``: every candidate of a source lands in the
same fold, so a fold's sources are unseen, as the test sources will be), trains each recipe on
``k - 1`` folds, and validates on the held-out fold after every epoch (summary-level Kendall tau-b,
Spearman and Pearson with the labels, and with ``human.<aspect>`` where the records carry it).
The number of epochs is part of the recipe's choice: the epoch with the best mean held-out
correlation over the folds is reported (so no test data is ever looked at).

Recipes that fine-tune only the top layers (``TrainConfig.train_layers``) with the same encoder,
architecture and lengths share one cache of the frozen lower layers' token states across all
their folds, so the lower layers run once per distinct text.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from csem.errors import InputError
from csem.model.config import ModelConfig, TrainConfig


@dataclass
class Recipe:
    """A named training recipe: architecture + optimisation settings."""

    name: str
    config: ModelConfig
    train_config: TrainConfig


@dataclass
class CVResult:
    """Cross-validation figures of one recipe.

    Attributes:
        name: the recipe's name.
        per_epoch: epoch (1-based) -> ``{"label": {method: mean over folds}, "human": {...} | None,
            "label_std": {method: std over folds}}``; a method's value is the mean over aspects
            of the held-out fold's summary-level (or dataset-level) correlation.
        best_epoch: the epoch with the highest mean ``monitor`` correlation with the labels.
        seconds: wall-clock seconds of all folds; seconds_per_epoch: mean over fold epochs.
        folds: number of folds run.
    """

    name: str
    per_epoch: dict[int, dict[str, Any]] = field(default_factory=dict)
    best_epoch: int = 0
    seconds: float = 0.0
    seconds_per_epoch: float = 0.0
    folds: int = 0

    def at(self, epoch: int | None = None) -> dict[str, Any]:
        """The figures of ``epoch`` (default: the best one)."""
        return self.per_epoch[epoch or self.best_epoch]


def grouped_folds(records: Sequence[Mapping[str, Any]], k: int, key: str = "doc_id",
                  seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """``k`` (train indices, held-out indices) splits with every group in exactly one held-out fold.

    Groups are shuffled with ``seed`` and dealt round-robin, so fold sizes differ by at most one group.

    Raises:
        ValueError: fewer groups than folds, or ``k < 2``.
    """
    groups: dict[Any, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.get(key), []).append(i)
    names = sorted(groups, key=str)
    if k < 2 or len(names) < k:
        raise InputError(f"{k}-fold cross-validation needs k >= 2 and at least k groups ('{key}'); got {len(names)}")
    random.Random(seed).shuffle(names)
    fold_of = {g: j % k for j, g in enumerate(names)}
    out = []
    for f in range(k):
        dev = [i for g in names if fold_of[g] == f for i in groups[g]]
        trn = [i for g in names if fold_of[g] != f for i in groups[g]]
        out.append((sorted(trn), sorted(dev)))
    return out


def _cache_key(recipe: Recipe) -> tuple | None:
    c, t = recipe.config, recipe.train_config
    if t.train_layers is None:
        return None
    return (c.encoder, c.encoder_kind, c.architecture, c.mode, c.max_length, c.source_max_length, t.train_layers)


def cross_validate(
    records: Sequence[Mapping[str, Any]],
    label_cols: Sequence[str] | str,
    recipes: Sequence[Recipe],
    *,
    folds: int = 5,
    group_key: str = "doc_id",
    seed: int = 0,
    label_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    monitor: str = "spearman",
    on_fold: Callable[[str, int, Mapping[str, Any]], None] | None = None,
) -> list[CVResult]:
    """Grouped k-fold cross-validation of ``recipes`` on ``records`` (training data only).

    Each recipe trains for its ``max_epochs`` on every fold without early stopping and is
    validated after every epoch on the held-out fold.

    Args:
        records: labelled training records with ``group_key`` (e.g. ``doc_id``).
        label_cols: the label column(s), as for `csem.model.fit.fit`.
        recipes: the recipes to compare (the ``mode`` is each recipe's ``config.mode``).
        folds: ``k``. group_key: the grouping field. seed: fold assignment seed.
        label_range: the declared label scale, as for ``fit``.
        monitor: ``spearman`` | ``kendall`` | ``pearson``: picks each recipe's best epoch.
        on_fold: called after each fold with (recipe name, fold index, that fold's last report).

    Returns:
        One `CVResult` per recipe, in input order.

    Raises:
        ValueError: fewer groups than folds. TrainingDataError: bad labels (from ``fit``).
    """
    from csem.model.fit import fit

    split = grouped_folds(records, folds, key=group_key, seed=seed)
    caches: dict[tuple, dict] = {}
    results = []
    for recipe in recipes:
        res = CVResult(recipe.name, folds=folds)
        tc = recipe.train_config.model_copy(update={"patience": recipe.train_config.max_epochs})
        # the acceptability gate is fitted after training and the validation history is read before it:
        # a fold's model is never scored, so its gate is not fitted
        config = recipe.config.model_copy(update={"acceptability_gate": False})
        key = _cache_key(recipe)
        cache = caches.setdefault(key, {}) if key is not None else None
        histories = []
        t0 = time.perf_counter()
        for f, (trn, dev) in enumerate(split):
            model = fit([records[i] for i in trn], label_cols, recipe.config.mode, config=config,
                        train_config=tc, dev_records=[records[i] for i in dev], label_range=label_range,
                        lower_cache=cache)
            hist = list(model.card["validation_history"])
            histories.append(hist)
            if on_fold is not None and hist:
                on_fold(recipe.name, f, hist[-1])
        res.seconds = time.perf_counter() - t0
        n_epochs = min(len(h) for h in histories)
        res.seconds_per_epoch = res.seconds / max(1, n_epochs * folds)
        for e in range(n_epochs):
            reports = [h[e] for h in histories]
            entry: dict[str, Any] = {"label": {}, "label_std": {}, "human": None}
            for m in ("kendall", "spearman", "pearson"):
                vals = [r["mean"][m] for r in reports]
                entry["label"][m] = _mean(vals)
                entry["label_std"][m] = _std(vals)
            human = [_human_mean(r) for r in reports]
            if all(h is not None for h in human):
                entry["human"] = {m: _mean([h[m] for h in human]) for m in ("kendall", "spearman", "pearson")}
            res.per_epoch[e + 1] = entry
        best = max(res.per_epoch, key=lambda e: _finite(res.per_epoch[e]["label"][monitor]))
        res.best_epoch = best
        results.append(res)
    return results


def _human_mean(report: Mapping[str, Any]) -> dict[str, float] | None:
    per = [a.get("human") for a in report["aspects"].values()]
    if any(p is None for p in per):
        return None
    return {m: _mean([p[m] for p in per]) for m in ("kendall", "spearman", "pearson")}


def _mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return float(sum(xs) / len(xs)) if xs else math.nan


def _std(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    if len(xs) < 2:
        return math.nan
    m = sum(xs) / len(xs)
    return float(math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)))


def _finite(x: float) -> float:
    return -math.inf if x is None or math.isnan(x) else x
