"""N-best reranking with the GPT-4-distilled student on held-out SummEval articles (issue 12).

Metric: the student distilled from the published gpt-4-0314 ratings (Shen et al. 2023) of SummEval
documents 0-49 (sorted doc_id), four heads (coherence, consistency, fluency, relevance), ref-free,
trained here with csem's default recipe (``ModelConfig()`` / ``TrainConfig()``; cached under a hash of
the recipe, so a changed default retrains), or the folder given by ``--student``.

Sources: SummEval documents 50-99 (never seen by the student). N-best lists: by default the 16
systems' summaries of each document (SummEval's outputs; ``--generator URI`` samples N top-k
candidates plus a greedy output from a local model instead: ``smollm2`` or ``hf:PATH`` through
transformers, batched; another URI through ``csem collect``). A dev slice
tunes the Eq. 8 weights (MERT, objective ROUGE-1 F against the 11 references, max) and picks the
single head for Eq. 7 and the best single system; a disjoint test slice measures.

On the test sources, each selection rule picks one candidate per source: a random pick (seeded),
the best single system on dev (or the greedy output), the student's best dev head (Eq. 7), the
student's four heads with MERT-tuned weights (Eq. 8, per-source z-scores), MBR with chrF, and (for
reference) the ROUGE oracle. Measures: the student's mean-of-heads score, ROUGE-1 F, the SummEval
experts' mean over the four aspects (system outputs only), and the local judge (Qwen2.5-Coder-1.5B,
G-Eval rubrics, probs mode; on ``--judge-docs``), which never labelled the student's training data.
Paired bootstrap over test sources (1000 resamples): mean difference to the random pick, 95%
interval, one-sided p.

Run (the figures in results/apply_rerank.*), as last run:
    nice -n 10 python bench_apply_rerank.py --threads 1 --judge-docs 70:80 --rubrics geval/summeval-relevance
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path

import numpy as np
from harness import CACHE, fmt, log, machine, markdown_table, parser, setup, summeval, summeval_llm_ratings, \
    write_results

HEADS = ("coherence", "consistency", "fluency", "relevance")


def student_recipe() -> tuple[dict, dict, str]:
    """csem's current default recipe (``ModelConfig()`` / ``TrainConfig()``) as dumps, with the last commit of
    ``src/csem/model`` (the code of the recipe), and its short hash."""
    from csem.model import ModelConfig, TrainConfig

    mc = ModelConfig(name="student-gpt4").model_dump(mode="json")
    tc = TrainConfig().model_dump(mode="json")
    for k in ("num_threads", "progress"):  # how it runs, not what it learns
        tc.pop(k, None)
    # the model code too: the last commit under src/csem/model (and whether it has uncommitted changes)
    import subprocess

    import csem

    model_src = Path(csem.__file__).resolve().parent / "model"
    rev = subprocess.run(["git", "-C", str(model_src), "log", "-1", "--format=%h", "--", "."], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(model_src), "status", "--porcelain", "--", "."], capture_output=True,
                           text=True).stdout.strip()
    tc["csem_model_code"] = rev + (" + uncommitted changes" if dirty else "")
    key = hashlib.sha256(json.dumps([mc, tc, "summeval gpt-4 docs 0:50"], sort_keys=True).encode()).hexdigest()
    return mc, tc, key[:12]


def get_student(args) -> tuple[Path, str]:
    """The student folder and where it came from: ``--student``, else one trained here on the
    GPT-4 ratings of SummEval documents 0-49 with csem's default recipe (cached under a key of the
    recipe, so a changed default retrains)."""
    if args.student:
        return Path(args.student), f"given: {args.student}"
    from csem.model import ModelConfig, TrainConfig, train

    mc, tc, key = student_recipe()
    out = CACHE / "apply" / f"student_gpt4_default_{key}"
    short = (f"{mc['architecture']}, {mc['encoder']}, train_layers {tc['train_layers']}, {mc['loss']}, "
             f"overlap features {mc.get('overlap_features')}, {tc['max_epochs']} epochs, batch {tc['batch_size']}, "
             f"lr {tc['lr']}; model code {tc['csem_model_code']}")
    origin = f"csem's default recipe (ModelConfig()/TrainConfig(): {short}; key {key}), GPT-4 ratings of docs 0-49"
    if (out / "model.safetensors").exists():
        return out, origin + " (cached)"
    recs = summeval_llm_ratings(args.data_dir, docs="0:50")
    cols = [f"judge.{a}" for a in HEADS]
    recs = [r for r in recs if all(r.get(c) is not None for c in cols)]
    log(f"training the student on {len(recs)} GPT-4-rated summaries of documents 0-49 with the default recipe "
        f"({short})")
    t = time.perf_counter()
    train(recs, cols, "ref-free", out_dir=out, config=ModelConfig(**mc),
          train_config=TrainConfig(**{k: v for k, v in tc.items() if k != "csem_model_code"}, num_threads=args.threads),
          label_range=(1, 5), judge="gpt-4-0314 (Shen et al. 2023, rts)", rubric="SummEval 4 aspects")
    (out / "recipe.json").write_text(json.dumps({"model": mc, "train": tc}, indent=2),
                                     encoding="utf-8")
    log(f"student trained in {time.perf_counter() - t:.0f} s")
    return out, origin + f", trained in {time.perf_counter() - t:.0f} s"


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


def main() -> None:
    ap = parser(__doc__, out="apply_rerank", quick=True)
    ap.add_argument("--dev-docs", default="50:70", help="held-out SummEval docs tuning the weights (sorted doc_id)")
    ap.add_argument("--test-docs", default="70:100", help="held-out SummEval docs measured")
    ap.add_argument("--n", type=int, default=16, help="top-k samples per source (N)")
    ap.add_argument("--generator", default=None, help="sample the N-best lists from this generator URI "
                    "(default: SummEval's 16 system summaries)")
    ap.add_argument("--judge-docs", default="70:80", help="test docs the local judge measures (its cost)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-source-tokens", type=int, default=384, help="transformers generators: source tokens kept")
    ap.add_argument("--judge", default="local")
    ap.add_argument("--rubrics", default="geval/summeval-coherence,geval/summeval-relevance")
    ap.add_argument("--objective", default="rouge1", help="MERT's reference-based objective on dev")
    ap.add_argument("--student", default=None, help="student folder (default: the lead's, else train one)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    if args.quick:
        args.dev_docs, args.test_docs, args.judge_docs, args.n = "50:52", "52:54", "52:53", 4
    setup(args)
    t_all = time.perf_counter()
    from csem.apply.mbr import mbr_select
    from csem.apply.metrics import JudgeMetric, load_metric
    from csem.apply.reranking import add_scores, build_nbest, rerank_scored, score_specs
    from csem.apply.tune import clean_lists, mert, objective, random_search
    from csem.collect.sampler import GeneratorSpec, collect_candidates
    from csem.llm import GenerateConfig

    student_dir, student_origin = get_student(args)
    log(f"student: {student_origin}")

    # ---- held-out sources and their N-best lists
    d0, d1 = (int(x) for x in args.dev_docs.split(":"))
    t0, t1 = (int(x) for x in args.test_docs.split(":"))
    pool = summeval(args.data_dir, docs=f"{d0}:{t1}")
    docs = sorted({r["doc_id"] for r in pool})
    dev_ids, test_ids = set(docs[:d1 - d0]), set(docs[t0 - d0:])
    j0, j1 = (int(x) for x in args.judge_docs.split(":"))
    judge_ids = set(docs[j0 - d0:j1 - d0]) & test_ids
    t = time.perf_counter()
    if args.generator and (args.generator == "smollm2" or args.generator.startswith("hf:")):
        # a transformers generator: N top-k samples per source in one batched generate call (the prompt
        # encoded once, its cache repeated), plus the greedy output; cached per (generator, N, tokens, seed)
        from csem.apply.mrt import generate_texts, load_generator
        from csem.data.jsonio import JsonlLog

        srcs = {}
        for r in pool:
            srcs.setdefault(r["doc_id"], {"source": r["source"], "reference": r["reference"]})
        gen_name = args.generator.replace("hf:", "").strip("/").split("/")[-1]
        path = CACHE / "apply" / (f"nbest_hf_{gen_name}_{args.n}_{args.max_tokens}_{args.max_source_tokens}_"
                                  f"{args.seed}.jsonl")
        nbest_log = JsonlLog(path)  # a line cut by a kill is skipped: that source is generated again
        done = {row["doc_id"]: row for row in nbest_log.read() if "doc_id" in row}
        todo = [d for d in docs if d not in done]
        if todo:
            net, tok = load_generator(args.generator)
            with nbest_log:
                for d in todo:  # one source at a time: a kill loses at most one
                    src = [srcs[d]["source"]]
                    samp = generate_texts(net, tok, src, max_source_tokens=args.max_source_tokens,
                                          max_new_tokens=args.max_tokens, sample=True, num_samples=args.n, top_k=50,
                                          seed=args.seed + docs.index(d), batch_size=1)[0]
                    greedy_text = generate_texts(net, tok, src, max_source_tokens=args.max_source_tokens,
                                                 max_new_tokens=args.max_tokens, sample=False, batch_size=1)[0][0]
                    done[d] = {"doc_id": d, "samples": samp, "greedy": greedy_text}
                    nbest_log.append(done[d])
            del net
        cands = []
        for d in docs:
            base = {"doc_id": d, "source": srcs[d]["source"], "reference": srcs[d]["reference"]}
            for k, text in enumerate(done[d]["samples"]):
                cands.append(dict(base, id=f"{d}/sample/{k}", system_id=f"sample-{k}", candidate=text or " "))
            cands.append(dict(base, id=f"{d}/greedy", system_id="greedy", candidate=done[d]["greedy"] or " "))
        nbest_origin = (f"{args.generator} through transformers (fp32): N = {args.n} top-k samples (k = 50, "
                        f"{args.max_tokens} new tokens, source cut to {args.max_source_tokens} tokens) + 1 greedy "
                        f"output per source ({len(todo)} sources generated in this run, {len(docs) - len(todo)} reused)")
    elif args.generator:
        srcs = {}
        for r in pool:
            srcs.setdefault(r["doc_id"], {"id": r["doc_id"], "source": r["source"], "reference": r["reference"]})
        gen_name = args.generator.split(":")[-1]
        partial = CACHE / "apply" / f"nbest_{gen_name}_{args.n}_{args.max_tokens}.partial.jsonl"
        partial.parent.mkdir(parents=True, exist_ok=True)
        specs = [GeneratorSpec(uri=args.generator, num_samples=args.n, name="sample", options={"n_threads": args.threads},
                               decoding=GenerateConfig(temperature=1.0, top_k=50, max_tokens=args.max_tokens)),
                 GeneratorSpec(uri=args.generator, num_samples=1, name="greedy", options={"n_threads": args.threads},
                               decoding=GenerateConfig(temperature=0.0, max_tokens=args.max_tokens))]
        cands, csum = collect_candidates([srcs[d] for d in docs], specs, seed=args.seed, include_reference=False,
                                         duplicates="keep", empty="drop", partial_path=partial, progress=False)
        nbest_origin = (f"{args.generator}: N = {args.n} top-k samples (k = 50, {args.max_tokens} tokens) + 1 greedy "
                        f"output per source (generated {csum.generated}, reused {csum.resumed})")
    else:
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
    samples = [r for r in rows if r["system_id"] != "greedy"]
    greedy = {r["doc_id"]: r for r in rows if r["system_id"] == "greedy"}
    dev = [r for r in samples if r["doc_id"] in dev_ids]
    test = [r for r in samples if r["doc_id"] in test_ids]

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
    if greedy:
        chosen["greedy output"] = {d: greedy[d] for d in tdocs if d in greedy}
    else:  # one system for every source: the best on dev by the objective (a fixed generator)
        sys_dev: dict[str, list[float]] = {}
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
    jrows = add_scores(list(to_judge.values()), judge.score(list(to_judge.values())))
    t_judge = time.perf_counter() - t
    jcols = judge.columns
    jscore = {r["id"]: (float(np.mean([r[c] for c in jcols])) if all(r.get(c) is not None for c in jcols)
                        else np.nan) for r in jrows}
    log(f"judge: {t_judge:.0f} s ({judge.last_summary})")
    agreement = judge_agreement([r for r in to_judge.values() if not np.isnan(jscore.get(r["id"], np.nan))], jscore)

    # ---- table with paired bootstrap against the random pick
    measures = {"student": lambda r: r["student.mean"], "judge": lambda r: jscore.get(r["id"], np.nan),
                "rouge1": lambda r: r["metric.rouge1"], "experts": lambda r: r["human.mean"]}
    table, rows_md = {}, []
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

    def cell(e: dict, digits: int) -> str:
        s = fmt(e["mean"], digits)
        v = e["vs_random"]
        if v and v["delta"] is not None:
            s += f" ({v['delta']:+.{digits}f} [{v['ci_low']:+.{digits}f}, {v['ci_high']:+.{digits}f}], p={v['p']:.3f})"
        return s

    for name, e in table.items():
        rows_md.append({"selection": name, "student": cell(e["student"], 3), "judge": cell(e["judge"], 3),
                        "rouge1": cell(e["rouge1"], 3), "experts": cell(e["experts"], 3)})
    rows_md.append({"selection": "random pick, expectation over the list", "student": fmt(exp_random["student.mean"], 3),
                    "judge": "–", "rouge1": fmt(exp_random["metric.rouge1"], 3), "experts": fmt(exp_random["human.mean"], 3)})
    rows_md.append({"selection": f"oracle by {args.objective} (upper bound)", "student": fmt(orc["student.mean"], 3),
                    "judge": "–", "rouge1": fmt(orc["metric.rouge1"], 3), "experts": fmt(orc["human.mean"], 3)})
    tune_rows = [{"selection": f"{c.split('.')[-1]} head only (Eq. 7)", "dev": fmt(v, 4), "evaluations": "1",
                  "weights": ""} for c, v in head_dev.items()]
    tune_rows += [
        {"selection": f"random search, {rs_l.evaluations} points (= MERT's line searches)", "dev": fmt(rs_l.value, 4),
         "evaluations": str(rs_l.evaluations), "weights": ", ".join(f"{x:+.2f}" for x in rs_l.weights)},
        {"selection": f"random search, {rs.evaluations} points (= MERT's evaluations)", "dev": fmt(rs.value, 4),
         "evaluations": str(rs.evaluations), "weights": ", ".join(f"{x:+.2f}" for x in rs.weights)},
        {"selection": "MERT (5 starts, axes + 2 random directions)", "dev": fmt(m.value, 4),
         "evaluations": str(m.evaluations), "weights": ", ".join(f"{x:+.2f}" for x in m.weights)},
        {"selection": "oracle", "dev": fmt(float(np.mean([g.max() for g in gs])), 4), "evaluations": "",
         "weights": ""}]
    md = [
        "# N-best reranking with the GPT-4 student (bench_apply_rerank.py)", "",
        f"Machine: {machine()}. N-best lists: {nbest_origin}; dev docs {args.dev_docs} ({len(dev_ids)} sources), "
        f"test docs {args.test_docs} ({len(tdocs)} sources) of SummEval (sorted doc_id). Student: {student_origin}. "
        f"Judge: {args.judge}, rubrics {args.rubrics} (mean of the aspects), probs mode.", "",
        "## Test sources: mean score of the chosen candidate (difference to the random pick, 95% paired "
        f"bootstrap interval over sources, one-sided p; {args.bootstrap} resamples)", "",
        markdown_table(rows_md, ["selection", "student", "judge", "rouge1", "experts"],
                       headers=["selection", "student (mean of 4 heads, 1-5)",
                                f"local judge (1-5; docs {args.judge_docs})", "ROUGE-1 F", "experts (1-5)"]),
        "",
        f"## Dev: tuning the Eq. 8 weights over the 4 heads (z-scored per source), objective mean {args.objective} "
        "of the chosen candidate", "",
        markdown_table(tune_rows, ["selection", "dev", "evaluations", "weights"],
                       headers=["selection", "dev objective", "objective evaluations",
                                "weights (" + ", ".join(c.split('.')[-1] for c in head_cols) + ")"]),
        "",
        "## Does the judge separate these candidates? (the judged chosen candidates, each once)", "",
        (f"Spearman over the {agreement['candidates']} judged candidates: judge vs ROUGE-1 F "
         f"{fmt(agreement['judge_vs_rouge1'], 3)}, judge vs student {fmt(agreement['judge_vs_student'], 3)}, "
         f"student vs ROUGE-1 F {fmt(agreement['student_vs_rouge1'], 3)}; the judge's scores span "
         f"{fmt(agreement['judge_min'], 3)}-{fmt(agreement['judge_max'], 3)}, standard deviation within a source "
         f"{fmt(agreement['judge_sd_within_source'], 3)} (mean over sources with 2+ judged candidates)."
         if agreement["candidates"] > 2 else "(fewer than 3 judged candidates)"), "",
        f"Times: N-best {t_collect:.0f} s, scoring "
        f"{len(rows)} candidates with the student + ROUGE + chrF {t_score:.1f} s, MBR {t_mbr:.1f} s, "
        f"judge {t_judge:.0f} s for {len(to_judge)} candidates, total {time.perf_counter() - t_all:.0f} s.",
    ]
    data = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine(), "student": student_origin,
            "dev_sources": len(dev_ids), "test_sources": len(tdocs), "candidates": len(rows),
            "nbest": nbest_origin, "judged_test_sources": len(judge_ids), "judge_agreement": agreement, "test": table, "random_expected": exp_random, "oracle": orc, "dev_heads": head_dev,
            "mert": m.as_dict(), "random_search": rs.as_dict(), "random_search_line_budget": rs_l.as_dict(),
            "seconds": {"collect": t_collect, "score": t_score, "mbr": t_mbr, "judge": t_judge,
                        "total": time.perf_counter() - t_all},
            "judge_summary": judge.last_summary.as_dict() if judge.last_summary else None}
    j, mdp = write_results(args.out, data, md)
    (Path(str(args.out) + ".chosen.jsonl")).write_text(
        "".join(json.dumps({"selection": name, "doc_id": d, "id": r["id"], "candidate": r["candidate"],
                            "student": r["student.mean"], "judge": None if np.isnan(jscore.get(r["id"], np.nan))
                            else jscore[r["id"]], "rouge1": r["metric.rouge1"],
                            "experts": None if np.isnan(r["human.mean"]) else r["human.mean"]}) + "\n"
                for name, sel in chosen.items() for d, r in sel.items()), encoding="utf-8")
    log(f"wrote {j} and {mdp}")
    print("\n".join(md))


if __name__ == "__main__":
    main()
