"""How deep may a seed ensemble's members share their encoder? Grouped cross-validation on the main job's
training articles of seed ensembles whose scoring cost differs, beside one student and the trivial baselines.

Question: the main job ships a seed ensemble of 5 students that fine-tune the top 2 of MiniLM's 6 layers
(``TrainConfig.train_layers=2``); scoring runs the 4 shared lower layers once and each member's top 2, so
the ensemble costs at least (4 + 5 * 2) / 6 = 2.33x one member's encoder. Do ensembles that cost less
keep its agreement with the judge?

Recipes (the main job's train settings, ``package:summarization.yaml``, with these fields on top):

* ``ensemble x5 top 2 layers``: the shipped recipe (members 5, train_layers 2).
* ``ensemble x5 top 1 layer``: members fine-tune only the top layer (floor (5 + 5) / 6 = 1.67x).
* ``ensemble x5 heads over member 1's encoder [3 epochs]``: member 1 is the shipped recipe's
  student; members 2-5 start from its fine-tuned encoder (frozen: ``train_layers=0``) with fresh
  heads (re-initialised with their own seed) and train only the heads (1 or 3 epochs). Every member
  has one encoder, so scoring embeds each text once (``shared_depth == -1``, about 1.1x).
  Built here from csem's training steps (``csem.model.train.train_student`` with ``init``); csem has
  no option for it.
* ``ensemble x5 heads over the pretrained encoder [3 epochs]``: members 5, train_layers 0
  (the bare MiniLM frozen: one encoder for all, about 1.1x).
* ``one student top 2 layers`` (csem train's default) and ``one student top 1 layer``.

Method: the run folder's training articles only (its test articles are never read), ``--folds``
groups of articles (``folds_of``, as ``bench_main_job_recipe.py``); for each recipe, seed and fold
a model is trained on the other folds and scored on the held-out fold; the figure is the
summary-level Spearman of model vs judge per aspect, averaged over folds, then mean and sd over
seeds. A seed ensemble of seed s has members with seeds 5s ... 5s + 4 (as the recipe study, so
ensembles of different seeds share no member). Beside them the study's trivial baselines on the same
folds (length, extractiveness, the overlap features fitted by least squares, the system prior).

Cost: for every ensemble of the first seed and fold, ``shared_depth`` of its members, and the
wall seconds of ``predict`` on the training rows (best of ``--repeats`` after a warm-up, fp32,
``--threads`` torch threads) for the ensemble and for its first member alone, side by side.

Run:  PYTHONPATH=research:research/main_job_recipes python research/ensemble_depth/bench_ensemble_depth.py \
          --run-dir RUN [--recipes A,B] [--seeds 12,13,14] --out research/ensemble_depth/ensemble_depth_cv
"""

from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

from bench_main_job_recipe import baselines, folds_of, mean_sd, summary_spearman
from harness import fmt, log, machine, markdown_table, now, parser, setup, write_results

RECIPES: dict[str, dict] = {
    "ensemble x5 top 2 layers (shipped)": {"members": 5, "train_layers": 2},
    "ensemble x5 top 1 layer": {"members": 5, "train_layers": 1},
    "ensemble x5 heads over member 1's encoder": {"members": 5, "train_layers": 2, "heads": 1},
    "ensemble x5 heads over member 1's encoder 3 epochs": {"members": 5, "train_layers": 2, "heads": 3},
    "ensemble x5 heads over the pretrained encoder": {"members": 5, "train_layers": 0},
    "ensemble x5 heads over the pretrained encoder 3 epochs": {"members": 5, "train_layers": 0,
                                                                      "max_epochs": 3},
    "one student top 2 layers": {"members": 1, "train_layers": 2},
    "one student top 1 layer": {"members": 1, "train_layers": 1},
}


def configs_of(t, recipe: dict, seed: int, threads: int):
    """(ModelConfig with ``members``, TrainConfig of the first member) of ``recipe`` over the pipeline's
    train section ``t``; seed s of a k-member ensemble starts at seed k * s."""
    from csem.model import ModelConfig, TrainConfig

    members = recipe["members"]
    config = ModelConfig(encoder=t.encoder, mode=t.mode, **{**t.model, "members": members})
    fields = {k: v for k, v in recipe.items() if k not in ("members", "heads")}
    tc = TrainConfig(**{**t.options, **fields, "seed": seed * members if members > 1 else seed,
                        "num_threads": threads, "progress": False})
    return config, tc


def heads_ensemble(train: list[dict], labels: list[str], mode: str, config, tc, label_range, epochs: int):
    """Member 1: one student of ``tc``; members 2..k: member 1's encoder (frozen, ``train_layers=0``)
    with fresh heads (re-initialised under ``torch.manual_seed`` of the member's seed), heads trained
    for ``epochs`` epochs; the mean of their scores (`EvaluationModel.ensemble`)."""
    import torch
    from torch import nn

    from csem.model import EvaluationModel
    from csem.model.fit import fit
    from csem.model.train import train_student

    one = config.model_copy(update={"members": 1})
    first = fit(train, labels, mode=mode, config=one, train_config=tc, label_range=label_range)
    students, seeds = [first], [tc.seed]
    for i in range(1, config.members):
        seed = tc.seed + i
        start = copy.deepcopy(first)
        torch.manual_seed(seed)
        for head in start.module.heads.values():
            for layer in head.modules():
                if isinstance(layer, nn.Linear):
                    layer.reset_parameters()
        member_tc = tc.model_copy(update={"seed": seed, "train_layers": 0, "max_epochs": epochs})
        students.append(train_student(train, labels, mode, one, member_tc, None, label_range=label_range,
                                      init=start))
        seeds.append(seed)
    return EvaluationModel.ensemble(students, seeds=seeds)


def train_model(pipe, train: list[dict], recipe: dict, seed: int, threads: int):
    """The model of ``recipe`` and ``seed`` trained on ``train`` (and its training seconds)."""
    from csem.model.fit import fit

    t = pipe.cfg.train
    labels = pipe.label_cols()
    ranges = pipe.scales()
    label_range = {c: ranges[c] for c in labels if c in ranges} or None
    config, tc = configs_of(t, recipe, seed, threads)
    t0 = time.perf_counter()
    if recipe.get("heads"):
        model = heads_ensemble(train, labels, t.mode, config, tc, label_range, recipe["heads"])
    else:
        model = fit(train, labels, mode=t.mode, config=config, train_config=tc, label_range=label_range)
    return model, time.perf_counter() - t0


def correlations(model, test: list[dict], labels: list[str]) -> dict[str, float | None]:
    """Summary-level Spearman of ``model`` vs the judge on ``test``, per label column."""
    cols = model.predict(test, name="student", precision="fp32").scores
    res = {}
    for label in labels:
        aspect = label.rsplit(".", 1)[-1]
        (mcol,) = [c for c in cols if c.endswith("." + aspect)]
        rows = [dict(r, **{mcol: v}) for r, v in zip(test, cols[mcol])]
        res[label] = summary_spearman(rows, mcol, label)
    return res


def timing(model, rows: list[dict], repeats: int) -> dict:
    """Wall seconds of ``predict`` on ``rows``: the ensemble and its first member alone, best of
    ``repeats`` after one warm-up each, alternating; and the members' ``shared_depth``."""
    from csem.model.inference import shared_depth

    one = model.member(0)
    best = {"ensemble": float("inf"), "one member": float("inf")}
    for m in (model, one):
        m.predict(rows[:8], precision="fp32")
    for _ in range(repeats):
        for name, m in (("ensemble", model), ("one member", one)):
            t0 = time.perf_counter()
            m.predict(rows, precision="fp32")
            best[name] = min(best[name], time.perf_counter() - t0)
    return {"shared_depth": shared_depth(model.members), "rows": len(rows), "ensemble_s": best["ensemble"],
            "one_member_s": best["one member"], "ratio": best["ensemble"] / best["one member"]}


def table(names: list[str], cv: dict, base_cv: dict, labels: list[str]) -> list[list[str]]:
    rows = []
    for n in names:
        c = cv[n]
        cost = c.get("cost")
        rows.append([n, *[f"{fmt(c[l]['mean'])} ± {fmt(c[l]['sd'])}" for l in labels],
                     f"{fmt(c['average'])} ± {fmt(c['average_sd'])}", f"{c['train_seconds']:.0f}",
                     "" if cost is None else str(cost["shared_depth"]),
                     "" if cost is None else f"{cost['ratio']:.2f}x"])
    for n in names:
        if "members_alone" in cv[n]:
            a = cv[n]["members_alone"]
            rows.append([f"{n}: its members alone", *[f"{fmt(a[l]['mean'])} ± {fmt(a[l]['sd'])}" for l in labels],
                         fmt(statistics.fmean(a[l]["mean"] for l in labels)), "", "", ""])
    rows += [[f"baseline: {n}", *[fmt(base_cv[n][l]) for l in labels],
              fmt(statistics.fmean(base_cv[n][l] for l in labels)), "", "", ""] for n in base_cv]
    return rows


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="ensemble_depth_cv", threads=1, seed=None)
    ap.add_argument("--run-dir", required=True, help="a finished main-job run folder")
    ap.add_argument("--pipeline", default="package:summarization.yaml")
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--seeds", default="12,13,14")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="timed predict passes per model")
    args = ap.parse_args()
    setup(args)
    from csem.pipeline.runner import Pipeline

    pipe = Pipeline.from_file(args.pipeline, run_dir=Path(args.run_dir), progress=False)
    recs, _ = pipe.labelled()
    labels = pipe.label_cols()
    train = [r for r in recs if r.get("split") == "train"]  # the test articles are never read
    names = [n for n in args.recipes.split(",") if n]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        ap.error(f"--recipes: unknown recipe(s) {unknown}; known: {list(RECIPES)}")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    folds = folds_of([r["doc_id"] for r in train], args.folds)
    log(f"{len(train)} training rows ({len({r['doc_id'] for r in train})} articles, {len(folds)} folds); "
        f"labels {labels}; recipes {names}; seeds {seeds}")
    t_all = time.perf_counter()
    base_cv: dict = {}
    for fold in folds:
        held = set(fold)
        b = baselines([r for r in train if r["doc_id"] not in held], [r for r in train if r["doc_id"] in held], labels)
        for name, per in b.items():
            for l in labels:
                base_cv.setdefault(name, {}).setdefault(l, []).append(per[l])
    base_cv = {n: {l: mean_sd(v)[0] for l, v in d.items()} for n, d in base_cv.items()}
    meta = {"date": now(), "machine": machine(), "threads": args.threads, "run_dir": str(args.run_dir),
            "train_rows": len(train), "folds": [sorted(f) for f in folds], "seeds": seeds, "labels": labels}
    cv = previous(args.out, meta)  # a re-run resumes: recipes already in the results file are kept
    for name in names:
        recipe = RECIPES[name]
        if name in cv and cv[name]["recipe"] == recipe:
            log(f"cv {name}: kept from {args.out}.json")
            continue
        per_seed: dict = {l: [] for l in labels}
        alone_seed: dict = {l: [] for l in labels}
        secs, cost = [], None
        for seed in seeds:
            per_fold: dict = {l: [] for l in labels}
            alone_fold: dict = {l: [] for l in labels}
            for fold in folds:
                held = set(fold)
                trn = [r for r in train if r["doc_id"] not in held]
                dev = [r for r in train if r["doc_id"] in held]
                model, s = train_model(pipe, trn, recipe, seed, args.threads)
                secs.append(s)
                corr = correlations(model, dev, labels)
                for l in labels:
                    per_fold[l].append(corr[l])
                if len(model.members) > 1:
                    alone = [correlations(model.member(i), dev, labels) for i in range(len(model.members))]
                    for l in labels:
                        alone_fold[l].append(mean_sd([a[l] for a in alone])[0])
                    if cost is None:
                        cost = timing(model, train, args.repeats)
                        log(f"cost {name}: shared depth {cost['shared_depth']}, ensemble {cost['ensemble_s']:.2f} s,"
                            f" one member {cost['one_member_s']:.2f} s, {cost['ratio']:.2f}x")
            for l in labels:
                per_seed[l].append(mean_sd(per_fold[l])[0])
                if alone_fold[l]:
                    alone_seed[l].append(mean_sd(alone_fold[l])[0])
            log(f"cv {name} seed {seed}: " + ", ".join(f"{l} {fmt(per_seed[l][-1])}" for l in labels))
        averages = [statistics.fmean(per_seed[l][i] for l in labels) for i in range(len(seeds))]
        cv[name] = {"recipe": recipe, "per_seed": per_seed, "train_seconds": statistics.fmean(secs),
                    **{l: dict(zip(("mean", "sd"), mean_sd(per_seed[l]))) for l in labels},
                    "average": statistics.fmean(averages), "average_per_seed": averages,
                    "average_sd": statistics.stdev(averages) if len(averages) > 1 else None, "cost": cost}
        if any(alone_seed.values()):
            cv[name]["members_alone"] = {l: dict(zip(("mean", "sd"), mean_sd(alone_seed[l]))) for l in labels}
        write(args, meta, cv, base_cv, [n for n in RECIPES if n in cv], time.perf_counter() - t_all)
    write(args, meta, cv, base_cv, [n for n in RECIPES if n in cv], time.perf_counter() - t_all)


def previous(out: Path, meta: dict) -> dict:
    """The recipes of an earlier run's results file with the same run folder, folds, seeds and threads."""
    import json

    path = Path(out).with_suffix(".json")
    if not path.exists():
        return {}
    old = json.loads(path.read_text(encoding="utf-8"))
    same = all(old["meta"].get(k) == meta[k] for k in ("run_dir", "folds", "seeds", "labels", "threads"))
    return dict(old["cv"]) if same else {}


def write(args, meta: dict, cv: dict, base_cv: dict, names: list[str], seconds: float) -> None:
    """The results file and its Markdown table (rewritten after every recipe)."""
    labels, train_rows, seeds = meta["labels"], meta["train_rows"], meta["seeds"]
    res = {"meta": {**meta, "seconds": seconds}, "cv": cv, "cv_baselines": base_cv}
    md = [("# Seed ensembles that share more of their encoder: grouped cross-validation on the main job's "
           "training articles"), "",
          (f"Run folder `{args.run_dir}` ({train_rows} training rows of {sum(map(len, meta['folds']))} "
          f"articles; labels {', '.join(labels)}). {len(meta['folds'])} folds of training articles, seeds {seeds}; "
          "summary-level Spearman of model vs judge on the held-out fold, averaged over folds, mean ± sd over "
          f"seeds. {res['meta']['date']}, {machine()}, {args.threads} torch thread(s)."), "",
          ("Cost: `shared_depth` of the members (-1: one encoder for all; k: embeddings and layers 0..k-1 "
          "shared) and the ensemble's `predict` time over its first member's alone on the "
          f"{train_rows} training rows (first seed and fold, fp32, best of {args.repeats})."), "",
          markdown_table(table(names, cv, base_cv, labels),
                         ["recipe", *labels, "average", "s/model", "shared depth", "ensemble / one member"]),
          "", f"Total {seconds / 60:.1f} min (this run; recipes kept from an earlier run not counted)."]
    write_results(args.out, res, md)
    log(f"wrote {args.out}.json/.md")


if __name__ == "__main__":
    main()
