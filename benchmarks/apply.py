"""Applying the student: N-best reranking (Eq. 7/8, MERT, MBR), MRT fine-tuning and the scoring server.

Student: csem's default student trained on the published gpt-4-0314 ratings (Shen et al. 2023) of
SummEval documents 0-49 (sorted doc_id), four heads (coherence, consistency, fluency, relevance),
ref-free; cached under a hash of the default configs, so a changed default retrains.

Reranking: N-best lists = the 16 SummEval systems' summaries of documents 50-99 (never seen by the
student). A dev slice (50-69) tunes the Eq. 8 weights (MERT, objective ROUGE-1 F, against random search
at the same budget) and picks the Eq. 7 head and the best single system; on the test slice (70-99)
each rule picks one candidate per source: a random pick, the best single system, the student's best
head (Eq. 7), its four heads with MERT weights (Eq. 8, per-source z-scores), MBR with chrF, and the
ROUGE oracle. Measures: the student, ROUGE-1 F, the experts' mean over the four aspects and the local
judge (Qwen2.5-Coder-1.5B, G-Eval relevance, docs 70-79), which never labelled the student's data;
paired bootstrap over test sources (1000 resamples) against the random pick.

MRT: SmolLM2-135M-Instruct fine-tuned on documents 0-49 with MRT + MLE (Eq. 12, lambda 0.7) and with
MLE only, same budget, the student's mean of heads as reward; held-out documents 70-81: greedy outputs
of the base, MLE-only and MRT generators, and RL+RR (the MRT generator's samples reranked by the
student), measured by the student, the judge and ROUGE-1 F against the base generator.

Serving: ``csem serve`` (FastAPI + uvicorn on loopback, dynamic batching) under concurrent httpx
clients: requests/s and latency percentiles per (records per request, clients).

``quick``: a student trained 1 epoch on 4 documents, 2 dev + 2 test sources, 1 MRT step without the
judge, 8 requests per serving setting.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from benchmarks.suite import CACHE, fmt, log, machine, markdown_table, summeval, summeval_llm_ratings, threads

HEADS = ("coherence", "consistency", "fluency", "relevance")


def get_student(quick: bool) -> tuple[Path, str]:
    """The student folder (trained here once per default recipe) and a line saying what it is."""
    import csem
    from csem.model import ModelConfig, TrainConfig

    settings = {"max_epochs": 1} if quick else {}
    key = hashlib.sha256(json.dumps([ModelConfig().model_dump(mode="json"), TrainConfig().model_dump(mode="json"),
                                     settings, quick], sort_keys=True, default=str).encode()).hexdigest()[:12]
    out = CACHE / "apply" / f"student_gpt4_default_{key}"
    docs = slice(0, 4) if quick else slice(0, 50)
    origin = (f"csem's default student ({key}), GPT-4 ratings of SummEval docs {docs.start}-{docs.stop - 1}"
              + (", 1 epoch" if quick else ""))
    if (out / "model.safetensors").exists():
        return out, origin
    cols = [f"judge.{a}" for a in HEADS]
    recs = [r for r in summeval_llm_ratings(docs) if all(r.get(c) is not None for c in cols)]
    csem.train(recs, ",".join(cols), out_dir=out, label_range=(1, 5), judge="gpt-4-0314 (Shen et al. 2023, rts)",
               rubric="SummEval 4 aspects", num_threads=threads(), **settings)
    return out, origin


def paired(a: np.ndarray, b: np.ndarray, n: int, seed: int) -> dict:
    """Paired bootstrap over sources of mean(a - b): delta, 95% interval, one-sided p (H1: a > b)."""
    from csem.meta.bootstrap import resample_counts

    ok = ~(np.isnan(a) | np.isnan(b))
    d = (a - b)[ok]
    if not len(d):
        return {"delta": None, "ci_low": None, "ci_high": None, "p": None, "n": 0}
    counts = resample_counts(len(d), n, seed)
    means = counts @ d / len(d)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return {"delta": float(d.mean()), "ci_low": float(lo), "ci_high": float(hi),
            "p": float(np.mean(means <= 0)), "n": int(len(d))}


def judge_agreement(rows: list[dict], jscore: dict) -> dict:
    """How far the judge agrees with ROUGE-1 F and the student on the judged candidates (each once):
    Spearman rho (scipy.stats.spearmanr) over candidates, the judge's range, and its standard
    deviation within a source (mean over sources with 2+ judged candidates). A judge that ranks
    candidates by neither cannot confirm a reranking gain."""
    from scipy.stats import spearmanr

    out = {"candidates": len(rows)}
    if len(rows) < 3:
        return out
    j = np.array([jscore[r["id"]] for r in rows])
    rg = np.array([r["metric.rouge1"] for r in rows])
    st = np.array([r["student.mean"] for r in rows])
    by: dict[str, list[float]] = {}
    for r, v in zip(rows, j):
        by.setdefault(r["doc_id"], []).append(v)
    sds = [float(np.std(v)) for v in by.values() if len(v) > 1]
    out.update(judge_vs_rouge1=float(spearmanr(j, rg).statistic), judge_vs_student=float(spearmanr(j, st).statistic),
               student_vs_rouge1=float(spearmanr(st, rg).statistic), judge_min=float(j.min()), judge_max=float(j.max()),
               judge_sd_within_source=float(np.mean(sds)) if sds else None)
    return out


def rerank(quick: bool, student_dir: Path, student_origin: str) -> dict:
    """N-best reranking of held-out SummEval sources: every selection rule, measured on the test slice."""
    args = SimpleNamespace(dev_docs="50:70", test_docs="70:100", judge_docs="70:80", seed=0, judge="local",
                           rubrics="geval/summeval-relevance", objective="rouge1", bootstrap=1000)
    if quick:  # no judge: its minutes per candidate are the full run's business
        args.dev_docs, args.test_docs, args.judge_docs, args.bootstrap = "50:52", "52:54", "52:52", 50
    t_all = time.perf_counter()
    from csem.apply.mbr import mbr_select
    from csem.apply.metrics import JudgeMetric, load_metric
    from csem.apply.reranking import add_scores, build_nbest, rerank_scored, score_specs
    from csem.apply.tune import clean_lists, mert, objective, random_search

    # ---- held-out sources and their N-best lists
    d0, d1 = (int(x) for x in args.dev_docs.split(":"))
    t0, t1 = (int(x) for x in args.test_docs.split(":"))
    pool = summeval(slice(d0, t1))
    docs = sorted({r["doc_id"] for r in pool})
    dev_ids, test_ids = set(docs[:d1 - d0]), set(docs[t0 - d0:])
    j0, j1 = (int(x) for x in args.judge_docs.split(":"))
    judge_ids = set(docs[j0 - d0:j1 - d0]) & test_ids
    t = time.perf_counter()
    cands = [dict(r, id=f"{r['doc_id']}/{r['system_id']}") for r in pool]
    nbest_origin = "SummEval's 16 system summaries per source"
    t_collect = time.perf_counter() - t
    log(f"N-best: {len(cands)} candidates for {len(docs)} sources ({nbest_origin}) in {t_collect:.0f} s")

    # ---- every candidate: student heads, ROUGE-1, chrF
    t = time.perf_counter()
    rows, cols = score_specs(cands, [str(student_dir), "rouge1", "chrf"])
    t_score = time.perf_counter() - t
    head_cols = [c for c in cols if c.startswith("metric.") and c.split(".")[-1] in HEADS]
    for r in rows:
        r["student.mean"] = float(np.mean([r[c] for c in head_cols]))
    log(f"scored {len(rows)} candidates (student {len(head_cols)} heads, ROUGE-1, chrF) in {t_score:.1f} s")
    for r in rows:
        hs = [r.get(f"human.{a}") for a in HEADS]
        r["human.mean"] = float(np.mean(hs)) if all(h is not None for h in hs) else np.nan
    dev = [r for r in rows if r["doc_id"] in dev_ids]
    test = [r for r in rows if r["doc_id"] in test_ids]

    # ---- dev: the Eq. 7 head and the Eq. 8 weights (MERT vs random search)
    obj_col = f"metric.{args.objective}"
    nb = build_nbest(dev, head_cols, "zscore")
    gains = [np.array([dev[i][obj_col] for i in idx], dtype=float) for idx in nb.index]
    feats, gs, _ = clean_lists(nb.features, gains)
    head_dev = {c: objective(feats, gs, np.eye(len(head_cols))[k]) for k, c in enumerate(head_cols)}
    best_head = max(head_dev, key=head_dev.get)
    m = mert(feats, gs, restarts=5, random_directions=2, seed=args.seed)
    rs = random_search(feats, gs, budget=m.evaluations, seed=args.seed)
    rs_l = random_search(feats, gs, budget=m.line_searches, seed=args.seed)
    log(f"dev ({len(feats)} sources): best head {best_head} {head_dev[best_head]:.4f}; MERT {m.value:.4f} "
        f"({m.line_searches} line searches, {m.evaluations} evaluations, {m.seconds:.2f} s); random search "
        f"{rs.value:.4f} at the same evaluations, {rs_l.value:.4f} at {rs_l.evaluations} points")

    # ---- test selections
    rng = random.Random(args.seed)
    chosen: dict[str, dict[str, dict]] = {}
    by_doc: dict[str, list[dict]] = {}
    for r in test:
        by_doc.setdefault(r["doc_id"], []).append(r)
    tdocs = sorted(by_doc)
    chosen["random pick"] = {d: rng.choice(by_doc[d]) for d in tdocs}
    sys_dev: dict[str, list[float]] = {}  # one system for every source: the best on dev by the objective
    for r in dev:
        sys_dev.setdefault(r["system_id"], []).append(r[obj_col])
    best_sys = max(sys_dev, key=lambda k: np.mean(sys_dev[k]))
    chosen[f"best single system on dev ({best_sys})"] = {d: r for d in tdocs for r in by_doc[d]
                                                          if r["system_id"] == best_sys}
    head_name = best_head.split(".")[-1]
    chosen[f"student {head_name} head (Eq. 7)"] = {r["doc_id"]: r for r in rerank_scored(test, [best_head]).chosen}
    chosen["student 4 heads, MERT weights (Eq. 8)"] = {
        r["doc_id"]: r for r in rerank_scored(test, head_cols, m.weights, "zscore").chosen}
    t = time.perf_counter()
    chosen["MBR, chrF utility"] = {r["doc_id"]: r for r in mbr_select(test, load_metric("chrf")).chosen}
    t_mbr = time.perf_counter() - t
    oracle = {d: max(by_doc[d], key=lambda r: r[obj_col]) for d in tdocs}

    # ---- the local judge on every chosen candidate (cached)
    judge = JudgeMetric(args.judge, args.rubrics.split(","), cache=CACHE / "apply" / "judge.sqlite")
    to_judge = {r["id"]: r for sel in chosen.values() for d, r in sel.items() if d in judge_ids}
    t = time.perf_counter()
    log(f"judging {len(to_judge)} distinct chosen candidates x {len(judge.rubric_ids)} rubrics with {args.judge}")
    jrows = add_scores(list(to_judge.values()), judge.score(list(to_judge.values()))) if to_judge else []
    t_judge = time.perf_counter() - t
    jcols = judge.columns if to_judge else []
    jscore = {r["id"]: (float(np.mean([r[c] for c in jcols])) if all(r.get(c) is not None for c in jcols)
                        else np.nan) for r in jrows}
    log(f"judge: {t_judge:.0f} s ({judge.last_summary})")
    agreement = judge_agreement([r for r in to_judge.values() if not np.isnan(jscore.get(r["id"], np.nan))], jscore)

    # ---- table with paired bootstrap against the random pick
    measures = {"student": lambda r: r["student.mean"], "judge": lambda r: jscore.get(r["id"], np.nan),
                "rouge1": lambda r: r["metric.rouge1"], "experts": lambda r: r["human.mean"]}
    table = {}
    base = chosen["random pick"]
    for name, sel in chosen.items():
        entry = {}
        for mname, fn in measures.items():
            a = np.array([fn(sel[d]) if d in sel else np.nan for d in tdocs], dtype=float)
            b = np.array([fn(base[d]) for d in tdocs], dtype=float)
            entry[mname] = {"mean": float(np.nanmean(a)) if not np.all(np.isnan(a)) else None,
                            "vs_random": paired(a, b, args.bootstrap, args.seed) if name != "random pick" else None}
        table[name] = entry

    def expect(key: str, pick) -> float:
        return float(np.nanmean([pick(d, key) for d in tdocs]))

    exp_random = {k: expect(k, lambda d, k=k: np.nanmean([r[k] for r in by_doc[d]]))
                  for k in ("student.mean", "metric.rouge1", "human.mean")}
    orc = {k: expect(k, lambda d, k=k: oracle[d][k]) for k in ("student.mean", "metric.rouge1", "human.mean")}

    return {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine(), "student": student_origin,
            "dev_sources": len(dev_ids), "test_sources": len(tdocs), "candidates": len(rows), "nbest": nbest_origin,
            "judged_test_sources": len(judge_ids), "judge_agreement": agreement, "test": table,
            "random_expected": exp_random, "oracle": orc, "dev_heads": head_dev, "mert": m.as_dict(),
            "random_search": rs.as_dict(), "random_search_line_budget": rs_l.as_dict(),
            "seconds": {"collect": t_collect, "score": t_score, "mbr": t_mbr, "judge": t_judge,
                        "total": time.perf_counter() - t_all},
            "judge_summary": judge.last_summary.as_dict() if judge.last_summary else None}


def _cell(e: dict, key: str, digits: int = 3) -> str:
    s = fmt(e["mean"], digits)
    v = e[key]
    if v and v["delta"] is not None:
        s += f" ({v['delta']:+.{digits}f} [{v['ci_low']:+.{digits}f}, {v['ci_high']:+.{digits}f}], p={v['p']:.3f})"
    return s


def report_rerank(d: dict) -> list[str]:
    """The reranking section: test-slice means with paired bootstrap vs the random pick, the dev tuning."""
    a = d["args"]
    rows_md = [{"selection": name, **{m: _cell(e[m], "vs_random") for m in ("student", "judge", "rouge1", "experts")}}
               for name, e in d["test"].items()]
    for label, v in (("random pick, expectation over the list", d["random_expected"]),
                     (f"oracle by {a['objective']} (upper bound)", d["oracle"])):
        rows_md.append({"selection": label, "student": fmt(v["student.mean"], 3), "judge": "–",
                        "rouge1": fmt(v["metric.rouge1"], 3), "experts": fmt(v["human.mean"], 3)})
    rs, rs_l, m = d["random_search"], d["random_search_line_budget"], d["mert"]
    tune_rows = [{"selection": f"{c.split('.')[-1]} head only (Eq. 7)", "dev": fmt(v, 4), "evaluations": "1",
                  "weights": ""} for c, v in d["dev_heads"].items()]
    for label, r in ((f"random search, {rs_l['evaluations']} points (= MERT's line searches)", rs_l),
                     (f"random search, {rs['evaluations']} points (= MERT's evaluations)", rs),
                     ("MERT (5 starts, axes + 2 random directions)", m)):
        tune_rows.append({"selection": label, "dev": fmt(r["value"], 4), "evaluations": str(r["evaluations"]),
                          "weights": ", ".join(f"{x:+.2f}" for x in r["weights"])})
    g = d.get("judge_agreement") or {}
    s = d["seconds"]
    return [
        "## N-best reranking", "",
        f"Machine: {d['machine']}. N-best lists: {d['nbest']}; dev docs {a['dev_docs']} ({d['dev_sources']} sources), "
        f"test docs {a['test_docs']} ({d['test_sources']} sources) of SummEval (sorted doc_id). Student: {d['student']}. "
        f"Judge: {a['judge']}, rubrics {a['rubrics']} (mean of the aspects), probs mode.", "",
        "### Test sources: mean score of the chosen candidate (difference to the random pick, 95% paired "
        f"bootstrap interval over sources, one-sided p; {a['bootstrap']} resamples)", "",
        markdown_table(rows_md, ["selection", "student", "judge", "rouge1", "experts"],
                       headers=["selection", "student (mean of 4 heads, 1-5)", f"local judge (1-5; docs {a['judge_docs']})",
                                "ROUGE-1 F", "experts (1-5)"]), "",
        f"### Dev: tuning the Eq. 8 weights over the 4 heads (z-scored per source), objective mean {a['objective']}", "",
        markdown_table(tune_rows, ["selection", "dev", "evaluations", "weights"],
                       headers=["selection", "dev objective", "objective evaluations", "weights"]), "",
        (f"Does the judge separate these candidates? Spearman over the {g['candidates']} judged candidates: judge vs "
         f"ROUGE-1 F {fmt(g['judge_vs_rouge1'], 3)}, judge vs student {fmt(g['judge_vs_student'], 3)}, student vs "
         f"ROUGE-1 F {fmt(g['student_vs_rouge1'], 3)}; within-source sd of the judge "
         f"{fmt(g['judge_sd_within_source'], 3)}." if g.get("candidates", 0) > 2 else ""),
        f"Times: scoring {d['candidates']} candidates (student + ROUGE + chrF) {s['score']:.1f} s, MBR {s['mbr']:.1f} s, "
        f"judge {s['judge']:.0f} s, total {s['total']:.0f} s."]


def mrt(quick: bool, student_dir: Path, origin: str) -> dict:
    """MRT + MLE vs MLE only with the student as reward; held-out greedy outputs and RL+RR, measured."""
    args = SimpleNamespace(train_docs="0:50", test_docs="70:82", steps=12, batch_size=2, samples=4, alpha=5e-3,
                           lam=0.7, lr=5e-5, reward_scale=10.0, max_new_tokens=48, max_source_tokens=384, rr_n=4,
                           judge="local", rubrics="geval/summeval-relevance", bootstrap=1000, seed=0, threads=threads(),
                           quick=quick)
    if quick:
        args.train_docs, args.test_docs, args.steps, args.rr_n, args.max_new_tokens = "0:2", "70:71", 1, 2, 8
        args.judge, args.bootstrap = "none", 50
    t_all = time.perf_counter()
    from csem.apply.metrics import JudgeMetric, load_metric
    from csem.apply.mrt import MRTConfig, generate_texts, load_generator, train_mrt
    from csem.apply.reranking import add_scores
    from csem.baselines import rouge

    student = load_metric(str(student_dir))

    def uniq(recs):
        out = {}
        for r in recs:
            out.setdefault(r["doc_id"], {"doc_id": r["doc_id"], "source": r["source"], "reference": r["reference"]})
        return list(out.values())

    train_src = uniq(summeval(slice(*map(int, args.train_docs.split(":")))))
    for s in train_src:
        s["reference"] = s["reference"][0]  # MLE on one reference per source
    test_src = uniq(summeval(slice(*map(int, args.test_docs.split(":")))))
    runs = CACHE / "apply" / ("mrt_runs_quick" if args.quick else "mrt_runs")

    results = {}
    logs = {}
    for name, lam in (("MRT + MLE", args.lam), ("MLE only", 0.0)):
        cfg = MRTConfig(lam=lam, alpha=args.alpha, num_samples=args.samples, max_steps=args.steps,
                        batch_size=args.batch_size, lr=args.lr, reward_scale=args.reward_scale,
                        max_new_tokens=args.max_new_tokens, max_source_tokens=args.max_source_tokens,
                        checkpoint_every=min(args.steps, 3), keep_checkpoints=1, seed=args.seed,
                        threads=args.threads)
        out = runs / ("mrt" if lam > 0 else "mle")
        done = out / "done.json"
        key = {"config": cfg.model_dump(mode="json"), "student": origin, "train_docs": args.train_docs}
        if done.exists() and json.loads(done.read_text(encoding="utf-8"))["key"] == key:
            results[name] = json.loads(done.read_text(encoding="utf-8"))["result"]  # a finished run: reuse it
            log(f"{name}: reusing the finished run in {out}")
        else:
            t = time.perf_counter()
            res = train_mrt("smollm2", train_src, student, out, cfg, resume=True)
            results[name] = {"folder": str(res.final), "steps": res.steps, "seconds": time.perf_counter() - t,
                             "reward_computed": res.reward_misses, "reward_reused": res.reward_hits,
                             "resumed_from": res.resumed_from}
            log(f"{name}: {res.steps} steps in {time.perf_counter() - t:.0f} s")
            # the Lightning state (weights + AdamW moments) is only for resuming: drop it once finished
            for p in (out / "lightning").glob("*.ckpt"):
                p.unlink()
            done.write_text(json.dumps({"key": key, "result": results[name]}), encoding="utf-8")
        with open(out / "train_log.csv", encoding="utf-8") as fh:
            logs[name] = list(csv.DictReader(fh))

    # ---- held-out: greedy outputs of each generator, and RL+RR
    gens = {"base (SmolLM2-135M-Instruct)": "smollm2", "MLE only": results["MLE only"]["folder"],
            "MRT + MLE": results["MRT + MLE"]["folder"]}
    outputs: dict[str, dict[str, dict]] = {}
    t = time.perf_counter()
    sources = [s["source"] for s in test_src]
    for name, uri in gens.items():
        net, tok = load_generator(uri if uri == "smollm2" else f"hf:{uri}")
        texts = generate_texts(net, tok, sources, max_source_tokens=args.max_source_tokens,
                               max_new_tokens=args.max_new_tokens, sample=False, batch_size=4)
        outputs[name] = {s["doc_id"]: {"id": f"{s['doc_id']}/{name}", "doc_id": s["doc_id"], "source": s["source"],
                                       "reference": s["reference"], "candidate": tx[0]}
                         for s, tx in zip(test_src, texts)}
        if name == "MRT + MLE":
            samples = generate_texts(net, tok, sources, max_source_tokens=args.max_source_tokens,
                                     max_new_tokens=args.max_new_tokens, sample=True, num_samples=args.rr_n,
                                     top_k=50, seed=args.seed, batch_size=2)
            pool = [{"id": f"{s['doc_id']}/rr/{k}", "doc_id": s["doc_id"], "source": s["source"],
                     "reference": s["reference"], "candidate": tx or " "}
                    for s, txs in zip(test_src, samples) for k, tx in enumerate(txs)]
            sc = student.score(pool)
            mean = np.mean([sc[c] for c in student.columns], axis=0)
            best: dict[str, tuple[float, dict]] = {}
            for rec, v in zip(pool, mean):
                if rec["doc_id"] not in best or v > best[rec["doc_id"]][0]:
                    best[rec["doc_id"]] = (float(v), rec)
            outputs[f"RL+RR: MRT + MLE, best of {args.rr_n} samples by the student"] = {d: r for d, (_, r) in best.items()}
        del net
    t_gen = time.perf_counter() - t
    log(f"held-out generation: {t_gen:.0f} s")

    # ---- measures
    every = [r for sel in outputs.values() for r in sel.values()]
    for r in every:
        r["candidate"] = r["candidate"] or " "
    sc = student.score(every)
    r1 = rouge(every, "rouge1")
    judge = None if args.judge == "none" else JudgeMetric(args.judge, args.rubrics.split(","),
                                                          cache=CACHE / "apply" / "judge.sqlite")
    t = time.perf_counter()
    jrows = add_scores(every, judge.score(every)) if judge else every
    t_judge = time.perf_counter() - t
    vals = {}
    for i, r in enumerate(jrows):
        js = [r.get(c) for c in judge.columns] if judge else [None]
        vals[r["id"]] = {"student": float(np.mean([sc[c][i] for c in student.columns])),
                         "judge": float(np.mean(js)) if all(v is not None for v in js) else np.nan,
                         "rouge1": float(r1[i]), "length": len(r["candidate"].split())}
    docs = [s["doc_id"] for s in test_src]
    base = outputs["base (SmolLM2-135M-Instruct)"]
    table = {}
    for name, sel in outputs.items():
        entry = {}
        for m in ("student", "judge", "rouge1", "length"):
            a = np.array([vals[sel[d]["id"]][m] for d in docs], dtype=float)
            b = np.array([vals[base[d]["id"]][m] for d in docs], dtype=float)
            entry[m] = {"mean": float(np.nanmean(a)),
                        "vs_base": None if sel is base else paired(a, b, args.bootstrap, args.seed)}
        table[name] = entry

    return {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine(), "student": origin,
            "runs": results, "held_out": table, "logs": logs,
            "outputs": {n: {d: r["candidate"] for d, r in sel.items()} for n, sel in outputs.items()},
            "seconds": {"generation": t_gen, "judge": t_judge, "total": time.perf_counter() - t_all},
            "judge_summary": judge.last_summary.as_dict() if judge and judge.last_summary else None}


def report_mrt(d: dict) -> list[str]:
    """The MRT section: held-out means vs the base generator, the training log's first and last quarter."""
    a = d["args"]
    rows = [{"generator": name, **{m: _cell(e[m], "vs_base") for m in ("student", "judge", "rouge1")},
             "length": fmt(e["length"]["mean"], 1)} for name, e in d["held_out"].items()]

    def avg(rs, k):
        xs = [float(r[k]) for r in rs if r.get(k) not in (None, "")]
        return fmt(float(np.mean(xs)), 3) if xs else "–"

    log_rows = []
    for name, rs in d["logs"].items():
        q = max(1, len(rs) // 4)
        log_rows.append([name, len(rs), avg(rs[:q], "reward_mean"), avg(rs[-q:], "reward_mean"), avg(rs[:q], "mle_loss"),
                         avg(rs[-q:], "mle_loss"), fmt(d["runs"][name]["seconds"], 0)])
    return [
        "## MRT with the student as reward, against MLE only", "",
        f"Machine: {d['machine']}. Generator SmolLM2-135M-Instruct (fp32, CPU). Training sources: SummEval docs "
        f"{a['train_docs']}; {a['steps']} steps x {a['batch_size']} sources, S = {a['samples']} top-k samples (k = 50, "
        f"{a['max_new_tokens']} tokens), alpha = {a['alpha']}, lambda = {a['lam']} (MRT) vs 0 (MLE only), AdamW lr "
        f"{a['lr']}, reward = student mean of heads x {a['reward_scale']}. Held-out: docs {a['test_docs']}. Student: "
        f"{d['student']}. Judge: {a['judge']}, {a['rubrics']} (mean), probs mode.", "",
        "### Held-out sources: greedy output (RL+RR: best sample by the student); difference to the base generator, "
        f"95% paired bootstrap interval over sources, one-sided p ({a['bootstrap']} resamples)", "",
        markdown_table(rows, ["generator", "student", "judge", "rouge1", "length"],
                       headers=["generator", "student (1-5)", "local judge (1-5)", "ROUGE-1 F", "words"]), "",
        "### Training log (first and last quarter of the steps)", "",
        markdown_table(log_rows, ["run", "steps", "reward first", "reward last", "MLE loss first", "MLE loss last",
                                  "wall s"])]


def serve(quick: bool, student_dir: Path, origin: str) -> dict:
    """Load test of ``csem serve`` on loopback: requests/s and latency percentiles per setting."""
    from csem.apply.metrics import load_metric
    from csem.apply.server import BackgroundServer, load_test

    recs = [{"id": f"{r['doc_id']}/{r['system_id']}", "source": r["source"], "candidate": r["candidate"]}
            for r in summeval(slice(50, 100))]
    metric = load_metric(str(student_dir))
    rows = []
    with BackgroundServer(metric, max_batch=256, max_wait_ms=5) as srv:
        load_test(srv.url, recs[:8], requests=4, records_per_request=1, concurrency=1)  # warm-up
        for per_req, conc in [(1, 1), (1, 8), (8, 1), (8, 8)]:  # (records per request, concurrent clients)
            res = load_test(srv.url, recs, requests=8 if quick else 96, records_per_request=per_req, concurrency=conc)
            rows.append({"metric": "student", "records": per_req, "clients": conc, **res.as_dict()})
    return {"machine": machine(), "student": origin, "settings": rows}


def report_serve(d: dict) -> list[str]:
    """The serving section: requests/s, records/s and latency per setting."""
    rows = d["settings"]
    table = markdown_table(
        [{**r, "rps": fmt(r["requests_per_s"], 2), "recps": fmt(r["records_per_s"], 1), "p50": fmt(r["p50_ms"], 0),
          "p99": fmt(r["p99_ms"], 0)} for r in rows],
        ["metric", "records", "clients", "requests", "errors", "rps", "recps", "p50", "p99"],
        headers=["served metric", "records/request", "clients", "requests", "errors", "requests/s", "records/s",
                 "p50 ms", "p99 ms"])
    return ["## The scoring endpoint under load", "",
            f"Machine: {d['machine']}. `csem serve` (FastAPI + uvicorn, loopback, dynamic batching up to 256 records, "
            f"5 ms wait) with {d['student']}; SummEval summaries of docs 50-99 with their articles.", "", table]


def run(quick: bool = False) -> dict:
    """The student, then reranking, MRT and serving (``quick``: 2+2 sources, 1 MRT step, 8 requests)."""
    student_dir, origin = get_student(quick)
    log(f"student: {origin}")
    return {"rerank": rerank(quick, student_dir, origin), "mrt": mrt(quick, student_dir, origin),
            "serve": serve(quick, student_dir, origin)}


def report(results: dict) -> str:
    """The Markdown report: reranking, MRT and serving sections."""
    md = ["# Applying the student: reranking, MRT and serving", ""]
    for key, fn in (("rerank", report_rerank), ("mrt", report_mrt), ("serve", report_serve)):
        if results.get(key):
            md += fn(results[key]) + [""]
    return "\n".join(md)
