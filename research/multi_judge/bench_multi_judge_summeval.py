"""Several LLM judges as one teacher: raw vs normalised labels, on the published SummEval ratings.

The CSEM paper (Sec. IV-C) trained on ChatGPT plus text-davinci-003 ratings at once and saw the
student fall from 0.442 (ChatGPT alone) to 0.397 summary-level Spearman on SummEval, blaming the
judges' different scales. Here: the published ratings of Shen et al. (2023) of SummEval's 12
abstractive systems x 100 documents by gpt-4-0314 (rts), gpt-3.5-turbo-0301 (rts) and
llama-2-70b-chat-hf (rts); documents sorted by ``doc_id``, 0-49 train, 50-99 test.

For each judge set (the single judges; GPT-4 + ChatGPT; ChatGPT + Llama-2-70B, the closest analogue
of the paper's strong + weaker judge on different scales; all three) and each per-judge normalisation (none, zscore, rank; :mod:`csem.model.labels`), on the
test documents, summary-level Spearman / Kendall tau-b with the expert means of:

* the combined teacher itself (the mean of the judges' labels of each test summary, normalised per
  judge over the test rows),
* the system prior (each test summary scored by its system's mean combined label over the training
  documents: what a student could learn from the system alone),
* a student trained on the combined training labels (4 aspects as heads over one encoder; the
  recipe is printed in the notes), one per seed (``--seeds``; the table gives the mean over seeds
  and their standard deviation), for the rows in ``STUDENTS``; for the largest judge set also a
  student with separate heads per judge (``--combine heads``).

Run:  nice -n 10 python benchmarks/bench_multi_judge_summeval.py [--threads 1] [--seeds 12,13,14]
Out:  benchmarks/results/multi_judge_summeval.json and .md (rewritten after every student). A re-run
      keeps every student trained with the same recipe on the same csem source tree (the git tree
      hash of src/csem, so commits elsewhere do not retrain) and trains only the missing ones.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from harness import ASPECTS, Results, aspect_rows, fmt, log, machine, parser, previous_results, setup, \
    summeval_llm_ratings

JUDGES = {  # short name -> (judge, method) in the Shen et al. file
    "gpt4": ("gpt-4-0314", "rts"),
    "chatgpt": ("gpt-3.5-turbo-0301", "rts"),
    "llama70b": ("llama-2-70b-chat-hf", "rts"),
    "chatgpt-mcq": ("gpt-3.5-turbo-0301", "mcq"),
    "chatgpt-stareval": ("gpt-3.5-turbo-0301", "stareval"),
}
SETS = {
    "GPT-4": ["gpt4"],
    "GPT-4 + ChatGPT": ["gpt4", "chatgpt"],
    "GPT-4 + ChatGPT + Llama-2-70B": ["gpt4", "chatgpt", "llama70b"],
    "ChatGPT": ["chatgpt"],
    "Llama-2-70B": ["llama70b"],
    "ChatGPT + Llama-2-70B": ["chatgpt", "llama70b"],
    "ChatGPT rts + mcq + stareval": ["chatgpt", "chatgpt-mcq", "chatgpt-stareval"],
}
# the students trained, most telling first (a run cut short by a busy machine still answers the question):
# each single judge, then each mix raw and z-scored; one student per (set, normalisation, combine, seed)
STUDENTS = (("GPT-4", "none", "mean"), ("ChatGPT", "none", "mean"), ("GPT-4 + ChatGPT", "none", "mean"),
            ("ChatGPT + Llama-2-70B", "none", "mean"), ("GPT-4 + ChatGPT + Llama-2-70B", "none", "mean"),
            ("Llama-2-70B", "none", "mean"), ("GPT-4 + ChatGPT", "zscore", "mean"),
            ("ChatGPT + Llama-2-70B", "zscore", "mean"), ("GPT-4 + ChatGPT + Llama-2-70B", "zscore", "mean"),
            ("GPT-4 + ChatGPT + Llama-2-70B", "none", "heads"))


def summary_corr(records, col) -> dict:
    """Summary-level Spearman / Kendall tau-b of ``col(aspect)`` with ``human.<aspect>`` for every
    aspect and their average (harness.aspect_rows, the one evaluator)."""
    return aspect_rows(records, col)


def _fmt(c):
    return f"{fmt(c.get('spearman'))} / {fmt(c.get('kendall'))}"


def _fmt_student(st):
    """mean over seeds, with the seeds' standard deviation of the Spearman where there are several"""
    per = st.get("per_seed") or {}
    sd = f" (sd {st['sd_spearman']:.3f}, {len(per)} seeds)" if len(per) > 1 else ""
    return _fmt(st["average"]) + sd


def seed_mean(per_seed: dict) -> dict:
    """Per-aspect and average Spearman/Kendall averaged over seeds, with the seeds' sd of the average
    Spearman (population sd, ``statistics.pstdev``)."""
    runs = list(per_seed.values())
    out = {a: {k: statistics.fmean(r[a][k] for r in runs) for k in ("spearman", "kendall")}
           for a in (*ASPECTS, "average")}
    out["sd_spearman"] = statistics.pstdev([r["average"]["spearman"] for r in runs])
    out["per_seed"] = {s: r["average"]["spearman"] for s, r in per_seed.items()}
    return out


def render_md(d: dict) -> str:
    m = d["meta"]
    lines = ["# Several judges as one teacher (SummEval, published ratings of Shen et al. 2023)", "",
             f"Run {m['started']} on {m['machine']}"
             + (" — QUICK MODE (not the benchmark: a few documents, one short student)" if m["args"].get("quick") else "")
             + f"; train documents 0-49 ({m['n_train']} summaries), test "
             f"documents 50-99 ({m['n_test']} summaries), sorted doc_id. Summary-level Spearman / Kendall tau-b "
             "with the expert means, averaged over the 4 aspects (per-aspect figures in the JSON).", "",
             "| judges | normalisation | teacher (test labels) | system prior | student |", "|---|---|---|---|---|"]
    for key, e in d["rows"].items():
        st = e.get("student")
        lines.append(f"| {e['set']} | {e['normalise']}{' (' + e['combine'] + ')' if e['combine'] != 'mean' else ''} | "
                     f"{_fmt(e['teacher']['average']) if e.get('teacher') else ''} | "
                     f"{_fmt(e['prior']['average']) if e.get('prior') else ''} | "
                     f"{_fmt_student(st) if st else ''} |")
    lines += ["", "Per aspect, Spearman (teacher / student):", "",
              "| judges | normalisation | " + " | ".join(ASPECTS) + " |", "|---|---|" + "---|" * len(ASPECTS)]
    for key, e in d["rows"].items():
        cells = []
        for a in ASPECTS:
            t = e["teacher"][a]["spearman"] if e.get("teacher") else None
            s = e["student"][a]["spearman"] if e.get("student") else None
            cells.append(" / ".join("" if v is None else fmt(v) for v in (t, s)))
        lines.append(f"| {e['set']} | {e['normalise']}{' (' + e['combine'] + ')' if e['combine'] != 'mean' else ''} | "
                     + " | ".join(cells) + " |")
    if m.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in m["notes"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = parser(__doc__, out="multi_judge_summeval", threads=1, seed=None, quick=True)
    ap.add_argument("--data", dest="data_dir", type=Path, help=argparse.SUPPRESS)  # the old name of --data-dir
    ap.add_argument("--seeds", default="12", help="comma-separated training seeds; one student per seed")
    ap.add_argument("--epochs", type=int, default=None, help="default: TrainConfig().max_epochs")
    ap.add_argument("--head-lr", type=float, default=None, help="default: TrainConfig().head_lr")
    ap.add_argument("--hidden", type=int, nargs="+", default=None, help="default: ModelConfig().hidden_sizes")
    ap.add_argument("--max-length", type=int, default=None, help="default: ModelConfig().max_length")
    ap.add_argument("--encoder", default=None, help="default: ModelConfig().encoder")
    ap.add_argument("--frozen-epochs", type=float, default=None, help="default: TrainConfig().frozen_epochs "
                    "(with --epochs and no --frozen-epochs: frozen for all epochs, the old head-only recipe)")
    ap.add_argument("--loss", default=None, help="default: ModelConfig().loss")
    ap.add_argument("--recipe", default="csem default (ModelConfig()/TrainConfig())",
                    help="name of the student recipe, written to the notes")
    ap.add_argument("--no-students", action="store_true", help="teacher and system-prior figures only")
    args = ap.parse_args()
    setup(args)
    if args.quick:  # a smoke run: one seed, one student, one epoch, short inputs, a few documents
        args.seeds, args.epochs, args.max_length = args.seeds.split(",")[0], 1, 64
    from csem.baselines import system_prior
    from csem.model import ModelConfig, TrainConfig, fit
    from csem.model.labels import ensemble_scores, prepare_labels

    # the student recipe: csem's defaults, overridden only by the options given
    cfg_over = {k: v for k, v in {"encoder": args.encoder, "max_length": args.max_length,
                                  "hidden_sizes": args.hidden, "loss": args.loss}.items() if v is not None}
    tc_over = {k: v for k, v in {"max_epochs": args.epochs, "head_lr": args.head_lr}.items() if v is not None}
    if args.frozen_epochs is not None:
        tc_over["frozen_epochs"] = args.frozen_epochs
    elif args.epochs is not None:
        tc_over["frozen_epochs"] = args.epochs
    model_cfg = ModelConfig(name="student", mode="ref-free", **cfg_over)
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    train_cfg = TrainConfig(num_threads=args.threads, seed=seeds[0], **tc_over)
    import subprocess

    import csem

    src = Path(csem.__file__).resolve().parents[1]
    rev = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    tree = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD:src/csem"], capture_output=True,
                          text=True)
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."], capture_output=True, text=True)
    changed = " + uncommitted changes" if dirty.stdout.strip() else ""
    recipe = {"model": model_cfg.model_dump(mode="json", exclude={"labels"}),
              "train": train_cfg.model_dump(mode="json", exclude={"num_threads", "progress", "seed"}),
              "csem_tree": (tree.stdout.strip() or "unknown") + changed}
    code = {"csem": (rev.stdout.strip() or "unknown") + changed, "csem_path": str(src)}

    recs: dict[str, dict] = {}
    for short, (judge, method) in JUDGES.items():
        for r in summeval_llm_ratings(args.data_dir, judge=judge, method=method):
            rec = recs.setdefault(r["id"], {k: v for k, v in r.items() if not k.startswith("judge")})
            for a in ASPECTS:
                rec[f"judge.{a}@{short}"] = r.get(f"judge.{a}")
    allrecs = list(recs.values())
    docs = sorted({r["doc_id"] for r in allrecs})
    train_docs, test_docs = (set(docs[:4]), set(docs[50:53])) if args.quick else (set(docs[:50]), set(docs[50:]))
    train_recs = [r for r in allrecs if r["doc_id"] in train_docs]
    test_recs = [r for r in allrecs if r["doc_id"] in test_docs]
    out = Path(args.out)
    notes = [
        "Ratings: Shen et al. 2023 (github.com/DAMO-NLP-SG/LLM_summeval), 1-5 (halves possible), None where a "
        "response states no score (skipped in means, never 0). Combined label = mean of the judges that rated the "
        "summary, after per-judge normalisation (csem.model.labels: zscore = (y - mean)/std per judge; rank = "
        "average rank mapped onto [0, 1] per judge).",
        "Teacher column: the combined labels of the test summaries themselves (normalised over the test rows); "
        "a monotone normalisation cannot change a single judge's summary-level correlation, so single-judge rows "
        "differ only in the student column.",
        "System prior: each test summary scored by the mean combined training label of its system (no text read).",
        f"Student recipe: {args.recipe}: encoder {model_cfg.encoder}, {train_cfg.max_epochs} epochs "
        f"(frozen for {train_cfg.frozen_epochs}, top {train_cfg.train_layers} encoder layers trained after), loss "
        f"{model_cfg.loss}, head {model_cfg.hidden_sizes}, lr {train_cfg.lr} / head lr {train_cfg.head_lr}, batch "
        f"{train_cfg.batch_size}, max_length {model_cfg.max_length}, overlap features {model_cfg.overlap_features}, "
        f"seeds {', '.join(map(str, seeds))} (one student each; mean and sd over seeds), no dev set (last epoch kept); "
        "4 aspects as 4 heads over one encoder; trained on all 50 training documents. csem source tree "
        f"{recipe['csem_tree']} (commit {code['csem']}); full configuration in the JSON (meta.recipe).",
        "Paper (CSEM Sec. IV-C, SummEval, student Spearman): ChatGPT alone 0.442, ChatGPT + text-davinci-003 "
        "0.397 (raw labels).",
    ]
    data = {"meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(), "threads": args.threads,
                     "n_train": len(train_recs), "n_test": len(test_recs), "args": vars(args), "recipe": recipe,
                     **code, "notes": notes},
            "rows": {}}
    results = Results(out, data, render_md)
    old = previous_results(out)
    # row key -> {seed: summary_corr} of an earlier run with the same recipe and csem source tree
    done: dict[str, dict] = {}
    if old.get("meta", {}).get("recipe") == recipe:
        done = {k: dict(v.get("student_seeds") or {}) for k, v in old.get("rows", {}).items()}
    save = results.save

    plans = [(s, n, "mean") for s in SETS for n in ("none", "zscore", "rank")]
    plans += [("GPT-4 + ChatGPT + Llama-2-70B", n, "heads") for n in ("none", "zscore")]
    prepared = {}
    for set_name, norm, combine in plans:  # teacher and system prior of every row first (seconds)
        judges = SETS[set_name]
        key = f"{set_name} | {norm} | {combine}"
        groups = [[f"judge.{a}@{j}" for j in judges] for a in ASPECTS]
        entry = {"set": set_name, "judges": [f"{JUDGES[j][0]} {JUDGES[j][1]}" for j in judges], "normalise": norm,
                 "combine": combine}
        if combine == "mean":
            te = prepare_labels(test_recs, groups, normalise=norm, combine="mean", label_range=(1, 5))
            entry["teacher"] = summary_corr(te.records, lambda a: te.label_cols[ASPECTS.index(a)])
        tr = prepare_labels(train_recs, groups, normalise=norm, combine=combine, label_range=(1, 5))
        if combine == "mean":  # the system prior of the combined training labels (csem.baselines.system_prior)
            prior = system_prior(tr.records, test_recs, tr.label_cols)
            prior_rows = [dict(r, **{f"prior.{a}": prior[col][i] for a, col in zip(ASPECTS, tr.label_cols)})
                          for i, r in enumerate(test_recs)]
            entry["prior"] = summary_corr(prior_rows, lambda a: f"prior.{a}")
        if done.get(key):  # kept from an earlier run with the same recipe and csem source
            entry["student_seeds"] = done[key]
            entry["student"] = seed_mean(done[key])
        log(f"{key}: teacher {entry.get('teacher', {}).get('average')} prior {entry.get('prior', {}).get('average')}")
        data["rows"][key] = entry
        prepared[key] = tr
    save()
    if args.no_students:
        todo = []
    else:  # seed by seed, so that a run cut short by a busy machine has every row at the first seeds
        todo = [(f"{s} | {n} | {c}", seed) for seed in seeds for s, n, c in STUDENTS[:1 if args.quick else None]]
        assert all(k in data["rows"] for k, _ in todo)
    lower_cache: dict = {}  # frozen lower layers' token states of the training texts, shared by all students
    for key, seed in todo:
        entry, tr = data["rows"][key], prepared[key]
        if str(seed) in entry.get("student_seeds", {}):
            continue
        combine = entry["combine"]
        t0 = time.perf_counter()
        model = fit(tr.records, tr.label_cols, "ref-free", config=model_cfg.model_copy(deep=True),
                    train_config=train_cfg.model_copy(update={"seed": seed}), label_range=tr.label_range,
                    lower_cache=lower_cache if train_cfg.train_layers else None)
        train_s = time.perf_counter() - t0
        scored = model.predict(test_recs, name="student", batch_size=32).records
        if combine == "heads":
            from csem.model.validation import aspect_name

            ens = {a: [aspect_name(c, tr.label_cols) for c in tr.ensembles[f"judge.{a}"]] for a in ASPECTS}
            scales = {s.aspect: (s.min, s.max) for s in model.config.labels}
            scored = ensemble_scores(scored, ens, scales, "metric.student")
            col = lambda a: f"metric.student.{a}"  # noqa: E731
        else:
            col = lambda a: f"metric.student.{model.config.labels[ASPECTS.index(a)].aspect}"  # noqa: E731
        result = summary_corr(scored, col)
        result["train_s"] = train_s
        entry.setdefault("student_seeds", {})[str(seed)] = result
        entry["student"] = seed_mean(entry["student_seeds"])
        log(f"{key} seed {seed}: student {result['average']} ({train_s:.0f} s train, "
            f"{time.perf_counter() - t0:.0f} s with scoring)")
        save()
    log(f"wrote {out.with_suffix('.md')}")
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
