"""Judge quality at a fraction of the judge's calls: the student as a filter that knows when to ask the judge.

The student scores every candidate; a deferral rule (:mod:`csem.apply.cascade`: the seed-ensemble
members' deviation ``std``, the MC-dropout deviation ``mc``, the closeness of a score to its source's
nearest other score ``neighbours``, or ``random``) sends a share of them to the judge, and the
combined score (the judge's where it judged, the student's elsewhere; identity scale map, the
student's labels being the judge's scores) is measured against an independent reference. No new
judging: the judge's labels of every candidate are already on disk, deferral only reads them.

Two sets:

* **teacher pool** (``benchmarks/data/teacher_pool``): the 1,018 held-out test candidates. Judge: the
  pool's Qwen2.5-Coder-0.5B judgments (rubric ``csem/summ-relevance-ref-free``). Reference: the same
  judge's second rendering of the aspect (``forms/geval-relevance``, rubric ``geval/summeval-relevance``),
  against which the judge reaches its repeatability. Students: ``csem.train`` defaults on the pool's
  3,876 judged training candidates (label ``judge.relevance``, 1-5).
* **SummEval**: test documents 50-99 x 12 systems; judge: GPT-4's published ratings (gpt-4-0314, rts,
  Shen et al. 2023); reference: the expert means; four aspects, figures averaged over them. Students:
  ``csem.train`` defaults on the GPT-4 ratings of documents 0-49 (four heads, 1-5).

Figures: summary-level Spearman (per source over its candidates, averaged; :func:`csem.meta.correlate`)
of the combined score with the reference, against the share of candidates judged (every 5%), per rule:
single students (each seed; mean and sd over the seeds; the ``mc``, ``neighbours`` and ``random`` rules)
and the seed ensemble of the same students (mean score; ``std``, ``mc`` = the ensemble's predictive
deviation, ``neighbours``, ``random``). Random deferral is the mean of 10 draws. The area under each
curve (trapezoid over the share, 0-1), whether a rule beats random at every share up to 50%, and the
share of judge calls at which the curve first reaches 90% of the judge's own figure (linear
interpolation between grid points). Two-stage reranking (the student's top K of each source, the judge
picks among them): the judge's score of the pick vs the judge's best, the student-only pick and a random
shortlist of K, and the reference's score of each pick, K = 2, 3. Beside each random curve, the standard
deviation of its single draws: the yardstick of a rule's margin over random.

The main job's held-out articles (a finished run folder of ``csem run package:summarization.yaml``: the
main job benchmark's ``benchmarks/.cache/main_job``, or the folder ``$CSEM_CASCADE_RUN_DIR`` names; no
folder, no section): two-stage reranking of each held-out article's candidates (N = its systems' samples)
by the run's student (``scored.jsonl``, split ``test``) and the run's judge, whose label of every candidate
the annotate stage wrote; no reference beyond the judge. Beside the pick: the judge's best, the
student's own pick, a random candidate (the mean), a random shortlist of K (the judge's expected best of
K candidates drawn at random, exact) and the longest K (the length baseline).

Students are cached (scores and deviations) under ``benchmarks/.cache/cascade/`` so a rerun reports
without retraining; the plot is the docs page's figure (``docs/benchmarks/cascade.png``; ``benchmarks/results``
holds only what the suite's writer writes).

Run:  python -m benchmarks run cascade [--quick]
Out:  benchmarks/results/cascade.{json,md} and docs/benchmarks/cascade.png (a full run)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import statistics
import time
from pathlib import Path

from benchmarks import suite

POOL = suite.POOL
CACHE = suite.CACHE / "cascade"
PLOT = suite.HERE.parent / "docs" / "benchmarks" / "cascade.png"  # the figure of the docs page
SEEDS = (12, 13, 14)  # SummEval's students: one default fit takes 15-40 min on the shared 2-core machine
SHARES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)  # the reported shares
GRID = tuple(i / 20 for i in range(21))  # every 5%: areas and the 90% point
DRAWS = 10  # random deferral: mean of this many draws
MC_SAMPLES = 10
ASPECTS = ("coherence", "consistency", "fluency", "relevance")
SINGLE_RULES = ("mc", "neighbours", "random")
ENSEMBLE_RULES = ("std", "mc", "neighbours", "random")
KS = (2, 3)
SHIPPED = "news-relevance-minilm"  # the teacher pool's student, shipped with csem
MAIN_JOB = suite.CACHE / "main_job"  # the main job benchmark's run folder (``csem run package:summarization.yaml``)
MAIN_JOB_ENV = "CSEM_CASCADE_RUN_DIR"  # another finished run folder of the summarization pipeline


def _log(msg: str) -> None:
    suite.log(f"cascade: {msg}")


def _read_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _judged(folder: Path) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for p in sorted(folder.glob("chunk-*.jsonl.gz")):
        for r in _read_gz(p):
            out[r["id"]] = r["score"]
    return out


# ------------------------------------------------------------------------------------------------
# the two sets: records with the judge's label, the reference and the training labels
# ------------------------------------------------------------------------------------------------

def pool_set(quick: bool) -> dict:
    """The teacher pool: test candidates scored by both renderings, the pool's training candidates."""
    sources = {s["source_id"]: s["text"] for s in _read_gz(POOL / "sources.jsonl.gz")}
    first, second = _judged(POOL / "judged"), _judged(POOL / "forms" / "geval-relevance")
    test, train = [], []
    for c in _read_gz(POOL / "candidates.jsonl.gz"):
        j = first.get(c["id"])
        if j is None:
            continue
        rec = {"id": c["id"], "doc_id": c["source_id"], "system_id": c["system_id"], "dataset": c["dataset"],
               "source": sources[c["source_id"]], "candidate": c["candidate"], "judge.relevance": float(j)}
        if c["split"] == "test":
            if second.get(c["id"]) is not None:
                test.append(dict(rec, **{"ref.relevance": float(second[c["id"]])}))
        else:
            train.append(rec)
    if quick:
        docs = sorted({r["doc_id"] for r in test})[:12]
        test, train = [r for r in test if r["doc_id"] in docs], train[:120]
    return {"name": "teacher pool", "aspects": ["relevance"], "test": test, "train": train,
            "judge": "llama-cpp:qwen-0.5b, csem/summ-relevance-ref-free (the pool's judgments)",
            "reference": "the same judge, geval/summeval-relevance (the pool's second rendering)"}


def summeval_set(quick: bool) -> dict:
    """SummEval with GPT-4's published ratings: documents 0-49 train, 50-99 test."""
    lo, hi = (slice(0, 6), slice(50, 54)) if quick else (slice(0, 50), slice(50, 100))
    train = suite.summeval_llm_ratings(lo, judge="gpt-4-0314", method="rts")
    test = suite.summeval_llm_ratings(hi, judge="gpt-4-0314", method="rts")
    test = [dict(r, **{f"ref.{a}": r[f"human.{a}"] for a in ASPECTS}) for r in test]
    return {"name": "SummEval", "aspects": list(ASPECTS), "test": test, "train": train,
            "judge": "gpt-4-0314 (rts, Shen et al. 2023)", "reference": "the expert means"}


# ------------------------------------------------------------------------------------------------
# students: csem.train defaults, one per seed; scores and MC-dropout deviations of the test records
# ------------------------------------------------------------------------------------------------

def _score(model, records: list[dict], mc: int) -> tuple[dict, dict | None]:
    """``({aspect: scores}, {aspect: deviations} | None)`` of ``records`` through the model's scoring method."""
    if hasattr(model, "predict"):
        pred = model.predict(records, mc_dropout=mc) if mc else model.predict(records)
        scores = {c.rsplit(".", 1)[-1]: list(v) for c, v in pred.scores.items()}
        std = {c.rsplit(".", 1)[-1]: list(v) for c, v in (pred.std or {}).items()} if mc else None
        return scores, std
    res = model.score(records, mc_dropout=mc)
    aspects = list(res[0].scores)
    scores = {a: [r.scores[a] for r in res] for a in aspects}
    std = {a: [r.std[a] for r in res] for a in aspects} if mc else None
    return scores, std


def _cached(key_parts: list, make) -> dict:
    key = hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()[:16]
    path = CACHE / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    out = make()
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


def _scores_of(model, data: dict, seed: int) -> tuple[dict, dict]:
    """Deterministic scores and MC-dropout deviations of ``data``'s test records, on its aspects."""
    import torch

    scores, _ = _score(model, data["test"], 0)
    torch.manual_seed(seed)
    _, std = _score(model, data["test"], MC_SAMPLES)
    return {a: scores[a] for a in data["aspects"]}, {a: std[a] for a in data["aspects"]}


def student(data: dict, seed: int, quick: bool) -> dict:
    """One default student (``csem.train``) trained on ``data``'s training labels with ``seed``: its
    deterministic scores, MC-dropout deviations and training seconds (cached)."""
    import csem

    def make() -> dict:
        import torch

        torch.manual_seed(seed)
        t0 = time.perf_counter()
        cols = ",".join(f"judge.{a}" for a in data["aspects"])
        model = csem.train(data["train"], cols, label_range=(1, 5), judge=data["judge"], seed=seed,
                           num_threads=suite.threads())
        secs = time.perf_counter() - t0
        _log(f"{data['name']}: student seed {seed} trained in {secs:.0f} s")
        scores, std = _scores_of(model, data, seed)
        return {"seed": seed, "train_seconds": secs, "scores": scores, "mc_std": std, "student": "csem.train defaults"}

    return _cached([data["name"], seed, quick, csem.__version__, len(data["train"]), [r["id"] for r in data["test"]]],
                   make)


def shipped_student(data: dict) -> dict:
    """The shipped ``news-relevance-minilm``: the teacher pool's own student (the pool's 3,876 judged
    training candidates, test articles never trained on; its card gives the recipe and seed)."""
    import csem
    from csem.model.pretrained import resolve

    folder = resolve(f"package:{SHIPPED}")

    def make() -> dict:
        model = csem.load_metric(folder)
        seed = int(model.card["training"]["config"]["seed"])
        scores, std = _scores_of(model, data, seed)
        cfg = model.card["training"]["config"]
        return {"seed": seed, "train_seconds": None, "scores": scores, "mc_std": std,
                "student": f"shipped {SHIPPED} ({model.card['training']['n_records']} labels, {cfg['max_epochs']} "
                           f"epochs at lr {cfg['lr']}, top {cfg['train_layers']} layers, seed {seed})"}

    return _cached([SHIPPED, csem.__version__, [r["id"] for r in data["test"]], data["aspects"]], make)


def ensemble(students: list[dict], aspects: list[str]) -> dict:
    """The seed ensemble of ``students``: mean score, the members' deviation (population sd) and the
    ensemble's MC-dropout predictive deviation ``sqrt(mean member variance + variance of member means)``."""
    import numpy as np

    out: dict = {"scores": {}, "std": {}, "mc_std": {}}
    for a in aspects:
        s = np.array([st["scores"][a] for st in students], dtype=float)
        v = np.array([st["mc_std"][a] for st in students], dtype=float) ** 2
        out["scores"][a] = s.mean(0).tolist()
        out["std"][a] = s.std(0).tolist()
        out["mc_std"][a] = np.sqrt(v.mean(0) + s.var(0)).tolist()
    return out


# ------------------------------------------------------------------------------------------------
# curves
# ------------------------------------------------------------------------------------------------

def agreement(values: list, reference: list, groups: list) -> float:
    """Summary-level Spearman (per source, averaged) through csem's one evaluator."""
    from csem.meta import correlate

    v = correlate(values, reference, level="summary", method="spearman", groups=groups).value
    return float("nan") if v is None else float(v)


def cascade_curve(data: dict, scores: dict, devs: dict | None, rule: str, calibration: str = "fit",
                  draw_sd: list | None = None) -> list[float]:
    """Agreement with the reference (mean over aspects) at each :data:`GRID` share for one rule; for
    ``random`` the mean over :data:`DRAWS` draws. ``calibration``: as ``csem score --judge-calibration``
    (``fit``: the judged scores mapped by the line of the student's score on the judge's over the judged
    rows; ``identity``: as they are). ``draw_sd``: a list that gets, per share, the sample standard
    deviation over the draws of their agreement (mean over aspects; None for a rule with one draw)."""
    from csem.apply.cascade import choose, combine, fit_calibration

    test, groups = data["test"], [r["doc_id"] for r in data["test"]]
    draws = range(DRAWS) if rule == "random" else [0]
    out = []
    for share in GRID:
        vals, by_draw = [], []
        for a in data["aspects"]:
            judge = [r[f"judge.{a}"] for r in test]
            ref = [r[f"ref.{a}"] for r in test]
            per_draw = []
            for d in draws:
                picked = choose(rule, scores[a], share=share, std=None if devs is None else devs.get(a),
                                groups=groups, seed=d)
                line = fit_calibration({i: judge[i] for i in picked}, scores[a]) if calibration == "fit" else None
                k, m = line or (0.0, 1.0)
                combined, _ = combine(scores[a], {i: None if judge[i] is None else k + m * judge[i] for i in picked})
                per_draw.append(agreement(combined, ref, groups))
            vals.append(statistics.fmean(per_draw))
            by_draw.append(per_draw)
        out.append(statistics.fmean(vals))
        if draw_sd is not None:
            means = [statistics.fmean(col) for col in zip(*by_draw)]  # each draw's mean over aspects
            draw_sd.append(statistics.stdev(means) if len(means) > 1 else None)
    return out


def area(curve: list[float]) -> float:
    """Trapezoid area under ``curve`` over :data:`GRID` (share 0-1)."""
    return sum((GRID[i + 1] - GRID[i]) * (curve[i] + curve[i + 1]) / 2 for i in range(len(GRID) - 1))


def share_reaching(curve: list[float], target: float) -> float | None:
    """The smallest share at which ``curve`` reaches ``target`` (linear between grid points), or None."""
    for i, v in enumerate(curve):
        if v >= target:
            if i == 0:
                return 0.0
            lo, hi = curve[i - 1], v
            return GRID[i - 1] + (GRID[i] - GRID[i - 1]) * (target - lo) / (hi - lo)
    return None


def _mean_sd(xs: list[float]) -> dict:
    return {"mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else None}


def measure_set(data: dict, students: list[dict]) -> dict:
    """Every curve of one set, its areas, the 90% points and the beats-random checks."""
    test, groups = data["test"], [r["doc_id"] for r in data["test"]]
    judge_fig = statistics.fmean(agreement([r[f"judge.{a}"] for r in test], [r[f"ref.{a}"] for r in test], groups)
                                 for a in data["aspects"])
    length = [float(len(r["candidate"].split())) for r in test]
    length_fig = statistics.fmean(agreement(length, [r[f"ref.{a}"] for r in test], groups) for a in data["aspects"])
    res: dict = {"name": data["name"], "judge": data["judge"], "reference": data["reference"],
                 "test_candidates": len(test), "sources": len(set(groups)), "training_labels": len(data["train"]),
                 "aspects": data["aspects"], "judge_agreement": judge_fig, "length_agreement": length_fig,
                 "target_90": 0.9 * judge_fig, "grid": list(GRID), "single": {}, "ensemble": {}, "identity": {}}
    for rule in SINGLE_RULES:
        spreads = [[] for _ in students]
        runs = [cascade_curve(data, st["scores"], st["mc_std"], rule, draw_sd=sp) for st, sp in zip(students, spreads)]
        res["single"][rule] = _summary(runs, res["target_90"])
        if rule == "random":
            res["single"][rule]["draw_sd"] = _mean_draw_sd(spreads)
        _log(f"{data['name']}: single students, rule {rule}: area {res['single'][rule]['area']['mean']:.3f}")
    for rule in ("mc", "random"):  # the judged scores as they are: why the calibration is needed
        runs = [cascade_curve(data, st["scores"], st["mc_std"], rule, "identity") for st in students]
        res["identity"][rule] = _summary(runs, res["target_90"])
    res["spread"] = {a: {"student_sd": statistics.fmean(statistics.pstdev(st["scores"][a]) for st in students),
                         "judge_sd": statistics.pstdev([r[f"judge.{a}"] for r in test if r[f"judge.{a}"] is not None])}
                     for a in data["aspects"]}
    if len(students) > 1:
        ens = ensemble(students, data["aspects"])
        for rule in ENSEMBLE_RULES:
            devs = ens["std"] if rule == "std" else ens["mc_std"]
            spread: list = []
            res["ensemble"][rule] = _summary([cascade_curve(data, ens["scores"], devs, rule, draw_sd=spread)],
                                             res["target_90"])
            if rule == "random":
                res["ensemble"][rule]["draw_sd"] = _mean_draw_sd([spread])
    for kind in ("single", "ensemble", "identity"):
        rnd = res[kind].get("random")
        for rule, v in res[kind].items():
            if rule == "random" or rnd is None:
                continue
            pts = [i for i, s in enumerate(GRID) if 0 < s <= 0.5]
            v["beats_random_to_50"] = all(v["curve"][i] > rnd["curve"][i] for i in pts)
            v["beats_random_to_50_runs"] = [all(c[i] > r[i] for i in pts) for c, r in zip(v["runs"], rnd["runs"])]
            v["margin_over_random"] = {f"{GRID[i]:.2f}": v["curve"][i] - rnd["curve"][i] for i in pts}
    res["student_seconds"] = [st["train_seconds"] for st in students]
    res["students"] = sorted({st["student"] for st in students})
    return res


def _mean_draw_sd(spreads: list[list]) -> list[float | None]:
    """Per share, the mean over students of the random draws' standard deviation."""
    return [None if any(v is None for v in col) else statistics.fmean(col) for col in zip(*spreads)]


def _summary(runs: list[list[float]], target: float) -> dict:
    curve = [statistics.fmean(c[i] for c in runs) for i in range(len(GRID))]
    sd = [statistics.stdev(c[i] for c in runs) if len(runs) > 1 else None for i in range(len(GRID))]
    return {"curve": curve, "sd": sd, "area": _mean_sd([area(c) for c in runs]),
            "share_for_90": share_reaching(curve, target),
            "share_for_90_runs": [share_reaching(c, target) for c in runs], "runs": runs}


# ------------------------------------------------------------------------------------------------
# two-stage reranking
# ------------------------------------------------------------------------------------------------

def rerank_set(data: dict, students: list[dict]) -> dict:
    """Two-stage reranking on every source with more than 3 candidates, each judged and rated on every aspect,
    per K and aspect, mean over seeds."""
    from csem.apply.cascade import shortlist, two_stage_pick

    test = data["test"]
    groups = [r["doc_id"] for r in test]
    sizes: dict = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    complete = {g for g in sizes if all(r[f"judge.{a}"] is not None and r[f"ref.{a}"] is not None
                                        for r in test if r["doc_id"] == g for a in data["aspects"])}
    keep = {g for g, n in sizes.items() if n > max(KS) and g in complete}  # every candidate judged and rated
    out: dict = {"sources": len(keep), "candidates": sum(sizes[g] for g in keep), "by_k": {}}
    for k in KS:
        rows = {"judge_of_pick": [], "judge_best": [], "judge_of_student_pick": [], "judge_mean": [],
                "judge_random_k": [], "ref_of_pick": [], "ref_of_judge_pick": [], "ref_of_student_pick": [],
                "ref_mean": []}
        calls = 0
        for st in students:
            per_aspect = {key: [] for key in rows}
            for a in data["aspects"]:
                s = [v if g in keep else None for v, g in zip(st["scores"][a], groups)]
                short = shortlist(s, groups, k)
                judge = {i: test[i][f"judge.{a}"] for idx in short.values() for i in idx}
                picks = two_stage_pick(short, judge)
                calls = sum(len(v) for v in short.values())
                by: dict = {}
                for i, g in enumerate(groups):
                    if g in keep:
                        by.setdefault(g, []).append(i)
                acc = {key: [] for key in rows}
                for g, idx in by.items():
                    js = [test[i][f"judge.{a}"] for i in idx]
                    rs = [test[i][f"ref.{a}"] for i in idx]
                    best = idx[max(range(len(idx)), key=lambda t: (js[t], -t))]
                    acc["judge_of_pick"].append(test[picks[g]][f"judge.{a}"])
                    acc["judge_best"].append(max(js))
                    acc["judge_of_student_pick"].append(test[short[g][0]][f"judge.{a}"])
                    acc["judge_mean"].append(statistics.fmean(js))
                    acc["judge_random_k"].append(expected_best_of_random(js, k))
                    acc["ref_of_pick"].append(test[picks[g]][f"ref.{a}"])
                    acc["ref_of_judge_pick"].append(test[best][f"ref.{a}"])
                    acc["ref_of_student_pick"].append(test[short[g][0]][f"ref.{a}"])
                    acc["ref_mean"].append(statistics.fmean(rs))
                for key in rows:
                    per_aspect[key].append(statistics.fmean(acc[key]))
            for key in rows:
                rows[key].append(statistics.fmean(per_aspect[key]))
        out["by_k"][str(k)] = {key: _mean_sd(v) for key, v in rows.items()}
        out["by_k"][str(k)]["judge_calls"] = calls
        out["by_k"][str(k)]["judge_calls_all"] = out["candidates"]
    return out


def expected_best_of_random(values: list[float], k: int) -> float:
    """The expected maximum of ``k`` of ``values`` drawn at random without replacement (exact: the i-th
    smallest of n values is the maximum of C(i-1, k-1) of the C(n, k) subsets): the judge's pick from a
    random shortlist of K."""
    v, n = sorted(values), len(values)
    if k >= n:
        return v[-1]
    return sum(v[i] * math.comb(i, k - 1) for i in range(k - 1, n)) / math.comb(n, k)


def main_job_folder() -> Path:
    """The run folder the main-job section reads: ``$CSEM_CASCADE_RUN_DIR``, else :data:`MAIN_JOB`."""
    return Path(os.environ.get(MAIN_JOB_ENV) or MAIN_JOB)


def _main_job_run(folder: Path) -> tuple[dict, list[dict]] | str:
    """``(run facts, held-out scored records)`` of a finished run folder, or why there is none."""
    state_p, scored_p, card_p = folder / "state.json", folder / "scored.jsonl", folder / "model" / "metric_card.json"
    if not (state_p.is_file() and scored_p.is_file() and card_p.is_file()):
        return "no finished run folder there (state.json, scored.jsonl and model/metric_card.json)"
    state = json.loads(state_p.read_text(encoding="utf-8"))
    if "report" not in state:
        return "the run there has not finished (state.json has no report stage)"
    done = state["report"].get("finished_at") or ""
    later = [k for k, v in state.items() if (v.get("finished_at") or "") > done]
    if later:
        return f"the run there is being run again ({', '.join(later)} finished after its report)"
    card = json.loads(card_p.read_text(encoding="utf-8"))
    with open(scored_p, encoding="utf-8") as f:
        test = [r for r in (json.loads(line) for line in f if line.strip()) if r.get("split") == "test"]
    facts = {"finished_at": state["report"].get("finished_at"), "judge": card["distilled_from"]["judge"],
             "rubrics": card["distilled_from"]["rubric"], "name": card["name"],
             "aspects": [a["aspect"] for a in card["aspects"]],
             "student": f"the run's model/ ({card['model']['encoder']}, {_members(card)}, "
                        f"{card['training']['n_records']} labels)"}
    return facts, test


def _members(card: dict) -> str:
    """``"a seed ensemble of 5 (seeds 12, 13, ...)"`` or ``"one student, seed 12"`` from a metric card."""
    members = card.get("members") or []
    if len(members) > 1:
        return f"a seed ensemble of {len(members)} (seeds {', '.join(str(m['seed']) for m in members)})"
    return f"one student, seed {card['training']['config']['seed']}"


def _pick_figures(test: list[dict], idx: list[int], scores: list, lengths: list[float], jcol: str, k: int) -> dict:
    """One source's two-stage figures for one aspect and K (positions ``idx`` of ``test``)."""
    from csem.apply.cascade import shortlist, two_stage_pick

    js = [float(test[i][jcol]) for i in idx]
    by_student = shortlist([scores[i] for i in idx], [0] * len(idx), k)
    by_length = shortlist([lengths[i] for i in idx], [0] * len(idx), k)
    judge = dict(enumerate(js))
    pick, lpick = two_stage_pick(by_student, judge)[0], two_stage_pick(by_length, judge)[0]
    return {"judge_of_pick": js[pick], "judge_best": max(js), "judge_of_student_pick": js[by_student[0][0]],
            "judge_mean": statistics.fmean(js), "judge_random_k": expected_best_of_random(js, k),
            "judge_of_length_pick": js[lpick], "pick_is_best": float(js[pick] == max(js)),
            "overruled": float(pick != by_student[0][0])}


def main_job_rerank(folder: Path) -> dict:
    """Two-stage reranking on a finished main-job run's held-out articles: per aspect and K, the judge's
    score of the pick (mean over sources) beside the judge's best, the student's own pick, the mean
    candidate, a random shortlist of K and the longest K; ``{"folder", "missing": why}`` without a run."""
    got = _main_job_run(folder)
    if isinstance(got, str):
        return {"folder": str(folder.resolve().relative_to(suite.HERE.parent))
                if folder.resolve().is_relative_to(suite.HERE.parent) else str(folder), "missing": got}
    facts, test = got
    groups: dict = {}
    for i, r in enumerate(test):
        groups.setdefault(r["doc_id"], []).append(i)
    cols = {a: f"metric.{facts['name']}.{a}" for a in facts["aspects"]}
    keep = {g: idx for g, idx in groups.items() if len(idx) > max(KS) and all(
        test[i].get(f"judge.{a}") is not None and test[i].get(c) is not None for i in idx for a, c in cols.items())}
    lengths = [float(len(r["candidate"].split())) for r in test]
    root = suite.HERE.parent
    shown = folder.resolve().relative_to(root) if folder.resolve().is_relative_to(root) else folder
    out = dict(facts, folder=str(shown), sources=len(keep), candidates=sum(len(v) for v in keep.values()),
               per_source=sorted({len(v) for v in keep.values()}), by_k={})
    for k in KS:
        per: dict = {}
        for a, col in cols.items():
            scores = [test[i][col] for i in range(len(test))]
            rows = [_pick_figures(test, idx, scores, lengths, f"judge.{a}", k) for idx in keep.values()]
            per[a] = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]} if rows else {}
            per[a]["judge_calls"] = k * len(keep)  # each source has more than K candidates
            per[a]["judge_calls_all"] = out["candidates"]
        out["by_k"][str(k)] = per
    return out


# ------------------------------------------------------------------------------------------------
# the suite interface
# ------------------------------------------------------------------------------------------------

def run(quick: bool = False) -> dict:
    """Every set: students (the pool: the shipped pool student; SummEval: :data:`SEEDS`; ``quick``: the shipped
    student on a small slice of both, relevance only, no training), curves, reranking."""
    t0 = time.perf_counter()
    seeds = SEEDS[:1] if quick else SEEDS
    res: dict = {"meta": {"date": suite.now(), "quick": quick, "machine": suite.machine(),
                          "seeds": list(seeds), "random_draws": DRAWS, "mc_samples": MC_SAMPLES,
                          "recipe": "each set names its students" + ("; quick: the shipped pool student on both "
                                                                     "sets, relevance only" if quick else "")},
                 "sets": {}, "rerank": {}}
    for build in (pool_set, summeval_set):
        data = build(quick)
        _log(f"{data['name']}: {len(data['test'])} test candidates, {len(data['train'])} training labels")
        if data["name"] == "teacher pool" or quick:  # quick: no training (the shipped student, relevance)
            if quick and data["name"] == "SummEval":
                data["aspects"] = ["relevance"]
            students = [shipped_student(data)]
        else:
            students = [student(data, s, quick) for s in seeds]
        res["sets"][data["name"]] = measure_set(data, students)
        res["rerank"][data["name"]] = rerank_set(data, students)
    res["main_job"] = main_job_rerank(main_job_folder())
    res["headline"] = headline(res)
    res["meta"]["seconds"] = time.perf_counter() - t0
    if not quick:
        plot(res, PLOT)
        res["meta"]["plot"] = "docs/benchmarks/cascade.png"
    return res


def best_rule(s: dict) -> tuple[str, str, dict]:
    """``(kind, rule, figures)`` of the rule with the largest area on set ``s`` (random excluded)."""
    cands = [(k, r, v) for k in ("single", "ensemble") for r, v in s[k].items() if r != "random"]
    return max(cands, key=lambda t: t[2]["area"]["mean"])


def headline(res: dict) -> dict:
    """The README's row: the share of judge calls at which the best rule reaches 90% of the judge."""
    parts = []
    for s in res["sets"].values():
        k, r, v = best_rule(s)
        parts.append((s["name"], r, k, v["share_for_90"], s[k]["random"]["share_for_90"]))
    name, r, k, share, rnd = parts[-1]
    return {"what": f"share of judge calls for 90% of the judge's agreement ({name}, rule {r})", "value": share,
            "compare": "; ".join(f"{n}: {_share(sh)} by {rr}, random {_share(ra)}" for n, rr, _, sh, ra in parts)}


def plot(res: dict, path: Path) -> None:
    """Agreement vs share judged, one line per rule, one panel per set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(res["sets"].values())
    fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 4.5))
    for ax, s in zip(axes if len(sets) > 1 else [axes], sets):
        x = [g * 100 for g in s["grid"]]
        for kind, style in (("single", "-"), ("ensemble", "--"), ("identity", ":")):
            for rule, v in s.get(kind, {}).items():
                ax.plot(x, v["curve"], style, label=f"{rule} ({kind})")
        ax.axhline(s["judge_agreement"], color="k", lw=0.8, label="judge alone")
        ax.axhline(s["target_90"], color="k", lw=0.8, ls=":", label="90% of the judge")
        ax.set_title(f"{s['name']}: vs {s['reference']}", fontsize=9)
        ax.set_xlabel("share of candidates judged (%)")
        ax.set_ylabel("summary-level Spearman")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _f(v, d: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}f}"


def _pm(m: dict) -> str:
    return _f(m["mean"]) + (f" ± {_f(m['sd'])}" if m.get("sd") is not None else "")


def report(results: dict) -> str:
    """The markdown page of :func:`run`'s results."""
    meta = results["meta"]
    idx = [results["sets"][next(iter(results["sets"]))]["grid"].index(s) for s in SHARES]
    md = ["# Cascade: the student defers its least certain candidates to the judge", "",
          f"{meta['date']}, {meta['machine']}; students: {meta['recipe']}, seeds {meta['seeds']}; random deferral: "
          f"mean of {meta['random_draws']} draws; MC dropout: {meta['mc_samples']} samples."
          + (" **Quick run (small slices): not a result.**" if meta.get("quick") else ""), ""]
    if meta.get("plot"):
        md += ["![agreement vs share judged](cascade.png)", ""]
    md += ["## Headline", "", "| set | judge alone | student alone | best rule | area (best rule) | area (random) | "
           "judge calls for 90% of the judge | beats random at every share <= 50% |", "| --- |" + " --- |" * 7]
    for s in results["sets"].values():
        k, r, v = best_rule(s)
        rnd = s[k]["random"]
        md.append(f"| {s['name']} | {_f(s['judge_agreement'])} | {_pm(_first(s['single']['random']))} | {r} ({k}) | "
                  f"{_pm(v['area'])} | {_pm(rnd['area'])} | {_share(v['share_for_90'])} (random {_share(rnd['share_for_90'])}) | "
                  f"{'yes' if v.get('beats_random_to_50') else 'no'} |")
    md.append("")
    for s in results["sets"].values():
        md += [f"## {s['name']}", "",
               f"{s['test_candidates']} test candidates of {s['sources']} sources; judge: {s['judge']}; reference: "
               f"{s['reference']}; {s['training_labels']} training labels; aspects: {', '.join(s['aspects'])} "
               f"(figures averaged over them). Judge alone {_f(s['judge_agreement'])} (90%: {_f(s['target_90'])}); "
               f"length (words) alone {_f(s['length_agreement'])}. Students: {'; '.join(s['students'])} "
               f"({len(s['student_seconds'])}; training seconds "
               f"{', '.join('n/a' if x is None else f'{x:.0f}' for x in s['student_seconds'])}).", "",
               "Summary-level Spearman with the reference by share of candidates judged (single students: mean ± sd "
               "over seeds; the judged scores placed on the student's spread by the line fitted on the judged rows, "
               "as `csem score` does; *identity*: the single students' judged scores as they are). Standard "
               "deviation of the scores: " + ", ".join(f"{a} student {_f(v['student_sd'])}, judge {_f(v['judge_sd'])}"
                                                      for a, v in s.get("spread", {}).items()) + ".", "",
               "| students | rule | " + " | ".join(f"{int(SHARES[i] * 100)}%" for i in range(len(SHARES)))
               + " | area | judge calls for 90% (per seed) | beats random <= 50% (seeds) |",
               "| --- | --- |" + " --- |" * (len(SHARES) + 3)]
        for kind in ("single", "ensemble", "identity"):
            for rule, v in s.get(kind, {}).items():
                cells = [_f(v["curve"][i]) + (f" ± {_f(v['sd'][i])}" if v["sd"][i] is not None else "") for i in idx]
                beats = "" if rule == "random" else ("yes" if v.get("beats_random_to_50") else "no")
                runs = v.get("beats_random_to_50_runs") or []
                if rule != "random" and len(runs) > 1:
                    beats += f" ({sum(runs)} of {len(runs)})"
                per = v.get("share_for_90_runs") or []
                share = _share(v["share_for_90"]) + (f" ({', '.join(_share(x) for x in per)})" if len(per) > 1 else "")
                md.append(f"| {kind} | {rule} | " + " | ".join(cells) + f" | {_pm(v['area'])} | {share} | {beats} |")
        md += ["", _draws_line(s, idx), ""]
    md += ["## Two-stage reranking", "",
           "The student shortlists its top K of each source's candidates, the judge picks among them. Mean over "
           "sources (and aspects), mean ± sd over seeds; the reference's score of each pick beside the judge's; "
           "*random K*: the judge's expected best of K candidates drawn at random.", "",
           "| set | K | judge calls (of all) | judge: pick | judge: its best | judge: student's pick | judge: random K "
           "| judge: mean candidate | reference: pick | reference: judge-only pick | reference: student's pick | "
           "reference: mean |", "| --- | --- |" + " --- |" * 10]
    for name, rr in results["rerank"].items():
        for k, v in rr["by_k"].items():
            md.append(f"| {name} ({rr['sources']} sources) | {k} | {v['judge_calls']} ({v['judge_calls_all']}) | "
                      + " | ".join(_pm(v[c]) if c in v else "n/a"
                                   for c in ("judge_of_pick", "judge_best", "judge_of_student_pick", "judge_random_k",
                                             "judge_mean", "ref_of_pick", "ref_of_judge_pick", "ref_of_student_pick",
                                             "ref_mean")) + " |")
    md += [""] + _main_job_md(results.get("main_job"))
    md += ["", f"Total {meta['seconds'] / 60:.1f} min (students cached under benchmarks/.cache/cascade/ are not retrained)."]
    return "\n".join(md) + "\n"


def _draws_line(s: dict, idx: list[int]) -> str:
    """How far single random draws scatter around the random curve: the yardstick of a rule's margin."""
    parts = []
    for kind in ("single", "ensemble"):
        sd = (s.get(kind, {}).get("random") or {}).get("draw_sd")
        if sd:
            parts.append(f"{kind}: " + ", ".join(f"{int(SHARES[j] * 100)}% {_f(sd[i])}" for j, i in enumerate(idx)
                                                   if 0 < SHARES[j] < 1))
    if not parts:
        return "Spread of the random draws: not recorded."
    return (f"Spread of single random draws around the random curve (standard deviation over the {DRAWS} draws; "
            "single students: mean over seeds): " + "; ".join(parts) + ".")


def _main_job_md(mj: dict | None) -> list[str]:
    """The main job's two-stage section of the report."""
    md = ["## Two-stage reranking on the main job's held-out articles", ""]
    if not mj or mj.get("missing"):
        where = mj["folder"] if mj else str(MAIN_JOB)
        return md + [f"Not measured: {mj['missing'] if mj else 'no run folder read'} ({where}; "
                     f"`{MAIN_JOB_ENV}` names another).", ""]
    md += [f"Run folder `{mj['folder']}` (finished {mj['finished_at']}): {mj['sources']} held-out articles, "
           f"{mj['candidates']} candidates ({', '.join(map(str, mj['per_source']))} per article); student: "
           f"{mj['student']}; judge: {mj['judge']} ({mj['rubrics']}), whose label of every candidate the run holds. "
           "Mean over articles of the judge's score: of the two-stage pick, of the judge's own best, of the "
           "student's own pick, of the judge's pick from a random K (expected, exact), from the longest K, and of "
           "the mean candidate; how often the pick is the judge's best and how often the judge overruled the "
           "student. One run: no spread over seeds.", "",
           "| aspect | K | judge calls (of all) | calls saved | pick | judge's best | student's pick | random K | "
           "longest K | mean candidate | pick = judge's best | judge overruled |", "| --- | --- |" + " --- |" * 10]
    for k, per in mj["by_k"].items():
        for a, v in per.items():
            saved = 1 - v["judge_calls"] / v["judge_calls_all"] if v["judge_calls_all"] else 0.0
            md.append(f"| {a} | {k} | {v['judge_calls']} ({v['judge_calls_all']}) | {saved * 100:.0f}% | "
                      + " | ".join(_f(v[c]) for c in ("judge_of_pick", "judge_best", "judge_of_student_pick",
                                                      "judge_random_k", "judge_of_length_pick", "judge_mean"))
                      + f" | {v['pick_is_best'] * 100:.0f}% | {v['overruled'] * 100:.0f}% |")
    return md + [""]


def _first(v: dict) -> dict:
    return {"mean": v["curve"][0], "sd": v["sd"][0]}


def _share(v) -> str:
    return "not reached" if v is None else f"{v * 100:.0f}%"

