"""The student distilled from GPT-4's SummEval ratings, against its teacher, the experts and the trivial baselines.

Data: the published gpt-4-0314 ratings of SummEval (Shen et al. 2023: 12 abstractive systems x 100
documents, four aspects, ``judge.<aspect>``) beside the expert means (``human.<aspect>``). csem's
default student (``csem.train`` with its defaults, four heads, reference-free, label range 1-5) is
trained on documents 0-49 (sorted doc_id) with seeds 12-14 and scored with ``EvaluationModel.predict``
on documents 50-99. Figures: summary-level Spearman (per document over its 12 summaries, averaged) of
the student with its teacher (GPT-4) and with the experts, per aspect and averaged, mean ± sd over
seeds; the teacher's own agreement with the experts (the ceiling of distillation); and the trivial
baselines on the same test rows: length, extractiveness, the system prior and the overlap features'
least-squares fit (both fitted on the training documents' GPT-4 ratings). ``quick``: 3 training and 2
test documents, one seed, one epoch.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks.suite import ASPECTS, aspect_rows, fmt, log, machine, markdown_table, summeval_llm_ratings, threads

TEACHER = lambda a: f"judge.{a}"  # noqa: E731
HUMAN = lambda a: f"human.{a}"  # noqa: E731


def _both(rows: list[dict], metric) -> dict:
    """Summary-level Spearman of ``metric`` (a column or ``aspect -> column``) with GPT-4 and with the experts."""
    return {"teacher": {k: v["spearman"] for k, v in aspect_rows(rows, metric, human=TEACHER, methods=("spearman",)).items()},
            "experts": {k: v["spearman"] for k, v in aspect_rows(rows, metric, methods=("spearman",)).items()}}


def baselines(train: list[dict], test: list[dict]) -> dict:
    """Length, extractiveness, the system prior and the overlap LS fit against GPT-4 and the experts."""
    from csem.baselines import extractiveness, length, overlap_least_squares, system_prior

    labels = [TEACHER(a) for a in ASPECTS]
    prior, ls = system_prior(train, test, labels), overlap_least_squares(train, test, labels)
    rows = [dict(r) for r in test]
    for i, r in enumerate(rows):
        r["metric.length"], r["metric.extractiveness"] = length(test)[i], extractiveness(test)[i]
        for a in ASPECTS:
            r[f"metric.prior.{a}"], r[f"metric.ls.{a}"] = prior[TEACHER(a)][i], ls[TEACHER(a)][i]
    return {"length": _both(rows, "metric.length"), "extractiveness": _both(rows, "metric.extractiveness"),
            "system prior": _both(rows, lambda a: f"metric.prior.{a}"),
            "overlap features (LS)": _both(rows, lambda a: f"metric.ls.{a}")}


def run(quick: bool = False) -> dict:
    """Train the students, score the held-out documents, correlate."""
    import csem

    train_docs, test_docs, seeds = (slice(0, 3), slice(50, 52), (12,)) if quick else (slice(0, 50), slice(50, 100),
                                                                                    (12, 13, 14))
    cols = [TEACHER(a) for a in ASPECTS]
    train = [r for r in summeval_llm_ratings(train_docs) if all(r.get(c) is not None for c in cols)]
    test = summeval_llm_ratings(test_docs)
    students = []
    with tempfile.TemporaryDirectory(prefix="csem-student-") as tmp:
        for seed in seeds:
            model = csem.train(train, ",".join(cols), out_dir=Path(tmp) / str(seed), label_range=(1, 5), seed=seed,
                               num_threads=threads(), **({"max_epochs": 1} if quick else {}))
            pred = model.predict(test)
            rows = [dict(r) for r in test]
            for col, vals in pred.scores.items():
                aspect = col.rsplit(".", 1)[-1]
                for r, v in zip(rows, vals):
                    r[f"metric.student.{aspect}"] = v
            students.append(_both(rows, lambda a: f"metric.student.{a}"))
            log(f"seed {seed}: average vs GPT-4 {fmt(students[-1]['teacher']['average'])}")
    mean = {t: {a: statistics.fmean(s[t][a] for s in students) for a in (*ASPECTS, "average")} for t in ("teacher", "experts")}
    sd = {t: {a: statistics.stdev([s[t][a] for s in students]) if len(students) > 1 else None
              for a in (*ASPECTS, "average")} for t in ("teacher", "experts")}
    base = baselines(train, test)
    return {"machine": machine(), "threads": threads(), "seeds": list(seeds), "train_rows": len(train),
            "train_docs": f"{train_docs.start}-{train_docs.stop - 1}", "test_docs": f"{test_docs.start}-{test_docs.stop - 1}",
            "test_rows": len(test), "student": {"mean": mean, "sd": sd, "per_seed": students},
            "teacher_vs_experts": {k: v["spearman"] for k, v in aspect_rows(test, TEACHER, methods=("spearman",)).items()},
            "baselines": base,
            "headline": {"mean": mean["teacher"]["average"], "sd": sd["teacher"]["average"],
                         "baselines": {k: base[k]["teacher"]["average"] for k in ("length", "system prior")}}}


def report(res: dict) -> str:
    """The Markdown report: the student and the baselines vs GPT-4 and vs the experts, per aspect."""
    s = res["student"]
    md = ["# The student distilled from GPT-4 on SummEval", "",
          f"Trained on {res['train_rows']} GPT-4-rated summaries (documents {res['train_docs']}), tested on "
          f"{res['test_rows']} (documents {res['test_docs']}); summary-level Spearman, seeds {', '.join(map(str, res['seeds']))} (mean ± sd); "
          f"machine: {res['machine']}.", ""]
    for target, title in (("teacher", "with its teacher (GPT-4)"), ("experts", "with the SummEval experts")):
        rows = [["student", *(f"{fmt(s['mean'][target][a])} ± {fmt(s['sd'][target][a])}" for a in (*ASPECTS, "average"))]]
        if target == "experts":
            rows.append(["GPT-4 (the teacher)", *(fmt(res["teacher_vs_experts"][a]) for a in (*ASPECTS, "average"))])
        rows += [[k, *(fmt(v[target][a]) for a in (*ASPECTS, "average"))] for k, v in res["baselines"].items()]
        md += [f"## Summary-level Spearman {title}", "", markdown_table(rows, ["scorer", *ASPECTS, "average"]), ""]
    return "\n".join(md)
