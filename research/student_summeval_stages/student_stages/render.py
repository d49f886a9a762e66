"""The reports: ``student_summeval.md`` (:func:`render`) and ``student_cv.md`` (:func:`render_cv`)."""

from __future__ import annotations

import math

from harness import ASPECTS, fmt, markdown_table

from .common import REFERENCE, TIE


def _cells(row) -> list[str]:
    out = []
    for a in (*ASPECTS, "average"):
        c = row.get(a) or {}
        out.append(f"{fmt(c.get('spearman'))} / {fmt(c.get('kendall'))}")
    return out


def render(d: dict) -> list[str]:
    """The main report's lines from the figures ``d``."""
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
    if d.get("expert_ceiling"):
        lines += ["## Ceiling: the student trained on the experts' own ratings (bench_student_contrast.py, stage ceiling)", "",
                  "The training rows of each split labelled with the expert means instead of GPT-4's ratings, what a "
                  "perfect teacher would give; average summary-level Spearman with the experts on the test rows.", "",
                  markdown_table([[split, n, fmt(v["spearman"]) + (f" ± {fmt(v['spearman_sd'])}" if "spearman_sd" in v else "")]
                                  for split, rows in d["expert_ceiling"].items() for n, v in rows.items()],
                                 ["split", "metric", "Spearman"]), ""]
    if d.get("runs"):
        lines += ["## Training runs", "",
                  markdown_table([[k, v.get("epochs"), f"{v.get('train_s', 0):.0f}"] for k, v in d["runs"].items()],
                                 ["student", "epochs", "train s"]), ""]
    return lines


def render_cv(cv: dict) -> list[str]:
    """The recipe-choice report's lines from ``cv``."""
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
