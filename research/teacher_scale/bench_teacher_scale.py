"""Does the student learn its own teacher as the teacher's labels grow? (issue 23; CSEM paper Fig. 3)

Data: the teacher pool (``benchmarks/data/teacher_pool/``, built and judged by ``teacher_pool.py`` and
``teacher_pool_judge.sh``): the existing summaries of SummEval, REALSumm, Newsroom and QAGS, judged by
one local LLM judge with one rubric through ``csem annotate`` (probs mode). The pool is split by
article: the held-out test pool (articles of SummEval, REALSumm, Newsroom drawn at random) and the
training candidates in judging order, interleaved across the datasets, so the training pool of N
labels is the first N judged training candidates (nested pools).

For each pool size and seed the default student (``csem train``'s defaults: ``ModelConfig()`` and
``TrainConfig()``, MiniLM, reference-free) is trained on the teacher's scores and scored on the test
pool. Every figure is a correlation **with the teacher** on the test pool: summary-level (within each
source over its candidates, averaged over sources; :func:`csem.meta.correlation.column_correlations`;
QAGS sources hold one summary and cannot enter it) and dataset-level (all test candidates pooled),
Spearman and Kendall tau-b, mean and sd over seeds. Beside it: trivial baselines against the same
teacher (length, extractiveness, each overlap feature alone, a least-squares fit of the overlap
features and the system prior, both on the same training pool), a log-linear fit of the curve, the
teacher's own agreement with the human scores of each dataset (what is being distilled), and the
judging speed from the pool's chunk log.

Run:  nice -n 10 python benchmarks/bench_teacher_scale.py [--sizes 250,500,1000,2000] [--seeds 12,13,14]
Out:  benchmarks/results/teacher_scale.{json,md,png}
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness import fmt, log, machine, markdown_table, now, parser, setup, write_results

import teacher_pool as tp

SEEDS = (12, 13, 14)
SIZES = (50, 100, 250, 500, 1000, 2000, 4000)
LEVELS = ("summary", "dataset")
METHODS = ("spearman", "kendall")
FEATURES = ("novel unigram share", "novel bigram share", "novel trigram share", "trigram repetition",
            "log length")


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------

def provenance_path(form: str = "") -> Path:
    """The provenance file of the pool's judgments (``form`` = ""), or of another form's."""
    return tp.form_dir(form) / "provenance.json" if form else tp.POOL / "provenance.json"


def load(col: str, form: str = "", extended: bool = False,
         extension_form: str | None = None) -> tuple[list[dict], list[dict], dict]:
    """``(test, train_in_judging_order, provenance)``: judged candidates as csem records (``doc_id`` =
    source id, ``system_id``, ``dataset``, ``source``, ``candidate``, ``col`` = the teacher's score,
    ``human.<aspect>``); candidates the judge left without a score are dropped (counted in the log).
    ``form``: the teacher is that form's judgments (test and training alike); ``extended``: the pool's
    rule-made training candidates (``teacher_pool.py extend``) follow its own in the training order, with
    the labels of ``extension_form`` when given (e.g. the GPU run's ``hf-bf16``: the same judge computed
    by another runtime), else of ``form``; where both judged an extension candidate, ``extension_form``'s label
    is used. With both, the training order puts ``extension_form``'s extension candidates before the ones only
    ``form`` judged (the pool's own judge takes those the GPU run left: ``teacher_pool.py chunk --extension``),
    so the earlier, smaller pools stay the same nested sets as the judging grows."""
    sources, cands = tp.load_pool(extended=extended)
    got = tp.judged(form)
    ext: dict = {}
    if extended and extension_form is not None and extension_form != form:
        ext = {k: v for k, v in tp.judged(extension_form).items() if k.startswith("ext/")}
        got.update(ext)
        first = [c for c in cands if not c["id"].startswith("ext/") or c["id"] in ext]
        cands = first + [c for c in cands if c["id"].startswith("ext/") and c["id"] not in ext]
    prov = json.loads(provenance_path(form).read_text())
    test, train, missing = [], [], 0
    for c in cands:
        j = got.get(c["id"])
        if j is None:
            continue
        if j["score"] is None:
            missing += 1
            continue
        rec = {"id": c["id"], "doc_id": c["source_id"], "system_id": c["system_id"], "dataset": c["dataset"],
               "source": sources[c["source_id"]]["text"], "candidate": c["candidate"], col: float(j["score"])}
        if c["id"].startswith("ext/"):
            rec["label_form"] = extension_form if c["id"] in ext else form
        rec.update({f"human.{k}": v for k, v in c["human"].items()})
        (test if c["split"] == "test" else train).append(rec)
    log(f"pool: {len(cands)} candidates, {len(got)} judged ({missing} without a score), "
        f"test {len(test)}, train {len(train)}")
    return test, train, prov


def correlations(records: list[dict], metric: str, target: str) -> dict:
    """``{"summary": {"spearman", "kendall", "n_groups"}, "dataset": {...}}`` through csem's evaluator."""
    from csem.meta.correlation import column_correlations

    res = column_correlations(records, metric, target, levels=LEVELS, methods=METHODS)
    out: dict = {}
    for level in LEVELS:
        row = {}
        for m in METHODS:
            v = res[(level, m)].value
            row[m] = None if math.isnan(v) else v
        row["n_groups"] = res[(level, METHODS[0])].n_groups
        row["n_pairs"] = res[(level, METHODS[0])].n_pairs
        out[level] = row
    return out


# ----------------------------------------------------------------------------------------------
# baselines (against the teacher)
# ----------------------------------------------------------------------------------------------

def features(records: list[dict]):
    """The student's overlap features (:func:`csem.model.features.overlap_features` against the
    source): novel 1/2/3-gram shares, trigram repetition, log length; array (N, 5)."""
    import numpy as np

    from csem.model.features import overlap_features

    return np.array([overlap_features(r["candidate"], [r["source"]]) for r in records])


def fixed_baselines(test: list[dict], col: str) -> dict:
    """Baselines that need no training: word count, extractiveness (share of the candidate's
    trigrams found in the source = 1 - novel trigram share), each overlap feature alone (signed)."""
    x = features(test)
    rows = [dict(r) for r in test]
    for r, xi in zip(rows, x):
        r["metric.length"] = float(len(r["candidate"].split()))
        r["metric.extractiveness"] = 1.0 - float(xi[2])
        for k, name in enumerate(FEATURES):
            r[f"metric.f{k}"] = float(xi[k])
    out = {"length (words)": correlations(rows, "metric.length", col),
           "extractiveness (share of the candidate's trigrams found in the source)":
               correlations(rows, "metric.extractiveness", col)}
    for k, name in enumerate(FEATURES):
        out[f"overlap feature alone: {name}"] = correlations(rows, f"metric.f{k}", col)
    return out


def fitted_baselines(train: list[dict], test: list[dict], col: str, x_test) -> dict:
    """Baselines fitted on the training pool: least squares of the 5 overlap features (+ intercept)
    on the teacher's scores; the system prior (each test candidate scored by its system's mean
    teacher score on the training pool; systems unseen in training get the pool mean)."""
    import numpy as np

    x_tr = np.c_[features(train), np.ones(len(train))]
    y = np.array([r[col] for r in train])
    w, *_ = np.linalg.lstsq(x_tr, y, rcond=None)
    pred = np.c_[x_test, np.ones(len(test))] @ w
    by: dict = defaultdict(list)
    for r in train:
        by[(r["dataset"], r["system_id"])].append(r[col])
    mean = {k: statistics.fmean(v) for k, v in by.items()}
    glob = statistics.fmean(y)
    rows = [dict(r, **{"metric.ls": float(p), "metric.prior": mean.get((r["dataset"], r["system_id"]), glob)})
            for r, p in zip(test, pred)]
    return {"overlap features, least squares on the training pool": correlations(rows, "metric.ls", col),
            "system prior (the system's mean teacher score on the training pool)":
                correlations(rows, "metric.prior", col)}


# ----------------------------------------------------------------------------------------------
# students
# ----------------------------------------------------------------------------------------------

#: the contrast-pretraining recipe of issue 24 (``csem train --contrast-per-record 1``): one rule-made
#: pair per training row (the rubric's aspect's perturbation family, csem.model.contrast.auto_pairs),
#: ranked for one epoch before the labels and mixed into label training; no LLM call
CONTRAST = {"contrast_per_record": 1, "contrast_epochs": 1, "contrast_mix": 0.5}
NO_CONTRAST = {"contrast_per_record": 0}


def second_recipe(name: str | None = None) -> tuple[str, dict]:
    """The recipe the second curve trains: ``name``, a recipe of the training-pool cross-validation
    (``bench_teacher_pool_cv.RECIPES``; its ``"model"`` entry holds ModelConfig fields); without a name,
    no contrast pairs when ``csem train``'s default makes them (issue 24), else :data:`CONTRAST`."""
    from csem.model import TrainConfig

    if name:
        from bench_teacher_pool_cv import RECIPES

        if name not in RECIPES:
            raise ValueError(f"unknown recipe '{name}' (known: {', '.join(RECIPES)})")
        return name, dict(RECIPES[name])
    if TrainConfig().contrast_per_record > 0:
        return "without contrast pairs (contrast_per_record 0: the default before issue 24)", dict(NO_CONTRAST)
    return ("contrast pretraining (1 rule-made pair per row, 1 epoch, mixed into label training at 0.5)",
            dict(CONTRAST))


def fit_student(train: list[dict], col: str, seed: int, threads: int, lower_cache: dict,
                options: dict | None = None, model_options: dict | None = None):
    """The default student (``csem train`` defaults; ``options``: further TrainConfig fields such as
    :data:`CONTRAST`; ``model_options``: ModelConfig fields such as ``architecture``) trained on
    ``train``'s ``col``; returns ``(model, training seconds)``."""
    from csem.model import ModelConfig, TrainConfig, fit

    t0 = time.perf_counter()
    cfg = ModelConfig(name="student", **(model_options or {}))
    tc = TrainConfig(seed=seed, num_threads=threads, **(options or {}))
    model = fit(train, [col], "ref-free", config=cfg, train_config=tc, label_range=(1, 5),
                lower_cache=lower_cache)
    return model, time.perf_counter() - t0


def student_scores(model, test: list[dict]) -> list[float]:
    """The student's score of each ``test`` record (its one aspect), in order."""
    cols = model.predict(test, name="student").scores
    (mcol,) = [c for c in cols if not c.endswith(".std")]
    return list(cols[mcol])


def recipe_parts(recipe: dict | None, caches: dict) -> tuple[dict, dict | None, dict]:
    """``(TrainConfig fields, ModelConfig fields or None, lower-layer cache)`` of a recipe dict whose
    ``"model"`` entry holds ModelConfig fields; the cache is the one in ``caches`` for the recipe's number
    of trained layers (``train()`` shares a cache only between runs that train the same layers)."""
    from csem.model import TrainConfig

    options = dict(recipe or {})
    model_options = options.pop("model", None)
    cache = caches.setdefault(options.get("train_layers", TrainConfig().train_layers), {})
    return options, model_options, cache


def train_student(train: list[dict], test: list[dict], col: str, seed: int, threads: int, lower_cache: dict,
                  options: dict | None = None, model_options: dict | None = None,
                  scores_out: list | None = None) -> tuple[dict, float, dict | None, int]:
    """:func:`fit_student`, then its correlations with the teacher on ``test``, the training seconds,
    the same model's correlations with its acceptability gate removed (None without a gate), and the
    number of contrast pairs it trained on. ``scores_out``: the student's scores of ``test`` (with the
    gate) are appended to it, one list per call (for :func:`ensemble_correlations`)."""
    model, secs = fit_student(train, col, seed, threads, lower_cache, options, model_options)

    def corr() -> tuple[dict, list[float]]:
        scores = student_scores(model, test)
        rows = [dict(r, **{"metric.student": v}) for r, v in zip(test, scores)]
        return correlations(rows, "metric.student", col), scores

    with_gate, scores = corr()
    if scores_out is not None:
        scores_out.append(scores)
    no_gate = None
    if model.module.gate is not None:
        gate, model.module.gate = model.module.gate, None
        no_gate = corr()[0]
        model.module.gate = gate
    return with_gate, secs, no_gate, (model.card.get("contrast") or {}).get("pairs", 0)


def ensemble_correlations(scores: list[list[float]], test: list[dict], col: str) -> dict | None:
    """Correlations with the teacher on ``test`` of the seed ensemble: each candidate scored by the mean of
    the seeds' students' scores (all on the label scale, 1-5; the usual ensemble of independently trained
    networks, Lakshminarayanan et al. 2017). None with fewer than two seeds."""
    if len(scores) < 2:
        return None
    mean = [statistics.fmean(v) for v in zip(*scores)]
    return correlations([dict(r, **{"metric.ensemble": v}) for r, v in zip(test, mean)], "metric.ensemble", col)


def summarise(runs: list[dict]) -> dict:
    """Mean and sd over seeds of every (level, method)."""
    out: dict = {}
    for level in LEVELS:
        for m in METHODS:
            vals = [r["corr"][level][m] for r in runs if r["corr"][level][m] is not None]
            out[f"{level}_{m}"] = statistics.fmean(vals) if vals else None
            out[f"{level}_{m}_sd"] = statistics.stdev(vals) if len(vals) > 1 else None
    return out


def fit_curve(points: list[tuple[int, float]]) -> dict | None:
    """``spearman = a + b * ln(labels)`` by least squares (``scipy.optimize.curve_fit``), with R^2 and
    the labels at which the fit would reach 0.6 and 0.75 (extrapolations)."""
    if len(points) < 3:
        return None
    import numpy as np
    from scipy.optimize import curve_fit

    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    (a, b), _ = curve_fit(lambda n, a, b: a + b * np.log(n), x, y, p0=(0.0, 0.05))
    resid = y - (a + b * np.log(x))
    r2 = 1 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum()) if len(x) > 2 else None
    reach = {str(t): (float(math.exp((t - a) / b)) if b > 0 else None) for t in (0.6, 0.75)}
    return {"form": "spearman = a + b * ln(labels)", "a": float(a), "b": float(b), "r2": r2,
            "labels_to_reach": reach}


# ----------------------------------------------------------------------------------------------
# the teacher vs the humans
# ----------------------------------------------------------------------------------------------

def teacher_vs_human(records: list[dict], col: str) -> dict:
    """The teacher's agreement with each dataset's human scores over every judged candidate of the
    pool that people scored (train and test: judging involves no training; the rule-made extension has
    no human scores): summary-level for SummEval, REALSumm, Newsroom (per aspect); dataset-level for
    QAGS (one summary per article), per subset."""
    from csem.meta.correlation import column_correlations

    records = [r for r in records if any(k.startswith("human.") for k in r)]
    out: dict = {}
    by = defaultdict(list)
    for r in records:
        key = r["system_id"] if r["dataset"] == "qags" else r["dataset"]
        by[key].append(r)
    for key, rows in sorted(by.items()):
        level = "dataset" if key.startswith("qags") else "summary"
        aspects = sorted({k.split(".", 1)[1] for r in rows for k in r if k.startswith("human.")})
        out[key] = {"level": level, "candidates": len(rows), "aspects": {}}
        for a in aspects:
            res = column_correlations(rows, col, f"human.{a}", levels=(level,), methods=METHODS)
            out[key]["aspects"][a] = {m: (None if math.isnan(res[(level, m)].value) else res[(level, m)].value)
                                      for m in METHODS}
            out[key]["aspects"][a]["n_groups"] = res[(level, METHODS[0])].n_groups
    return out


def judging_speed(form: str = "") -> dict:
    """Seconds per judgment from ``judged/chunks.jsonl`` (a form's: ``forms/<form>/chunks.jsonl``): wall
    time of each ``csem annotate`` call (model load included) over the judgments it made (cache hits not
    counted)."""
    path = tp.form_dir(form) / "chunks.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    timed = [r for r in rows if r.get("seconds") and r.get("new_judgments")]
    n = sum(r["new_judgments"] for r in timed)
    s = sum(r["seconds"] for r in timed)
    per_chunk = [round(r["seconds"] / r["new_judgments"], 2) for r in timed]
    return {"chunks": len(rows), "candidates": sum(r["candidates"] for r in rows), "timed_judgments": n,
            "seconds": s, "seconds_per_judgment": s / n if n else None,
            # the median chunk: a chunk whose process was paused (SIGSTOP while another benchmark timed
            # itself) or shared its core with more jobs counts once, not by its length
            "median_seconds_per_judgment": statistics.median(per_chunk) if per_chunk else None,
            "per_chunk": per_chunk}


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------

def _train_defaults() -> dict:
    from csem.model import TrainConfig

    return TrainConfig().model_dump(mode="json")


def contrast_available() -> bool:
    """Whether ``csem train`` has the contrast-pretraining stage of issue 24 (TrainConfig fields)."""
    from csem.model import TrainConfig

    return all(k in TrainConfig.model_fields for k in CONTRAST)


def main() -> None:
    ap = parser(__doc__, out="teacher_scale", quick=True)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="training pool sizes (labels); those above the judged training candidates are "
                         "dropped and the largest judged pool is added")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--large-seeds", type=int, default=None,
                    help="at sizes above --large-from, only this many seeds (time budget)")
    ap.add_argument("--large-from", type=int, default=2000)
    ap.add_argument("--contrast-sizes", default=None,
                    help="pool sizes of the second recipe's curve (default: the same sizes; 'max': the largest "
                         "pool; 'none': skip)")
    ap.add_argument("--second", default=None,
                    help="the second curve's recipe: a name of bench_teacher_pool_cv.RECIPES (chosen there by "
                         "cross-validation on the training pool); default: contrast pretraining")
    ap.add_argument("--no-full-pool", action="store_true",
                    help="train only at --sizes (by default the whole judged training pool is added)")
    ap.add_argument("--form", default="",
                    help="the teacher: another form's judgments (forms/NAME/, e.g. the GPU run's hf-bf16) "
                         "instead of the pool's own")
    ap.add_argument("--extended", action="store_true",
                    help="training pools continue with the rule-made extension (teacher_pool.py extend)")
    ap.add_argument("--extension-form", default=None,
                    help="with --extended: the extension's labels come from this form (e.g. hf-bf16, the GPU run)")
    ap.add_argument("--recipe-first", action="store_true",
                    help="at each size, train the second recipe before the default")
    ap.add_argument("--precision", default=None,
                    help="TrainConfig.precision of every student (default: csem train's, auto; 32-true on a GPU "
                         "trains as on a CPU)")
    ap.add_argument("--largest-first", action="store_true",
                    help="train the largest pool first (a time-limited run keeps the point that matters most)")
    ap.add_argument("--encoder", default=None,
                    help="the students' encoder (ModelConfig.encoder: a folder, or minilm / mpnet; default minilm)")
    args = ap.parse_args()
    setup(args)
    t_start = time.time()
    for f in filter(None, (args.form, args.extension_form)):
        if not tp.judged(f):
            ap.error(f"form '{f}': no judgments in {tp.form_dir(f)}")
    prov = json.loads(provenance_path(args.form).read_text())
    col = f"judge.{prov['rubric']['aspect']}"
    test, train, prov = load(col, args.form, args.extended, args.extension_form)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    sizes = sorted({int(s) for s in args.sizes.split(",") if s and int(s) <= len(train)})
    if not args.no_full_pool and len(train) >= 100 and (not sizes or len(train) > sizes[-1] * 1.1):
        sizes.append(len(train))
    if not sizes and not args.quick:
        ap.error(f"--sizes: no size at or below the {len(train)} judged training candidates")
    if args.quick:
        test, sizes, seeds = test[:60], [s for s in (40,) if s <= len(train)], seeds[:1]
    if len(test) < 1000 and not args.quick:
        log(f"note: the test pool has {len(test)} judged candidates (target >= 1000)")
    res: dict = {"meta": {"date": now(), "machine": machine(), "threads": args.threads, "seeds": seeds,
                          "sizes": sizes, "student": "csem train defaults (ModelConfig(), TrainConfig()): "
                          "MiniLM bi-encoder, reference-free, label range 1-5",
                          "train_config_default": _train_defaults(), "form": args.form or None,
                          "extended": bool(args.extended), "encoder": args.encoder or "minilm",
                          "precision": args.precision, "extension_form": args.extension_form},
                 "teacher": {"judge": prov["judge"], "rubric": prov["rubric"]["id"],
                             "rubric_version": prov["rubric"]["version"], "model_sha256": prov["model_sha256"],
                             "mode": prov["mode"], "column": col},
                 "test_candidates": len(test),
                 "test_by_dataset": {d: sum(r["dataset"] == d for r in test) for d in tp.DATASETS},
                 "train_judged": len(train),
                 "judging": judging_speed(args.form)}
    log("teacher vs humans")
    res["teacher_vs_human"] = teacher_vs_human(test + train, col)
    log("fixed baselines")
    fixed = fixed_baselines(test, col)
    x_test = features(test)
    runs, fitted = [], {}
    lower_caches: dict = {}  # one lower-layer cache per number of trained layers (recipe_parts)
    for size in sizes:
        fitted[size] = fitted_baselines(train[:size], test, col, x_test)
    if args.contrast_sizes == "none" or not contrast_available():
        contrast_sizes = []
    elif args.contrast_sizes:
        wanted = args.contrast_sizes.split(",")
        contrast_sizes = [s for s in sizes if str(s) in wanted or ("max" in wanted and s == sizes[-1])]
    else:
        contrast_sizes = sizes
    try:
        second_name, second_options = second_recipe(args.second)
    except ValueError as e:
        ap.error(f"--second: {e}")
    res["contrast_recipe"] = {"name": second_name, "train_config": second_options} if contrast_sizes else None

    def curve_of(recipe: str, options: dict | None, curve_sizes: list[int], key: str) -> None:
        curve = res.setdefault(key, [])
        for size in curve_sizes:
            pool = train[:size]
            use = seeds if args.large_seeds is None or size < args.large_from else seeds[:args.large_seeds]
            size_runs, seed_scores = [], []
            for seed in use:
                opts, model_options, cache = recipe_parts(options, lower_caches)
                if args.encoder:
                    model_options = {**(model_options or {}), "encoder": args.encoder}
                if args.precision:
                    opts = {**opts, "precision": args.precision}
                corr, secs, no_gate, _ = train_student(pool, test, col, seed, args.threads, cache, opts, model_options,
                                                       scores_out=seed_scores)
                run = {"recipe": recipe, "labels": size, "seed": seed, "corr": corr, "train_seconds": secs,
                       "corr_no_gate": no_gate}
                size_runs.append(run)
                runs.append(run)
                log(f"{recipe} student, {size} labels, seed {seed}: summary spearman "
                    f"{fmt(corr['summary']['spearman'])}, dataset {fmt(corr['dataset']['spearman'])}, gate removed "
                    f"{fmt(no_gate['summary']['spearman'] if no_gate else None)} ({secs:.0f} s)")
            s = summarise(size_runs)
            ng = [r["corr_no_gate"]["summary"]["spearman"] for r in size_runs if r.get("corr_no_gate")]
            curve.append({"labels": size, "spearman": s["summary_spearman"], "sd": s["summary_spearman_sd"],
                          "seeds": len(size_runs),
                          "spearman_no_gate": statistics.fmean(ng) if len(ng) == len(size_runs) else None,
                          "sd_no_gate": statistics.stdev(ng) if len(ng) == len(size_runs) > 1 else None,
                          **{k: v for k, v in s.items() if not k.startswith("summary_spearman")},
                          "by_dataset": {d: sum(r["dataset"] == d for r in pool) for d in tp.DATASETS},
                          "rule_made": sum(r["id"].startswith("ext/") for r in pool),
                          "rule_made_by_form": dict(Counter(r["label_form"] or "pool" for r in pool
                                                            if "label_form" in r)),
                          "ensemble": ensemble_correlations(seed_scores, test, col)})
            res["runs"] = runs

    def finish(complete: bool) -> None:
        """Write the results of the sizes done so far (a stopped run leaves valid files)."""
        curve = res.setdefault("curve", [])
        res.setdefault("contrast_curve", [])
        res["complete"] = complete
        res["fit"] = fit_curve([(c["labels"], c["spearman"]) for c in curve if c["spearman"] is not None])
        res["contrast_fit"] = fit_curve([(c["labels"], c["spearman"]) for c in res["contrast_curve"]
                                         if c["spearman"] is not None])
        largest = curve[-1]["labels"] if curve else None
        base = dict(fixed)
        if largest is not None:
            base.update(fitted[largest])
        res["baselines_detail"] = base
        res["baselines"] = {k: v["summary"]["spearman"] for k, v in base.items()}
        res["baselines_by_size"] = {str(s): {k: v["summary"]["spearman"] for k, v in b.items()}
                                    for s, b in fitted.items()}
        res["seconds"] = time.time() - t_start
        plot(res, f"{args.out}.png")
        write_results(args.out, res, report(res))
        log(f"wrote {args.out}.json / .md" + ("" if complete else " (so far)"))

    # interleaved by size so a stopped run still has both curves at the small (or, --largest-first, large) sizes
    for size in (sorted(sizes, reverse=True) if args.largest_first else sizes):
        if not args.recipe_first:
            curve_of("default", None, [size], "curve")
            finish(complete=False)
        if size in contrast_sizes:
            curve_of("second", second_options, [size], "contrast_curve")
            finish(complete=False)
        if args.recipe_first:
            curve_of("default", None, [size], "curve")
            finish(complete=False)
    finish(complete=True)


#: the baselines drawn in the figure (short name -> key of ``res["baselines"]``)
PLOTTED = {"length": "length (words)",
           "extractiveness": "extractiveness (share of the candidate's trigrams found in the source)",
           "overlap LS": "overlap features, least squares on the training pool",
           "system prior": "system prior (the system's mean teacher score on the training pool)"}


def plot(res: dict, path: str) -> None:
    """``teacher_scale.png``: the curve(s), the fit of the default curve and the trivial baselines."""
    from csem.report.plots import plot_scaling_curve

    curves = {"default student (csem train's defaults)": res.get("curve") or []}
    if res.get("contrast_curve"):
        curves[res["contrast_recipe"]["name"].split(" (")[0]] = res["contrast_curve"]
    plot_scaling_curve(curves, path, fit=res.get("fit"),
                       baselines={k: res["baselines"].get(v) for k, v in PLOTTED.items()},
                       title=f"student vs its teacher ({res['teacher']['judge']}), {res['test_candidates']} test candidates")


def _no_gate(c: dict) -> str:
    """The curve point's summary Spearman with the acceptability gate removed (same models), or "-"."""
    if c.get("spearman_no_gate") is None:
        return "-"
    return f"{fmt(c['spearman_no_gate'])}" + (f" ± {fmt(c['sd_no_gate'])}" if c.get("sd_no_gate") is not None else "")


def _ensemble(c: dict) -> str:
    """The summary Spearman of the curve point's seed ensemble (:func:`ensemble_correlations`), or "-"."""
    e = c.get("ensemble")
    return fmt(e["summary"]["spearman"]) if e else "-"


def report(res: dict) -> list[str]:
    t = res["teacher"]
    j = res["judging"]
    lines = [
        "# Student vs its own teacher as the teacher's labels grow (issue 23)",
        "",
        f"Teacher: `{t['judge']}` (sha256 {t['model_sha256'][:16]}...), rubric `{t['rubric']}` v{t['rubric_version']}, "
        f"{t['mode']}. Student: {res['meta']['student']}; its TrainConfig: "
        + ", ".join(f"{k} {res['meta']['train_config_default'][k]}" for k in
                    ("lr", "batch_size", "max_epochs", "train_layers", "contrast_per_record", "contrast_epochs",
                     "contrast_mix") if k in res["meta"]["train_config_default"])
        + f". Test pool: {res['test_candidates']} judged candidates "
        f"({', '.join(f'{d} {n}' for d, n in res['test_by_dataset'].items() if n)}), articles disjoint from "
        f"training; {res['train_judged']} judged training candidates. Seeds {res['meta']['seeds']}. "
        f"{res['meta']['date']}, {res['meta']['machine']}, {res['meta']['threads']} torch threads.",
        "",
        f"Judging: {j['candidates']} candidates in {j['chunks']} chunks, "
        f"{fmt(j['seconds_per_judgment'], 2)} s per judgment overall, {fmt(j.get('median_seconds_per_judgment'), 2)} s "
        "in the median chunk (wall time of `csem annotate`, 1 llama.cpp thread under `nice -n 5`, two judging "
        "processes and other jobs sharing the 2-core machine; some chunks include pauses while other benchmarks "
        "timed themselves).",
        "",
    ]
    m = res["meta"]
    if m.get("form") or m.get("extended"):
        largest = max(res.get("curve", []) + res.get("contrast_curve", []), key=lambda c: c.get("rule_made") or 0,
                      default={})
        rule_made = largest.get("rule_made") or 0
        by_form = largest.get("rule_made_by_form") or {}
        def labels(form: str | None) -> str:
            return f"form `{form}`" if form else "the pool's own judgments (llama.cpp)"

        lines += [f"Teacher's labels: {labels(m.get('form'))}"
                  + (f"; training pools continue with the rule-made extension ({rule_made} of its candidates in the "
                     f"largest pool), labelled by "
                     + (", ".join(f"{labels(None if f == 'pool' else f)} ({n})" for f, n in by_form.items())
                        if len(by_form) > 1 else labels(m.get('extension_form') or m.get('form')))
                     if m.get("extended") else "")
                  + (f"; students trained with precision {m['precision']}" if m.get("precision") else "")
                  + (f", encoder {m['encoder']}" if m.get("encoder") not in (None, "minilm") else "") + ".", ""]
    lines += [
        "## Student vs teacher on the test pool",
        "",
    ]
    rows = []
    for c in res["curve"]:
        rows.append([c["labels"], c["seeds"], f"{fmt(c['spearman'])} ± {fmt(c['sd'])}", _no_gate(c), _ensemble(c),
                     f"{fmt(c['summary_kendall'])} ± {fmt(c['summary_kendall_sd'])}",
                     f"{fmt(c['dataset_spearman'])} ± {fmt(c['dataset_spearman_sd'])}",
                     f"{fmt(c['dataset_kendall'])} ± {fmt(c['dataset_kendall_sd'])}",
                     fmt(res["baselines_by_size"][str(c["labels"])]
                         ["overlap features, least squares on the training pool"]),
                     fmt(res["baselines_by_size"][str(c["labels"])]
                         ["system prior (the system's mean teacher score on the training pool)"])])
    lines.append(markdown_table(rows, ["labels", "seeds", "summary Spearman", "same models, gate removed",
                                       "seed ensemble", "summary Kendall", "dataset Spearman", "dataset Kendall",
                                       "overlap LS (summary ρ)", "system prior (summary ρ)"]))
    if res.get("contrast_curve"):
        cfg = res["contrast_recipe"]["train_config"]
        opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in cfg.items() if k != "model")
        model = "".join(f"; ModelConfig {k}={v}" for k, v in (cfg.get("model") or {}).items())
        lines += ["", f"Second curve: {res['contrast_recipe']['name']} (`csem train {opts}`{model}).", ""]
        rows = [[c["labels"], c["seeds"], f"{fmt(c['spearman'])} ± {fmt(c['sd'])}", _no_gate(c), _ensemble(c),
                 f"{fmt(c['summary_kendall'])} ± {fmt(c['summary_kendall_sd'])}",
                 f"{fmt(c['dataset_spearman'])} ± {fmt(c['dataset_spearman_sd'])}",
                 f"{fmt(c['dataset_kendall'])} ± {fmt(c['dataset_kendall_sd'])}"] for c in res["contrast_curve"]]
        lines.append(markdown_table(rows, ["labels", "seeds", "summary Spearman", "same models, gate removed",
                                           "seed ensemble", "summary Kendall", "dataset Spearman", "dataset Kendall"]))
    for label, f in (("Fit", res.get("fit")), ("Fit of the contrast curve", res.get("contrast_fit"))):
        if not f:
            continue
        lines += ["", f"{label}: spearman = {f['a']:.3f} + {f['b']:.4f} ln(labels), R² {fmt(f['r2'])}; labels to reach "
                      f"0.6: {fmt(f['labels_to_reach']['0.6'], 0)}, 0.75: {fmt(f['labels_to_reach']['0.75'], 0)} "
                      "(extrapolations)."]
    lines += ["", "## Trivial baselines against the same teacher (test pool)", ""]
    rows = [[k, fmt(v["summary"]["spearman"]), fmt(v["summary"]["kendall"]), fmt(v["dataset"]["spearman"]),
             fmt(v["dataset"]["kendall"])] for k, v in res["baselines_detail"].items()]
    lines.append(markdown_table(rows, ["baseline", "summary Spearman", "summary Kendall", "dataset Spearman",
                                       "dataset Kendall"]))
    lines += ["", "Fitted baselines use the largest training pool. Single features are signed (a feature the "
                  "teacher dislikes correlates negatively).", "", "## The teacher vs the humans", ""]
    rows = []
    for key, v in res["teacher_vs_human"].items():
        for a, c in v["aspects"].items():
            rows.append([key, a, v["level"], v["candidates"], c["n_groups"], fmt(c["spearman"]), fmt(c["kendall"])])
    lines.append(markdown_table(rows, ["set", "human score", "level", "candidates", "groups", "Spearman", "Kendall"]))
    lines += ["", f"Total benchmark time {res['seconds'] / 60:.1f} min"
              + ("." if res.get("complete") else " (run stopped before its last pool size).")]
    return lines


if __name__ == "__main__":
    main()
