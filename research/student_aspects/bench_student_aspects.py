"""Do the student's aspect heads tell the aspects apart? The aspect-specificity term on SummEval's GPT-4
distillation (issue 24).

Data, splits and scoring of ``bench_student_contrast.py`` (gpt-4-0314 ``rts`` ratings of SummEval,
documents 0-49 train, 50-99 test; the system-disjoint split). The *aspect matrix*: for each aspect's
perturbation family (:mod:`csem.data.contrasts`: sentence shuffles and connectives for coherence, entity /
number / date swaps, negation and foreign sentences for consistency, word noise for fluency, off-topic and
peripheral sentences, redundancy and truncation for relevance), one perturbed copy of up to 4 summaries per
document, and the share of (original, perturbed) pairs each head orders correctly. A head *wins* its
family when it orders them correctly more often than every other head; *separation* is the mean of the
diagonal minus the mean of the off-diagonal cells.

Recipes (TrainConfig fields over csem train's defaults):

* ``default``: csem train's default (labels only);
* ``aspect contrast``: rule-made pairs of each aspect's own family, made from the training rows
  (``contrast_per_record 1``, at most 400), mixed into label training (weight 0.5, no pretraining
  epoch);
* ``aspect contrast + specificity W``: the same plus the aspect-specificity term
  (``contrast_specificity``: a pair's own head must separate it more than the other heads do).

Stages (``--stages``):
  cv     grouped cross-validation on the TRAINING documents with systems held out (3 folds of 4 systems, as
         ``bench_student_contrast.py``'s cv stage), seed ``--seed`` + 12: per recipe, held-out Spearman with
         the GPT-4 labels (average of the aspects) and the aspect matrix on the held-out systems' summaries.
         Rule, fixed before the run: the chosen recipe has the largest separation among those whose CV
         Spearman is at most 0.01 below the default's.
  final  the default and the chosen recipe on both splits over ``--seeds`` seeds (mean ± sd), with the
         aspect matrix on the standard split's test documents for every seed.

Run:  nice -n 5 python benchmarks/bench_student_aspects.py [--stages cv,final] [--seeds 3] [--threads 1]
Out:  benchmarks/results/student_aspects.{json,md}
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from harness import ASPECTS, aspect_rows, fmt, log, machine, markdown_table, now, parser, setup, \
    summeval_llm_ratings, write_results

import bench_student_contrast as C
import bench_student_summeval as S

CONTRAST = {"contrast_per_record": 1, "contrast_max_pairs": 400, "contrast_epochs": 0, "contrast_mix": 0.5,
            "contrast_pairs_per_batch": 8}
RECIPES: dict[str, dict] = {
    "default": {},
    "aspect contrast": dict(CONTRAST),
    "aspect contrast + specificity 1": {**CONTRAST, "contrast_specificity": 1.0},
    "aspect contrast + specificity 3": {**CONTRAST, "contrast_specificity": 3.0},
}
#: a recipe may cost at most this much CV Spearman against the default to be chosen
TOLERANCE = 0.01


def matrix_summary(mat: dict) -> dict:
    """Wins (families whose own head is strictly best) and separation (diagonal minus off-diagonal mean)."""
    fams = [f for f in ASPECTS if f in mat]
    diag = [mat[f][f] for f in fams]
    off = [mat[f][h] for f in fams for h in ASPECTS if h != f]
    wins = [f for f in fams if all(mat[f][f] > mat[f][h] for h in ASPECTS if h != f)]
    return {"wins": wins, "n_wins": len(wins), "separation": statistics.fmean(diag) - statistics.fmean(off),
            "diagonal": statistics.fmean(diag)}


def mean_matrix(mats: list[dict]) -> dict:
    return {f: {h: statistics.fmean(m[f][h] for m in mats) for h in ASPECTS} for f in ASPECTS if f in mats[0]}


def stage_cv(res: dict, train: list[dict], args) -> None:
    systems = sorted({r["system_id"] for r in train}, key=lambda s: int(s.lstrip("M")))
    random.Random(args.seed).shuffle(systems)
    folds = [sorted(systems[i::3]) for i in range(3)]
    cv = res.setdefault("cv", {})
    cv["folds"] = folds
    cv["seed"] = args.seed + 12
    recipes = cv.setdefault("recipes", {})
    for name, options in RECIPES.items():
        if name in recipes:
            continue
        per, mats = [], []
        for held in folds:
            tr = [r for r in train if r["system_id"] not in held]
            dv = [dict(r) for r in train if r["system_id"] in held]
            model, secs, pairs = C.fit(tr, options, args.seed + 12, args.threads)
            sc = C.score(model, dv)
            per.append(aspect_rows(sc, lambda a: f"metric.s.{a}", human=lambda a: f"judge.{a}")["average"]["spearman"])
            mats.append(C.aspects_matrix(model, dv, args.seed))
            log(f"cv {name} held {held}: Spearman {per[-1]:.3f}, {matrix_summary(mats[-1])} ({secs:.0f} s, {pairs} pairs)")
        mat = mean_matrix(mats)
        recipes[name] = {"options": options, "per_fold": per, "spearman": statistics.fmean(per),
                         "matrix": mat, **matrix_summary(mat)}
        save(res, args)
    ok = [n for n in recipes if recipes[n]["spearman"] >= recipes["default"]["spearman"] - TOLERANCE]
    cv["chosen"] = max(ok, key=lambda n: recipes[n]["separation"])
    cv["rule"] = (f"largest separation among recipes whose CV Spearman is at most {TOLERANCE} below the default's")
    log(f"cv chosen: {cv['chosen']}")
    save(res, args)


def stage_final(res: dict, train: list[dict], test: list[dict], args) -> None:
    splits, systems = C.splits_of(train, test)  # bench_student_contrast's (the student benchmark's) two splits
    chosen = (res.get("cv") or {}).get("chosen")
    if chosen is None:
        raise SystemExit("final: run the cv stage first")
    seeds = [args.seed + 12 + k for k in range(args.seeds)]
    fin = res.setdefault("final", {})
    if res.get(C.SYSTEMS) != systems:  # rows of another system-disjoint split (before 7 December 2026: --seed's)
        if fin.pop("disjoint", None):
            log(f"final: the disjoint rows on file were trained on another split; dropped (now {systems})")
        res[C.SYSTEMS] = systems
    for split, (tr, te) in splits.items():
        for name in dict.fromkeys(("default", chosen)):
            rec = fin.setdefault(split, {}).setdefault(name, {"seeds": {}})
            for seed in seeds:
                if str(seed) in rec["seeds"]:
                    continue
                model, secs, pairs = C.fit(tr, RECIPES[name], seed, args.threads)
                row = S.row_of(C.score(model, [dict(r) for r in te]), "metric.s")
                one = {"row": row, "train_s": secs, "pairs": pairs}
                if split == "standard":
                    one["matrix"] = C.aspects_matrix(model, te, args.seed)
                rec["seeds"][str(seed)] = one
                log(f"{split} {name} seed {seed}: {row['average']['spearman']:.3f} ({secs:.0f} s)"
                    + (f", {matrix_summary(one['matrix'])}" if "matrix" in one else ""))
                save(res, args)
            vals = [v["row"]["average"]["spearman"] for v in rec["seeds"].values()]
            rec["spearman"] = C.stats(vals)
            rec["per_aspect"] = {a: statistics.fmean(v["row"][a]["spearman"] for v in rec["seeds"].values())
                                 for a in ASPECTS}
            if split == "standard":
                rec["matrix"] = mean_matrix([v["matrix"] for v in rec["seeds"].values()])
                rec.update(matrix_summary(rec["matrix"]))
                rec["wins_per_seed"] = [matrix_summary(v["matrix"])["n_wins"] for v in rec["seeds"].values()]
            save(res, args)


def save(res: dict, args) -> None:
    """Write the results; this process's run is the last entry of ``meta.runs`` (added by :func:`main`)."""
    stamp = {"date": now(), "machine": machine(), "threads": args.threads, "seeds": args.seeds}
    runs = res["meta"]["runs"]
    runs[-1] = stamp
    res["meta"] = {**stamp, "runs": runs}
    write_results(args.out, res, report(res))


def report(res: dict) -> list[str]:
    md = ["# Aspect heads: the aspect-specificity term (issue 24)", "",
          "Runs: " + "; ".join(f"{r['date']}, {r['machine']}, {r['threads']} thread(s)"
                               for r in res["meta"].get("runs") or [res["meta"]]) + ". SummEval, GPT-4 "
          "(gpt-4-0314 rts) labels; summary-level Spearman averaged over the four aspects. Aspect matrix: share of "
          "(original, perturbed) pairs each head orders correctly, per perturbation family; a head *wins* its "
          "family when no other head does as well; separation = diagonal mean - off-diagonal mean.", ""]
    cv = res.get("cv")
    if cv:
        md += [f"## Cross-validation on the training documents, systems held out (folds {cv['folds']}, seed {cv['seed']})", "",
               markdown_table([[n, fmt(r["spearman"]), ", ".join(r["wins"]) or "none", fmt(r["separation"]),
                                *[fmt(r["matrix"][f][f], 2) for f in ASPECTS]]
                               for n, r in cv["recipes"].items()],
                              ["recipe", "CV Spearman", "families won", "separation", *[f"{f} (own head)" for f in ASPECTS]]),
               ""]
        if "chosen" in cv:
            md += [f"Rule: {cv['rule']}. Chosen: **{cv['chosen']}**.", ""]
    fin = res.get("final") or {}
    for split, rows in fin.items():
        md += [f"## {split} split, test documents", "",
               markdown_table([[n, f"{fmt(r['spearman']['mean'])} ± {fmt(r['spearman']['sd'])}",
                                *[fmt(r["per_aspect"][a]) for a in ASPECTS],
                                (f"{fmt(r['separation'])}; wins per seed {r['wins_per_seed']}" if "matrix" in r else "")]
                               for n, r in rows.items() if "spearman" in r],
                              ["recipe", "average Spearman (seeds)", *ASPECTS, "separation"]), ""]
        for n, r in rows.items():
            if "matrix" in r:
                md += [f"Aspect matrix, {n} (mean over seeds; rows: perturbation family, columns: head):", "",
                       markdown_table([[f, *[fmt(r["matrix"][f][h], 3) for h in ASPECTS]] for f in r["matrix"]],
                                      ["family", *ASPECTS]), ""]
    return md


def main() -> int:
    ap = parser(__doc__.split("\n")[0], out="student_aspects", threads=1)
    ap.add_argument("--stages", default="cv,final")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--resume", action="store_true", help="keep the finished recipes and seeds of --out")
    args = ap.parse_args()
    setup(args)
    recs = summeval_llm_ratings(args.data_dir, judge="gpt-4-0314", method="rts")
    train, test = S.split_docs(recs, 0, 50), S.split_docs(recs, 50, 100)
    path = Path(args.out).with_suffix(".json")
    res = json.loads(path.read_text()) if args.resume and path.exists() else {}
    meta = res.get("meta") or {}  # one entry per run: a --resume run keeps the earlier runs' dates
    res["meta"] = {**meta, "runs": (meta.get("runs") or ([meta] if "date" in meta else [])) + [{}]}
    for stage in [s.strip() for s in args.stages.split(",") if s.strip()]:
        log(f"stage {stage}")
        if stage == "cv":
            stage_cv(res, train, args)
        elif stage == "final":
            stage_final(res, train, test, args)
        else:
            raise SystemExit(f"unknown stage {stage}")
    save(res, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
