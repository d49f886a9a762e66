"""The run report of a pipeline: ``report.md`` and ``report.html`` (one self-contained file, figures embedded).

The report opens with the verdict ([`csem.report.verdict`][]: can the student replace its judge, would
more labels help) and the headline figures, then one section per question, each holding its own text,
table and figure: the data, the judge (cost and its repeatability), the student (training, throughput),
its agreement with the judge on held-out sources (a scatter per aspect, coloured by system, with the
diagonal and every source's Spearman), the trivial baselines (bars with 95% intervals), the learning
curve (with the judge's attenuation bound ``sqrt(r)`` as a band), the acceptability gate's count of
floored real candidates, and where configured the score stage's cascade (what it deferred, the judge
calls, the combined column against human ratings and the judge's repeat labels), the spread over
seeds, reranking (gain per source) and MRT. Numbers are rounded to 3 decimals at most (intervals to 2); mappings are tables. Every figure
comes from a file a stage wrote in this run.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from csem.data.filenames import path_in
from csem.data.records import read_records
from csem.pipeline.agreement import BOOTSTRAP, aspect_of, student_col
from csem.pipeline.folder import BASELINES_FILE, CASCADE_FILE
from csem.report.tables import fmt, markdown_table


@dataclass
class Section:
    """One section of the report: a title and its items in order, each ``("p", text)``, ``("li", [texts])``,
    ``("table", rows, columns, headers, caption)`` or ``("fig", caption, path)``."""

    title: str
    items: list[tuple] = field(default_factory=list)
    key: str = ""

    def p(self, text: str) -> "Section":
        self.items.append(("p", text))
        return self

    def li(self, *texts: str) -> "Section":
        self.items.append(("li", [t for t in texts if t]))
        return self

    def table(self, rows: list[dict], columns: list[str], headers: list[str] | None = None,
              caption: str = "") -> "Section":
        self.items.append(("table", rows, columns, headers or columns, caption))
        return self

    def fig(self, caption: str, path: Path | None) -> "Section":
        if path is not None:
            self.items.append(("fig", caption, path))
        return self


def _ci(ci) -> str:
    """``low to high`` with 2 decimals (an interval over a few sources supports no more), empty without one."""
    return "" if not ci else f"{ci[0]:.2f} to {ci[1]:.2f}"


def _load(run_dir: Path, name: str, default: Any = None) -> Any:
    p = run_dir / name
    return json.loads(p.read_text()) if p.exists() else default


# -- sections ------------------------------------------------------------------------------------------

def _verdict_section(run_dir: Path) -> Section | None:
    v = _load(run_dir, "verdict.json")
    if not v:
        return None
    s = Section("Verdict", key="verdict").p(f"**{v['headline']}**")
    for a in v["aspects"]:
        s.p(" ".join(a["sentences"]))
    rows = [{"aspect": a["aspect"], "status": a["status"], "student": a.get("student"),
             "best baseline": a.get("best_baseline") or "", "baseline": a.get("best_baseline_value"),
             "versus": a["versus_baseline"], "sqrt(r)": a.get("sqrt_r")} for a in v["aspects"]]
    s.table(rows, list(rows[0]) if rows else [], caption="Headline figures: summary-level Spearman with the judge on "
            "held-out sources; versus: the paired 95% interval of student minus baseline (above / level / below)")
    s.p("The rule, its thresholds and its wording: docs/guides/verdict.md (csem.report.verdict).")
    return s


def _data_section(cfg, state: dict) -> Section:
    col, tr = state.get("collect", {}).get("summary", {}), state.get("train", {}).get("summary", {})
    s = Section("Data", key="data").li(
        f"sources: {col.get('sources')} ({tr.get('train_sources')} for training, {tr.get('dev_sources')} dev, "
        f"{tr.get('test_sources')} held out)",
        f"candidates kept: {col.get('kept')} (generated {col.get('generated')}, resumed {col.get('resumed')}, references "
        f"{col.get('references')}, empty {col.get('empty')}, duplicates {col.get('duplicates')}, cut at max_tokens "
        f"{col.get('truncated', 'n/a')} (trimmed {col.get('trimmed', 'n/a')}, kept cut {col.get('kept_cut', 'n/a')}), "
        f"dropped {col.get('dropped')}) in {col.get('seconds') or 0:.1f} s")
    per = col.get("per_system") or {}
    return s.table([{"system": k, "candidates": v} for k, v in per.items()], ["system", "candidates"],
                   caption="Candidates per system")


def _judge_section(run_dir: Path, cfg, state: dict) -> Section:
    from csem.pipeline.annotate import read_repeatability

    ann = state.get("annotate", {}).get("summary", {})
    cmp = state.get("compare", {}).get("summary") if getattr(cfg, "compare", None) is not None else None
    judged, secs = ann.get("judged", 0), ann.get("seconds") or 0.0
    s = Section("Judge", key="judge").li(
        f"judge `{cfg.annotate.judge}`, rubrics {', '.join(cfg.annotate.rubrics)}, mode `{cfg.annotate.mode}`",
        f"judgments made {judged}, from cache {ann.get('cached')}, missing {sum((ann.get('missing') or {}).values())}, "
        f"prompt tokens {ann.get('prompt_tokens')}, completion tokens {ann.get('completion_tokens')}, {secs:.1f} s"
        + (f" ({secs / judged:.2f} s per judgment)" if judged else "")
        + (f", cost ${ann['cost_usd']:.4f}" if ann.get("cost_usd") is not None else "")
        + (f", as batch jobs {', '.join(str(b.get('id')) for b in ann['batches'])}" if ann.get("batches") else ""),
        "" if cmp is None else
        f"comparison (compare stage): {cmp.get('pairs')} pairs of the {cmp.get('train_sources')} training sources "
        f"({cfg.compare.pairs}), {cmp.get('calls')} judge calls (both orders; {cmp.get('judged')} made, "
        f"{cmp.get('cached')} from cache), {cmp.get('seconds') or 0:.1f} s")
    rep = read_repeatability(run_dir / "labelled.jsonl") if cfg.annotate.repeatability else None
    if not rep:
        return s.p("The judge's repeatability was not measured (annotate.repeatability: 0).")
    rj = ann.get("repeat") or rep.get("judge", {})
    s.p(f"The judge's repeatability: the candidates of {len(rep['sources'])} sources ({rep['candidates']} candidates, "
        f"{rep['share']:.0%} of the sources, seed {rep['seed']}) judged a second time under a second rendering of each "
        f"rubric ({rep['rendering']}: {', '.join(rep['rubrics'])}), {rj.get('seconds', 0):.1f} s more. r is the "
        "Spearman of the two scores within each source, averaged over sources (dataset level: pooled); sqrt(r) is "
        "the attenuation bound, about the most a student can agree with this judge. The second scores "
        "(judge.<aspect>.repeat) are never training labels.")
    rows = [{"label": c, "r": f["summary"]["r"], "95% CI": _ci(f["summary"]["ci"]), "sqrt(r)": f["summary"]["sqrt_r"],
             "sources": f["summary"]["n_sources"], "dataset-level r": f["dataset"]["r"],
             "dataset 95% CI": _ci(f["dataset"]["ci"]), "candidates": f["n_candidates"]}
            for c, f in rep["columns"].items()]
    return s.table(rows, list(rows[0]) if rows else [], caption="The judge against itself")


def _student_section(run_dir: Path, cfg, state: dict, figs: Path) -> Section:
    from csem.report.plots import plot_training_curve

    tr, sc = state.get("train", {}).get("summary", {}), state.get("score", {}).get("summary", {})
    ann = state.get("annotate", {}).get("summary", {})
    cmp = state.get("compare", {}).get("summary") if getattr(cfg, "compare", None) is not None else None
    judged, secs = ann.get("judged", 0), ann.get("seconds") or 0.0
    rate = sc.get("samples_per_second", 0)
    members = int(cfg.train.model.get("members", 1))
    s = Section("Student", key="student").li(
        f"encoder `{cfg.train.encoder}`, mode `{cfg.train.mode}`"
        + (f", a seed ensemble of {members} (the mean of their scores)" if members > 1 else "")
        + f", trained on {tr.get('train_rows')} rows in {state.get('train', {}).get('seconds', 0):.1f} s"
        + ("" if cmp is None else f", from the {cmp.get('pairs')} judged pairs (ranking loss, Eq. 3)"),
        f"scoring throughput: {rate:.1f} samples/s ({sc.get('rows')} records scored in {sc.get('seconds', 0):.2f} s "
        "by the score stage, model loading excluded)"
        + (f", {rate * secs / judged:.0f}x the judge's rate in this run" if judged and secs else ""))
    history = tr.get("history") or []
    if history:
        s.fig("Training: dev agreement with the judge per epoch",
              plot_training_curve(history, figs / "training.png", title="training: dev agreement with the judge"))
    return s


#: the agreement table's columns (``meta.json`` rows; ``spearman 95% CI`` from their ``spearman_ci``)
AGREEMENT_COLUMNS = ["aspect", "scorer", "target", "level", "spearman", "spearman 95% CI", "kendall", "pearson",
                     "n_groups", "n_skipped", "n_pairs"]


def _with_ci(rows: list[dict]) -> list[dict]:
    """``meta.json`` rows with their ``spearman_ci`` written as ``low to high`` (empty where absent)."""
    return [{**r, "spearman 95% CI": _ci(r.get("spearman_ci"))} for r in rows]


def _agreement_section(run_dir: Path, state: dict, scales: dict, figs: Path) -> Section:
    from csem.report.plots import plot_student_vs_judge

    meta = _with_ci(_load(run_dir, "meta.json", []))
    s = Section("Agreement on held-out sources", key="agreement")
    s.p("Summary level: correlation within each source's candidates, averaged over sources (sources where a side is "
        "constant are skipped and counted in n_skipped). Dataset level: all held-out pairs pooled. Kendall is tau-b. "
        f"spearman 95% CI: the percentile interval of the Spearman over {BOOTSTRAP:,} resamples of the held-out "
        "sources (sources drawn with replacement); with few sources it is wide, and a difference inside it is not "
        "evidence.")
    s.table(meta, AGREEMENT_COLUMNS, caption="Student vs judge (and humans)")
    scored = [r for r in read_records(run_dir / "scored.jsonl") if r.get("split") == "test"]
    for col in state.get("train", {}).get("summary", {}).get("label_cols", []):
        a = aspect_of(col)
        try:
            p = plot_student_vs_judge(scored, student_col(scored, a), col, path_in(figs, "student_vs_judge", a, suffix=".png"),
                                      scale=scales.get(col), title=f"{a}: student vs judge on the held-out sources")
        except (ValueError, KeyError):
            continue
        s.fig(f"{a}: each held-out candidate (colour: system; dashed: student = judge) and each source's Spearman", p)
    return s


def _cascade_section(run_dir: Path, cfg, state: dict) -> Section | None:
    """The score stage's cascade (``score`` section): what it deferred, the judge calls it made, and the
    combined column against the targets that are not the judged labels (``cascade.json``)."""
    c = state.get("score", {}).get("summary", {}).get("cascade")
    if getattr(cfg, "score", None) is None or not c:
        return None
    amount = f"share {c['defer']:g}" if c.get("defer") is not None else f"budget {c['defer_budget']} records"
    per = [f"{n} of {c['rows']} records ({c['share_deferred'][r]:.1%}) to {r}, {c['held_out_deferred'][r]} of them "
           f"among the {c['held_out_rows']} held-out candidates" for r, n in c["deferred"].items()]
    s = Section("Cascade (score stage)", key="cascade").li(
        f"deferral rule `{c['rule']}`, {amount}: {'; '.join(per)}",
        f"judge `{c['judge']}`: {c['judge_calls']} judgments asked, {c['judged']} new judge calls, {c['cached']} "
        f"answered by the run's judge cache, {c['failed']} failed, {c['missing']} without a score",
        *[f"{col}: {how}" for col, how in c["scale"].items()])
    s.p("scored.jsonl holds the combined column (`metric.<name>.<aspect>`: the judge's score on the deferred rows, "
        "the student's elsewhere), the student's own score (`metric.<name>.<aspect>@student`) and each row's source "
        "(`.provenance`). On the deferred rows the combined column is the judge's own score (placed on the student's "
        "spread), so it is never measured against the judge's labels: every other figure of this report is the student's own score. Below, on the "
        "held-out sources, it is measured against the targets that are not the judged labels (human ratings, the "
        "judge's second rendering of the rubric), beside the student's own score and the judge's labels on the same "
        "rows.")
    rows = _load(run_dir, CASCADE_FILE, [])
    if not rows:
        return s.p("No such target in this run: the records carry no human.<aspect> rating and the judge's "
                   "repeatability was not measured (annotate.repeatability: 0), so the combined column's agreement "
                   "is not reported.")
    table: dict[tuple, dict] = {}
    for r in rows:
        t = table.setdefault((r["aspect"], r["target"], r["level"]),
                             {"aspect": r["aspect"], "target": r["target"], "level": r["level"], "pairs": r["n_pairs"],
                              "judged rows": r["rows_judged"]})
        t[r["scorer"]], t[f"{r['scorer']} 95% CI"] = r.get("spearman"), _ci(r.get("spearman_ci"))
    cols = ["aspect", "target", "level", "cascade", "cascade 95% CI", "student", "student 95% CI", "judge",
            "pairs", "judged rows"]
    return s.table(list(table.values()), cols, caption="Spearman with each target: the combined column (cascade), "
                   "the student's own score and the judge's labels on the same held-out rows; judged rows: those of "
                   "them the cascade deferred")


def _baseline_section(run_dir: Path, figs: Path) -> Section | None:
    from csem.report.plots import plot_bars

    rows = _load(run_dir, BASELINES_FILE, [])
    if not rows:
        return None
    meta = _load(run_dir, "meta.json", [])
    s = Section("Trivial baselines on the same held-out sources", key="baselines")
    s.p("What could explain the student without any encoder: length (words), extractiveness (share of the "
        "candidate's trigrams found in the source), the system prior (each candidate scored by its system's mean "
        "training label), the overlap fit (the overlap features fitted to the training labels by least squares). "
        "Signed as computed; a student below these has learnt nothing they do not know.")
    s.table(_with_ci(rows), ["aspect", "scorer", "target", "level", "spearman", "spearman 95% CI", "kendall", "pearson",
                             "n_groups", "n_missing"], caption="Baselines vs judge")
    groups: dict[str, list] = {}
    for r in [m for m in meta if m["scorer"] == "student" and m["target"] == "judge"] + rows:
        if r["level"] == "summary":
            groups.setdefault(r["aspect"], []).append({"name": r["scorer"], "value": r.get("spearman"),
                                                       "ci": r.get("spearman_ci")})
    return s.fig("The student and the baselines (summary-level Spearman with the judge, 95% intervals over sources)",
                 plot_bars(groups, figs / "baselines.png", ylabel="summary-level Spearman with the judge",
                           title="student vs trivial baselines, held-out sources", highlight="student"))


def _curve_section(run_dir: Path, cfg, figs: Path) -> Section | None:
    from csem.pipeline.annotate import read_repeatability
    from csem.report.plots import plot_scaling_curve

    data = _load(run_dir, "curve.json") if getattr(cfg, "curve", None) is not None else None
    if not data:
        return None
    rep = (read_repeatability(run_dir / "labelled.jsonl") or {}) if cfg.annotate.repeatability else {}
    s = Section("Learning curve", key="curve")
    s.p(f"The student recipe (one student) on nested shares of the training sources ({', '.join(f'{x:.0%}' for x in data['shares'])}), "
        f"seeds {', '.join(map(str, data['seeds']))}, each scored on the held-out sources; a least-squares fit of the "
        "summary-level Spearman against ln(labels), the gain per doubling of the labels with its 95% interval.")
    s.table(data["points"], ["aspect", "share", "sources", "labels", "seed", "spearman", "dataset"],
            headers=["aspect", "share", "sources", "labels", "seed", "summary-level Spearman", "dataset-level"],
            caption="Curve points")
    fits = []
    for a, f in (data.get("fits") or {}).items():
        fits.append({"aspect": a, "gain per doubling": None if not f else f["gain_per_doubling"],
                     "95% CI": "" if not f else _ci(f.get("gain_ci")), "trend": "n/a" if not f else f["trend"],
                     "target (sqrt(r) - 0.05)": None if not f else f.get("target"),
                     "labels to target": "" if not f or f.get("labels_to_target") is None
                     else f"{f['labels_to_target']:,.0f}"})
    s.table(fits, list(fits[0]) if fits else [], caption="The fit")
    for a, f in (data.get("fits") or {}).items():
        pts = [pt for pt in data["points"] if pt["aspect"] == a]
        col = next((c for c in (rep.get("columns") or {}) if aspect_of(c) == a), None)
        band = None
        if col:
            r = rep["columns"][col]["summary"]
            if r.get("sqrt_r") is not None:
                lo, hi = (r["ci"] if r.get("ci") else (r["r"], r["r"]))
                band = (max(lo, 0) ** 0.5, max(hi, 0) ** 0.5, f"judge's sqrt(r) = {r['sqrt_r']:.2f} (95% CI)")
        s.fig(f"{a}: learning curve",
              plot_scaling_curve({"student": [{"labels": pt["labels"], "spearman": pt["spearman"]} for pt in pts]},
                                 path_in(figs, "curve", a, suffix=".png"), fit=None if not f else {"a": f["intercept"], "b": f["slope"]},
                                 band=band, title=f"{a}: held-out agreement as labels grow"))
    return s


def _gate_section(run_dir: Path) -> Section | None:
    gate = _load(run_dir, "gate.json")
    if not gate:
        return None
    rows = [{"aspect": a, "split": sp, "candidates": g["candidates"], "gated": g["gated"], "floored": g["floored"],
             "judge mean of floored": g["floored_judge_mean"], "floored above the judge's median": g["floored_above_median"],
             "judge median": g["judge_median"]}
            for a, by in gate.items() for sp in ("held-out", "training") for g in [by[sp]]]
    s = Section("Acceptability gate on real candidates", key="gate")
    s.p("The gate (csem.model.acceptability) lowers the score of a text it finds unacceptable; gated: real "
        "candidates whose score it lowered, floored: those it put at the scale's minimum. A gate that floors more "
        "than 1% of the real candidates the judge rates above its median is a defect of the gate.")
    return s.table(rows, list(rows[0]) if rows else [], caption="What the gate did to this run's real candidates")


SEED_COLUMNS = ["aspect", "scorer", "target", "level", "method", "mean", "sd", "min", "max", "n_seeds", "values"]


def _seed_section(run_dir: Path, cfg) -> Section | None:
    """The spread over training seeds (``seeds.json``); None without ``train.seeds``."""
    data = _load(run_dir, "seeds.json") if getattr(cfg.train, "seeds", None) else None
    if not data:
        return None
    rows = [{**r, "values": ", ".join("" if v is None else f"{v:.3f}" for v in r["values"])}
            for r in data["spread"] if r["method"] in ("spearman", "kendall")]
    members = int(cfg.train.model.get("members", 1))
    above = (f"seed {data['train_seed']}'s student" if members == 1 else
             f"the seed ensemble of seeds {data['train_seed']}-{data['train_seed'] + members - 1}, the mean of "
             f"{members} students' scores; each of its seeds here is that member alone")
    return (Section("Spread over training seeds", key="seeds")
            .li(f"seeds {', '.join(map(str, data['seeds']))}: one student each, same training sources and settings "
                f"(the tables above are {above})")
            .table(rows, SEED_COLUMNS, caption="Agreement with the judge per seed")
            .p("sd: sample standard deviation over seeds (n - 1); values: per seed, in the order listed."))


def _rerank_section(run_dir: Path, cfg, state: dict, figs: Path) -> Section | None:
    """The rerank stage: per source the judge's score of the chosen candidate against its N-best list's mean."""
    from csem.pipeline.rerank import choice_rows, gain_summary
    from csem.report.plots import plot_gains

    if getattr(cfg, "rerank", None) is None or "rerank" not in state or not (run_dir / "reranked.scores.jsonl").exists():
        return None
    judge_cols = state.get("train", {}).get("summary", {}).get("label_cols", [])
    rows = choice_rows(read_records(run_dir / "reranked.scores.jsonl"), judge_cols)
    gains = gain_summary(rows, judge_cols)
    s, r = state["rerank"]["summary"], cfg.rerank
    which = "held-out" if r.sources == "held-out" else "all (training sources included: the student saw their judge scores)"
    tuned = s.get("tuned")
    sec = Section("Reranking (rerank stage)", key="rerank").li(
        f"N-best lists of {s['sources']} sources ({which}), {s['candidates']} candidates; metrics "
        f"{', '.join(r.metrics)}; weights {', '.join(f'{c}={w:g}' for c, w in zip(s['columns'], s['weights']))}; "
        f"normalize `{s['normalize']}`",
        "" if not tuned else f"weights tuned by MERT on {tuned['sources']} training and dev sources: mean judge score of "
        f"the chosen candidate {tuned['value']:.3f} there (all weights 1: {tuned['start_value']:.3f}); `rerank_weights.json`",
        "" if not s.get("no_choice") else f"no choice for {len(s['no_choice'])} source(s) (no candidate with every "
        f"score): {', '.join(map(str, s['no_choice'][:5]))}",
        *[(f"{c}: chosen candidate {g['chosen']:.3f} vs N-best mean {g['mean']:.3f} (a random pick), mean gain "
           f"{g['gain']:+.3f} over {g['sources']} sources (best in list {g['best']:.3f})") if g["sources"] else
          f"{c}: no source with a judged chosen candidate; no gain to report" for c, g in gains.items()])
    cols, headers = ["doc_id", "candidates", "chosen", "system_id"], ["source", "candidates", "chosen", "system"]
    for c in judge_cols:
        cols += [c, f"{c}.mean", f"{c}.best", f"{c}.gain"]
        headers += [f"{c} of the chosen", f"{aspect_of(c)}: N-best mean", f"{aspect_of(c)}: best", f"{aspect_of(c)}: gain"]
    table = [{k: (f"{v:+.3f}" if k.endswith(".gain") and isinstance(v, float) else v) for k, v in row.items()}
             for row in rows]
    sec.table(table, cols, headers, caption="Reranking: chosen candidate per source")
    sec.p("Per source: the judge's score of the chosen candidate, the mean judge score of the source's N-best list "
          "(what a random pick gets in expectation), its best, and the gain (chosen - mean).")
    if rows and judge_cols:
        sec.fig("Reranking gain per source", plot_gains(rows, judge_cols, figs / "rerank_gain.png",
                                                        title="the student's pick vs a random pick, per source"))
    return sec


def _mrt_section(cfg, state: dict) -> Section | None:
    """The mrt stage (its summary: figures from ``train_mrt`` and its log); None without ``mrt``."""
    if getattr(cfg, "mrt", None) is None or "mrt" not in state:
        return None
    s = state["mrt"]["summary"]
    st = s["settings"]
    f = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    return Section("Generator fine-tuning (mrt stage)", key="mrt").li(
        f"generator `{s['generator']}` fine-tuned with MRT + MLE (Eq. 12: lambda {st['lam']:g}, alpha {st['alpha']:g}, "
        f"S = {st['num_samples']} samples, {st['batch_size']} sources per step, lr {st['lr']:g}) for {s['steps']} steps"
        + (f" (resumed from `{s['resumed_from']}`)" if s.get("resumed_from") else "")
        + f" on {s['sources']} sources ({cfg.mrt.sources}; {s['references']} with a reference for the MLE term) "
        f"in {s['seconds']:.1f} s",
        f"reward: `{s['metric']}`, the mean of {', '.join(s['reward_columns'])}; rewards computed "
        f"{s['rewards_computed']}, reused {s['rewards_reused']}",
        f"mean reward of the samples {f(s['reward_first'])} over the first {s['quarter']} step(s), "
        f"{f(s['reward_last'])} over the last {s['quarter']}; MLE loss {f(s['mle_first'])} -> {f(s['mle_last'])} over "
        f"the same steps (n/a: not logged); per step: `mrt/train_log.csv` ({s['logged_steps']} rows)",
        f"the fine-tuned generator: `{s['folder']}` (a transformers folder, `hf:` + its path)")


# -- rendering -----------------------------------------------------------------------------------------

def _cell(v: Any) -> str:
    return fmt(v, 3, "") if not isinstance(v, str) else v


def render_markdown(title: str, sections: list[Section], run_dir: Path) -> str:
    """The report as Markdown (figures linked by their path in the run folder)."""
    lines = [f"# {title}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        for item in s.items:
            if item[0] == "p":
                lines += [item[1], ""]
            elif item[0] == "li":
                lines += [f"- {t}" for t in item[1]] + [""]
            elif item[0] == "table" and item[1]:
                lines += ([f"*{item[4]}*", ""] if item[4] else []) + [markdown_table(item[1], item[2], headers=item[3],
                                                                                     missing=""), ""]
            elif item[0] == "fig":
                lines += [f"![{item[1]}]({Path(item[2]).relative_to(run_dir)})", ""]
    return "\n".join(lines)


_CSS = ("body{font-family:system-ui,sans-serif;max-width:1040px;margin:auto;padding:0 16px;color:#222}"
        "section{border-top:1px solid #ddd;margin-top:18px}table{border-collapse:collapse;margin:8px 0;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}"
        "caption{caption-side:top;text-align:left;font-style:italic;padding:4px 0}"
        "figure{margin:10px 0}img{max-width:100%;border:1px solid #eee}figcaption{font-size:13px;color:#555}"
        "#verdict{background:#f7f9fc;padding:4px 14px;border:1px solid #cfd8e6}")


def _inline(text: str) -> str:
    """Escaped text with ``**bold**`` and ``code`` spans."""
    import re

    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", t)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", t)


def render_html(title: str, sections: list[Section]) -> str:
    """The report as one self-contained HTML page: each section a ``<section>`` holding its own paragraphs,
    lists, tables and figures (PNG embedded as base64)."""
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    for s in sections:
        out.append(f"<section id='{s.key}'><h2>{html.escape(s.title)}</h2>")
        for item in s.items:
            if item[0] == "p":
                out.append(f"<p>{_inline(item[1])}</p>")
            elif item[0] == "li":
                out.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in item[1]) + "</ul>")
            elif item[0] == "table" and item[1]:
                out.append("<table>" + (f"<caption>{html.escape(item[4])}</caption>" if item[4] else "")
                           + "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in item[3]) + "</tr>"
                           + "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in item[2])
                                     + "</tr>" for r in item[1]) + "</table>")
            elif item[0] == "fig":
                data = base64.b64encode(Path(item[2]).read_bytes()).decode()
                out.append(f"<figure><img alt='{html.escape(item[1])}' src='data:image/png;base64,{data}'/>"
                           f"<figcaption>{html.escape(item[1])}</figcaption></figure>")
        out.append("</section>")
    return "\n".join(out) + "</body></html>"


def write_report(run_dir: Path, cfg, state: dict, scales: dict | None = None) -> list[Path]:
    """Write ``report.md`` and ``report.html`` (figures embedded) into ``run_dir``; return the paths
    (the figures' PNG files under ``figures/`` last).

    Args:
        run_dir: the run folder. cfg: its [`csem.pipeline.config.PipelineConfig`][]. state: ``state.json``'s
            content (each stage's summary). scales: ``{judge column: (min, max)}`` for the scatter axes.
    """
    run_dir = Path(run_dir)
    figs = run_dir / "figures"
    figs.mkdir(exist_ok=True)
    sections = [_verdict_section(run_dir), _data_section(cfg, state), _judge_section(run_dir, cfg, state),
                _student_section(run_dir, cfg, state, figs), _agreement_section(run_dir, state, scales or {}, figs),
                _cascade_section(run_dir, cfg, state), _baseline_section(run_dir, figs),
                _curve_section(run_dir, cfg, figs), _gate_section(run_dir),
                _seed_section(run_dir, cfg), _rerank_section(run_dir, cfg, state, figs), _mrt_section(cfg, state)]
    sections = [s for s in sections if s is not None]
    title = f"csem run report: {cfg.name}"
    md_path, html_path = run_dir / "report.md", run_dir / "report.html"
    md_path.write_text(render_markdown(title, sections, run_dir), encoding="utf-8")
    html_path.write_text(render_html(title, sections), encoding="utf-8")
    return [md_path, html_path, *[Path(i[2]) for s in sections for i in s.items if i[0] == "fig"]]
