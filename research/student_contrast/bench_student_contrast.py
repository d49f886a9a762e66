"""Contrast pretraining and the sanity suite of the student (issue 24), on SummEval's GPT-4 distillation.

Same data, splits and baselines as ``bench_student_summeval.py`` (gpt-4-0314 ``rts`` ratings of
SummEval; documents sorted by ``doc_id``, 0-49 train, 50-99 test; the system-disjoint split trains on 6
systems and tests on the other 6, seeded as there). Every figure is summary-level (per document over its
systems, averaged over documents and the four aspects) Spearman / Kendall tau-b with the expert means.

Contrast pairs: made from the TRAINING rows of the split (and each training document's first reference)
by :func:`csem.model.contrast.auto_pairs` (``csem train --contrast-per-record``), never from a test
document; no LLM call.

Stages (``--stages``, default all; each saves as it finishes, ``--resume`` keeps finished work):
  cv       the recipe: grouped cross-validation on the training documents with SYSTEMS held out (3 folds of
           4 systems, as ``syscv``), one seed, recipes: labels only (no contrast) and contrast
           pretraining with the pairs mixed into label training; chosen by held-out Spearman with the
           GPT-4 labels (never the test documents). csem train's default is set by this and the other
           training-data CVs (main job, teacher pool); the rows of the recipe TrainConfig runs by default
           say "(default)" (:func:`default_recipe`)
  final    labels only and the contrast recipe on both splits, each over ``--seeds`` seeds
           (mean, sd, min, max), beside the baselines (system prior, extractiveness, overlap features alone)
  ensemble the default recipe as a seed ensemble (``csem train --members``, default 5 students, the mean
           of their scores) on both splits, ``--ensembles`` ensembles with disjoint seeds, beside the spread
           of their members scored alone
  ceiling  what a perfect teacher would give this student: csem train's default recipe and the novelty recipe
           trained on the EXPERT means of the training rows instead of GPT-4's ratings (same rows, splits and
           ``--seeds`` seeds), beside extractiveness and the features-only fits on the expert labels; an upper
           bound on what distilling any teacher on these rows can reach (uses expert labels of the training
           documents only, never a test document's)
  gatecv   which lexical features the acceptability gate reads, by 2-fold cross-validation over the standard
           split's TRAINING documents: the gate of the default recipe's standard-split model refitted on one
           fold, the sanity suite (below) run on the other fold's documents; every lexical feature vs without
           csem.model.acceptability.EXCLUDED_FEATURES (csem's default); also the real candidates each rejects
  sanity   per test document, degenerate candidates scored beside the 12 real ones (empty, whitespace, one
           token, a token x100, a real summary truncated mid-sentence, its words shuffled, another
           document's summary; relevance also: the source copied whole): the share of documents where the
           degenerate text scores below every real candidate, and below their median, per aspect; and the
           aspect matrix: for each aspect's perturbation family, how often each head ranks the perturbed
           text below the original
  sanity_seeds  the sanity suite on the default recipe's other seeds' standard-split models: the worst seed
  ties     within-document tied scores of the default student's test scores in bf16 vs fp32
  speed    what the acceptability gate costs at scoring time: the default student scoring the 800 test
           summaries with its gate and with the gate removed, side by side (interleaved, best of
           ``--repeats``, fp32, batch 32), and the seconds fitting the gate took (metric card)

Models trained with the acceptability gate (csem.model.acceptability, csem train's default) are also scored
with the gate removed, in the final and sanity stages: rows and tables marked "without the acceptability gate
(same models)".

Out: ``benchmarks/results/student_contrast.{json,md}``; the rows, ``sanity`` and ``sanity_aspects`` are also
merged into ``benchmarks/results/student_summeval.json`` (layout kept; the default's rows say ``(default)``).

    nice -n 5 python benchmarks/bench_student_contrast.py [--stages cv,final,sanity,ties] [--resume] [--seeds 3]
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from harness import ASPECTS, RESULTS, aspect_rows, log, machine, markdown_table, now, parser, setup, \
    summeval_llm_ratings, write_results

import bench_student_summeval as S

STAGES = ("cv", "final", "ensemble", "ceiling", "gatecv", "sanity", "sanity_seeds", "ties", "speed")
OLD = "no contrast pretraining (labels only)"
WARM = "warm start from --init"
NOVELTY = "labels only, novelty features (the overlap features without the length)"
#: the name this recipe had before contrast pretraining stopped being the default (rows dropped on --resume)
STALE = "old default (no contrast pretraining)"
RECIPES = {
    OLD: {},
    # csem train's auto pairs (csem.model.contrast.auto_pairs): 1 per training row and aspect, at most 400
    "contrast pretraining (400 pairs from the training rows, 1 epoch) + mixed into label training (0.5)":
        {"contrast_per_record": 1, "contrast_max_pairs": 400, "contrast_epochs": 1, "contrast_mix": 0.5,
         "contrast_pairs_per_batch": 8},
    # TrainConfig.average_tail: the weights of the last half of the steps averaged (tail averaging, SWA-style)
    "labels only, weights of the last half of the steps averaged": {"average_tail": 0.5},
    # warm starts (TrainConfig.init, csem train --init) from the student given by --init; INIT is replaced by
    # it. Made for a start that never saw SummEval: teacher_pool_student.py --exclude-dataset summeval (the
    # teacher pool's 0.5B judge on news summaries of REALSumm, Newsroom and QAGS articles, no SummEval article)
    WARM + ", csem train's other defaults (1 epoch at lr 1e-3)": {"init": "INIT"},
    WARM + ", 3 epochs at lr 3e-4 (the main job's)": {"init": "INIT", "lr": 3e-4, "head_lr": 3e-4, "max_epochs": 3},
    WARM + ", 3 epochs at lr 1e-4": {"init": "INIT", "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 3},
    # ModelConfig.feature_set = "novelty": the overlap features without the length (a "model" entry holds
    # ModelConfig fields): the linear term cannot weigh the training systems' lengths
    NOVELTY: {"model": {"feature_set": "novelty"}},
    NOVELTY + ", contrast pretraining + mixing as above": {
        "model": {"feature_set": "novelty"}, "contrast_per_record": 1, "contrast_max_pairs": 400,
        "contrast_epochs": 1, "contrast_mix": 0.5, "contrast_pairs_per_batch": 8},
    # the novelty student is below its own features-only fit on the test splits: less room for the deep part
    # (the within-document ranking term weighted up; a linear head; a smaller step)
    NOVELTY + ", pairwise weight 3": {"model": {"feature_set": "novelty", "pairwise_weight": 3.0}},
    NOVELTY + ", linear head": {"model": {"feature_set": "novelty", "hidden_sizes": []}},
    NOVELTY + ", lr 3e-4": {"model": {"feature_set": "novelty"}, "lr": 3e-4, "head_lr": 3e-4},
    # more rule-made pairs (session 45): up to 10 per training row (and reference) and aspect, a seeded 3,000
    NOVELTY + ", contrast pretraining (3,000 pairs from the training rows, 1 epoch) + mixed into label training (0.5)": {
        "model": {"feature_set": "novelty"}, "contrast_per_record": 10, "contrast_max_pairs": 3000,
        "contrast_epochs": 1, "contrast_mix": 0.5, "contrast_pairs_per_batch": 8},
    NOVELTY + ", contrast pretraining (8,000 pairs from the training rows, 1 epoch) + mixed into label training (0.5)": {
        "model": {"feature_set": "novelty"}, "contrast_per_record": 10, "contrast_max_pairs": 8000,
        "contrast_epochs": 1, "contrast_mix": 0.5, "contrast_pairs_per_batch": 8},
}
#: the warm-start recipes' initial student (--init); without it the cv and final stages leave them out
INIT: str | None = None
#: the baseline row of the initial student scored as it is (its one aspect's score for every aspect)
AS_IS = "the initial student as it is (--init, no SummEval label)"
COLS = [f"judge.{a}" for a in ASPECTS]
#: suffix of the rows that score the same models with the acceptability gate removed
NO_GATE = " - without the acceptability gate (same models)"
#: the key of ``final`` holding the system-disjoint split's systems ({"train": [...], "test": [...]})
SYSTEMS = "disjoint_systems"


def fit(train: list[dict], recipe: str | dict, seed: int, threads: int, members: int = 1):
    """Train csem train's recipe with the contrast settings of ``recipe`` (a name of :data:`RECIPES`, or
    TrainConfig fields, and under ``"model"`` ModelConfig fields; pairs made from ``train`` itself by
    csem.model.contrast.auto_pairs, as ``csem train --contrast-per-record`` does); ``members`` > 1: a seed
    ensemble (seeds seed..seed+members-1, ``csem train --members``)."""
    from csem.model import ModelConfig, TrainConfig
    from csem.model import fit as fit_student  # csem's one training entry (this function shares its name)

    options = dict(RECIPES[recipe] if isinstance(recipe, str) else recipe)
    model_options = options.pop("model", {})
    if options.get("init") == "INIT":
        if not INIT:
            raise SystemExit("a warm-start recipe needs --init (a student folder, e.g. from teacher_pool_student.py)")
        options["init"] = INIT
    tc = TrainConfig(seed=seed, num_threads=threads, **{"contrast_per_record": 0, **options})
    t0 = time.perf_counter()
    model = fit_student(train, COLS, "ref-free", config=ModelConfig(name="s", members=members, **model_options),
                        train_config=tc, label_range=(1, 5), judge="gpt-4-0314 (rts, Shen et al. 2023)")
    return model, time.perf_counter() - t0, (model.card.get("contrast") or {}).get("pairs", 0)


def needs_init(name: str) -> bool:
    return RECIPES[name].get("init") == "INIT"


def as_is(recs: list[dict]) -> list[dict]:
    """``recs`` scored by the initial student (--init) with no SummEval label: its only aspect's score
    (``metric.s.<aspect>``) for every aspect."""
    from csem.model import EvaluationModel

    model = EvaluationModel.load(INIT)
    (aspect,) = [spec.aspect for spec in model.config.labels]
    res = model.predict(recs, aspects=[aspect], precision="fp32")
    values = res.scores[res.columns[0]]
    return [dict(r, **{f"metric.s.{a}": x for a in ASPECTS}) for r, x in zip(recs, values)]


def score(model, recs: list[dict], precision: str = "fp32") -> list[dict]:
    return model.predict(recs, aspects=list(ASPECTS), precision=precision, name="s").records


def stats(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "n": len(values)}


class Bench:
    def __init__(self, args):
        self.args = args
        self.path = Path(args.out)
        self.data = {"meta": {}, "cv": {}, "final": {}, "ensemble": {}, "sanity": {}, "sanity_aspects": {},
                     "precision_ties": {}, "sanity_seeds": {}}
        if args.resume and self.path.with_suffix(".json").exists():
            self.data.update(json.loads(self.path.with_suffix(".json").read_text()))
        if "run" in self.data["meta"]:  # an earlier run's stages keep their date; this run's go to stage_runs
            self.data["meta"].setdefault("stage_runs", {})
            self.stamp = {"run": now(), "machine": machine(), "threads": args.threads}
        else:
            self.data["meta"].update(run=now(), machine=machine(), threads=args.threads, seeds=args.seeds)
            self.stamp = None
        self.owned: set[str] = set()  # final-stage recipes this process trains
        self.splits: set[str] = set()  # final-stage splits this process runs
        self.touched: set[str] = set()  # top-level keys this process writes (the others are re-read)
        self.skipped: list[str] = []  # what a stage could not do (missing models): the run exits non-zero
        self.touched_final: set[str] = set()  # entries of "final" besides the splits this process writes

    def skip(self, why: str) -> None:
        """Record (and log) work a stage could not do."""
        log(why)
        self.skipped.append(why)

    def save(self):
        """Write the results; several processes may run stages at once (``--split``, ``--final-recipes``),
        so under a lock the file is re-read and only this process's final rows and stages replace it."""
        import fcntl

        lock = self.path.with_suffix(".lock")
        with open(lock, "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            js = self.path.with_suffix(".json")
            disk = json.loads(js.read_text()) if js.exists() else {}
            merged = {**disk, **{k: self.data[k] for k in self.touched | {"meta"} if k != "final"}}
            final = disk.get("final", {})
            if SYSTEMS in self.touched_final and final.get(SYSTEMS) != self.data["final"].get(SYSTEMS):
                final.pop("disjoint", None)  # rows of another system-disjoint split (see stage_final)
            for split, rows in self.data.get("final", {}).items():
                if split == SYSTEMS or not isinstance(rows, dict):  # the split's systems, not a split
                    if split in self.touched_final:
                        final[split] = rows
                    continue
                if split not in self.splits:  # another process may be running that split
                    continue
                target = final.setdefault(split, {})
                for name, rec in rows.items():
                    if name == "baselines" or name in self.owned:
                        target[name] = rec
            merged["final"] = final
            for rows in [*final.values(), merged.get("sanity") or {}, merged.get("sanity_aspects") or {}]:
                for k in [k for k in (rows if isinstance(rows, dict) else {}) if k.startswith(STALE)]:
                    del rows[k]  # rows of the recipe's former name (re-run under OLD)
            write_results(self.path, merged, render(merged))
        self.merged = merged


# --------------------------------------------------------------------------------------------- stages
def stage_cv(b: Bench, train: list[dict]) -> None:
    args = b.args
    systems = sorted({r["system_id"] for r in train}, key=lambda s: int(s.lstrip("M")))
    random.Random(args.seed).shuffle(systems)
    folds = [sorted(systems[i::3]) for i in range(3)]
    b.touched.add("cv")
    cv = b.data["cv"]
    if cv.get("folds") != folds:
        cv.clear()
    cv["folds"] = folds
    res = cv.setdefault("recipes", {})
    seeds = [args.seed + k for k in range(args.cv_seeds)]
    wanted = recipes_at(args.cv_recipes, "--cv-recipes") if args.cv_recipes else list(RECIPES)
    for name in wanted:
        if name in res and len(res[name]["per_fold"]) == len(folds) * len(seeds):
            continue
        if needs_init(name) and not INIT:
            log(f"cv: {name} left out (no --init)")
            continue
        per = []
        for seed in seeds:
            for held in folds:
                tr = [r for r in train if r["system_id"] not in held]
                dv = [dict(r) for r in train if r["system_id"] in held]
                model, secs, n_pairs = fit(tr, name, seed, args.threads)
                sc = score(model, dv)
                per.append({"held": held, "seed": seed,
                            "label": aspect_rows(sc, lambda a: f"metric.s.{a}", human=lambda a: f"judge.{a}")["average"]["spearman"],
                            "human": aspect_rows(sc, lambda a: f"metric.s.{a}")["average"]["spearman"],
                            "train_s": secs, "pairs": n_pairs})
                log(f"cv {name} seed {seed} held {held}: labels {per[-1]['label']:.3f} experts {per[-1]['human']:.3f} "
                    f"({secs:.0f} s)")
        res[name] = {"per_fold": per, "label": statistics.fmean(p["label"] for p in per),
                     "human": statistics.fmean(p["human"] for p in per),
                     "label_per_seed": [statistics.fmean(p["label"] for p in per if p["seed"] == sd) for sd in seeds]}
        b.save()
    # baselines inside the same folds
    base = {}
    for held in folds:
        tr = [r for r in train if r["system_id"] not in held]
        dv = [dict(r) for r in train if r["system_id"] in held]
        for n, row in S.lexical_baselines(tr, dv, human=lambda a: f"judge.{a}").items():
            base.setdefault(n, []).append(row["average"]["spearman"])
        if INIT:
            row = aspect_rows(as_is(dv), lambda a: f"metric.s.{a}", human=lambda a: f"judge.{a}")
            base.setdefault(AS_IS, []).append(row["average"]["spearman"])
    cv["baselines"] = {n: statistics.fmean(v) for n, v in base.items()}
    best = max(res, key=lambda n: res[n]["label"])
    cv["chosen"] = best
    log(f"cv chosen: {best}")
    b.save()


def recipes_at(indices: str, option: str) -> list[str]:
    """The recipes at comma-separated indices into :data:`RECIPES`; a bad index stops the run (exit 2)."""
    try:
        return [list(RECIPES)[int(i)] for i in indices.split(",")]
    except (ValueError, IndexError):
        print(f"error: {option} {indices!r}: indices 0-{len(RECIPES) - 1} into RECIPES, comma separated",
              file=sys.stderr)
        raise SystemExit(2) from None


def positive(value: str) -> int:
    """argparse type: an integer >= 1 (otherwise a usage error, exit 2)."""
    import argparse

    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number >= 1")
    return int(value)


def default_recipe() -> str:
    """The recipe ``csem train`` runs by default (TrainConfig's contrast settings): its rows say "(default)",
    and the sanity, ties and speed stages score its standard-split model."""
    from csem.model import TrainConfig

    return OLD if TrainConfig().contrast_per_record == 0 else list(RECIPES)[1]


def chosen(b: Bench) -> str:
    if b.args.assume_chosen:
        return list(RECIPES)[int(b.args.assume_chosen)]
    return (b.data.get("cv") or {}).get("chosen") or list(RECIPES)[1]


def splits_of(train: list[dict], test: list[dict]) -> tuple[dict, dict]:
    """``({"standard": (train, test), "disjoint": (train rows of 6 systems, test rows of the other 6)},
    {"train": systems, "test": systems})``: the two splits of ``bench_student_summeval.py`` (the disjoint
    one from :func:`student_stages.common.disjoint_systems`, whatever ``--seed`` is)."""
    a_sys, b_sys = S.disjoint_systems(train)
    return ({"standard": (train, test),
             "disjoint": ([r for r in train if r["system_id"] in a_sys], [r for r in test if r["system_id"] in b_sys])},
            {"train": a_sys, "test": b_sys})


def stage_final(b: Bench, train, test) -> None:
    args = b.args
    splits, systems = splits_of(train, test)
    fin = b.data["final"]
    if args.split in ("both", "disjoint"):  # the split's systems are recorded by the run that trains on it
        if fin.get(SYSTEMS) != systems and fin.pop("disjoint", None):
            # rows of another system-disjoint split (runs before 7 December 2026 drew it with --seed 0, not
            # the student benchmark's split): never mixed with this one's
            log(f"final: the disjoint rows on file were trained on another split; dropped (now {systems})")
        fin[SYSTEMS] = systems
        b.touched_final.add(SYSTEMS)
    seeds = [args.seed + 12 + k for k in range(args.seeds)]
    if args.split != "both":
        splits = {args.split: splits[args.split]}
    names = [OLD if n == "old" else chosen(b) if n == "chosen" else recipes_at(n, "--final-recipes")[0]
             for n in args.final_recipes.split(",")]
    b.owned.update(names)
    b.splits.update(splits)
    for split, (tr, te) in splits.items():
        rows = fin.setdefault(split, {})
        if "baselines" not in rows:
            te_p = [dict(r) for r in te]
            S.system_prior(tr, te_p)
            base = {S.TEACHER: S.row_of(te, "judge")}
            if split == "standard":
                base[S.PRIOR] = S.row_of(te_p, "metric.prior")
            base.update(S.lexical_baselines(tr, te))
            rows["baselines"] = base
        if INIT and AS_IS not in rows["baselines"]:
            rows["baselines"][AS_IS] = S.row_of(as_is([dict(r) for r in te]), "metric.s")
            b.save()
        for name in names:
            rec = rows.setdefault(name, {"seeds": {}})
            for seed in seeds:
                done = rec["seeds"].get(str(seed))
                if done and "row_no_gate" in done:
                    continue
                model, secs, n_pairs = fit(tr, name, seed, args.threads)
                sc = score(model, [dict(r) for r in te])
                row = S.row_of(sc, "metric.s")
                gate, model.module.gate = model.module.gate, None  # the same model, regressor alone
                row_no_gate = S.row_of(score(model, [dict(r) for r in te]), "metric.s")
                model.module.gate = gate
                rec["seeds"][str(seed)] = {"row": row, "row_no_gate": row_no_gate, "train_s": secs, "pairs": n_pairs,
                                           "acceptability": model.card.get("acceptability")}
                log(f"{split} {name} seed {seed}: {row['average']['spearman']:.3f}, without the gate "
                    f"{row_no_gate['average']['spearman']:.3f} ({secs:.0f} s, {n_pairs} pairs)")
                # the first seed's folder is the one the sanity, ties and speed stages read; the others give
                # the sanity suite its spread over seeds
                model.save(b.args.models / (f"{split}-{slug(name)}" + ("" if seed == seeds[0] else f"-seed{seed}")))
                b.save()
            avg = [v["row"]["average"]["spearman"] for v in rec["seeds"].values()]
            rec["spearman"] = stats(avg)
            rec["kendall"] = stats([v["row"]["average"]["kendall"] for v in rec["seeds"].values()])
            if all("row_no_gate" in v for v in rec["seeds"].values()):
                rec["spearman_no_gate"] = stats([v["row_no_gate"]["average"]["spearman"] for v in rec["seeds"].values()])
                rec["kendall_no_gate"] = stats([v["row_no_gate"]["average"]["kendall"] for v in rec["seeds"].values()])
            rec["per_aspect"] = {a: statistics.fmean(v["row"][a]["spearman"] for v in rec["seeds"].values())
                                 for a in ASPECTS}
            b.save()


def stage_ensemble(b: Bench, train, test) -> None:
    """The default recipe as a seed ensemble (``csem train --members K``) on both splits: ``--ensembles``
    ensembles of ``--members`` students each, with disjoint seeds (12.., the first ensemble's members are
    the final stage's seeds), each scored as one model (the mean of its members' scores) and each member
    alone (the spread of single students beside the spread of ensembles)."""
    args = b.args
    splits, systems = splits_of(train, test)
    if args.split != "both":
        splits = {args.split: splits[args.split]}
    k, name = args.members, default_recipe()
    b.touched.add("ensemble")
    out = b.data.setdefault("ensemble", {})
    for split, (tr, te) in splits.items():
        rec = out.setdefault(split, {"recipe": name, "members": k, "groups": {}})
        on = systems if split == "disjoint" else None
        if rec.get("members") != k or rec.get("recipe") != name or rec.get("systems") != on:
            rec.clear()  # another recipe, size or system-disjoint split (see stage_final): trained anew
            rec.update(recipe=name, members=k, groups={}, systems=on)
        for g in range(args.ensembles):
            first = args.seed + 12 + g * k
            if str(first) in rec["groups"]:
                continue
            model, secs, _ = fit(tr, name, first, args.threads, members=k)
            row = S.row_of(score(model, [dict(r) for r in te]), "metric.s")
            members = {str(first + i): S.row_of(score(model.member(i), [dict(r) for r in te]), "metric.s")
                       for i in range(k)}
            rec["groups"][str(first)] = {"row": row, "members": members, "train_s": secs}
            log(f"{split} ensemble {first}-{first + k - 1}: {row['average']['spearman']:.3f}; members "
                + ", ".join(f"{m['average']['spearman']:.3f}" for m in members.values()) + f" ({secs:.0f} s)")
            b.save()
        groups = list(rec["groups"].values())
        rec["spearman"] = stats([gr["row"]["average"]["spearman"] for gr in groups])
        rec["kendall"] = stats([gr["row"]["average"]["kendall"] for gr in groups])
        rec["single"] = stats([m["average"]["spearman"] for gr in groups for m in gr["members"].values()])
        rec["per_aspect"] = {a: statistics.fmean(gr["row"][a]["spearman"] for gr in groups) for a in ASPECTS}
        b.save()


def expert_labelled(recs: list[dict]) -> list[dict]:
    """Copies of ``recs`` whose label columns (``judge.<aspect>``) hold the experts' means (``human.<aspect>``)."""
    return [dict(r, **{f"judge.{a}": r[f"human.{a}"] for a in ASPECTS}) for r in recs]


def stage_ceiling(b: Bench, train, test) -> None:
    """The student trained on the experts' own ratings of the training rows (see the module docstring):
    ``ceiling[split] = {"systems", "baselines": {row: aspect_rows}, "training_rows": extractiveness's aspect_rows
    on the training rows, "students": {recipe: {"seeds": {seed: row}, "spearman": stats}}, "curve"}``."""
    args = b.args
    splits, systems = splits_of(train, test)
    if args.split != "both":
        splits = {args.split: splits[args.split]}
    b.touched.add("ceiling")
    out = b.data.setdefault("ceiling", {})
    seeds = [args.seed + 12 + k for k in range(args.seeds)]
    for split, (tr, te) in splits.items():
        on = systems if split == "disjoint" else None
        rows = out.setdefault(split, {})
        if rows.get("systems") != on:  # another system-disjoint split (see stage_final): trained anew
            rows.clear()
        rows["systems"] = on
        tr_h = expert_labelled(tr)
        rows["baselines"] = {n.replace("GPT-4 labels", "the EXPERT labels"): v
                             for n, v in S.lexical_baselines(tr_h, te).items()}
        # how the one-line baseline relates to the experts on the training rows themselves: what a learner
        # fitted there can see of it
        from csem.baselines import extractiveness

        rows["training_rows"] = aspect_rows(
            [dict(r, **{"metric.extractive": e}) for r, e in zip(tr, extractiveness(tr))], lambda a: "metric.extractive")
        for name in (default_recipe(), NOVELTY):
            rec = rows.setdefault("students", {}).setdefault(name, {"seeds": {}})
            for seed in seeds:
                if str(seed) in rec["seeds"]:
                    continue
                model, secs, _ = fit(tr_h, name, seed, args.threads)
                row = S.row_of(score(model, [dict(r) for r in te]), "metric.s")
                rec["seeds"][str(seed)] = {"row": row, "train_s": secs}
                log(f"ceiling {split} {name} seed {seed}: {row['average']['spearman']:.3f} ({secs:.0f} s)")
                b.save()
            rec["spearman"] = stats([v["row"]["average"]["spearman"] for v in rec["seeds"].values()])
            rec["per_aspect"] = {a: statistics.fmean(v["row"][a]["spearman"] for v in rec["seeds"].values())
                                 for a in ASPECTS}
            b.save()
        # the default's learning curve on expert labels: the first 12 and 25 training documents, then all 50
        curve = rows.setdefault("curve", {"recipe": default_recipe(), "points": {}})
        for n_docs in CEILING_DOCS:
            if str(n_docs) in curve["points"]:
                continue
            keep = set(sorted({r["doc_id"] for r in tr_h})[:n_docs])
            per = []
            for seed in seeds:
                model, secs, _ = fit([r for r in tr_h if r["doc_id"] in keep], default_recipe(), seed, args.threads)
                per.append(S.row_of(score(model, [dict(r) for r in te]), "metric.s")["average"]["spearman"])
                log(f"ceiling {split} curve {n_docs} docs seed {seed}: {per[-1]:.3f} ({secs:.0f} s)")
            curve["points"][str(n_docs)] = stats(per)
            b.save()
        full = rows["students"][default_recipe()]["spearman"]
        n_all = len({r["doc_id"] for r in tr_h})
        pts = [(n, curve["points"][str(n)]["mean"]) for n in CEILING_DOCS] + [(n_all, full["mean"])]
        curve["points"][str(n_all)] = full
        curve["fit"] = S.log_fit(pts, CEILING_TARGETS[split])
        b.save()


#: training documents of the ceiling's learning curve (then all of the split's 50)
CEILING_DOCS = (12, 25)
#: issue 24's targets the curve is extrapolated to (standard: the default at or above 0.321; system-disjoint:
#: above extractiveness, 0.335)
CEILING_TARGETS = {"standard": 0.321, "disjoint": 0.335}


def slug(name: str) -> str:
    if needs_init(name):
        return f"warm{list(RECIPES).index(name)}"
    return "old" if name == OLD else "contrast"


CASES = ("empty", "whitespace", "one token", "token x100", "truncated mid-sentence", "words shuffled",
         "another document's summary", "source copied (relevance only)")


def degenerate(doc_recs: list[dict], other: dict, rng: random.Random) -> dict[str, str]:
    real = rng.choice(doc_recs)["candidate"]
    words = real.split()
    cut = " ".join(words[: max(2, len(words) // 2)])
    cut = cut.rstrip(".!?") if cut.endswith((".", "!", "?")) else cut
    shuffled = words[:]
    while len(shuffled) > 1 and shuffled == words:
        rng.shuffle(shuffled)
    return {"empty": "", "whitespace": "   \n ", "one token": words[0], "token x100": "the " * 100,
            "truncated mid-sentence": cut, "words shuffled": " ".join(shuffled),
            "another document's summary": other["candidate"], "source copied (relevance only)": doc_recs[0]["source"]}


def sanity_for(model, test: list[dict], seed: int) -> dict:
    """{case: {aspect: {"below_all": share, "below_median": share}}} over the test documents."""
    rng = random.Random(seed)
    docs = sorted({r["doc_id"] for r in test})
    by_doc = {d: [r for r in test if r["doc_id"] == d] for d in docs}
    recs, meta = [], []
    for i, d in enumerate(docs):
        other = rng.choice(by_doc[docs[(i + 1 + rng.randrange(len(docs) - 1)) % len(docs)]])
        for case, text in degenerate(by_doc[d], other, rng).items():
            recs.append({"id": f"{d}~{case}", "doc_id": d, "source": by_doc[d][0]["source"], "candidate": text})
            meta.append((d, case))
    real = {r["id"]: r for r in score(model, [dict(r) for r in test])}
    deg = score(model, recs)
    # what the network alone gives empty / whitespace candidates (the scoring path floors them by rule)
    from csem.model.inference import head_scores

    raw_idx = [i for i, (_, c) in enumerate(meta) if c in ("empty", "whitespace")]
    raw, _ = head_scores([model.module], [recs[i] for i in raw_idx], precision="fp32")
    heads = model.config.aspects
    for row, i in enumerate(raw_idx):
        meta.append((meta[i][0], meta[i][1] + " (network, no floor)"))
        deg.append(dict(recs[i], **{f"metric.s.{a}": float(raw[0, row, heads.index(a)]) for a in ASPECTS}))
    out: dict = {}
    for (d, case), r in zip(meta, deg):
        for a in ASPECTS:
            if case.startswith("source copied") and a != "relevance":
                continue
            reals = [real[x["id"]][f"metric.s.{a}"] for x in by_doc[d]]
            v = r[f"metric.s.{a}"]
            cell = out.setdefault(case, {}).setdefault(a, {"below_all": 0, "below_median": 0, "n": 0})
            cell["n"] += 1
            cell["below_all"] += v < min(reals)
            cell["below_median"] += v < statistics.median(reals)
    for case in out.values():
        for cell in case.values():
            n = cell.pop("n")
            cell["below_all"] /= n
            cell["below_median"] /= n
            cell["documents"] = n
    return out


def aspects_matrix(model, test: list[dict], seed: int, per_doc: int = 4) -> dict:
    """{family aspect: {head: share of (original, perturbed) pairs the head orders correctly}}."""
    from csem.data.contrasts import make_pairs

    rng = random.Random(seed)
    picked = []
    for d in sorted({r["doc_id"] for r in test}):
        recs = [r for r in test if r["doc_id"] == d]
        picked += rng.sample(recs, min(per_doc, len(recs)))
    out = {}
    for fam in ASPECTS:
        pairs = make_pairs(picked, aspects=[fam], per_record=1, seed=seed, degenerate_weight=0.0)
        if not pairs:
            continue
        a = score(model, [{"id": f"a{i}", "source": p["source"], "candidate": p["candidate_a"]} for i, p in enumerate(pairs)])
        w = score(model, [{"id": f"b{i}", "source": p["source"], "candidate": p["candidate_b"]} for i, p in enumerate(pairs)])
        out[fam] = {h: sum(x[f"metric.s.{h}"] > y[f"metric.s.{h}"] for x, y in zip(a, w)) / len(pairs) for h in ASPECTS}
        out[fam]["pairs"] = len(pairs)
        out[fam]["perturbations"] = sorted({p["perturbation"] for p in pairs})
    return out


def stage_sanity(b: Bench, test) -> None:
    from csem.model import EvaluationModel

    args = b.args
    b.touched.update({"sanity", "sanity_aspects"})
    for name in dict.fromkeys((default_recipe(), OLD, chosen(b))):
        path = args.models / f"standard-{slug(name)}"
        if not path.exists():
            b.skip(f"sanity: {path} missing (run the final stage first)")
            continue
        model = EvaluationModel.load(path)
        runs = [(name, model.module.gate)]
        if model.module.gate is not None:  # the same model with the gate removed: what the regressor does alone
            runs.append((name + NO_GATE, None))
        for key, gate in runs:
            model.module.gate = gate
            b.data["sanity"][key] = sanity_for(model, test, args.seed)
            b.data["sanity_aspects"][key] = aspects_matrix(model, test, args.seed)
            log(f"sanity {key}: " + ", ".join(f"{c} {statistics.fmean(v['below_all'] for v in cs.values()):.2f}"
                                              for c, cs in b.data["sanity"][key].items()))
            b.save()


def stage_sanity_seeds(b: Bench, test) -> None:
    """The sanity suite on the default recipe's other seeds (final stage folders ``-seed<N>``, with their
    gates) beside the first seed's (the sanity stage's): the spread over seeds."""
    from csem.model import EvaluationModel

    args = b.args
    name = default_recipe()
    first = str(args.seed + 12)
    paths = sorted(args.models.glob(f"standard-{slug(name)}-seed*"))
    if not b.data["sanity"].get(name) or not paths:
        b.skip(f"sanity_seeds: needs the sanity stage's result and at least one '-seed<N>' model of {name} "
               "(the final stage writes them); nothing written")
        return
    per_seed = {first: b.data["sanity"][name]}
    for path in paths:
        per_seed[path.name.rsplit("-seed", 1)[1]] = sanity_for(EvaluationModel.load(path), test, args.seed)
        log(f"sanity {name} {path.name}: done")
    b.touched.add("sanity_seeds")
    b.data["sanity_seeds"] = {
        "recipe": name,
        "per_seed": {sd: {c: {a: v["below_all"] for a, v in cells.items()} for c, cells in san.items()}
                     for sd, san in per_seed.items()},
        "worst_seed": {c: {a: min(per_seed[sd][c][a]["below_all"] for sd in per_seed) for a in cells}
                       for c, cells in per_seed[first].items()}}
    b.save()


def stage_gatecv(b: Bench, train) -> None:
    """The gate's feature set by cross-validation on the training documents (see the module docstring)."""
    from csem.model import EvaluationModel
    from csem.model.acceptability import EXCLUDED_FEATURES, AcceptabilityGate, fit_gate, gate_mask

    path = b.args.models / f"standard-{slug(default_recipe())}"
    if not path.exists():
        b.skip(f"gatecv: {path} missing (run the final stage first)")
        return
    model = EvaluationModel.load(path)
    base = model.module.gate
    if base is None:
        b.skip("gatecv: the default recipe has no gate")
        return
    b.touched.add("gate_cv")
    docs = sorted({r["doc_id"] for r in train})
    folds = [set(docs[0::2]), set(docs[1::2])]
    variants = {"every lexical feature": False, f"without {', '.join(EXCLUDED_FEATURES)} (csem's default)": True}
    out: dict = {"folds": 2, "documents": len(docs), "variants": {}}
    for name, masked in variants.items():
        per_fold = []
        for k in (0, 1):
            gate = AcceptabilityGate(len(base.mask), base.aspects)
            gate.mask.copy_(gate_mask(len(base.mask)) if masked else torch.ones_like(base.mask))
            fit_gate(gate, [r for r in train if r["doc_id"] in folds[k]], "ref-free", seed=b.args.seed + 12)
            model.module.gate = gate
            held = [r for r in train if r["doc_id"] in folds[1 - k]]
            san = sanity_for(model, held, b.args.seed)
            per_fold.append({"sanity": {c: {a: v["below_all"] for a, v in cells.items()} for c, cells in san.items()
                                        if "network" not in c},
                             "real_rejected": real_rejected(gate, held), "real": len(held)})
        cases = per_fold[0]["sanity"]
        out["variants"][name] = {
            "sanity_min_aspect": {c: statistics.fmean(min(f["sanity"][c].values()) for f in per_fold) for c in cases},
            "real_rejected_share": statistics.fmean(f["real_rejected"] / f["real"] for f in per_fold),
            "per_fold": per_fold}
        log(f"gatecv {name}: " + ", ".join(f"{c} {v:.2f}" for c, v in out["variants"][name]["sanity_min_aspect"].items()))
    model.module.gate = base
    b.data["gate_cv"] = out
    b.save()


def real_rejected(gate, recs: list[dict]) -> int:
    """How many of ``recs`` (real candidates) the gate pulls down (factor below 1) on at least one aspect."""
    from csem.model.acceptability import contexts_of
    from csem.model.features import pair_features

    x = torch.tensor([pair_features("lexical", r["candidate"], contexts_of(r, "ref-free")) for r in recs])
    with torch.no_grad():
        return int((gate.factor(x) < 1).any(dim=1).sum())


def stage_ties(b: Bench, test) -> None:
    from csem.model import EvaluationModel

    path = b.args.models / f"standard-{slug(default_recipe())}"
    if not path.exists():
        b.skip(f"ties: {path} missing (run the final stage first)")
        return
    model = EvaluationModel.load(path)
    b.touched.add("precision_ties")
    out = {}
    for prec in ("bf16", "fp32"):
        sc = score(model, [dict(r) for r in test], precision=prec)
        ties = pairs = 0
        for d in sorted({r["doc_id"] for r in sc}):
            rs = [r for r in sc if r["doc_id"] == d]
            for a in ASPECTS:
                vals = [r[f"metric.s.{a}"] for r in rs]
                pairs += len(vals) * (len(vals) - 1) // 2
                ties += sum(1 for i in range(len(vals)) for j in range(i) if vals[i] == vals[j])
        out[prec] = {"tied_pairs": ties, "pairs": pairs, "share": ties / pairs,
                     "average_spearman": S.row_of(sc, "metric.s")["average"]["spearman"]}
    b.data["precision_ties"] = out
    log(f"ties: {out}")
    b.save()


def stage_speed(b: Bench, test) -> None:
    """Scoring speed of the same student with and without its acceptability gate (the gate adds the lexical
    features of every (candidate, source) pair: CPU-side Python, no encoder pass)."""
    from csem.model import EvaluationModel

    path = b.args.models / f"standard-{slug(default_recipe())}"
    if not path.exists():
        b.skip(f"speed: {path} missing (run the final stage first)")
        return
    model = EvaluationModel.load(path)
    gate = model.module.gate
    if gate is None or not gate.is_fitted:
        b.skip("speed: the model has no fitted gate")
        return
    b.touched.add("gate_speed")
    recs = [dict(r) for r in test]
    model.predict(recs[:8], precision="fp32")  # warm-up
    best = {"with the gate": float("inf"), "gate removed": float("inf")}
    for _ in range(b.args.repeats):  # interleaved: both see the same machine load
        for key, g in (("with the gate", gate), ("gate removed", None)):
            model.module.gate = g
            t0 = time.perf_counter()
            model.predict(recs, batch_size=32, precision="fp32")
            best[key] = min(best[key], time.perf_counter() - t0)
    model.module.gate = gate
    out = {k: {"seconds": v, "samples_per_s": len(recs) / v} for k, v in best.items()}
    out.update(records=len(recs), repeats=b.args.repeats, threads=b.args.threads,
               slowdown=best["with the gate"] / best["gate removed"],
               gate_fit_seconds=(model.card.get("acceptability") or {}).get("seconds"),
               train_rows=(model.card.get("training") or {}).get("n_records"))
    b.data["gate_speed"] = out
    log(f"speed: {out}")
    b.save()


# --------------------------------------------------------------------------------------------- merge + render
def merge(b: Bench) -> None:
    """Copy the rows into student_summeval.json (its layout), csem train's default recipe marked (default)."""
    path = RESULTS / "student_summeval.json"
    d = json.loads(path.read_text())
    default = default_recipe()
    for split, key in (("standard", None), ("disjoint", "disjoint")):
        rows = b.data["final"].get(split, {})
        target = d["correlations"] if key is None else d["disjoint"].setdefault("correlations", {})
        for k in [k for k in target if "(default)" in k or "contrast" in k]:
            del target[k]
        for name in dict.fromkeys((OLD, chosen(b), default)):
            rec = rows.get(name)
            if not rec or "spearman" not in rec:
                continue
            mark = " (default)" if name == default else ""
            label = (f"student MiniLM csem train recipe, {name}{mark}, mean of {rec['spearman']['n']} seeds"
                     + (", system-disjoint" if key else ""))
            seeds = list(rec["seeds"].values())
            row = {a: {m: statistics.fmean(s["row"][a][m] for s in seeds) for m in ("spearman", "kendall")}
                   for a in [*ASPECTS, "average"]}
            row["average"]["spearman_sd"] = rec["spearman"]["sd"]
            target[label] = row
            if "spearman_no_gate" in rec:
                row = {a: {m: statistics.fmean(s["row_no_gate"][a][m] for s in seeds) for m in ("spearman", "kendall")}
                       for a in [*ASPECTS, "average"]}
                row["average"]["spearman_sd"] = rec["spearman_no_gate"]["sd"]
                target[label.replace(mark, "") + NO_GATE] = row
    for split, key in (("standard", None), ("disjoint", "disjoint")):
        rec = (b.data.get("ensemble") or {}).get(split)
        if not rec or "spearman" not in rec:
            continue
        target = d["correlations"] if key is None else d["disjoint"].setdefault("correlations", {})
        for k in [k for k in target if "seed ensemble" in k]:
            del target[k]
        groups = list(rec["groups"].values())
        row = {a: {m: statistics.fmean(g["row"][a][m] for g in groups) for m in ("spearman", "kendall")}
               for a in [*ASPECTS, "average"]}
        row["average"]["spearman_sd"] = rec["spearman"]["sd"]
        target[f"student MiniLM csem train recipe, {rec['recipe']}, seed ensemble of {rec['members']} "
               f"(csem train --members {rec['members']}), mean of {len(groups)} ensembles"
               + (", system-disjoint" if key else "")] = row
    ceiling = {split: {**{n: {"spearman": v["average"]["spearman"]} for n, v in rows.get("baselines", {}).items()},
                       **{f"student trained on the EXPERT labels: {n}": {"spearman": r["spearman"]["mean"],
                                                                        "spearman_sd": r["spearman"]["sd"]}
                          for n, r in rows.get("students", {}).items()}}
               for split, rows in (b.data.get("ceiling") or {}).items()}
    if ceiling:
        d["expert_ceiling"] = ceiling
    d["sanity"] = {case: {a: v["below_all"] for a, v in cells.items()}
                   for case, cells in b.data["sanity"].get(default, {}).items()}
    d["sanity_detail"] = b.data["sanity"]
    if b.data.get("sanity_seeds"):
        d["sanity_seeds"] = b.data["sanity_seeds"]
    d["sanity_aspects"] = b.data["sanity_aspects"].get(default, {})
    d["precision_ties"] = b.data["precision_ties"]
    if b.data.get("gate_speed"):
        d["gate_speed"] = b.data["gate_speed"]
    S.write_results(path.with_suffix(""), d, S.render(d))


def render(d: dict) -> list[str]:
    from harness import fmt

    lines = ["# Contrast pretraining and the sanity suite (SummEval, GPT-4 teacher)", "",
             f"Run {d['meta'].get('run')} on {d['meta'].get('machine')}; {d['meta'].get('seeds')} seeds per final row."
             + "".join(f" Stage {st} re-run {v['run']} ({v['threads']} torch thread(s), {v['machine']})."
                       for st, v in (d["meta"].get("stage_runs") or {}).items()), ""]
    cv = d.get("cv") or {}
    if cv.get("recipes"):
        n_seeds = max(len(r.get("label_per_seed") or [0]) for r in cv["recipes"].values())
        lines += [f"## Recipe choice: systems held out, training documents only (3 folds, "
                  f"{'one seed' if n_seeds == 1 else f'{n_seeds} seeds'})", "",
                  markdown_table([[n, fmt(r["label"]), ", ".join(fmt(v) for v in r.get("label_per_seed") or []),
                                   fmt(r["human"]), fmt(statistics.fmean(p["train_s"] for p in r["per_fold"]), 0)]
                                  for n, r in cv["recipes"].items()]
                                 + [[n, fmt(v), "", "", ""] for n, v in (cv.get("baselines") or {}).items()],
                                 ["recipe", "Spearman vs GPT-4 labels", "per seed (mean over folds)", "vs experts",
                                  "train s / fold"]), "",
                  f"Chosen: **{cv.get('chosen')}**.", ""]
    for split in ("standard", "disjoint"):
        rows = (d.get("final") or {}).get(split)
        if not rows:
            continue
        table = []
        for n, row in (rows.get("baselines") or {}).items():
            table.append([n, fmt(row["average"]["spearman"]), "", "", "", fmt(row["average"]["kendall"])])
        for n, rec in rows.items():
            if n == "baselines" or "spearman" not in rec:
                continue
            s = rec["spearman"]
            table.append([f"student: {n}", fmt(s["mean"]), fmt(s["sd"]), fmt(s["min"]), fmt(s["max"]), fmt(rec["kendall"]["mean"])])
            if "spearman_no_gate" in rec:
                s0 = rec["spearman_no_gate"]
                table.append([f"student: {n}{NO_GATE}", fmt(s0["mean"]), fmt(s0["sd"]), fmt(s0["min"]), fmt(s0["max"]),
                              fmt(rec["kendall_no_gate"]["mean"])])
        lines += [f"## {split} split: average summary-level correlation with the experts", "",
                  markdown_table(table, ["metric", "Spearman (mean)", "sd", "min", "max", "Kendall"]), ""]
    ens = {k: v for k, v in (d.get("ensemble") or {}).items() if "spearman" in v}
    if ens:
        table = []
        for split, rec in ens.items():
            s, one = rec["spearman"], rec["single"]
            table.append([split, str(rec["members"]), str(s["n"]), f"{fmt(s['mean'])} ± {fmt(s['sd'])}",
                          f"{fmt(s['min'])}-{fmt(s['max'])}", f"{fmt(one['mean'])} ± {fmt(one['sd'])}",
                          f"{fmt(one['min'])}-{fmt(one['max'])}", fmt(s["mean"] - one["mean"])])
        lines += ["## Seed ensembles of the default recipe (`csem train --members`)", "",
                  f"Recipe: {next(iter(ens.values()))['recipe']}. Each ensemble is one model scoring the mean of its "
                  "members' scores; its members, scored alone, are single students of the same seeds. Average "
                  "summary-level Spearman with the experts.", "",
                  markdown_table(table, ["split", "members", "ensembles", "ensemble, mean ± sd", "min-max",
                                         "its members alone, mean ± sd", "min-max", "gain"]), ""]
    for split, rows in (d.get("ceiling") or {}).items():
        table = [[n, fmt(row["average"]["spearman"]), "", ""] for n, row in rows.get("baselines", {}).items()]
        table += [[f"student trained on the EXPERT labels: {n}", fmt(r["spearman"]["mean"]), fmt(r["spearman"]["sd"]),
                   ", ".join(fmt(v["row"]["average"]["spearman"]) for v in r["seeds"].values())]
                  for n, r in rows.get("students", {}).items()]
        lines += [f"## Ceiling, {split} split: the student trained on the experts' own ratings", "",
                  "The same training rows labelled with the expert means instead of GPT-4's ratings (what a perfect "
                  "teacher would give); average summary-level Spearman with the experts on the test rows.", "",
                  markdown_table(table, ["metric", "Spearman (mean)", "sd", "per seed"]), ""]
        seen = rows.get("training_rows")
        if seen:
            lines += [f"Extractiveness against the experts on the training rows themselves: "
                      f"{fmt(seen['average']['spearman'])} (" + ", ".join(f"{a} {fmt(seen[a]['spearman'])}" for a in ASPECTS)
                      + ").", ""]
        curve = rows.get("curve") or {}
        if curve.get("fit"):
            f, need = curve["fit"], curve["fit"]["docs_to_target"]
            lines += [f"Learning curve of {curve['recipe']} on expert labels (training documents: Spearman mean ± sd "
                      "over the seeds): " + "; ".join(f"{k}: {fmt(v['mean'])} ± {fmt(v['sd'])}" for k, v in
                                                     sorted(curve["points"].items(), key=lambda kv: int(kv[0])))
                      + f". Fit {fmt(f['intercept'])} + {fmt(f['slope_per_ln_doc'])} ln(documents): it would reach "
                      f"{fmt(f['target'])} at " + (f"about {float(f'{need:.2g}'):,.0f} training documents." if need
                                                   else "no number of documents (flat or falling)."), ""]
    for name, san in (d.get("sanity") or {}).items():
        lines += [f"## Sanity suite: {name}", "", "Share of test documents where the degenerate candidate scores below "
                  "every real candidate (below the median in brackets).", "",
                  markdown_table([[c] + [f"{fmt(cells[a]['below_all'], 2)} ({fmt(cells[a]['below_median'], 2)})" if a in cells else "–"
                                         for a in ASPECTS] for c, cells in san.items()], ["case", *ASPECTS]), ""]
        mat = (d.get("sanity_aspects") or {}).get(name) or {}
        if mat:
            lines += ["Perturbation family (rows) x head (columns): share of pairs where the head scores the "
                      "perturbed text below the original.", "",
                      markdown_table([[f, *[fmt(v[h], 2) for h in ASPECTS], str(v["pairs"])] for f, v in mat.items()],
                                     ["family", *ASPECTS, "pairs"]), ""]
    ss = d.get("sanity_seeds")
    if ss:
        worst = ss["worst_seed"]
        lines += [f"## Sanity suite over seeds: {ss['recipe']}", "",
                  f"The lowest share over the seeds {', '.join(sorted(ss['per_seed']))} (one standard-split model each, "
                  "with its gate) of test documents where the degenerate candidate scores below every real one.", "",
                  markdown_table([[c] + [fmt(cells[a], 2) if a in cells else "–" for a in ASPECTS]
                                  for c, cells in worst.items()], ["case", *ASPECTS]), ""]
    gcv = d.get("gate_cv")
    if gcv:
        cases = list(next(iter(gcv["variants"].values()))["sanity_min_aspect"])
        lines += ["## The gate's features by cross-validation on the training documents", "",
                  f"{gcv['folds']} folds of the standard split's {gcv['documents']} training documents: the default "
                  "student's gate refitted on one fold, the sanity suite run on the other; share of held-out documents "
                  "where the degenerate text scores below every real candidate (worst aspect, mean over folds), and "
                  "the share of real held-out candidates the gate pulls down.", "",
                  markdown_table([[n, *[fmt(v["sanity_min_aspect"][c], 2) for c in cases], fmt(v["real_rejected_share"], 3)]
                                  for n, v in gcv["variants"].items()], ["gate reads", *cases, "real rejected"]), ""]
    if d.get("precision_ties"):
        lines += ["## Ties: bf16 vs fp32 scoring", "",
                  markdown_table([[p, str(v["tied_pairs"]), str(v["pairs"]), fmt(v["share"], 4), fmt(v["average_spearman"])]
                                  for p, v in d["precision_ties"].items()],
                                 ["precision", "tied within-document pairs", "pairs", "share", "average Spearman"]), ""]
    g = d.get("gate_speed")
    if g:
        lines += ["## What the acceptability gate costs at scoring time", "",
                  f"The default student scoring the {g['records']} test summaries, fp32, batch 32, "
                  f"{g['threads']} thread(s), interleaved, best of {g['repeats']}:", "",
                  markdown_table([[k, fmt(g[k]["seconds"], 2), fmt(g[k]["samples_per_s"], 1)]
                                  for k in ("with the gate", "gate removed")],
                                 ["scoring", "seconds", "summaries/s"]), "",
                  f"Slowdown with the gate: **{fmt(g['slowdown'], 2)}x**; fitting the gate after training took "
                  f"{fmt(g['gate_fit_seconds'], 1)} s ({g.get('train_rows')} training rows).", ""]
    return lines


def main() -> int:
    ap = parser(__doc__, out="student_contrast")
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="speed stage: timed repeats (best kept)")
    ap.add_argument("--split", default="both", choices=["standard", "disjoint", "both"], help="final stage: which split")
    ap.add_argument("--final-recipes", default="old,chosen",
                    help="final stage: old, chosen and/or indices into RECIPES")
    ap.add_argument("--init", default=None, help="the warm-start recipes' initial student (a model folder or "
                    "package:NAME); never one trained on SummEval's articles (teacher_pool_student.py "
                    "--exclude-dataset summeval)")
    ap.add_argument("--assume-chosen", default="", help="index into RECIPES to use as the chosen recipe before the "
                    "cv stage has finished (its final rows are kept only if the cv stage chooses the same)")
    ap.add_argument("--cv-recipes", default="", help="cv stage: indices into RECIPES, comma separated (default: all)")
    ap.add_argument("--cv-seeds", type=positive, default=1, help="cv stage: seeds per recipe (--seed, --seed + 1, ...); "
                    "each recipe's figure is the mean over seeds and folds, paired by seed")
    ap.add_argument("--members", type=int, default=5, help="ensemble stage: students per seed ensemble")
    ap.add_argument("--ensembles", type=int, default=3, help="ensemble stage: seed ensembles per split (disjoint seeds)")
    ap.add_argument("--models", type=Path, default=S.CACHE / "contrast_models")
    args = ap.parse_args()
    setup(args)
    global INIT
    INIT = args.init
    args.models.mkdir(parents=True, exist_ok=True)
    recs = summeval_llm_ratings(args.data_dir, judge="gpt-4-0314", method="rts")
    train, test = S.split_docs(recs, 0, 50), S.split_docs(recs, 50, 100)
    b = Bench(args)
    for stage in [s.strip() for s in args.stages.split(",") if s.strip()]:
        log(f"stage {stage}")
        if b.stamp is not None:
            b.data["meta"]["stage_runs"][stage] = b.stamp
        if stage == "cv":
            stage_cv(b, train)
        elif stage == "final":
            stage_final(b, train, test)
        elif stage == "ensemble":
            stage_ensemble(b, train, test)
        elif stage == "ceiling":
            stage_ceiling(b, train, test)
        elif stage == "gatecv":
            stage_gatecv(b, train)
        elif stage == "sanity":
            stage_sanity(b, test)
        elif stage == "sanity_seeds":
            stage_sanity_seeds(b, test)
        elif stage == "ties":
            stage_ties(b, test)
        elif stage == "speed":
            stage_speed(b, test)
        else:
            raise SystemExit(f"unknown stage {stage}")
    b.save()
    b.data = b.merged  # every process's rows, as written
    if Path(args.out).resolve() == (RESULTS / "student_contrast").resolve():
        merge(b)
    else:  # a trial run elsewhere never rewrites the benchmark's published figures
        log(f"--out {args.out}: benchmarks/results/student_summeval.json left as it is")
    if b.skipped:
        log(f"{len(b.skipped)} stage part(s) not done: " + "; ".join(b.skipped))
        return 3 if b.touched or b.owned else 1  # partial, or nothing done
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
