"""Does the student learn its own teacher as the teacher's labels grow? (the CSEM paper's Fig. 3)

Data: the judged teacher pool (``benchmarks/data/teacher_pool/``, its README): 4,894 existing
summaries of SummEval, REALSumm, Newsroom and QAGS judged by one local LLM judge with one rubric
(``provenance.json``), split by article into a held-out test pool (1,018 candidates) and the training
candidates in judging order, so the training pool of N labels is the first N judged candidates
(nested pools). For each pool size, recipe ([`benchmarks.suite.RECIPES`][]) and seed, the student is
trained with ``csem.train`` on the teacher's scores and scored on the test pool with
``EvaluationModel.predict``. Every figure is a correlation **with the teacher** on the test pool:
summary level (within each source, averaged; Spearman) and dataset level (all test candidates
pooled), mean and sd over seeds; beside it the trivial baselines against the same teacher (length,
extractiveness; the overlap features' least-squares fit and the system prior, fitted on the same
training pool) and a log-linear fit of the curve. Seeds 12-14, sizes 300, 1,000, 2,000 and every
judged training candidate, recipe ``default``. ``quick``: 24 labels, one seed, 24 test candidates, one epoch.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.suite import POOL, RECIPES, fmt, log, machine, markdown_table, threads

COL = "judge.relevance"
SEEDS, SIZES = (12, 13, 14), (300, 1000, 2000, None)  # None: every judged training candidate


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_pool() -> tuple[list[dict], list[dict], dict]:
    """``(test, train in judging order, provenance)`` as csem records with the teacher's score in ``COL``."""
    sources = {s["source_id"]: s["text"] for s in _read(POOL / "sources.jsonl.gz")}
    judged = {j["id"]: j for p in sorted((POOL / "judged").glob("chunk-*.jsonl.gz")) for j in _read(p)}
    test, train = [], []
    for c in _read(POOL / "candidates.jsonl.gz"):
        j = judged.get(c["id"])
        if j is None or j["score"] is None:
            continue
        rec = {"id": c["id"], "doc_id": c["source_id"], "system_id": f"{c['dataset']}/{c['system_id']}",
               "dataset": c["dataset"], "source": sources[c["source_id"]], "candidate": c["candidate"],
               COL: float(j["score"])}
        (test if c["split"] == "test" else train).append(rec)
    return test, train, json.loads((POOL / "provenance.json").read_text(encoding="utf-8"))


def correlations(records: list[dict], metric: str) -> dict:
    """Summary- and dataset-level Spearman of ``metric`` with the teacher (None where undefined)."""
    from csem.meta.correlation import column_correlations

    res = column_correlations(records, metric, COL, levels=("summary", "dataset"), methods=("spearman",))
    return {lv: (None if math.isnan(res[(lv, "spearman")].value) else res[(lv, "spearman")].value)
            for lv in ("summary", "dataset")}


def baselines(train: list[dict], test: list[dict]) -> dict:
    """Summary-level Spearman with the teacher of length, extractiveness, the overlap LS fit and the system prior."""
    from csem.baselines import extractiveness, length, overlap_least_squares, system_prior

    cols = {"length": length(test), "extractiveness": extractiveness(test),
            "overlap features (LS)": overlap_least_squares(train, test, COL)[COL],
            "system prior": system_prior(train, test, COL)[COL]}
    rows = [dict(r, **{f"metric.{k}": v[i] for k, v in cols.items()}) for i, r in enumerate(test)]
    return {k: correlations(rows, f"metric.{k}")["summary"] for k in cols}


def fit_curve(points: list[tuple[int, float]]) -> dict | None:
    """``spearman = a + b ln(labels)`` by least squares ([`csem.meta.curve.log_fit`][], csem's one curve fit),
    R^2, labels to reach 0.6 (None for fewer than 3 points)."""
    if len(points) < 3:
        return None
    from csem.meta.curve import log_fit

    fit = log_fit(points)
    a, b = fit["intercept"], fit["slope"]
    return {"form": "spearman = a + b * ln(labels)", "a": a, "b": b, "r2": fit["r2"],
            "labels_to_reach": {"0.6": float(math.exp((0.6 - a) / b)) if b > 0 else None}}


def run(quick: bool = False) -> dict:
    """Train the students along the curve and correlate them with the teacher."""
    import csem

    test, train, prov = load_pool()
    seeds, sizes, recipes = ((12,), (24,), ("default",)) if quick else (SEEDS, SIZES, ("default",))
    if quick:
        test = test[:24]
    sizes = [n or len(train) for n in sizes]
    runs, by_size = [], {}
    with tempfile.TemporaryDirectory(prefix="csem-pool-") as tmp:
        for n in sizes:
            by_size[str(n)] = baselines(train[:n], test)
            for recipe in recipes:
                for seed in seeds:
                    t0 = time.perf_counter()
                    settings = dict(RECIPES[recipe], **({"max_epochs": 1} if quick else {}))
                    model = csem.train(train[:n], COL, out_dir=Path(tmp) / f"{recipe}-{n}-{seed}", label_range=(1, 5),
                                       seed=seed, num_threads=threads(), **settings)
                    pred = model.predict(test)
                    rows = [dict(r, **{"metric.student": s}) for r, s in zip(test, next(iter(pred.scores.values())))]
                    corr = correlations(rows, "metric.student")
                    runs.append({"recipe": recipe, "labels": n, "seed": seed, "corr": corr,
                                 "train_seconds": time.perf_counter() - t0})
                    log(f"{recipe}, {n} labels, seed {seed}: summary-level {fmt(corr['summary'])}")
    curves: dict = {}
    for recipe in recipes:
        for n in sizes:
            vals = [r["corr"]["summary"] for r in runs if r["recipe"] == recipe and r["labels"] == n]
            ds = [r["corr"]["dataset"] for r in runs if r["recipe"] == recipe and r["labels"] == n]
            curves.setdefault(recipe, []).append(
                {"labels": n, "spearman": statistics.fmean(vals), "sd": statistics.stdev(vals) if len(vals) > 1 else None,
                 "seeds": len(vals), "dataset_spearman": statistics.fmean(ds)})
    return finish({"meta": {"machine": machine(), "threads": threads(), "seeds": list(seeds), "sizes": sizes},
                   "teacher": prov, "test_candidates": len(test), "train_judged": len(train), "curves": curves,
                   "fits": {r: fit_curve([(p["labels"], p["spearman"]) for p in c]) for r, c in curves.items()},
                   "baselines_by_size": by_size, "runs": runs})


def finish(res: dict) -> dict:
    """Add the headline: the default recipe at the largest pool beside its baselines."""
    top = res["curves"]["default"][-1]
    base = res["baselines_by_size"][str(top["labels"])]
    res["headline"] = {"labels": top["labels"], "mean": top["spearman"], "sd": top["sd"],
                       "baselines": {k: base[k] for k in ("length", "overlap features (LS)") if k in base}}
    return res


def report(res: dict) -> str:
    """The Markdown report: the curve per recipe beside the baselines at each size, the fits."""
    recipes = list(res["curves"])
    sizes = sorted({p["labels"] for c in res["curves"].values() for p in c})
    names = list(next(iter(res["baselines_by_size"].values())))
    rows = []
    for n in sizes:
        cells = []
        for r in recipes:
            p = next((p for p in res["curves"][r] if p["labels"] == n), None)
            cells.append(f"{fmt(p['spearman'])} ± {fmt(p['sd'])} ({p['seeds']})" if p else "")
        rows.append([f"{n:,}", *cells, *(fmt(res["baselines_by_size"].get(str(n), {}).get(k)) for k in names)])
    t = res["teacher"]
    rubric = t.get("rubric")
    rubric = rubric.get("id") if isinstance(rubric, dict) else rubric
    md = ["# The student vs its teacher as labels grow (the teacher pool)", "",
          f"Teacher {t.get('judge')} ({rubric}, probs mode); {res['test_candidates']:,} held-out test "
          f"candidates, {res['train_judged']:,} judged training candidates; summary-level Spearman with the teacher "
          f"on the test pool, mean ± sd over seeds (seeds); machine: {res['meta']['machine']}.", "",
          markdown_table(rows, ["training labels", *recipes, *names])]
    for r, fit in res.get("fits", {}).items():
        if fit:
            md += ["", f"{r}: spearman = {fit['a']:.3f} + {fit['b']:.3f} ln(labels), R² {fit['r2']:.2f}; "
                       f"0.6 would take ~{fit['labels_to_reach']['0.6'] or 0:,.0f} labels (an extrapolation)."]
    return "\n".join(md)
