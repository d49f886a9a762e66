"""MRT fine-tuning with the GPT-4-distilled student as the reward, against MLE-only, then RL+RR (issue 12).

Generator: SmolLM2-135M-Instruct (the packaged GGUF, converted once to a trainable fp32
transformers model). Training sources: SummEval documents 0-49 (sorted doc_id) with their first
reference for the MLE term. Two runs with the same budget (optimiser steps, sources per step,
samples per source): MRT mixed with MLE (Eq. 12, lambda 0.7) and MLE only (lambda 0). Reward: the
student's mean over its four heads (the benchmark's student, see bench_apply_rerank.py), scaled.

Held-out sources: SummEval documents 70-85 (never seen by the student or by the fine-tuning).
Before/after: the greedy output of the base, MLE-only and MRT generators; RL+RR: N samples from
the MRT generator reranked by the student (Eq. 7 on the mean of heads). Measures: the student's
score, the local judge (Qwen2.5-Coder-1.5B, G-Eval rubrics, probs mode) and ROUGE-1 F against the
references; paired bootstrap over sources against the base generator.

Step time (``--stages speed``): the same steps with each prompt encoded once per step (its key/value
cache shared by the sampling and the samples' and reference's log-probabilities) and re-encoded per
sample, side by side, CPU seconds of this process per step (the machine is shared: wall time varies).

Run (figures in results/apply_mrt.* and results/apply_mrt_speed.*), as last run:
    nice -n 10 python bench_apply_mrt.py --stages speed --speed-steps 2 --threads 1 \
        --student .cache/apply/student_gpt4_quick --out results/apply_mrt_speed
    nice -n 10 python bench_apply_mrt.py --stages train --threads 1 \
        --student .cache/apply/student_gpt4_default_24aa3157710b --train-docs 0:50 --test-docs 70:78 --steps 6 \
        --batch-size 2 --samples 4 --max-new-tokens 48 --max-source-tokens 384 --rr-n 4 \
        --rubrics geval/summeval-relevance
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from pathlib import Path

import numpy as np
from bench_apply_rerank import get_student, paired
from harness import CACHE, fmt, log, machine, markdown_table, parser, setup, summeval, write_results


def main() -> None:
    ap = parser(__doc__, out="apply_mrt", quick=True)
    ap.add_argument("--train-docs", default="0:50")
    ap.add_argument("--test-docs", default="70:86")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4, help="S: samples per source in L_MRT")
    ap.add_argument("--alpha", type=float, default=5e-3)
    ap.add_argument("--lam", type=float, default=0.7)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--reward-scale", type=float, default=10.0)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--max-source-tokens", type=int, default=384)
    ap.add_argument("--speed-steps", type=int, default=2, help="steps per variant in the step-time comparison "
                    "(prompt cache shared vs re-encoded per sample)")
    ap.add_argument("--stages", default="speed,train", help="speed (step time, shared vs per-sample prompt), "
                    "train (MRT vs MLE-only, then the held-out measures and RL+RR)")
    ap.add_argument("--rr-n", type=int, default=8, help="samples per held-out source for RL+RR")
    ap.add_argument("--judge", default="local", help="judge URI, or none to skip the judge")
    ap.add_argument("--rubrics", default="geval/summeval-coherence,geval/summeval-relevance")
    ap.add_argument("--student", default=None)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    if args.quick:
        args.train_docs, args.test_docs, args.steps, args.rr_n = "0:4", "70:72", 2, 2
    setup(args)
    t_all = time.perf_counter()
    import torch

    from csem.apply.metrics import JudgeMetric, load_metric
    from csem.apply.mrt import MRTConfig, generate_texts, load_generator, train_mrt
    from csem.apply.reranking import add_scores

    student_dir, origin = get_student(args)
    student = load_metric(str(student_dir))
    log(f"student: {origin}")

    def uniq(recs):
        out = {}
        for r in recs:
            out.setdefault(r["doc_id"], {"doc_id": r["doc_id"], "source": r["source"], "reference": r["reference"]})
        return list(out.values())

    train_src = uniq(summeval(args.data_dir, docs=args.train_docs))
    for s in train_src:
        s["reference"] = s["reference"][0]  # MLE on one reference per source
    test_src = uniq(summeval(args.data_dir, docs=args.test_docs))
    runs = CACHE / "apply" / ("mrt_runs_quick" if args.quick else "mrt_runs")

    # ---- step time: the prompt encoded once per source (its cache shared) vs once per sample, side by side
    speed = []
    stages = set(args.stages.split(","))
    for share in ((True, False) if "speed" in stages else ()):
        cfg = MRTConfig(lam=args.lam, alpha=args.alpha, num_samples=args.samples, max_steps=args.speed_steps,
                        batch_size=args.batch_size, lr=args.lr, reward_scale=args.reward_scale,
                        max_new_tokens=args.max_new_tokens, max_source_tokens=args.max_source_tokens,
                        checkpoint_every=10_000, seed=args.seed, threads=args.threads, share_prompt=share)
        out = runs / f"speed_{'shared' if share else 'per_sample'}"
        res = train_mrt("smollm2", train_src, student, out, cfg, resume=False)
        with open(res.log, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))

        def per_step(col):
            return [float(r[col]) - (float(rows[i - 1][col]) if i else 0.0) for i, r in enumerate(rows)]

        speed.append({"prompt": "encoded once per source, cache shared" if share else "re-encoded per sample",
                      "steps": res.steps, "cpu_s_per_step": float(np.mean(per_step("cpu_seconds"))),
                      "wall_s_per_step": float(np.mean(per_step("seconds"))), "cpu_s_steps": per_step("cpu_seconds"),
                      "wall_s_steps": per_step("seconds"), "mle_loss": [float(r["mle_loss"]) for r in rows],
                      "reward_mean": [float(r["reward_mean"]) for r in rows]})
        log(f"speed, prompt {speed[-1]['prompt']}: CPU s per step {speed[-1]['cpu_s_steps']}, "
            f"wall s per step {speed[-1]['wall_s_steps']}")
        shutil.rmtree(out, ignore_errors=True)
    speed_md = [
        "## Step time: each prompt encoded once per step (its cache shared by the samples, the reference "
        "and the sampling) vs re-encoded per sample; same settings and samples, side by side in one run "
        f"({args.speed_steps} steps each, {args.threads} torch thread(s), {args.batch_size} sources x S = "
        f"{args.samples} samples x {args.max_new_tokens} tokens, source cut to {args.max_source_tokens} tokens; "
        "wall time depends on the machine's load, CPU time is this process's)", "",
        markdown_table([{"prompt": r["prompt"], "cpu": fmt(r["cpu_s_per_step"], 1), "wall": fmt(r["wall_s_per_step"], 1),
                         "steps": ", ".join(f"{c:.1f}" for c in r["cpu_s_steps"]),
                         "mle": ", ".join(f"{c:.4f}" for c in r["mle_loss"])} for r in speed],
                       ["prompt", "cpu", "wall", "steps", "mle"],
                       headers=["prompt", "CPU s / step", "wall s / step", "CPU s of each step",
                                "MLE loss of each step (same values: same computation)"]) if speed else "(not run)",
        ""]
    if "train" not in stages:
        md = ["# MRT step time (bench_apply_mrt.py --stages speed)", "", f"Machine: {machine()}. Generator "
              f"SmolLM2-135M-Instruct (fp32, CPU), reward: the student ({origin}).", ""] + speed_md
        j, mdp = write_results(args.out, {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine(),
                                          "student": origin, "step_time": speed}, md)
        log(f"wrote {j} and {mdp}")
        print("\n".join(md))
        return
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
    from csem.baselines import rouge

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
    table, md_rows = {}, []
    for name, sel in outputs.items():
        entry = {}
        for m in ("student", "judge", "rouge1", "length"):
            a = np.array([vals[sel[d]["id"]][m] for d in docs], dtype=float)
            b = np.array([vals[base[d]["id"]][m] for d in docs], dtype=float)
            entry[m] = {"mean": float(np.nanmean(a)),
                        "vs_base": None if sel is base else paired(a, b, args.bootstrap, args.seed)}
        table[name] = entry

        def cell(e, digits=3):
            s = fmt(e["mean"], digits)
            v = e["vs_base"]
            if v and v["delta"] is not None:
                s += f" ({v['delta']:+.{digits}f} [{v['ci_low']:+.{digits}f}, {v['ci_high']:+.{digits}f}], p={v['p']:.3f})"
            return s

        md_rows.append({"generator": name, "student": cell(entry["student"]), "judge": cell(entry["judge"]),
                        "rouge1": cell(entry["rouge1"]), "length": fmt(entry["length"]["mean"], 1)})
    log_rows = []
    for name, rows in logs.items():
        if rows:
            first, last = rows[: max(1, len(rows) // 4)], rows[-max(1, len(rows) // 4):]

            def avg(rs, k):
                xs = [float(r[k]) for r in rs if r.get(k) not in (None, "")]
                return float(np.mean(xs)) if xs else None

            log_rows.append({"run": name, "steps": len(rows), "reward first": fmt(avg(first, "reward_mean"), 2),
                             "reward last": fmt(avg(last, "reward_mean"), 2),
                             "MLE loss first": fmt(avg(first, "mle_loss"), 3), "MLE loss last": fmt(avg(last, "mle_loss"), 3),
                             "length first": fmt(avg(first, "sample_length"), 1),
                             "length last": fmt(avg(last, "sample_length"), 1),
                             "seconds": fmt(results[name]["seconds"], 0),
                             "cpu": fmt(avg(rows[-1:], "cpu_seconds"), 0)})
    plot = None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
        for name, rows in logs.items():
            steps = [int(r["step"]) for r in rows]
            for ax, k in zip(axes, ("reward_mean", "mle_loss", "sample_length")):
                ys = [float(r[k]) if r.get(k) not in (None, "") else np.nan for r in rows]
                ax.plot(steps, ys, label=name)
                ax.set_title(k)
                ax.set_xlabel("step")
        axes[0].legend()
        fig.tight_layout()
        plot = Path(str(args.out) + ".png")
        fig.savefig(plot, dpi=110)
    except Exception as exc:  # a missing plot never hides the figures
        log(f"no plot: {exc}")
    md = [
        "# MRT with the GPT-4 student as reward, against MLE-only (bench_apply_mrt.py)", "",
        f"Machine: {machine()}. Generator SmolLM2-135M-Instruct (fp32, CPU). Training sources: SummEval docs "
        f"{args.train_docs} ({len(train_src)} sources); {args.steps} steps x {args.batch_size} sources, "
        f"S = {args.samples} top-k samples (k = 50, {args.max_new_tokens} tokens), alpha = {args.alpha}, "
        f"lambda = {args.lam} (MRT) vs 0 (MLE only), AdamW lr {args.lr}, reward = student mean of heads x "
        f"{args.reward_scale}. Held-out: docs {args.test_docs} ({len(docs)} sources). Student: {origin}. "
        f"Judge: {args.judge}, {args.rubrics} (mean), probs mode.", "",
        "## Held-out sources: greedy output (RL+RR: best sample by the student); difference to the base "
        f"generator, 95% paired bootstrap interval over sources, one-sided p ({args.bootstrap} resamples)", "",
        markdown_table(md_rows, ["generator", "student", "judge", "rouge1", "length"],
                       headers=["generator", "student (1-5)", "local judge (1-5)", "ROUGE-1 F", "words"]), "",
    ] + speed_md + [
        "## Training log (first and last quarter of the steps)", "",
        markdown_table(log_rows, ["run", "steps", "reward first", "reward last", "MLE loss first", "MLE loss last",
                                  "length first", "length last", "seconds", "cpu"],
                       headers=["run", "steps", "reward first", "reward last", "MLE loss first", "MLE loss last",
                                "length first", "length last", "wall s", "CPU s (training steps)"]), "",
        f"Times: held-out generation {t_gen:.0f} s, judge {t_judge:.0f} s, total {time.perf_counter() - t_all:.0f} s."
        + (f" Per-step curves: {plot.name}." if plot else ""),
    ]
    data = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine(), "student": origin,
            "runs": results, "held_out": table, "logs": logs, "step_time": speed,
            "outputs": {n: {d: r["candidate"] for d, r in sel.items()} for n, sel in outputs.items()},
            "seconds": {"generation": t_gen, "judge": t_judge, "total": time.perf_counter() - t_all},
            "judge_summary": judge.last_summary.as_dict() if judge and judge.last_summary else None}
    j, mdp = write_results(args.out, data, md)
    log(f"wrote {j} and {mdp}")
    print("\n".join(md))
    del torch


if __name__ == "__main__":
    main()
