"""Which student recipe should the main job train? Grouped cross-validation on its training articles
(issue 24: "the main job's student starts from the pretrained point, so that 90 judged rows are enough
to learn something").

Data: a finished main-job run folder (``csem run package:summarization.yaml --run-dir DIR``): its
judged candidates (``labelled.jsonl``) and its train/test split of the 24 articles. Only the
**training** articles are used to choose: they are split into ``--folds`` groups of articles; for each
recipe, fold and seed a student is trained (the pipeline's own train settings, the recipe's
``TrainConfig`` fields on top) on the other folds and scored on the held-out fold; the figure is the
summary-level Spearman of student vs judge (within each article over its candidates, averaged over
articles; :func:`csem.meta.correlation.column_correlations`), per aspect, averaged over folds, then mean
and sd over seeds. The held-out test articles are not read unless ``--test`` is given: then the chosen
recipes are also trained on all training articles and scored on the test articles, once per seed (the
figure the main job's seeds stage reports).

Beside the students, the trivial baselines on the same folds: length (words) and extractiveness (share
of the candidate's trigrams found in the source), signed as the judge prefers them on the training folds.

Run:  python benchmarks/bench_main_job_recipe.py --run-dir /tmp/mainjob [--recipes default,no-contrast,...]
      [--seeds 12,13,14] [--test 12,13,14,15,16]
Out:  benchmarks/results/main_job_recipe.{json,md}
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

from harness import fmt, log, machine, markdown_table, now, parser, setup, write_results

#: candidate recipes: TrainConfig fields over the pipeline's train.options (csem train's defaults); a
#: ``model`` entry holds ModelConfig fields over the pipeline's train.model
RECIPES: dict[str, dict] = {
    "pipeline settings": {},  # the pipeline file's train section as it stands
    # csem train's defaults (ModelConfig / TrainConfig), whatever the pipeline file sets (no warm start,
    # one student, no contrast pairs)
    "csem train default": {"model": {"feature_set": "overlap", "members": 1}, "init": None, "lr": 1e-3,
                           "head_lr": 1e-3, "max_epochs": 1, "contrast_per_record": 0},
    "frozen encoder 3 epochs": {"frozen_epochs": 3, "max_epochs": 3},
    "frozen encoder 6 epochs": {"frozen_epochs": 6, "max_epochs": 6},
    "pairwise weight 3": {"model": {"pairwise_weight": 3.0}},
    "2 epochs lr 3e-4": {"max_epochs": 2, "lr": 3e-4, "head_lr": 3e-4},
    "lexical features lr 1e-4 3 epochs": {"model": {"feature_set": "lexical"}, "lr": 1e-4, "head_lr": 1e-4,
                                          "max_epochs": 3},
    # seed ensembles (ModelConfig.members): 5 students, the mean of their scores; seed s trains members
    # 5s..5s+4, so the ensembles of different seeds share no member
    # variants of csem train's default (no warm start, one student), for a pipeline that trains it
    "csem train default 2 epochs": {"model": {"feature_set": "overlap", "members": 1}, "init": None, "lr": 1e-3,
                                    "head_lr": 1e-3, "max_epochs": 2, "contrast_per_record": 0},
    "csem train default lr 3e-4 3 epochs": {"model": {"feature_set": "overlap", "members": 1}, "init": None,
                                            "lr": 3e-4, "head_lr": 3e-4, "max_epochs": 3, "contrast_per_record": 0},
    "csem train default novelty features": {"model": {"feature_set": "novelty", "members": 1}, "init": None,
                                            "lr": 1e-3, "head_lr": 1e-3, "max_epochs": 1, "contrast_per_record": 0},
    "csem train default lexical features": {"model": {"feature_set": "lexical", "members": 1}, "init": None,
                                            "lr": 1e-3, "head_lr": 1e-3, "max_epochs": 1, "contrast_per_record": 0},
    "csem train default without the gate": {"model": {"feature_set": "overlap", "members": 1,
                                                      "acceptability_gate": False}, "init": None, "lr": 1e-3,
                                            "head_lr": 1e-3, "max_epochs": 1, "contrast_per_record": 0},
    "csem train default x5 seed ensemble": {"model": {"feature_set": "overlap", "members": 5}, "init": None,
                                            "lr": 1e-3, "head_lr": 1e-3, "max_epochs": 1, "contrast_per_record": 0},
    "lexical features lr 1e-4 3 epochs x5 seed ensemble": {"model": {"feature_set": "lexical", "members": 5},
                                                          "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 3},
    "no-contrast": {"contrast_per_record": 0},
    "contrast x4": {"contrast_per_record": 4},
    "3 epochs": {"max_epochs": 3},
    "contrast x4 + 3 epochs": {"contrast_per_record": 4, "max_epochs": 3},
    "contrast x4 + 2 contrast epochs + 3 epochs": {"contrast_per_record": 4, "contrast_epochs": 2, "max_epochs": 3},
    # warm starts (TrainConfig.init) from the student given by --init (teacher_pool_student.py: distilled from
    # the teacher pool's 0.5B judge on news summaries); INIT is replaced by --init
    "warm start 1 epoch lr 1e-4": {"init": "INIT", "model": {"feature_set": "overlap", "members": 1},
                                       "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 1},
    "warm start 3 epochs lr 1e-4": {"init": "INIT", "model": {"feature_set": "overlap", "members": 1},
                                        "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 3},
    "warm start heads only 3 epochs lr 1e-3": {"init": "INIT", "model": {"feature_set": "overlap", "members": 1},
                                                    "train_layers": 0, "lr": 1e-3, "head_lr": 1e-3, "max_epochs": 3},
    "warm start 6 epochs lr 1e-4": {"init": "INIT", "model": {"feature_set": "overlap", "members": 1},
                                    "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 6},
    "warm start 3 epochs lr 3e-4": {"init": "INIT", "model": {"feature_set": "overlap", "members": 1},
                                    "lr": 3e-4, "head_lr": 3e-4, "max_epochs": 3},
    "warm start 3 epochs lr 1e-4 x5 seed ensemble": {"init": "INIT", "model": {"feature_set": "overlap",
                                                                               "members": 5},
                                                     "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 3},
    "warm start 3 epochs lr 3e-4 x5 seed ensemble": {"init": "INIT", "model": {"feature_set": "overlap",
                                                                               "members": 5},
                                                     "lr": 3e-4, "head_lr": 3e-4, "max_epochs": 3},
    "warm start 1 epoch lr 1e-3": {"init": "INIT", "model": {"feature_set": "overlap", "members": 1},
                                   "lr": 1e-3, "head_lr": 1e-3, "max_epochs": 1},
    "warm start 1 epoch lr 1e-3 x5 seed ensemble": {"init": "INIT", "model": {"feature_set": "overlap",
                                                                              "members": 5},
                                                    "lr": 1e-3, "head_lr": 1e-3, "max_epochs": 1},
    "warm start 1 epoch lr 1e-4 x5 seed ensemble": {"init": "INIT", "model": {"feature_set": "overlap",
                                                                                  "members": 5},
                                                        "lr": 1e-4, "head_lr": 1e-4, "max_epochs": 1},
}


def folds_of(doc_ids: list[str], k: int, seed: int = 0) -> list[list[str]]:
    """``k`` groups of articles (shuffled with ``seed``, then dealt round-robin)."""
    ids = sorted(set(doc_ids))
    random.Random(seed).shuffle(ids)
    return [ids[i::k] for i in range(k)]


def summary_spearman(records: list[dict], metric: str, target: str) -> float | None:
    from csem.meta.correlation import column_correlations

    v = column_correlations(records, metric, target, levels=("summary",), methods=("spearman",))
    value = v[("summary", "spearman")].value
    return None if value != value else value


def configs_of(t, recipe: dict, seed: int, threads: int | None = None):
    """The (ModelConfig, TrainConfig) of ``recipe`` over a pipeline's train section ``t``: the recipe's
    ``model`` fields over ``t.model``, its other fields over ``t.options`` (a field the recipe sets, ``init``
    included, replaces the pipeline's; ``"INIT"`` stands for ``--init``); a seed ensemble of seed s trains
    members with seeds ``s * members ...``, so ensembles of different seeds share no member."""
    from csem.model import ModelConfig, TrainConfig

    recipe = dict(recipe)
    if recipe.get("init") == "INIT":
        if not INIT:
            raise SystemExit("a warm-start recipe needs --init (a student folder, e.g. from teacher_pool_student.py)")
        recipe["init"] = INIT
    config = ModelConfig(encoder=t.encoder, mode=t.mode, **{**t.model, **recipe.pop("model", {})})
    seed = seed * config.members if config.members > 1 else seed  # disjoint members across seeds
    tc = TrainConfig(**{**t.options, **recipe, "seed": seed, "num_threads": threads, "progress": False})
    return config, tc


def train_and_score(pipe, train: list[dict], test: list[dict], labels: list[str], recipe: dict, seed: int,
                    threads: int) -> tuple[dict[str, float | None], float]:
    """A student with the pipeline's train settings and ``recipe`` on ``train``; its summary-level
    Spearman with the judge on ``test`` per label column (a seed ensemble also: ``"members"``, label ->
    the mean over its members scored alone), and the training seconds."""
    from csem.model.fit import fit

    t = pipe.cfg.train
    ranges = pipe.scales()
    config, tc = configs_of(t, recipe, seed, threads)
    t0 = time.perf_counter()
    model = fit(train, labels, mode=t.mode, config=config, train_config=tc,
                label_range={c: ranges[c] for c in labels if c in ranges} or None)
    secs = time.perf_counter() - t0

    def correlations(m) -> dict[str, float | None]:
        cols = m.predict(test, name="student").scores
        res = {}
        for label in labels:
            aspect = label.rsplit(".", 1)[-1]
            (mcol,) = [c for c in cols if c.endswith("." + aspect)]
            rows = [dict(r, **{mcol: v}) for r, v in zip(test, cols[mcol])]
            res[label] = summary_spearman(rows, mcol, label)
        return res

    out: dict = correlations(model)
    if config.members > 1:  # each member alone: the ensemble's gain over its own members (paired)
        alone = [correlations(model.member(i)) for i in range(config.members)]
        out["members"] = {l: mean_sd([a[l] for a in alone])[0] for l in labels}
    return out, secs


#: the warm-start recipes' initial student (--init)
INIT: str | None = None


def initial_as_is(test: list[dict], labels: list[str]) -> dict[str, float | None]:
    """The initial student (--init) with no main-job label: its score for the label's aspect, or its only
    aspect's score for every label, against the judge on ``test``."""
    from csem.model import EvaluationModel

    model = EvaluationModel.load(INIT)
    cols = model.predict(test, name="init").scores
    res = {}
    for label in labels:
        aspect = label.rsplit(".", 1)[-1]
        mine = [c for c in cols if c.endswith("." + aspect)] or [c for c in cols if not c.endswith(".std")][:1]
        rows = [dict(r, **{mine[0]: v}) for r, v in zip(test, cols[mine[0]])]
        res[label] = summary_spearman(rows, mine[0], label)
    return res


def baselines(train: list[dict], test: list[dict], labels: list[str]) -> dict[str, dict[str, float | None]]:
    """Length and extractiveness (:mod:`csem.baselines.lexical`), each signed by its summary-level
    correlation on ``train`` (the sign a user would pick from the training data), and the student's own
    overlap features fitted by least squares on ``train``'s labels (what the student adds to them), and the
    system prior (each candidate scored by its system's mean label on ``train``; :mod:`csem.baselines.prior`)."""
    import numpy as np

    from csem.baselines import extractiveness, length
    from csem.model.features import overlap_features

    def with_metrics(rows):
        return [dict(r, **{"metric.length": n, "metric.extractiveness": e})
                for r, n, e in zip(rows, length(rows), extractiveness(rows))]

    tr, te = with_metrics(train), with_metrics(test)
    res: dict = {}
    for name in ("length", "extractiveness"):
        res[name] = {}
        for label in labels:
            sign = summary_spearman(tr, f"metric.{name}", label) or 0.0
            v = summary_spearman(te, f"metric.{name}", label)
            res[name][label] = None if v is None else (v if sign >= 0 else -v)

    def x(rows):
        return np.array([[*overlap_features(r["candidate"], [r["source"]]), 1.0] for r in rows])

    from csem.baselines import system_prior

    prior = system_prior(train, test, labels)
    res["system prior"] = {}
    for label in labels:
        rows = [dict(r, **{"metric.prior": p}) for r, p in zip(test, prior[label])]
        res["system prior"][label] = summary_spearman(rows, "metric.prior", label)
    x_tr, x_te = x(train), x(test)
    if INIT:
        res["the initial student as it is (--init, no main-job label)"] = initial_as_is(test, labels)
    res["overlap features (least squares)"] = {}
    for label in labels:
        keep = [i for i, r in enumerate(train) if r.get(label) is not None]
        w, *_ = np.linalg.lstsq(x_tr[keep], np.array([train[i][label] for i in keep]), rcond=None)
        rows = [dict(r, **{"metric.ls": float(p)}) for r, p in zip(test, x_te @ w)]
        res["overlap features (least squares)"][label] = summary_spearman(rows, "metric.ls", label)
    return res


def mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="main_job_recipe", threads=1, seed=None)
    ap.add_argument("--run-dir", required=True, help="a finished main-job run folder")
    ap.add_argument("--pipeline", default="package:summarization.yaml")
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--seeds", default="12,13,14")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--test", default="", help="seeds for the held-out test articles (chosen recipes only)")
    ap.add_argument("--test-recipes", default="", help="recipes to score on the test articles "
                    "(default: the CV winner and 'csem train default')")
    ap.add_argument("--all-articles", action="store_true",
                    help="folds over all the run's articles, the test ones included: an estimate of a recipe's "
                         "agreement with less split noise than six test articles give, never a choice (no --test)")
    ap.add_argument("--init", default=None, help="the warm-start recipes' initial student (a model folder)")
    args = ap.parse_args()
    if args.all_articles and args.test:
        ap.error("--all-articles folds over the test articles too: it takes no --test")
    setup(args)
    global INIT
    INIT = args.init
    from csem.pipeline.runner import Pipeline

    pipe = Pipeline.from_file(args.pipeline, run_dir=Path(args.run_dir), progress=False)
    recs, counts = pipe.labelled()
    labels = pipe.label_cols()
    train = [r for r in recs if r.get("split") == "train"]
    test = [r for r in recs if r.get("split") == "test"]
    if args.all_articles:
        train, test = train + test, []
    names = [n for n in args.recipes.split(",") if n]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        ap.error(f"--recipes: unknown recipe(s) {unknown}; known: {list(RECIPES)}")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    folds = folds_of([r["doc_id"] for r in train], args.folds)
    log(f"{len(train)} training rows ({len({r['doc_id'] for r in train})} articles, {len(folds)} folds), "
        f"{len(test)} test rows; labels {labels}; recipes {names}; seeds {seeds}")
    t_all = time.perf_counter()
    cv: dict = {}
    base_names = ["length", "extractiveness", "overlap features (least squares)", "system prior"]
    if INIT:
        base_names.append("the initial student as it is (--init, no main-job label)")
    base_cv: dict = {n: {l: [] for l in labels} for n in base_names}
    for fold in folds:
        held = set(fold)
        b = baselines([r for r in train if r["doc_id"] not in held], [r for r in train if r["doc_id"] in held], labels)
        for name in base_cv:
            for l in labels:
                base_cv[name][l].append(b[name][l])
    for name in names:
        per_seed: dict = {l: [] for l in labels}
        alone_seed: dict = {l: [] for l in labels}
        secs = []
        for seed in seeds:
            per_fold: dict = {l: [] for l in labels}
            alone_fold: dict = {l: [] for l in labels}
            for fold in folds:
                held = set(fold)
                corr, s = train_and_score(pipe, [r for r in train if r["doc_id"] not in held],
                                          [r for r in train if r["doc_id"] in held], labels, RECIPES[name], seed,
                                          args.threads)
                secs.append(s)
                for l in labels:
                    per_fold[l].append(corr[l])
                    if "members" in corr:
                        alone_fold[l].append(corr["members"][l])
            for l in labels:
                per_seed[l].append(mean_sd(per_fold[l])[0])
                if alone_fold[l]:
                    alone_seed[l].append(mean_sd(alone_fold[l])[0])
            log(f"cv {name} seed {seed}: " + ", ".join(f"{l} {fmt(per_seed[l][-1])}" for l in labels))
        cv[name] = {"train_config": RECIPES[name], "per_seed": per_seed, "train_seconds": statistics.fmean(secs),
                    **{l: dict(zip(("mean", "sd"), mean_sd(per_seed[l]))) for l in labels}}
        cv[name]["average"] = statistics.fmean(cv[name][l]["mean"] for l in labels)
        if any(alone_seed.values()):
            cv[name]["members_alone"] = {l: dict(zip(("mean", "sd"), mean_sd(alone_seed[l]))) for l in labels}
    chosen = max(cv, key=lambda n: cv[n]["average"])
    res = {"meta": {"date": now(), "machine": machine(), "threads": args.threads, "run_dir": str(args.run_dir),
                    "train_rows": len(train), "test_rows": len(test), "folds": [sorted(f) for f in folds],
                    "seeds": seeds, "labels": labels, "init": INIT, "all_articles": args.all_articles},
           "cv": cv, "cv_baselines": {n: {l: mean_sd(v)[0] for l, v in d.items()} for n, d in base_cv.items()},
           "chosen": chosen}
    test_seeds = [int(s) for s in args.test.split(",") if s]
    if test_seeds:
        which = [n for n in args.test_recipes.split(",") if n] or sorted({chosen, "csem train default"})
        res["test"] = {}
        for name in which:
            per: dict = {l: [] for l in labels}
            alone: dict = {l: [] for l in labels}
            for seed in test_seeds:
                corr, _ = train_and_score(pipe, train, test, labels, RECIPES[name], seed, args.threads)
                for l in labels:
                    per[l].append(corr[l])
                    if "members" in corr:
                        alone[l].append(corr["members"][l])
                log(f"test {name} seed {seed}: " + ", ".join(f"{l} {fmt(corr[l])}" for l in labels))
            res["test"][name] = {"per_seed": per, **{l: dict(zip(("mean", "sd"), mean_sd(per[l]))) for l in labels}}
            if any(alone.values()):
                res["test"][name]["members_alone"] = {l: dict(zip(("mean", "sd"), mean_sd(alone[l]))) for l in labels}
        res["test_baselines"] = baselines(train, test, labels)
    res["meta"]["seconds"] = time.perf_counter() - t_all

    md = ["# Main-job student recipe: grouped cross-validation on "
          f"{'all the articles (an estimate, not a choice)' if args.all_articles else 'the training articles'}"
          " (issue 24)", "",
          f"Run folder `{args.run_dir}` ({len(train)} training rows, {len(test)} test rows; labels "
          f"{', '.join(labels)}). {len(folds)} folds of "
          f"{'all the articles, the test ones included (an estimate, not a choice)' if args.all_articles else 'training articles'}"
          f", seeds {seeds}; summary-level Spearman "
          f"of student vs judge on the held-out fold, averaged over folds, mean ± sd over seeds. "
          f"{res['meta']['date']}, {machine()}, {args.threads} torch thread(s).", ""]
    rows = [[n, *[f"{fmt(cv[n][l]['mean'])} ± {fmt(cv[n][l]['sd'])}" for l in labels], fmt(cv[n]["average"]),
             f"{cv[n]['train_seconds']:.0f}"] for n in names]
    rows += [[f"{n}: its members alone", *[f"{fmt(cv[n]['members_alone'][l]['mean'])} ± "
                                          f"{fmt(cv[n]['members_alone'][l]['sd'])}" for l in labels],
              fmt(statistics.fmean(cv[n]["members_alone"][l]["mean"] for l in labels)), ""]
             for n in names if "members_alone" in cv[n]]
    rows += [[f"baseline: {n}", *[fmt(res["cv_baselines"][n][l]) for l in labels],
              fmt(statistics.fmean(res["cv_baselines"][n][l] for l in labels)), ""] for n in base_cv]
    md += [markdown_table(rows, ["recipe", *labels, "average", "s/student"]), "",
           f"Highest in these folds: **{chosen}** (not a choice: the test articles are among the folds)."
           if args.all_articles else f"Chosen by CV: **{chosen}**."]
    if test_seeds:
        md += ["", f"## Held-out test articles ({len(test)} candidates), seeds {test_seeds}", ""]
        trows = [[n, *[f"{fmt(d[l]['mean'])} ± {fmt(d[l]['sd'])}" for l in labels]] for n, d in res["test"].items()]
        trows += [[f"{n}: its members alone", *[f"{fmt(d['members_alone'][l]['mean'])} ± "
                                                f"{fmt(d['members_alone'][l]['sd'])}" for l in labels]]
                  for n, d in res["test"].items() if "members_alone" in d]
        trows += [[f"baseline: {n}", *[fmt(d[l]) for l in labels]] for n, d in res["test_baselines"].items()]
        md += [markdown_table(trows, ["recipe", *labels])]
    md += ["", f"Total {res['meta']['seconds'] / 60:.1f} min."]
    write_results(args.out, res, md)
    log(f"wrote {args.out}.json/.md")


if __name__ == "__main__":
    main()
