"""Which contrast recipe should ``csem train`` default to? Grouped cross-validation on the teacher pool's
TRAINING candidates (issues 23 and 24).

Why: ``csem train``'s default mixes 400 rule-made contrast pairs (csem.model.contrast.auto_pairs, one per
training row up to ``contrast_max_pairs``) into label training at weight 0.5. On SummEval (600 GPT-4
labels, systems held out, one seed) that beat no pairs; on the main job's 72 training rows (3 seeds) it
lost; and the teacher-scale curve fell as labels grew. One suspect: the 400 pairs are cycled through every
label batch, so at 2,000+ labels each pair is rehearsed several times per epoch. This benchmark asks the
question on training data only, with a second training set that has many labels. It also compares
recipes that train longer or with the encoder frozen (issue 23: a ridge fit on the frozen encoder's
candidate embedding follows the teacher more closely than the one-epoch default), so the teacher-scale
benchmark's second curve (``--second``) is chosen here, never on its test pool.

Data: the first ``--labels`` judged TRAINING candidates of the teacher pool (``benchmarks/data/teacher_pool``,
judging order, as ``bench_teacher_scale.py``'s nested pools); the held-out test pool of the teacher-scale
benchmark is never read. They are split into ``--folds`` groups of sources
(:func:`csem.model.cv.grouped_folds`: every candidate of a source in one fold); for each seed, fold and recipe
a student is trained on the other folds (``csem train``'s defaults plus the recipe's TrainConfig fields) and
scored on the held-out fold. Figure: summary-level Spearman (and Kendall tau-b) of student vs teacher on the
held-out fold (within each source over its candidates, averaged over sources), mean over folds, then mean and
sd over seeds; beside it, on the same folds, length (words) and a least-squares fit of the overlap features.

Run:  nice -n 5 python benchmarks/bench_teacher_pool_cv.py [--labels 1800] [--folds 2] [--seeds 12,13]
      [--recipes 'NAME;NAME'] [--resume]
Out:  benchmarks/results/teacher_pool_cv.{json,md}
"""

from __future__ import annotations

import json
import statistics

from harness import fmt, log, machine, markdown_table, now, parser, setup, write_results

import bench_teacher_scale as T
import teacher_pool as tp

#: TrainConfig fields over csem train's defaults (explicit, so a name means the same recipe when the
#: defaults change)
CONTRAST = {"contrast_per_record": 1, "contrast_max_pairs": 400, "contrast_epochs": 1, "contrast_mix": 0.5}
RECIPES: dict[str, dict] = {
    "contrast pretraining + mixing (1 pair per row, at most 400, 1 epoch, mix 0.5)": CONTRAST,
    "no contrast pairs": {"contrast_per_record": 0},
    "contrast pretraining only (no mixing)": {**CONTRAST, "contrast_mix": 0.0},
    "contrast pairs not capped (1 per row)": {**CONTRAST, "contrast_max_pairs": None},
    # longer training of the head (issue 23: a ridge fit on the frozen MiniLM embeddings of the candidate
    # plus the overlap features follows this teacher more closely than the one-epoch default does)
    "frozen encoder (head only), 6 epochs": {"contrast_per_record": 0, "train_layers": 0, "max_epochs": 6},
    "top 2 layers, 3 epochs at lr 1e-4": {"contrast_per_record": 0, "max_epochs": 3, "lr": 1e-4, "head_lr": 1e-4},
    # TrainConfig.average_tail: the weights after each of the last half of the steps averaged (tail averaging)
    "no contrast pairs, last half of the steps averaged": {"contrast_per_record": 0, "average_tail": 0.5},
    "top 2 layers, 3 epochs at lr 1e-4, last half averaged": {
        "contrast_per_record": 0, "max_epochs": 3, "lr": 1e-4, "head_lr": 1e-4, "average_tail": 0.5},
    # the ridge's shape inside csem's model: frozen encoder, a linear head, within-source order weighted up
    "frozen encoder, linear head, pairwise weight 10, 6 epochs": {
        "contrast_per_record": 0, "train_layers": 0, "max_epochs": 6,
        "model": {"hidden_sizes": [], "pairwise_weight": 10.0}},
    # ModelConfig.feature_set = "novelty": the overlap features without the length (chosen over the overlap
    # set by the SummEval cross-validation with systems held out; does this teacher's pool agree?)
    "no contrast pairs, novelty features (no length)": {"contrast_per_record": 0, "model": {"feature_set": "novelty"}},
}
#: a recipe's ``"model"`` entry holds ModelConfig fields; the rest are TrainConfig fields
#: names of a first run, before the names above: read on --resume
ALIASES = {"default": "contrast pretraining + mixing (1 pair per row, at most 400, 1 epoch, mix 0.5)",
           "no-contrast": "no contrast pairs"}


def gate_check(folds, pool: list[dict], col: str, seed: int = 12) -> dict:
    """What the acceptability gate rejects among REAL candidates, and whether people agree: for each fold a
    gate is fitted on the training part (:func:`csem.model.acceptability.fit_gate`, as ``csem train`` does)
    and applied to the held-out part; per dataset, the share of held-out candidates it rejects (factor < 1)
    and the mean human score (each ``human.<aspect>``) and mean teacher score of rejected vs accepted ones."""
    import torch

    from csem.model.acceptability import AcceptabilityGate, contexts_of, fit_gate, gate_size
    from csem.model.features import pair_features

    acc: dict = {}
    for tr_idx, held_idx in folds:
        tr, held = [pool[i] for i in tr_idx], [pool[i] for i in held_idx]
        gate = AcceptabilityGate(gate_size("ref-free"), [col.split(".", 1)[1]])
        fit_gate(gate, tr, "ref-free", seed=seed)
        x = torch.tensor([pair_features("lexical", r["candidate"], contexts_of(r, "ref-free")) for r in held])
        with torch.no_grad():
            factor = gate.factor(x)[:, 0].tolist()
        for r, g in zip(held, factor):
            d = acc.setdefault(r["dataset"], {"rejected": [], "accepted": []})
            d["rejected" if g < 1 else "accepted"].append(r)
    out: dict = {}
    for ds, d in sorted(acc.items()):
        n = len(d["rejected"]) + len(d["accepted"])
        row: dict = {"candidates": n, "rejected": len(d["rejected"]), "share_rejected": len(d["rejected"]) / n}
        keys = sorted({k for g in d.values() for r in g for k in r if k.startswith("human.")} | {col})
        for k in keys:
            for side in ("rejected", "accepted"):
                vals = [r[k] for r in d[side] if isinstance(r.get(k), (int, float))]
                row[f"{k} {side}"] = statistics.fmean(vals) if vals else None
        out[ds] = row
    return out


def baselines(train: list[dict], held: list[dict], col: str) -> dict:
    """Length (words) and the overlap-feature least-squares fit (fitted on ``train``) on ``held``."""
    fixed = T.fixed_baselines(held, col)
    fitted = T.fitted_baselines(train, held, col, T.features(held))
    keep = ("length (words)", "overlap features, least squares on the training pool")
    return {k: v["summary"]["spearman"] for k, v in {**fixed, **fitted}.items() if k in keep}


def report(res: dict) -> str:
    m = res["meta"]
    lines = ["# Contrast recipe by grouped cross-validation on the teacher pool's training candidates\n",
             f"{res['labels']} training candidates (first in judging order; the test pool is not read), "
             f"{m['folds']} folds by source, seeds {', '.join(map(str, m['seeds']))}; teacher "
             f"{res['teacher']}; {m['machine']}; {m['date']}; {m['threads']} torch thread(s). Figure: "
             "summary-level Spearman with the teacher on the held-out fold, mean over folds, then mean +- sd "
             "over seeds (each seed's value in its own column).\n"]
    rows = []
    for name, r in res["recipes"].items():
        per = r.get("per_seed", {})
        vals = [v for v in per.values() if v is not None]
        mean = statistics.fmean(vals) if vals else None
        sd = statistics.stdev(vals) if len(vals) > 1 else None
        ng = list(r.get("per_seed_no_gate", {}).values())
        runs = [x for x in res["runs"] if x["recipe"] == name]
        folds = "; ".join(f"seed {x['seed']} fold {x['fold']}: {fmt(x['spearman'])}" for x in runs)
        rows.append([name, fmt(mean) + (f" +- {fmt(sd)}" if sd is not None else ""),
                     ", ".join(fmt(v) for v in vals) + (f" ({folds})" if folds else ""), fmt(statistics.fmean(ng)) if ng else "-",
                     str(r.get("pairs", "-")), f"{r.get('seconds', 0):.0f}"])
    for name, v in res["baselines"].items():
        rows.append([name, fmt(v), "-", "-", "-", "-"])
    lines.append(markdown_table(rows, ["recipe", "Spearman vs teacher", "per seed (per fold)", "same models, gate removed",
                                       "pairs (last fold)",
                                       "train s (all runs)"]))
    if res.get("chosen"):
        lines.append(f"\nHighest: **{res['chosen']}**.")
    g = res.get("gate_check")
    if g:
        lines.append("\n## What the acceptability gate rejects among real candidates\n")
        lines.append("A gate fitted on each fold's training part (as `csem train` fits it) applied to the held-out "
                     "part: the share of real candidates it rejects, and the mean human and teacher scores of the "
                     "rejected vs the accepted ones.\n")
        rows = []
        for ds, row in g.items():
            for k in sorted({k.rsplit(" ", 1)[0] for k in row if k.endswith(" rejected") and k != "rejected"}):
                rows.append([ds, f"{row['rejected']} / {row['candidates']}", k, fmt(row.get(f"{k} rejected")),
                             fmt(row.get(f"{k} accepted"))])
        lines.append(markdown_table(rows, ["dataset", "rejected", "score", "mean, rejected", "mean, accepted"]))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = parser(__doc__, out="teacher_pool_cv", threads=1, seed=None)
    ap.add_argument("--labels", type=int, default=1800)
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--seeds", default="12,13")
    ap.add_argument("--recipes", default=";".join(RECIPES), help="names of RECIPES, separated by ';'")
    ap.add_argument("--resume", action="store_true", help="keep the finished (seed, fold, recipe) runs")
    ap.add_argument("--no-train", action="store_true", help="with --resume: rewrite the report from the finished runs")
    ap.add_argument("--redo-gate-check", action="store_true",
                    help="with --resume: recompute the gate check (after a change to the gate) instead of keeping it")
    args = ap.parse_args()
    setup(args)
    from csem.model.cv import grouped_folds

    prov = json.loads((tp.POOL / "provenance.json").read_text())
    col = f"judge.{prov['rubric']['aspect']}"
    _, train, _ = T.load(col)
    pool = train[:args.labels]
    seeds = [int(s) for s in args.seeds.split(",")]
    recipes = [ALIASES.get(r, r) for r in args.recipes.split(";") if r]
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        ap.error(f"unknown recipe(s): {', '.join(unknown)} (known: {', '.join(RECIPES)})")
    out_json = args.out.with_suffix(".json")
    old = json.loads(out_json.read_text()) if args.resume and out_json.exists() else {}
    for r in old.get("runs", []):
        r["recipe"] = ALIASES.get(r["recipe"], r["recipe"])
    done = {(r["seed"], r["fold"], r["recipe"]): r for r in old.get("runs", [])
            if old.get("labels") == len(pool) and old.get("meta", {}).get("folds") == args.folds}
    folds = grouped_folds(pool, args.folds, key="doc_id", seed=0)
    res = {"meta": {"date": now(), "machine": machine(), "threads": args.threads, "seeds": seeds,
                    "folds": args.folds, "recipes": {r: RECIPES[r] for r in recipes}},
           "teacher": f"{prov['judge']} / {prov['rubric']['id']} ({prov['mode']})", "labels": len(pool),
           "runs": list(done.values())}
    base: dict = {}
    for tr_idx, held_idx in folds:
        tr, held = [pool[i] for i in tr_idx], [pool[i] for i in held_idx]
        for name, v in baselines(tr, held, col).items():
            base.setdefault(name, []).append(v)
    res["baselines"] = {k: statistics.fmean(v) for k, v in base.items()}
    keep = done and old.get("gate_check") and not args.redo_gate_check
    res["gate_check"] = old["gate_check"] if keep else gate_check(folds, pool, col)
    log(f"gate check: {res['gate_check']}")

    def summarise() -> None:
        res["recipes"] = {}
        # the recipes of this call, then those an earlier call ran (shown with the folds they have)
        for name in dict.fromkeys([*recipes, *(r["recipe"] for r in res["runs"])]):
            runs = [r for r in res["runs"] if r["recipe"] == name]
            per_seed, per_seed_no_gate = {}, {}
            for s in seeds:
                vals = [r["spearman"] for r in runs if r["seed"] == s and r["spearman"] is not None]
                if len(vals) == args.folds:
                    per_seed[str(s)] = statistics.fmean(vals)
                vals = [r.get("spearman_no_gate") for r in runs if r["seed"] == s]
                if len(vals) == args.folds and None not in vals:
                    per_seed_no_gate[str(s)] = statistics.fmean(vals)
            res["recipes"][name] = {"per_seed": per_seed, "per_seed_no_gate": per_seed_no_gate,
                                    "seconds": sum(r["seconds"] for r in runs),
                                    "pairs": runs[-1]["pairs"] if runs else None,
                                    "folds_done": len(runs)}
        full = {n: statistics.fmean(res["recipes"][n]["per_seed"].values()) for n in recipes
                if len(res["recipes"][n]["per_seed"]) == len(seeds)}
        res["chosen"] = max(full, key=full.get) if len(full) == len(recipes) else None
        write_results(args.out, res, report(res))

    caches: dict = {}  # one lower-layer cache per number of trained layers (bench_teacher_scale.recipe_parts)
    for seed in seeds if not args.no_train else ():
        for k, (tr_idx, held_idx) in enumerate(folds):
            tr, held = [pool[i] for i in tr_idx], [pool[i] for i in held_idx]
            for name in recipes:
                if (seed, k, name) in done:
                    continue
                options, model_options, cache = T.recipe_parts(RECIPES[name], caches)
                corr, secs, no_gate, pairs = T.train_student(tr, held, col, seed, args.threads, cache, options,
                                                             model_options)
                run = {"seed": seed, "fold": k, "recipe": name, "spearman": corr["summary"]["spearman"],
                       "kendall": corr["summary"]["kendall"],
                       "spearman_no_gate": no_gate["summary"]["spearman"] if no_gate else None,
                       "seconds": secs, "pairs": pairs, "train": len(tr), "held": len(held)}
                res["runs"].append(run)
                log(f"seed {seed} fold {k} {name}: {fmt(run['spearman'])}, gate removed "
                    f"{fmt(run['spearman_no_gate'])} ({secs:.0f} s, {pairs} pairs)")
                summarise()
    summarise()


if __name__ == "__main__":
    main()
