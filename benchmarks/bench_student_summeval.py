"""Distil published GPT-4 ratings of SummEval into small students, honestly (issue 13).

Data: SummEval's 12 abstractive systems x 100 documents rated 1-5 by gpt-4-0314 (``rts``, Shen et
al. 2023), with the expert means (``human.<aspect>``). Documents sorted by ``doc_id``: 0-49
train, 50-99 test. Every figure is summary-level (per document over its systems, averaged)
Spearman and Kendall tau-b with the expert means.

Stages (``--stages``, default all, in this order; each writes its figures as it finishes and
``--resume`` keeps the stages an earlier run finished):
  speed       seconds per training epoch on the 600 training rows (MiniLM, ref-free, 512-token
              sources), whole encoder fine-tuned (the old way) against the default recipe,
              measured side by side in this run
  cv          grouped k-fold cross-validation over the TRAINING documents only: each recipe's
              held-out correlation with the GPT-4 labels (the choice criterion) and with the
              experts, per epoch; the system prior inside the same folds; results/student_cv.*
  syscv       cross-validation with SYSTEMS held out, still on the training documents only (3 folds
              of 4 systems: train on the other 8 systems' rows, score the held-out systems' rows of
              the same documents): what document folds cannot see, a recipe that learns the 12
              systems' styles rather than quality; a recipe that loses to REFERENCE here is not chosen
  baselines   the teacher, the system prior (each summary scored by its system's mean GPT-4
              rating over the training documents), ROUGE-1, BERTScore (standard split)
  students    the recipes trained on all training documents for their cross-validated number of
              epochs, scored on the test documents (and the expert-label ceiling)
  disjoint    the system-disjoint split: 6 systems (seeded) for training, the other 6 for testing
  curve       learning curve of the default recipe over the number of training documents
  limits      what limits a text-only student on the standard split: how far knowing each system's mean
              quality goes (the systems' mean EXPERT ratings on the training documents), how well the
              system can be told from the summary's text alone (a classifier of the 12 systems on the
              lexical features, trained on the training documents: accuracy on the test documents, and
              the system prior read through its prediction), and the training documents the
              learning curves would need to reach the prior (log-linear fit)
  throughput  scoring speed on test summaries: bi-encoder, unified cross-encoder, and
              unbabel-comet 2.2.7 on the same MiniLM folder in its own venv (comet_speed.py)

Run:  python benchmarks/bench_student_summeval.py [--stages cv,baselines,...] [--resume] [--quick]
Out:  benchmarks/results/student_summeval.{json,md} and student_cv.{json,md}
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from pathlib import Path

from harness import (ASPECTS, CACHE, aspect_rows, fmt, log, machine, markdown_table, now, parser, setup,
                     summeval_llm_ratings, write_results)

TEACHER = "GPT-4 teacher (gpt-4-0314 rts)"
PRIOR = "system prior (mean GPT-4 rating of the system on the training documents)"
STAGES = ("speed", "cv", "syscv", "baselines", "students", "disjoint", "curve", "limits", "throughput")
#: the default before the lexical feature set; a new default must not lose to it when systems are held out
REFERENCE = "bi-encoder, top 2 layers, mse+pairwise, lr 1e-3, overlap features, batch 12"

# The recipes compared by cross-validation. Every one fine-tunes the encoder (top layers over
# cached lower-layer states) unless it says otherwise; lr = encoder, head_lr = head; batches of 32
# rows unless it says otherwise; overlap features only where named. The winner became csem train's
# default.
def recipe(lr: float, head_lr: float = 1e-3, loss: str = "mse+pairwise", overlap: bool | str = False, batch: int = 32,
           layers: int = 2, **model) -> tuple[dict, dict]:
    """(ModelConfig fields, TrainConfig fields) of a recipe: bi-encoder with 256-token sources unless
    ``model`` says otherwise; ``overlap``: False, True (the ``overlap`` feature set) or a feature-set name."""
    return ({"architecture": "bi-encoder", "source_max_length": 256, "loss": loss, "overlap_features": bool(overlap),
             "feature_set": overlap if isinstance(overlap, str) else "overlap", **model},
            {"lr": lr, "head_lr": head_lr, "train_layers": layers, "batch_size": batch})


RECIPES: dict[str, tuple[dict, dict]] = {
    "bi-encoder, top 2 layers, mse": recipe(1e-4, loss="mse"),
    "bi-encoder, top 2 layers, mse+pairwise": recipe(1e-4),
    "unified, top 2 layers, mse+pairwise": recipe(1e-4, architecture="unified", max_length=256),
    "candidate only, top 2 layers, mse+pairwise": recipe(1e-4, mode="fluency", max_length=128),
    # second round (after the first showed every curve still rising at its last epoch): hotter, longer
    "bi-encoder, top 2 layers, mse+pairwise, lr 3e-4": recipe(3e-4),
    "bi-encoder, top 2 layers, pairwise, lr 3e-4": recipe(3e-4, loss="pairwise"),
    # third round: hotter still
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-3": recipe(1e-3),
    # fourth round: what pooled embeddings cannot count (lexical overlap features: into the head's
    # input and through a linear term to its output), more steps (batches of one article)
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-3, overlap features": recipe(1e-3, overlap=True),
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-3, batch 12": recipe(1e-3, batch=12),
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-3, overlap features, batch 12": recipe(1e-3, overlap=True, batch=12),
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-4, head lr 1e-4, overlap features, batch 12":
        recipe(1e-4, head_lr=1e-4, overlap=True, batch=12),
    "frozen encoder (head only), mse+pairwise, overlap features, batch 12": recipe(1e-3, overlap=True, batch=12, layers=0),
    "mpnet bi-encoder, top 2 layers, mse+pairwise, lr 1e-3, overlap features, batch 12":
        recipe(1e-3, overlap=True, batch=12, encoder="mpnet"),
    # fifth round: the richer lexical set (extractive fragments, source positions, surface form),
    # standardised, into a feature MLP pre-fitted alone before the whole model trains
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-3, lexical features, batch 12": recipe(1e-3, overlap="lexical", batch=12),
    "bi-encoder, top 2 layers, mse+pairwise, lr 1e-4, head lr 1e-4, lexical features, batch 12":
        recipe(1e-4, head_lr=1e-4, overlap="lexical", batch=12),
    "frozen encoder (head only), mse+pairwise, lexical features, batch 12": recipe(1e-3, overlap="lexical", batch=12, layers=0),
    "bi-encoder, top 2 layers, mse, lr 1e-3, lexical features, batch 12": recipe(1e-3, loss="mse", overlap="lexical", batch=12),
}


def split_docs(records: list[dict], lo: int, hi: int) -> list[dict]:
    docs = sorted({r["doc_id"] for r in records})[lo:hi]
    keep = set(docs)
    return [r for r in records if r["doc_id"] in keep]


def system_prior(train: list[dict], test: list[dict], col: str = "metric.prior", label: str = "judge") -> None:
    """Score each test summary with its system's mean training label (``<label>.<aspect>``), in place."""
    for a in ASPECTS:
        by: dict[str, list[float]] = {}
        for r in train:
            if r.get(f"{label}.{a}") is not None:
                by.setdefault(r["system_id"], []).append(float(r[f"{label}.{a}"]))
        mean = {s: statistics.fmean(v) for s, v in by.items()}
        for r in test:
            r[f"{col}.{a}"] = mean.get(r["system_id"])


def configs(name: str, args, epochs: int | None = None, **override):
    """The recipe's configs; ``override`` replaces ModelConfig fields (``mode``, ``encoder``)."""
    from csem.model import ModelConfig, TrainConfig

    mk, tk = RECIPES[name]
    mk = {"mode": "ref-free", "encoder": args.encoder, **mk, **override}
    cfg = ModelConfig(name="student", hidden_sizes=args.hidden, **mk)
    tc = TrainConfig(max_epochs=epochs or args.epochs, frozen_epochs=0, seed=args.seed, num_threads=args.threads,
                     **tk)
    if args.quick:
        cfg = cfg.model_copy(update={"max_length": min(cfg.max_length, 64),
                                     "source_max_length": 64 if cfg.source_max_length else None})
    return cfg, tc


class Bench:
    def __init__(self, args):
        self.args = args
        self.path = Path(args.out)
        self.cv_path = self.path.with_name("student_cv")
        self.data = {"meta": {}, "correlations": {}, "disjoint": {}, "speed": {}, "throughput": {},
                     "learning_curve": [], "limits": {}, "runs": {}, "verdict": None}
        self.cv = {"meta": {}, "recipes": {}, "prior": None, "chosen": None}
        if args.resume and self.path.with_suffix(".json").exists():
            self.data.update(json.loads(self.path.with_suffix(".json").read_text()))
            if self.cv_path.with_suffix(".json").exists():
                self.cv.update(json.loads(self.cv_path.with_suffix(".json").read_text()))
        self.data["meta"].update(run=now(), machine=machine(), threads=args.threads, seed=args.seed,
                                 quick=bool(args.quick), encoder=args.encoder)

    def save(self) -> None:
        write_results(self.path, self.data, render(self.data))
        write_results(self.cv_path, self.cv, render_cv(self.cv))


def row_of(records, col) -> dict:
    return aspect_rows(records, col if callable(col) else (lambda a: f"{col}.{a}"))


def train_student(train, cols, cfg, tc, dev=None):
    from csem.model import train as train_model

    t0 = time.perf_counter()
    model = train_model(train, cols, cfg.mode, config=cfg, train_config=tc, dev_records=dev, label_range=(1, 5),
                        judge="gpt-4-0314 (rts, Shen et al. 2023)" if cols[0].startswith("judge") else "experts")
    return model, time.perf_counter() - t0


def stage_speed(b: Bench, train: list[dict]) -> None:
    """Seconds per epoch, before (whole encoder, 512-token sources) and after (the default recipe)."""
    import lightning as L
    import torch

    from csem.model import ModelConfig, TrainConfig

    args = b.args
    cols = [f"judge.{a}" for a in ASPECTS]
    out = {}

    class Timer(L.Callback):
        """Times optimiser steps 2..n+1 (then stops: whole-encoder variants) or whole epochs
        (partial fine-tuning: epoch 1 fills the lower-layer cache, later epochs reuse it)."""

        def __init__(self, n_steps):
            self.n, self.t0, self.step_s, self.epochs = n_steps, None, None, []
            self.c0, self.step_cpu, self.epochs_cpu = None, None, []

        def on_train_epoch_start(self, trainer, module):
            self.e0, self.ec0 = time.perf_counter(), time.process_time()

        def on_train_epoch_end(self, trainer, module):
            self.epochs.append(time.perf_counter() - self.e0)
            self.epochs_cpu.append(time.process_time() - self.ec0)

        def on_train_batch_start(self, trainer, module, batch, i):
            if self.n and i == 1 and self.t0 is None:
                self.t0, self.c0 = time.perf_counter(), time.process_time()  # step 0 warms up

        def on_train_batch_end(self, trainer, module, outputs, batch, i):
            if self.n and i == self.n:
                self.step_s = (time.perf_counter() - self.t0) / self.n
                self.step_cpu = (time.process_time() - self.c0) / self.n
                trainer.should_stop = True

    default_model, default_train = ModelConfig(), TrainConfig()
    # the old default: whole encoder, whole (512-token) sources, no overlap features, COMET's head
    old = dict(name="s", encoder=args.encoder, max_length=512, source_max_length=None, overlap_features=False,
               loss="mse", hidden_sizes=[3072, 1024])
    variants = {
        "before: whole encoder fine-tuned, 512-token sources, fp32 (the old default)":
            (ModelConfig(**old),
             TrainConfig(max_epochs=1, frozen_epochs=0, lr=1e-5, head_lr=3e-5, train_layers=None, batch_size=32)),
        "whole encoder, 512-token sources, bf16-mixed autocast":
            (ModelConfig(**old),
             TrainConfig(max_epochs=1, frozen_epochs=0, train_layers=None, precision="bf16-mixed", batch_size=32)),
        "top 2 layers (lower 4 cached), 512-token sources":
            (ModelConfig(**old),
             TrainConfig(max_epochs=2, frozen_epochs=0, train_layers=2, batch_size=32)),
        f"after: csem train's default recipe ({default_model.architecture}, top {default_train.train_layers} layers, "
        f"sources {default_model.source_max_length or default_model.max_length} tokens, overlap features, "
        f"batches of {default_train.batch_size})":
            (ModelConfig(name="s", encoder=args.encoder), TrainConfig(max_epochs=2)),
    }
    n_steps = 2 if args.quick else args.speed_steps
    from csem.model import train as train_model
    from csem.model.batching import GroupedBatchSampler

    for name, (cfg, tc) in variants.items():
        steps_per_epoch = len(GroupedBatchSampler(train, tc.batch_size, "ref-free"))
        partial = tc.train_layers is not None
        timer = Timer(0 if partial or not n_steps else n_steps)
        tc = tc.model_copy(update={"num_threads": args.threads, "seed": args.seed})
        orig = L.Trainer.__init__

        def patched(self, *a, _timer=timer, **kw):  # add the timing callback to csem's own Trainer
            kw["callbacks"] = list(kw.get("callbacks") or []) + [_timer]
            orig(self, *a, **kw)

        L.Trainer.__init__ = patched
        try:
            train_model(train, cols, "ref-free", config=cfg, train_config=tc, label_range=(1, 5))
        finally:
            L.Trainer.__init__ = orig
        if partial or not n_steps:  # whole epochs (--speed-steps 0: also for the whole-encoder variants)
            entry = {"first_epoch_s": timer.epochs[0], "seconds_per_epoch": timer.epochs[-1],
                     "cpu_seconds_per_epoch": timer.epochs_cpu[-1], "first_epoch_cpu_s": timer.epochs_cpu[0],
                     "seconds_per_step": timer.epochs[-1] / steps_per_epoch,
                     "timed": "whole epochs 1 and 2" if len(timer.epochs) > 1 else "whole epoch 1"}
        else:
            entry = {"seconds_per_step": timer.step_s, "seconds_per_epoch": timer.step_s * steps_per_epoch,
                     "cpu_seconds_per_epoch": timer.step_cpu * steps_per_epoch,
                     "timed": f"steps 2..{n_steps + 1} of epoch 1, times steps per epoch"}
        out[name] = {**entry, "steps_per_epoch": steps_per_epoch, "threads": torch.get_num_threads()}
        log(f"speed {name}: {entry['seconds_per_epoch']:.0f} s/epoch ({entry['timed']})")
    before = next(v for k, v in out.items() if k.startswith("before"))
    after = next(v for k, v in out.items() if k.startswith("after"))
    b.data["speed"] = {"variants": out, "ratio_before_over_after": before["seconds_per_epoch"] / after["seconds_per_epoch"],
                       "cpu_ratio_before_over_after": before["cpu_seconds_per_epoch"] / after["cpu_seconds_per_epoch"],
                       "machine": machine(), "rows": len(train)}
    b.save()


TIE = 0.001  # held-out Spearman differences below this are ties


def choose(recipes: dict, system_cv: dict | None = None) -> str:
    """The recipe with the highest held-out Spearman with the labels (at its best epoch); recipes
    within ``TIE`` of it tie, and the cheapest of them (seconds per epoch) is chosen. With
    ``system_cv`` (stage ``syscv``), only recipes cross-validated there too are eligible, and of
    those only the ones not worse than :data:`REFERENCE` with systems held out (labels, by more
    than ``TIE``)."""
    eligible = dict(recipes)
    sys_res = (system_cv or {}).get("recipes", {})
    if REFERENCE in sys_res:  # only recipes checked with systems held out, and not worse there than REFERENCE
        ref = sys_res[REFERENCE]["label"]
        eligible = {n: r for n, r in recipes.items() if n in sys_res and sys_res[n]["label"] >= ref - TIE}
    score = {n: r["per_epoch"][str(r["best_epoch"])]["label"]["spearman"] for n, r in eligible.items()}
    top = max(score.values())
    return min((n for n in eligible if score[n] >= top - TIE), key=lambda n: eligible[n]["seconds_per_epoch"])


def stage_syscv(b: Bench, train: list[dict]) -> None:
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
            sc = model.score_records(dv, name="s", batch_size=32)
            res.setdefault(name, []).append(
                (aspect_rows(sc, lambda a: "metric.s." + a, human=lambda a: f"judge.{a}")["average"]["spearman"],
                 aspect_rows(sc, lambda a: "metric.s." + a)["average"]["spearman"]))
            log(f"syscv {name} held {held}: {res[name][-1]}")
    recipes = dict(kept)
    recipes.update({n: {"label": statistics.fmean(x for x, _ in res[n]), "human": statistics.fmean(y for _, y in res[n]),
                        "per_fold": res[n], "epochs": cv_epochs(b, n)} for n in names if n in res})
    b.cv["system_cv"] = {
        "folds": folds, "machine": machine(), "run": now(),
        "baselines": {n: {"label": statistics.fmean(x for x, _ in v), "human": statistics.fmean(y for _, y in v),
                          "per_fold": v} for n, v in res.items() if n not in names},
        "recipes": recipes}
    if b.cv.get("recipes"):
        b.cv["chosen"] = choose(b.cv["recipes"], b.cv["system_cv"])
        log(f"cv chosen (documents and systems held out): {b.cv['chosen']}")


def stage_cv(b: Bench, train: list[dict]) -> None:
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


EXTRACTIVE = "extractiveness (share of the summary's trigrams found in the source)"
OVERLAP_LS = "overlap features alone (least squares on GPT-4 labels: novel 1-3-gram shares, repetition, length)"
LEXICAL_MLP = ("lexical features alone (the student's pre-fitted feature MLP on GPT-4 labels, no encoder: "
               "fragments, positions, surface form)")


def lexical_mlp(train, test, seed: int = 12) -> list[dict]:
    """The ``lexical`` student's wide part alone: its feature MLP pre-fitted on the training labels
    (``EvaluationModule.init_overlap_heads``), no encoder; ``metric.lexmlp.<aspect>`` on copies of ``test``."""
    import lightning as L
    import torch

    from csem.model import LabelSpec, ModelConfig, TrainConfig
    from csem.model.batching import BatchBuilder
    from csem.model.module import EvaluationModule

    L.seed_everything(seed, verbose=False)
    specs = [LabelSpec(aspect=a, column=f"judge.{a}", min=1, max=5) for a in ASPECTS]
    cfg = ModelConfig(name="lexmlp", feature_set="lexical", labels=specs)
    module = EvaluationModule(cfg, TrainConfig(seed=seed))
    build = lambda recs, labels: BatchBuilder(module.encoder, "ref-free", 32, labels, overlap="lexical")(recs)  # noqa: E731
    module.init_overlap_heads(build(train, specs))
    module.eval()
    with torch.no_grad():
        lex = (build(test, None).overlap - module.lex_mean) / module.lex_std
        out = module.denormalise(torch.cat([module.overlap_heads[a](lex) for a in ASPECTS], dim=1))
    return [dict(r, **{f"metric.lexmlp.{a}": float(v) for a, v in zip(ASPECTS, row)}) for r, row in zip(test, out)]


def lexical_baselines(train, test, suffix: str = "", human=lambda a: f"human.{a}") -> dict:
    """Trivial lexical baselines that could explain an overlap-feature student: extractiveness,
    and a per-aspect least-squares fit of the student's overlap features alone to the training labels."""
    import numpy as np

    from csem.model.features import overlap_features

    x_tr = np.array([overlap_features(r["candidate"], [r["source"]]) + [1.0] for r in train])
    x_te = np.array([overlap_features(r["candidate"], [r["source"]]) + [1.0] for r in test])
    te = [dict(r, **{"metric.extractive": 1.0 - x[2]}) for r, x in zip(test, x_te)]
    for a in ASPECTS:
        y = np.array([np.nan if r.get(f"judge.{a}") is None else float(r[f"judge.{a}"]) for r in train])
        ok = ~np.isnan(y)
        w, *_ = np.linalg.lstsq(x_tr[ok], y[ok], rcond=None)
        for r, v in zip(te, x_te @ w):
            r[f"metric.ls.{a}"] = float(v)
    mlp = lexical_mlp(train, test)
    return {EXTRACTIVE + suffix: aspect_rows(te, lambda a: "metric.extractive", human=human),
            OVERLAP_LS + suffix: aspect_rows(te, lambda a: f"metric.ls.{a}", human=human),
            LEXICAL_MLP + suffix: aspect_rows(mlp, lambda a: f"metric.lexmlp.{a}", human=human)}


def stage_baselines(b: Bench, train, test) -> None:
    from csem.baselines import bertscore, rouge

    corr = b.data["correlations"]
    corr[TEACHER] = row_of(test, "judge")
    test_p = [dict(r) for r in test]
    system_prior(train, test_p)
    corr[PRIOR] = row_of(test_p, "metric.prior")
    for r, v in zip(test, rouge(test, "rouge1")):
        r["metric.rouge1"] = v
    corr["ROUGE-1 F (11 refs, max)"] = row_of(test, lambda a: "metric.rouge1")
    b.save()
    for r, v in zip(test, bertscore(test)):
        r["metric.bertscore"] = v
    corr["BERTScore F (MiniLM-L6, 11 refs)"] = row_of(test, lambda a: "metric.bertscore")
    corr.update(lexical_baselines(train, test))
    log(f"baselines: teacher {corr[TEACHER]['average']}, prior {corr[PRIOR]['average']}")
    b.save()


def student_name(recipe: str) -> str:
    """Row name of a recipe's student: the encoder first (MiniLM unless the recipe names another)."""
    return recipe if recipe.startswith("mpnet") else f"MiniLM {recipe}"


def cv_epochs(b: Bench, name: str) -> int:
    rec = b.cv["recipes"].get(name)
    return int(rec["best_epoch"]) if rec else b.args.epochs


def stage_students(b: Bench, train, test) -> None:
    args = b.args
    names = [n for n in ([n.strip() for n in args.students.split(";") if n.strip()] if args.students else list(b.cv["recipes"]) or list(RECIPES))]
    for name in names:
        label = f"student {student_name(name)} (GPT-4 labels, {cv_epochs(b, name)} epochs from CV)"
        if args.resume and label in b.data["correlations"]:
            continue
        cfg, tc = configs(name, args, cv_epochs(b, name))
        model, secs = train_student(train, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        t0 = time.perf_counter()
        scored = model.score_records(test, name="s", batch_size=32)
        b.data["correlations"][label] = row_of(scored, "metric.s")
        b.data["runs"][label] = {"train_s": secs, "score_s": time.perf_counter() - t0, "epochs": tc.max_epochs,
                                 "seconds_per_epoch": secs / tc.max_epochs}
        log(f"{label}: {b.data['correlations'][label]['average']} ({secs:.0f} s)")
        update_verdict(b)
        b.save()
    chosen = b.cv.get("chosen") or names[0]
    # the chosen recipe's hyper-parameters on other inputs / encoders (not cross-validated themselves)
    for variant in [v for v in args.variants.split(",") if v]:
        override = {"mode": "ref-based"} if variant == "ref-based" else {"encoder": variant}
        enc = "mpnet" if variant == "mpnet" else "MiniLM"
        label = (f"student {enc} {chosen}{', ref-based' if variant == 'ref-based' else ''} "
                 f"(GPT-4 labels, {cv_epochs(b, chosen)} epochs from CV; hyper-parameters of the MiniLM ref-free CV)")
        if args.resume and label in b.data["correlations"]:
            continue
        cfg, tc = configs(chosen, args, cv_epochs(b, chosen), **override)
        model, secs = train_student(train, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        b.data["correlations"][label] = row_of(model.score_records(test, name="s", batch_size=32), "metric.s")
        b.data["runs"][label] = {"train_s": secs, "epochs": tc.max_epochs, "seconds_per_epoch": secs / tc.max_epochs}
        log(f"{label}: {b.data['correlations'][label]['average']} ({secs:.0f} s)")
        update_verdict(b)
        b.save()
    label = f"student {student_name(chosen)} (expert labels: ceiling)"
    if args.ceiling and not (args.resume and label in b.data["correlations"]):
        cfg, tc = configs(chosen, args, cv_epochs(b, chosen))
        model, secs = train_student(train, [f"human.{a}" for a in ASPECTS], cfg, tc)
        b.data["correlations"][label] = row_of(model.score_records(test, name="s"), "metric.s")
        b.data["runs"][label] = {"train_s": secs, "epochs": tc.max_epochs}
        b.save()


def stage_disjoint(b: Bench, train, test) -> None:
    args = b.args
    systems = sorted({r["system_id"] for r in train}, key=lambda s: int(s.lstrip("M")))
    rng = random.Random(args.seed)
    rng.shuffle(systems)
    a_sys, b_sys = sorted(systems[:6]), sorted(systems[6:])
    tr = [r for r in train if r["system_id"] in a_sys]
    te = [dict(r) for r in test if r["system_id"] in b_sys]
    d = b.data["disjoint"]
    d["train_systems"], d["test_systems"] = a_sys, b_sys
    d["rows"] = {"train": len(tr), "test": len(te)}
    rows = d.setdefault("correlations", {})
    rows[f"{TEACHER}, system-disjoint"] = row_of(te, "judge")
    from csem.baselines import bertscore, rouge

    for r, v in zip(te, rouge(te, "rouge1")):
        r["metric.rouge1"] = v
    rows["ROUGE-1 F (11 refs, max), system-disjoint"] = row_of(te, lambda a: "metric.rouge1")
    for r, v in zip(te, bertscore(te)):
        r["metric.bertscore"] = v
    rows["BERTScore F (MiniLM-L6, 11 refs), system-disjoint"] = row_of(te, lambda a: "metric.bertscore")
    rows.update(lexical_baselines(tr, te, ", system-disjoint"))
    b.save()
    names = [n for n in ([n.strip() for n in args.students.split(";") if n.strip()] if args.students else [b.cv.get("chosen") or next(iter(RECIPES))])]
    for name in names:
        label = f"student {student_name(name)}, system-disjoint"
        if args.resume and label in rows:
            continue
        cfg, tc = configs(name, args, cv_epochs(b, name))
        model, secs = train_student(tr, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        rows[label] = row_of(model.score_records(te, name="s"), "metric.s")
        log(f"{label}: {rows[label]['average']} ({secs:.0f} s)")
        b.save()


def stage_curve(b: Bench, train, test) -> None:
    args = b.args
    name = b.cv.get("chosen") or next(iter(RECIPES))
    docs = sorted({r["doc_id"] for r in train})
    if not args.resume:  # with --resume the curves of earlier chosen recipes stay beside this one's
        b.data["learning_curve"] = []
    done = {e["docs"] for e in b.data["learning_curve"] if e.get("recipe") == name}
    for n in [int(x) for x in args.curve.split(",") if x]:
        if n in done or n > len(docs):
            continue
        sub = split_docs(train, 0, n)
        cfg, tc = configs(name, args, cv_epochs(b, name))
        model, secs = train_student(sub, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        avg = row_of(model.score_records(test, name="s"), "metric.s")["average"]
        b.data["learning_curve"].append({"recipe": name, "docs": n, "records": len(sub), **avg, "train_s": secs})
        log(f"curve {n} docs: {avg}")
        b.save()


SYS_EXPERT = "system means of the EXPERT ratings on the training documents (what knowing the system alone gives)"
SYS_TEXT = "system prior through a text classifier of the system (lexical features; no system id at test time)"


def stage_limits(b: Bench, train, test) -> None:
    """What limits a text-only student on the standard split (see the module docstring): writes
    ``limits`` (classifier accuracy, curve fits) and two diagnostic rows in ``limits.correlations``."""
    import numpy as np
    import torch

    from csem.model.features import lexical_features

    lim = b.data["limits"] = {"correlations": {}}
    rows = lim["correlations"]
    # 1. knowing the system: each test summary scored by its system's mean expert rating on the training docs
    te = [dict(r) for r in test]
    system_prior(train, te, "metric.sysexp", label="human")
    rows[SYS_EXPERT] = row_of(te, "metric.sysexp")
    # 2. telling the system from the text: multinomial logistic regression (L2, L-BFGS) on the
    # standardised lexical features of (summary, article), fitted on the training documents only
    systems = sorted({r["system_id"] for r in train})
    x_tr = np.array([lexical_features(r["candidate"], [r["source"]]) for r in train])
    x_te = np.array([lexical_features(r["candidate"], [r["source"]]) for r in test])
    mu, sd = x_tr.mean(0), x_tr.std(0) + 1e-6
    xt, xe = (torch.tensor((x - mu) / sd, dtype=torch.float64) for x in (x_tr, x_te))
    y = torch.tensor([systems.index(r["system_id"]) for r in train])
    lin = torch.nn.Linear(xt.shape[1], len(systems)).double()
    torch.nn.init.zeros_(lin.weight)  # a fixed start: the objective is strictly convex, the result reproducible
    torch.nn.init.zeros_(lin.bias)
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=5000, tolerance_grad=1e-9, tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")
    l2 = 1e-2

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(lin(xt), y) + l2 * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    for _ in range(20):  # restarts of L-BFGS's history until the loss stops moving
        before = float(closure())
        if abs(before - float(opt.step(closure))) < 1e-12 and _:
            break
    with torch.no_grad():
        prob = torch.softmax(lin(xe), 1).numpy()
    truth = np.array([systems.index(r["system_id"]) if r["system_id"] in systems else -1 for r in test])
    acc = float((prob.argmax(1) == truth).mean())
    te2 = [dict(r) for r in test]
    for a in ASPECTS:
        means = np.array([statistics.fmean(float(r[f"judge.{a}"]) for r in train
                                           if r["system_id"] == s and r.get(f"judge.{a}") is not None)
                          for s in systems])
        for r, p in zip(te2, prob @ means):  # the prior's expectation under the classifier's posterior
            r[f"metric.systext.{a}"] = float(p)
    rows[SYS_TEXT] = row_of(te2, "metric.systext")
    lim["system_classifier"] = {"accuracy": acc, "chance": 1 / len(systems), "systems": len(systems),
                                "features": int(xt.shape[1]), "l2": l2, "test_rows": len(test)}
    log(f"limits: system from text, accuracy {acc:.3f}; prior through it "
        f"{rows[SYS_TEXT]['average']['spearman']:.3f}; expert system means {rows[SYS_EXPERT]['average']['spearman']:.3f}")
    # 3. the learning curves extrapolated: Spearman = a + b ln(docs), docs at which it would reach the prior
    prior = (b.data["correlations"].get(PRIOR) or {}).get("average", {}).get("spearman")
    fits = {}
    for name in dict.fromkeys(e.get("recipe") for e in b.data.get("learning_curve", [])):
        pts = [(e["docs"], e["spearman"]) for e in b.data["learning_curve"] if e.get("recipe") == name]
        if len(pts) < 3 or prior is None:
            continue
        slope, icpt = np.polyfit(np.log([d for d, _ in pts]), [s for _, s in pts], 1)
        need = float(math.exp((prior - icpt) / slope)) if slope > 0 else None
        fits[name] = {"intercept": float(icpt), "slope_per_ln_doc": float(slope), "points": pts,
                      "docs_to_reach_prior": need}
    lim["curve_fits"] = fits
    b.save()


BI_512 = "csem bi-encoder, sources up to 512 tokens as COMET (each article encoded once)"


def stage_throughput(b: Bench, test) -> None:
    """Scoring speed: csem bi-encoder vs unified cross-encoder vs COMET (same encoder, threads, batch)."""
    from csem.model import EvaluationModel, LabelSpec, ModelConfig
    from csem.model.module import EvaluationModule

    args = b.args
    sub = test[: args.speed_records]
    labels = [LabelSpec(aspect=a, column=f"judge.{a}", min=1, max=5) for a in ASPECTS]
    t = {"records": len(sub), "documents": len({r["doc_id"] for r in sub}), "threads": args.threads,
         "batch_size": 32, "precision": "fp32"}
    # like for like with COMET: whole sources up to 512 tokens; then csem's default 256-token source cut
    for name, arch, ml, sml in ((BI_512, "bi-encoder", 512, None),
                                ("csem bi-encoder, default 256-token sources", "bi-encoder", 512, 256),
                                ("csem unified cross-encoder (article re-read per summary)", "unified", 512, None)):
        cfg = ModelConfig(name="s", encoder=args.encoder, architecture=arch, max_length=ml, source_max_length=sml,
                          labels=labels)
        model = EvaluationModel(EvaluationModule(cfg).eval())
        model.score(sub[:4], precision="fp32")
        best = math.inf
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            model.score(sub, batch_size=32, precision="fp32")
            best = min(best, time.perf_counter() - t0)
        t[name] = {"seconds": best, "samples_per_s": len(sub) / best}
        log(f"throughput {name}: {len(sub) / best:.2f}/s")
    if not args.no_comet:
        from comet_speed import time_comet, write_comet_jsonl

        path = CACHE / "comet_speed_test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_comet_jsonl(sub, path, "ref-free")
        try:
            res = time_comet(path, threads=args.threads, batch_size=32, repeats=args.repeats, mode="ref-free",
                             log=log)
            t["COMET 2.2.7 ReferencelessRegression (same MiniLM)"] = {
                "seconds": res["seconds"], "samples_per_s": res["samples_per_s"],
                "comet_version": res.get("comet_version"), "torch_version": res.get("torch_version")}
        except Exception as exc:  # recorded, never hidden
            t["COMET error"] = f"{type(exc).__name__}: {exc}"
    bi = t[BI_512]["samples_per_s"]
    t["unified_cost"] = bi / t["csem unified cross-encoder (article re-read per summary)"]["samples_per_s"]
    comet = t.get("COMET 2.2.7 ReferencelessRegression (same MiniLM)")
    if comet:
        t["csem_over_comet"] = bi / comet["samples_per_s"]
    b.data["throughput"] = t
    b.save()


def update_verdict(b: Bench) -> None:
    corr = b.data["correlations"]
    if TEACHER not in corr or PRIOR not in corr:
        return
    students = {k: v for k, v in corr.items() if k.startswith("student") and "GPT-4 labels" in k}
    if not students:
        return
    best = max(students, key=lambda k: students[k]["average"]["spearman"])
    s = students[best]["average"]["spearman"]
    prior = corr[PRIOR]["average"]["spearman"]
    teacher = corr[TEACHER]["average"]["spearman"]
    b.data["verdict"] = (f"best student '{best}': average Spearman {s:.3f}; system prior {prior:.3f} "
                         f"({'met' if s >= prior else 'NOT met'}: at or above the prior); teacher {teacher:.3f} "
                         f"(gap {teacher - s:+.3f}; aim within 0.05: {'met' if teacher - s <= 0.05 else 'NOT met'}).")


def _cells(row) -> list[str]:
    out = []
    for a in (*ASPECTS, "average"):
        c = row.get(a) or {}
        out.append(f"{fmt(c.get('spearman'))} / {fmt(c.get('kendall'))}")
    return out


def render(d: dict) -> list[str]:
    m = d["meta"]
    head = ["metric", *ASPECTS, "average"]
    lines = ["# Student vs teacher on SummEval (GPT-4 ratings distilled; summary-level, test documents 50-99)", "",
             f"Run {m.get('run')} on {m.get('machine')}; torch threads {m.get('threads')}; seed {m.get('seed')}"
             + (" — QUICK MODE (not the benchmark)" if m.get("quick") else "") + ".", "",
             "Spearman rho / Kendall tau-b with the expert means, per document over its systems, averaged.", ""]
    if d["correlations"]:
        lines += ["## Standard split (train documents 0-49, test 50-99, the same 12 systems)", "",
                  markdown_table([[k, *_cells(v)] for k, v in d["correlations"].items()], head), ""]
    if d.get("verdict"):
        lines += ["**Target check.** " + d["verdict"], ""]
    dj = d.get("disjoint") or {}
    if dj.get("correlations"):
        lines += ["## System-disjoint split", "",
                  f"Train: documents 0-49 of systems {', '.join(dj['train_systems'])} ({dj['rows']['train']} rows); "
                  f"test: documents 50-99 of systems {', '.join(dj['test_systems'])} ({dj['rows']['test']} rows). "
                  "The system prior cannot help here.", "",
                  markdown_table([[k, *_cells(v)] for k, v in dj["correlations"].items()], head), ""]
    sp = d.get("speed") or {}
    if sp.get("variants"):
        lines += ["## Training speed (MiniLM, ref-free, 600 rows, measured side by side in this run)", "",
                  markdown_table([[k, f"{v['seconds_per_epoch']:.0f}", f"{v.get('cpu_seconds_per_epoch', math.nan):.0f}",
                                   f"{v['first_epoch_s']:.0f}" if "first_epoch_s" in v else "-", v["timed"]]
                                  for k, v in sp["variants"].items()],
                                 ["variant", "wall s/epoch", "CPU s/epoch (all threads)",
                                  "first epoch wall s (fills the cache)", "timed"]), "",
                  f"before / after: **{sp['ratio_before_over_after']:.1f}x** wall, "
                  f"**{sp.get('cpu_ratio_before_over_after', math.nan):.1f}x** CPU time ({sp['machine']}; the "
                  "machine is shared: CPU time is the steadier figure).", ""]
    t = d.get("throughput") or {}
    if t:
        rows = [[k, f"{v['samples_per_s']:.2f}", f"{v['seconds']:.1f}"] for k, v in t.items()
                if isinstance(v, dict) and "samples_per_s" in v]
        lines += ["## Scoring throughput (test summaries, fp32, batch 32, measured in this run)", "",
                  markdown_table(rows, ["scorer", "samples/s", "seconds"]), ""]
        if "csem_over_comet" in t:
            lines.append(f"csem bi-encoder / COMET: **{t['csem_over_comet']:.1f}x**; unified cross-encoder costs "
                         f"{t['unified_cost']:.1f}x the bi-encoder's time.")
        if "COMET error" in t:
            lines.append(f"COMET not timed: {t['COMET error']}")
        lines.append("")
    if d.get("learning_curve"):
        lines += ["## Learning curve (chosen recipes; test average)", "",
                  markdown_table([[e.get("recipe", "-"), e["docs"], e["records"], fmt(e.get("spearman")), fmt(e.get("kendall"))]
                                  for e in d["learning_curve"]], ["recipe", "train docs", "rows", "Spearman", "Kendall"]), ""]
    lim = d.get("limits") or {}
    if lim.get("correlations"):
        c = lim["system_classifier"]
        lines += ["## What limits a text-only student on the standard split", "",
                  markdown_table([[k, *_cells(v)] for k, v in lim["correlations"].items()], head), "",
                  f"The {c['systems']} systems told apart from the text alone (multinomial logistic regression, L2 "
                  f"{c['l2']}, on the {c['features']} lexical features of the training documents): accuracy "
                  f"**{c['accuracy']:.3f}** on the {c['test_rows']} test summaries (chance {c['chance']:.3f}).", ""]
        for name, f in lim.get("curve_fits", {}).items():
            need = f["docs_to_reach_prior"]
            lines.append(f"- Learning curve of '{name}': Spearman = {f['intercept']:.3f} + {f['slope_per_ln_doc']:.3f} "
                         f"ln(documents); it would reach the system prior at "
                         + (f"about **{float(f'{need:.2g}'):,.0f} training documents**" if need
                            else "no number of documents (flat)")
                         + " (SummEval has 100, GPT-4 ratings cover them all; the split trains on 50).")
        lines.append("")
    if d.get("runs"):
        lines += ["## Training runs", "",
                  markdown_table([[k, v.get("epochs"), f"{v.get('train_s', 0):.0f}"] for k, v in d["runs"].items()],
                                 ["student", "epochs", "train s"]), ""]
    return lines


def render_cv(cv: dict) -> list[str]:
    m = cv.get("meta") or {}
    lines = ["# Recipe choice by grouped cross-validation on the training documents (SummEval, GPT-4 labels)", "",
             f"{m.get('folds')}-fold grouped by document over training documents 0-49 ({m.get('rows')} rows); "
             f"{m.get('machine')}; {m.get('run')}. No test document is used. Criterion: {m.get('criterion')}.", ""]
    rows = []
    if cv.get("prior"):
        p = cv["prior"]
        rows.append(["system prior (fold's training documents)", "-", fmt(p["label"]["spearman"]),
                     fmt(p["human"]["spearman"]), fmt(p["human"]["kendall"]), "-"])
    for name, p in cv.get("lexical", {}).items():
        rows.append([name, "-", fmt(p["label"]["spearman"]), fmt(p["human"]["spearman"]), fmt(p["human"]["kendall"]), "-"])
    for name, r in cv.get("recipes", {}).items():
        e = r["per_epoch"][str(r["best_epoch"])]
        h = e.get("human") or {}
        rows.append([name, r["best_epoch"], f"{fmt(e['label']['spearman'])} ± {fmt(e['label_std']['spearman'])}",
                     fmt(h.get("spearman")), fmt(h.get("kendall")), f"{r['seconds_per_epoch']:.0f}"])
    lines += [markdown_table(rows, ["recipe", "best epoch", "Spearman vs GPT-4 labels (± sd over folds)",
                                    "Spearman vs experts", "Kendall vs experts", "s/epoch (fold)"]), ""]
    sc = cv.get("system_cv")
    if sc:
        lines += ["## Systems held out (training documents only)", "",
                  "3 folds of 4 systems (" + "; ".join(", ".join(f) for f in sc["folds"]) + "): trained on the other 8 "
                  "systems' rows of documents 0-49, scored on the held-out systems' rows of the same documents "
                  f"(summary-level over 4 systems per document); {sc.get('machine')}; {sc.get('run')}. Document folds "
                  "cannot see a recipe that learns the 12 systems' styles rather than quality; this can.", "",
                  markdown_table([[n, fmt(v["label"]), fmt(v["human"])] for n, v in
                                  list(sc["baselines"].items()) + list(sc["recipes"].items())],
                                 ["recipe", "Spearman vs GPT-4 labels", "Spearman vs experts"]), ""]
    if cv.get("chosen"):
        lines += [f"Chosen: **{cv['chosen']}** (highest held-out Spearman with the GPT-4 labels among the recipes "
                  f"that do not lose to '{REFERENCE}' with systems held out; recipes within {TIE} of it tie and the "
                  "cheapest per epoch wins).", ""]
    for name, r in cv.get("recipes", {}).items():
        lines += [f"### {name}", "", markdown_table(
            [[e, fmt(v["label"]["spearman"]), fmt((v.get("human") or {}).get("spearman"))]
             for e, v in r["per_epoch"].items()], ["epoch", "vs GPT-4 labels", "vs experts"]), ""]
    return lines


def main() -> int:
    ap = parser(__doc__, out="student_summeval", threads=2, seed=12, quick=True)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--resume", action="store_true", help="keep what an earlier run finished")
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--hidden", type=int, nargs="+", default=[512])
    ap.add_argument("--epochs", type=int, default=8, help="cross-validation: epochs per recipe (best one chosen)")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--recipes", default="", help="RECIPES to cross-validate, separated by ; (default: all)")
    ap.add_argument("--students", default="", help="recipes to train on all training docs, separated by ; (default: all cross-validated)")
    ap.add_argument("--ceiling", action="store_true", help="also the expert-label ceiling (chosen recipe)")
    ap.add_argument("--variants", default="ref-based,mpnet",
                    help="students: the chosen recipe also ref-based and/or with another encoder (comma list)")
    ap.add_argument("--curve", default="10,25,50")
    ap.add_argument("--speed-steps", type=int, default=0,
                    help="speed: optimiser steps timed for whole-encoder variants (0: the whole epoch)")
    ap.add_argument("--speed-records", type=int, default=120, help="throughput: test summaries scored")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-comet", action="store_true")
    args = ap.parse_args()
    setup(args)
    recs = summeval_llm_ratings(args.data_dir, judge="gpt-4-0314", method="rts")
    train, test = split_docs(recs, 0, 50), split_docs(recs, 50, 100)
    if args.quick:
        train, test = split_docs(recs, 0, 6), split_docs(recs, 50, 53)
        args.epochs, args.folds, args.curve, args.speed_records, args.repeats = 1, 2, "3", 12, 1
        args.no_comet = True
    b = Bench(args)
    b.data["meta"].update(train_rows=len(train), test_rows=len(test))
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    for s in stages:
        if s not in STAGES:
            raise SystemExit(f"unknown stage '{s}'; choose from {', '.join(STAGES)}")
    for s in STAGES:
        if s not in stages:
            continue
        log(f"stage {s}")
        if s == "speed":
            stage_speed(b, train)
        elif s == "cv":
            stage_cv(b, train)
        elif s == "syscv":
            stage_syscv(b, train)
        elif s == "baselines":
            stage_baselines(b, train, test)
        elif s == "students":
            stage_students(b, train, test)
        elif s == "disjoint":
            stage_disjoint(b, train, test)
        elif s == "curve":
            stage_curve(b, train, test)
        elif s == "limits":
            stage_limits(b, train, test)
        elif s == "throughput":
            stage_throughput(b, test)
        update_verdict(b)
        b.save()
    log(f"wrote {b.path.with_suffix('.md')} and {b.cv_path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
