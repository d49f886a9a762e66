"""Stages ``cv`` (grouped k-fold cross-validation over the training documents: each recipe's held-out
correlation per epoch, beside the system prior and the lexical baselines inside the same folds) and
``syscv`` (systems held out), and the recipe choice (:func:`choose`)."""

from __future__ import annotations

import math
import random
import statistics

from harness import ASPECTS, aspect_rows, log, machine, now

from .common import (RECIPES, REFERENCE, TIE, Bench, configs, cv_epochs, lexical_baselines, system_prior,
                     train_student)


def choose(recipes: dict, system_cv: dict | None = None) -> str:
    """The recipe with the highest held-out Spearman with the labels (at its best epoch); recipes
    within ``TIE`` of it tie, and the cheapest of them (seconds per epoch) is chosen. With
    ``system_cv`` (stage ``syscv``), only recipes cross-validated there too are eligible, and of
    those only the ones not worse than :data:`REFERENCE` with systems held out (labels, by more
    than ``TIE``)."""
    eligible = dict(recipes)
    sys_res = (system_cv or {}).get("recipes", {})
    ref = sys_res.get(REFERENCE, {}).get("label")
    if ref is not None:  # only recipes checked with systems held out, and not worse there than REFERENCE
        eligible = {n: r for n, r in recipes.items()
                    if n in sys_res and sys_res[n]["label"] is not None and sys_res[n]["label"] >= ref - TIE}
    score = {n: r["per_epoch"][str(r["best_epoch"])]["label"]["spearman"] for n, r in eligible.items()}
    top = max(score.values())
    return min((n for n in eligible if score[n] >= top - TIE), key=lambda n: eligible[n]["seconds_per_epoch"])


def _mean(values) -> float | None:
    """Mean over the folds where the correlation is defined (None where it is nowhere: a smoke run's
    few documents can leave an aspect constant within every document)."""
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def stage_syscv(b: Bench, train: list[dict], test: list[dict]) -> None:
    """Systems held out, training documents only (see the module docstring); ``b.cv["system_cv"]``."""
    args = b.args
    systems = sorted({r["system_id"] for r in train}, key=lambda s: int(s.lstrip("M")))
    random.Random(args.seed).shuffle(systems)
    folds = [sorted(systems[i::3]) for i in range(3)]
    names = [n.strip() for n in args.recipes.split(";") if n.strip()] if args.recipes else [REFERENCE]
    if REFERENCE not in names:
        names.insert(0, REFERENCE)
    old = (b.cv.get("system_cv") or {}) if args.resume else {}
    kept = {n: r for n, r in old.get("recipes", {}).items() if old.get("folds") == folds}
    res: dict[str, list[tuple[float, float]]] = {}
    splits = [([r for r in train if r["system_id"] not in held], [dict(r) for r in train if r["system_id"] in held])
              for held in folds]
    for tr, dv in splits:
        by_label = lexical_baselines(tr, dv, human=lambda a: f"judge.{a}")
        by_human = lexical_baselines(tr, dv)
        for n in by_label:
            res.setdefault(n, []).append((by_label[n]["average"]["spearman"], by_human[n]["average"]["spearman"]))
    for name in names:
        if name in kept:
            log(f"syscv {name}: kept")
            continue
        for held, (tr, dv) in zip(folds, splits):
            cfg, tc = configs(name, args, cv_epochs(b, name))
            model, _ = train_student(tr, [f"judge.{a}" for a in ASPECTS], cfg, tc)
            sc = model.predict(dv, name="s", batch_size=32).records
            res.setdefault(name, []).append(
                (aspect_rows(sc, lambda a: "metric.s." + a, human=lambda a: f"judge.{a}")["average"]["spearman"],
                 aspect_rows(sc, lambda a: "metric.s." + a)["average"]["spearman"]))
            log(f"syscv {name} held {held}: {res[name][-1]}")
    recipes = dict(kept)
    recipes.update({n: {"label": _mean(x for x, _ in res[n]), "human": _mean(y for _, y in res[n]),
                        "per_fold": res[n], "epochs": cv_epochs(b, n)} for n in names if n in res})
    b.cv["system_cv"] = {
        "folds": folds, "machine": machine(), "run": now(),
        "baselines": {n: {"label": _mean(x for x, _ in v), "human": _mean(y for _, y in v),
                          "per_fold": v} for n, v in res.items() if n not in names},
        "recipes": recipes}
    if b.cv.get("recipes"):
        b.cv["chosen"] = choose(b.cv["recipes"], b.cv["system_cv"])
        log(f"cv chosen (documents and systems held out): {b.cv['chosen']}")


def stage_cv(b: Bench, train: list[dict], test: list[dict]) -> None:
    """Grouped k-fold cross-validation of the recipes on the training documents; ``b.cv``."""
    from csem.model.cv import Recipe, cross_validate, grouped_folds

    args = b.args
    cols = [f"judge.{a}" for a in ASPECTS]
    names = [n.strip() for n in args.recipes.split(";") if n.strip()] if args.recipes else list(RECIPES)
    # the system prior inside the same folds: the bar a student must clear
    folds = grouped_folds(train, args.folds, seed=args.seed)
    prior_rows = []
    for trn, dev in folds:
        dev_recs = [dict(train[i]) for i in dev]
        system_prior([train[i] for i in trn], dev_recs)
        prior_rows.append({
            "label": aspect_rows(dev_recs, lambda a: f"metric.prior.{a}", human=lambda a: f"judge.{a}")["average"],
            "human": aspect_rows(dev_recs, lambda a: f"metric.prior.{a}")["average"]})
    b.cv["prior"] = {side: {m: statistics.fmean(r[side][m] for r in prior_rows) for m in ("spearman", "kendall")}
                     for side in ("label", "human")}
    # the lexical baselines an overlap-feature student must beat, inside the same folds
    lex = [{"label": lexical_baselines([train[i] for i in trn], [train[i] for i in dev],
                                       human=lambda a: f"judge.{a}"),
            "human": lexical_baselines([train[i] for i in trn], [train[i] for i in dev])} for trn, dev in folds]
    b.cv["lexical"] = {name: {side: {m: statistics.fmean(f[side][name]["average"][m] for f in lex)
                                     for m in ("spearman", "kendall")} for side in ("label", "human")}
                       for name in lex[0]["label"]}
    b.cv["meta"] = {"folds": args.folds, "train_docs": len({r["doc_id"] for r in train}), "rows": len(train),
                    "machine": machine(), "run": now(), "seed": args.seed,
                    "criterion": "mean over folds and aspects of the held-out summary-level Spearman with the "
                                 "GPT-4 labels"}
    b.save()
    for name in names:
        if name in b.cv["recipes"] and args.resume:
            log(f"cv {name}: kept")
            continue
        cfg, tc = configs(name, args)
        log(f"cv {name}: {args.folds} folds x {tc.max_epochs} epochs")
        res = cross_validate(train, cols, [Recipe(name, cfg, tc)], folds=args.folds, seed=args.seed,
                             label_range=(1, 5),
                             on_fold=lambda n, f, rep: log(f"  fold {f}: last epoch vs labels "
                                                           f"{rep['mean']['spearman']:.3f}"))[0]
        b.cv["recipes"][name] = {"best_epoch": res.best_epoch, "seconds": res.seconds,
                                 "seconds_per_epoch": res.seconds_per_epoch,
                                 "per_epoch": {str(e): v for e, v in res.per_epoch.items()},
                                 "model": cfg.model_dump(exclude={"labels"}), "train": tc.model_dump()}
        best = res.at()
        log(f"cv {name}: best epoch {res.best_epoch}, vs labels {best['label']['spearman']:.3f}, vs experts "
            f"{(best['human'] or {}).get('spearman', math.nan):.3f} ({res.seconds:.0f} s)")
        b.save()
    if b.cv["recipes"]:
        b.cv["chosen"] = chosen = choose(b.cv["recipes"], b.cv.get("system_cv"))
        log(f"cv chosen: {chosen}")
    b.save()
