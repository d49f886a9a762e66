"""What every stage of the student benchmark shares: row names, the recipes, the split, the
trivial baselines (through :mod:`csem.baselines`), training and the benchmark's state (:class:`Bench`)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from harness import ASPECTS, Results, aspect_rows, machine, now

TEACHER = "GPT-4 teacher (gpt-4-0314 rts)"
PRIOR = "system prior (mean GPT-4 rating of the system on the training documents)"
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


#: the seed of the system-disjoint split (:func:`disjoint_systems`): train M14 M20 M22 M23 M8 M9, test M10 M11
#: M12 M13 M15 M17, the split issue 24's targets name; every student benchmark uses it, whatever its --seed
DISJOINT_SEED = 12


def disjoint_systems(records: list[dict]) -> tuple[list[str], list[str]]:
    """``(training systems, test systems)`` of the system-disjoint split: the records' systems in numeric
    order, shuffled by ``random.Random(DISJOINT_SEED)``, the first 6 for training, the other 6 for testing."""
    systems = sorted({r["system_id"] for r in records}, key=lambda s: int(s.lstrip("M")))
    random.Random(DISJOINT_SEED).shuffle(systems)
    return sorted(systems[:6]), sorted(systems[6:])


def split_docs(records: list[dict], lo: int, hi: int) -> list[dict]:
    """The records of documents ``lo .. hi - 1`` in sorted ``doc_id`` order (record order kept)."""
    docs = sorted({r["doc_id"] for r in records})[lo:hi]
    keep = set(docs)
    return [r for r in records if r["doc_id"] in keep]


def system_prior(train: list[dict], test: list[dict], col: str = "metric.prior", label: str = "judge") -> None:
    """Score each test summary with its system's mean training label (``<label>.<aspect>``), in place
    as ``<col>.<aspect>`` (:func:`csem.baselines.system_prior`; None for a system without training labels)."""
    from csem.baselines import system_prior as prior

    scores = prior(train, test, [f"{label}.{a}" for a in ASPECTS])
    for a in ASPECTS:
        for r, v in zip(test, scores[f"{label}.{a}"]):
            r[f"{col}.{a}"] = v


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


def row_of(records, col) -> dict:
    """Summary-level rows of every aspect and the average (harness.aspect_rows): ``col`` is a column
    prefix (``metric.s`` -> ``metric.s.<aspect>``) or a function ``aspect -> column``."""
    return aspect_rows(records, col if callable(col) else (lambda a: f"{col}.{a}"))


def train_student(train, cols, cfg, tc, dev=None):
    """``(model, seconds)``: ``csem.model.fit`` on 1-5 labels ``cols`` with the recipe's configs."""
    from csem.model import fit

    t0 = time.perf_counter()
    model = fit(train, cols, cfg.mode, config=cfg, train_config=tc, dev_records=dev, label_range=(1, 5),
                judge="gpt-4-0314 (rts, Shen et al. 2023)" if cols[0].startswith("judge") else "experts")
    return model, time.perf_counter() - t0


TIE = 0.001  # held-out Spearman differences below this are ties

EXTRACTIVE = "extractiveness (share of the summary's trigrams found in the source)"
OVERLAP_LS = "overlap features alone (least squares on GPT-4 labels: novel 1-3-gram shares, repetition, length)"
NOVELTY_LS = "novelty features alone (least squares on GPT-4 labels: the overlap features without the length)"
LEXICAL_MLP = ("lexical features alone (the student's pre-fitted feature MLP on GPT-4 labels, no encoder: "
               "fragments, positions, surface form)")


def lexical_baselines(train, test, suffix: str = "", human=lambda a: f"human.{a}") -> dict:
    """Trivial lexical baselines that could explain an overlap-feature student (:mod:`csem.baselines`):
    extractiveness, a per-aspect least-squares fit of the student's overlap features alone (and of the
    novelty set: the same without the length) to the training GPT-4 labels, and the lexical student's feature MLP alone; ``{row name + suffix: aspect_rows}``
    against ``human(aspect)``."""
    from csem.baselines import extractiveness, lexical_mlp, overlap_least_squares

    cols = [f"judge.{a}" for a in ASPECTS]
    ls = overlap_least_squares(train, test, cols)
    nov = overlap_least_squares(train, test, cols, feature_set="novelty")
    mlp = lexical_mlp(train, test, cols, label_range=(1, 5), seed=12)
    te = [dict(r, **{"metric.extractive": e}, **{f"metric.ls.{a}": ls[f"judge.{a}"][i] for a in ASPECTS},
               **{f"metric.nov.{a}": nov[f"judge.{a}"][i] for a in ASPECTS},
               **{f"metric.lexmlp.{a}": mlp[f"judge.{a}"][i] for a in ASPECTS})
          for i, (r, e) in enumerate(zip(test, extractiveness(test)))]
    return {EXTRACTIVE + suffix: aspect_rows(te, lambda a: "metric.extractive", human=human),
            OVERLAP_LS + suffix: aspect_rows(te, lambda a: f"metric.ls.{a}", human=human),
            NOVELTY_LS + suffix: aspect_rows(te, lambda a: f"metric.nov.{a}", human=human),
            LEXICAL_MLP + suffix: aspect_rows(te, lambda a: f"metric.lexmlp.{a}", human=human)}


def log_fit(points: list[tuple[int, float]], target: float) -> dict:
    """Least-squares fit of a learning curve, ``spearman = intercept + slope * ln(docs)``, to ``points``
    ((training documents, Spearman), at least 2), and the documents at which it would reach ``target``:
    ``{"intercept", "slope_per_ln_doc", "target", "docs_to_target"}``, the last None when the curve is flat or
    falling (slope <= 1e-9) or the answer overflows a float."""
    import math

    import numpy as np

    slope, icpt = np.polyfit(np.log([d for d, _ in points]), [v for _, v in points], 1)
    try:
        need = float(math.exp((target - icpt) / slope)) if slope > 1e-9 else None
    except OverflowError:
        need = None
    return {"intercept": float(icpt), "slope_per_ln_doc": float(slope), "target": target, "docs_to_target": need}


def student_name(recipe: str) -> str:
    """Row name of a recipe's student: the encoder first (MiniLM unless the recipe names another)."""
    return recipe if recipe.startswith("mpnet") else f"MiniLM {recipe}"


def cv_epochs(b: Bench, name: str) -> int:
    """The recipe's cross-validated number of epochs (``--epochs`` when it was not cross-validated)."""
    rec = b.cv["recipes"].get(name)
    return int(rec["best_epoch"]) if rec else b.args.epochs


def update_verdict(b: Bench) -> None:
    """The target check (best GPT-4-label student vs the system prior and the teacher), in ``b.data["verdict"]``."""
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


class Bench:
    """The benchmark's state: ``args``, the figures ``data`` (``results/student_summeval``) and
    ``cv`` (``results/student_cv``), each a :class:`harness.Results` (``--resume``: an earlier run's
    figures are kept, its finished stages and models skipped); :meth:`save` rewrites both files."""

    def __init__(self, args):
        from .render import render, render_cv

        self.args = args
        self.path = Path(args.out)
        self.cv_path = self.path.with_name("student_cv")
        data = {"meta": {}, "correlations": {}, "disjoint": {}, "speed": {}, "throughput": {},
                "learning_curve": [], "limits": {}, "runs": {}, "verdict": None}
        self.results = Results(self.path, data, render, resume=args.resume)
        self.cv_results = Results(self.cv_path, {"meta": {}, "recipes": {}, "prior": None, "chosen": None}, render_cv,
                                  resume=args.resume and bool(self.results.previous))
        self.data, self.cv = self.results.data, self.cv_results.data
        self.data["meta"].update(run=now(), machine=machine(), threads=args.threads, seed=args.seed,
                                 quick=bool(args.quick), encoder=args.encoder)

    def save(self) -> None:
        self.results.save()
        self.cv_results.save()

