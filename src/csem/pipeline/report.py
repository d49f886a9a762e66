"""The run report of a pipeline: ``report.md`` and ``report.html`` with figures (matplotlib, PNG).

Sections: data sizes (sources, candidates per system), judge cost and time, training curves,
agreement of the student with the judge (and humans) on held-out sources, throughput, (with
``train.seeds``) the spread of that agreement over training seeds, and (with ``rerank``) what the
rerank stage chose: per source the judge's score of the chosen candidate against the mean judge score
of its N-best list, and (with ``mrt``) the generator fine-tuning: steps, the mean reward and MLE loss
over the first and last quarter of its log. Every figure comes from a file a stage wrote in this run.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from csem.data.records import read_records
from csem.pipeline.agreement import BOOTSTRAP, aspect_of, student_col
from csem.pipeline.folder import BASELINES_FILE
from csem.report.plots import plot_scatter, plot_training_curve
from csem.report.tables import markdown_table


def _figures(run_dir: Path, state: dict) -> list[tuple[str, Path]]:
    figs: list[tuple[str, Path]] = []
    fig_dir = run_dir / "figures"
    fig_dir.mkdir(exist_ok=True)
    label_cols = state.get("train", {}).get("summary", {}).get("label_cols", [])
    scored = [r for r in read_records(run_dir / "scored.jsonl") if r.get("split") == "test"]
    for col in label_cols:
        aspect = aspect_of(col)
        p = plot_scatter(scored, student_col(scored, aspect), col, fig_dir / f"student_vs_judge_{aspect}.png",
                         title=f"{aspect}: student vs judge, held-out sources")
        figs.append((f"Student vs judge ({aspect}) on held-out sources", p))
    history = state.get("train", {}).get("summary", {}).get("history") or []
    if history:
        figs.append(("Training curves", plot_training_curve(history, fig_dir / "training.png",
                                                            title="training: dev agreement with the judge")))
    return figs


SEED_COLUMNS = ["aspect", "scorer", "target", "level", "method", "mean", "sd", "min", "max", "n_seeds", "values"]


def _html_table(rows: list[dict], cols: list[str]) -> str:
    return "<table><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{'' if r.get(c) is None else html.escape(str(r.get(c)))}</td>" for c in cols) + "</tr>"
        for r in rows) + "</table>"


#: the agreement table's columns (``meta.json`` rows; ``spearman 95% CI`` from their ``spearman_ci``)
AGREEMENT_COLUMNS = ["aspect", "scorer", "target", "level", "spearman", "spearman 95% CI", "kendall", "pearson",
                     "n_groups", "n_skipped", "n_pairs"]


def _with_ci(rows: list[dict]) -> list[dict]:
    """``meta.json`` rows with their ``spearman_ci`` written as ``low to high`` (empty where absent)."""
    return [{**r, "spearman 95% CI": "" if not r.get("spearman_ci") else
             f"{r['spearman_ci'][0]:.3f} to {r['spearman_ci'][1]:.3f}"} for r in rows]


def _seed_rows(run_dir: Path, cfg) -> list[dict]:
    """Spearman and Kendall rows of ``seeds.json`` (per-seed values joined); empty without ``train.seeds``."""
    if not getattr(cfg.train, "seeds", None) or not (run_dir / "seeds.json").exists():
        return []
    data = json.loads((run_dir / "seeds.json").read_text())
    return [{**r, "values": ", ".join("" if v is None else f"{v:.3f}" for v in r["values"])}
            for r in data["spread"] if r["method"] in ("spearman", "kendall")]


def _baseline_lines(run_dir: Path) -> list[str]:
    """The report's section on the trivial baselines (``baselines.json`` of the meta_eval stage)."""
    path = run_dir / BASELINES_FILE
    rows = json.loads(path.read_text()) if path.exists() else []
    if not rows:
        return []
    return [
        "## Trivial baselines on the same held-out sources",
        "What could explain the student without any encoder: length (words), extractiveness (share of the "
        "candidate's trigrams found in the source), the system prior (each candidate scored by its system's "
        "mean training label). Signed as computed; a student below these has learnt nothing they do not know.",
        markdown_table(rows, ["aspect", "scorer", "target", "level", "spearman", "kendall", "pearson", "n_groups",
                              "n_missing"], missing=""),
        "",
    ]


def _seed_lines(run_dir: Path, cfg) -> list[str]:
    """The report's section on the spread over training seeds (``seeds.json``); empty without ``train.seeds``."""
    rows = _seed_rows(run_dir, cfg)
    if not rows:
        return []
    data = json.loads((run_dir / "seeds.json").read_text())
    members = int(cfg.train.model.get("members", 1))
    above = (f"seed {data['train_seed']}'s student" if members == 1 else
             f"the seed ensemble of seeds {data['train_seed']}-{data['train_seed'] + members - 1}, the mean of "
             f"{members} students' scores; each of its seeds here is that member alone")
    return [
        "## Spread over training seeds",
        f"- seeds {', '.join(map(str, data['seeds']))}: one student each, same training sources and settings "
        f"(the tables above are {above})",
        markdown_table(rows, SEED_COLUMNS, missing=""),
        "",
        "sd: sample standard deviation over seeds (n - 1); values: per seed, in the order listed.",
        "",
    ]


def _rerank_table(run_dir: Path, cfg, state: dict) -> tuple[list[dict], list[str], list[str]]:
    """(per-source rows, table columns, judge columns) of the rerank stage, from
    ``reranked.scores.jsonl``; empty without ``rerank`` or when the stage has not run."""
    from csem.pipeline.rerank import choice_rows

    if getattr(cfg, "rerank", None) is None or "rerank" not in state or not (run_dir / "reranked.scores.jsonl").exists():
        return [], [], []
    judge_cols = state.get("train", {}).get("summary", {}).get("label_cols", [])
    rows = choice_rows(read_records(run_dir / "reranked.scores.jsonl"), judge_cols)
    cols = ["doc_id", "candidates", "chosen", "system_id"]
    for c in judge_cols:
        cols += [c, f"{c}.mean", f"{c}.best", f"{c}.gain"]

    def fmt(k: str, v):
        if not isinstance(v, float):
            return v
        return f"{v:+.3f}" if k.endswith(".gain") else f"{v:.3f}"

    table = [{k: fmt(k, r[k]) for k in cols} for r in rows]
    return table, cols, judge_cols


def _rerank_lines(run_dir: Path, cfg, state: dict) -> list[str]:
    """The report's section on the rerank stage; empty without ``rerank`` or before it ran."""
    from csem.pipeline.rerank import choice_rows, gain_summary

    table, cols, judge_cols = _rerank_table(run_dir, cfg, state)
    if not cols:
        return []
    s = state["rerank"]["summary"]
    r = cfg.rerank
    which = "held-out" if r.sources == "held-out" else "all (training sources included: the student saw their judge scores)"
    weights = ", ".join(f"{c}={w:g}" for c, w in zip(s["columns"], s["weights"]))
    tuned = s.get("tuned")
    gains = gain_summary(choice_rows(read_records(run_dir / "reranked.scores.jsonl"), judge_cols), judge_cols)
    lines = [
        "## Reranking (rerank stage)",
        f"- N-best lists of {s['sources']} sources ({which}), {s['candidates']} candidates; metrics "
        f"{', '.join(r.metrics)}; weights {weights}; normalize `{s['normalize']}`",
        *([] if not tuned else [
            f"- weights tuned by MERT on {tuned['sources']} training and dev sources: mean judge score of the chosen "
            f"candidate {tuned['value']:.3f} there (all weights 1: {tuned['start_value']:.3f}); `rerank_weights.json`"]),
        *([] if not s.get("no_choice") else [
            f"- no choice for {len(s['no_choice'])} source(s) (no candidate with every score): "
            f"{', '.join(map(str, s['no_choice'][:5]))}"]),
    ]
    for c in judge_cols:
        g = gains[c]
        if g["sources"]:
            lines.append(f"- {c}: chosen candidate {g['chosen']:.3f} vs N-best mean {g['mean']:.3f} (a random pick), "
                         f"mean gain {g['gain']:+.3f} over {g['sources']} sources (best in list {g['best']:.3f})")
        else:
            lines.append(f"- {c}: no source with a judged chosen candidate; no gain to report")
    headers = ["source", "candidates", "chosen", "system"]
    for c in judge_cols:
        a = aspect_of(c)
        headers += [f"{c} of the chosen", f"{a}: N-best mean", f"{a}: best", f"{a}: gain"]
    lines += [markdown_table(table, cols, headers=headers, missing=""), "",
              "Per source: the judge's score of the chosen candidate, the mean judge score of the source's N-best "
              "list (what a random pick gets in expectation), its best, and the gain (chosen - mean).", ""]
    return lines


def _mrt_lines(cfg, state: dict) -> list[str]:
    """The report's section on the mrt stage (its summary: figures from ``train_mrt`` and its log);
    empty without ``mrt`` or before it ran."""
    if getattr(cfg, "mrt", None) is None or "mrt" not in state:
        return []
    s = state["mrt"]["summary"]
    st = s["settings"]
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    return [
        "## Generator fine-tuning (mrt stage)",
        f"- generator `{s['generator']}` fine-tuned with MRT + MLE (Eq. 12: lambda {st['lam']:g}, alpha {st['alpha']:g}, "
        f"S = {st['num_samples']} samples, {st['batch_size']} sources per step, lr {st['lr']:g}) for {s['steps']} steps"
        + (f" (resumed from `{s['resumed_from']}`)" if s.get("resumed_from") else "")
        + f" on {s['sources']} sources ({cfg.mrt.sources}; {s['references']} with a reference for the MLE term) "
        f"in {s['seconds']:.1f} s",
        f"- reward: `{s['metric']}`, the mean of {', '.join(s['reward_columns'])}; rewards computed "
        f"{s['rewards_computed']}, reused {s['rewards_reused']}",
        f"- mean reward of the samples {fmt(s['reward_first'])} over the first {s['quarter']} step(s), "
        f"{fmt(s['reward_last'])} over the last {s['quarter']}; MLE loss {fmt(s['mle_first'])} -> "
        f"{fmt(s['mle_last'])} over the same steps (n/a: not logged); per step: `mrt/train_log.csv` "
        f"({s['logged_steps']} rows)",
        f"- the fine-tuned generator: `{s['folder']}` (a transformers folder, `hf:` + its path)",
        "",
    ]


def write_report(run_dir: Path, cfg, state: dict) -> list[Path]:
    """Write ``report.md`` and ``report.html`` (figures embedded) into ``run_dir``; return the paths."""
    run_dir = Path(run_dir)
    meta = _with_ci(json.loads((run_dir / "meta.json").read_text()))
    col = state.get("collect", {}).get("summary", {})
    ann = state.get("annotate", {}).get("summary", {})
    sc = state.get("score", {}).get("summary", {})
    tr = state.get("train", {}).get("summary", {})
    cmp = state.get("compare", {}).get("summary") if getattr(cfg, "compare", None) is not None else None
    figs = _figures(run_dir, state)
    judged = ann.get("judged", 0)
    judge_seconds = ann.get("seconds") or 0.0
    lines = [
        f"# csem run report: {cfg.name}", "",
        "## Data",
        f"- sources: {col.get('sources')} ({tr.get('train_sources')} for training, {tr.get('dev_sources')} dev, {tr.get('test_sources')} held out)",
        f"- candidates kept: {col.get('kept')} (generated {col.get('generated')}, resumed {col.get('resumed')}, "
        f"references {col.get('references')}, empty {col.get('empty')}, duplicates {col.get('duplicates')}, "
        f"cut at max_tokens {col.get('truncated', 'n/a')} (trimmed {col.get('trimmed', 'n/a')}, kept cut "
        f"{col.get('kept_cut', 'n/a')}), dropped {col.get('dropped')}) in {col.get('seconds') or 0:.1f} s",
        f"- per system: {col.get('per_system')}", "",
        "## Judge",
        f"- judge `{cfg.annotate.judge}`, rubrics {', '.join(cfg.annotate.rubrics)}, mode `{cfg.annotate.mode}`",
        f"- judgments made {judged}, from cache {ann.get('cached')}, missing {ann.get('missing')}, "
        f"prompt tokens {ann.get('prompt_tokens')}, completion tokens {ann.get('completion_tokens')}, {judge_seconds:.1f} s"
        + (f" ({judge_seconds / judged:.2f} s per judgment)" if judged else ""),
        *([] if cmp is None else [
            f"- comparison (compare stage): {cmp.get('pairs')} pairs of the {cmp.get('train_sources')} training "
            f"sources ({cfg.compare.pairs}), {cmp.get('calls')} judge calls (both orders; {cmp.get('judged')} made, "
            f"{cmp.get('cached')} from cache), missing {cmp.get('missing')}, mean P(first is better) "
            f"{cmp.get('position_bias')}, {cmp.get('seconds') or 0:.1f} s"]), "",
        "## Student",
        f"- encoder `{cfg.train.encoder}`, mode `{cfg.train.mode}`, trained on {tr.get('train_rows')} rows "
        f"in {state.get('train', {}).get('seconds', 0):.1f} s"
        + ("" if cmp is None else f", from the {cmp.get('pairs')} judged pairs (ranking loss, Eq. 3)"),
        f"- scoring throughput: {sc.get('samples_per_second', 0):.1f} samples/s ({sc.get('rows')} rows in {sc.get('seconds', 0):.2f} s)"
        + (f", {sc.get('samples_per_second', 0) * judge_seconds / judged:.0f}x the judge's rate in this run"
           if judged and judge_seconds else ""),
        "",
        "## Agreement on held-out sources",
        markdown_table(meta, AGREEMENT_COLUMNS, missing=""),
        "",
        "Summary level: correlation within each source's candidates, averaged over sources (sources where a side "
        "is constant are skipped and counted in n_skipped). Dataset level: all held-out pairs pooled. Kendall is tau-b. "
        f"spearman 95% CI: the percentile interval of the Spearman over {BOOTSTRAP:,} resamples of the held-out sources "
        "(sources drawn with replacement); with few sources it is wide, and a difference inside it is not evidence.",
        "",
    ]
    lines += _baseline_lines(run_dir)
    lines += _seed_lines(run_dir, cfg)
    lines += _rerank_lines(run_dir, cfg, state)
    lines += _mrt_lines(cfg, state)
    for title, p in figs:
        lines += [f"![{title}]({p.relative_to(run_dir)})", ""]
    md = "\n".join(lines)
    md_path = run_dir / "report.md"
    md_path.write_text(md, encoding="utf-8")
    body = []
    for line in lines:
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line.startswith("|"):
            continue
        elif line.startswith("!["):
            continue
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    cols = ["aspect", "scorer", "target", "level", "spearman", "kendall", "pearson", "n_groups", "n_skipped", "n_pairs"]
    table = _html_table(meta, AGREEMENT_COLUMNS)
    if (run_dir / BASELINES_FILE).exists():
        table += ("<h2>Trivial baselines on the same held-out sources</h2>"
                  + _html_table(json.loads((run_dir / BASELINES_FILE).read_text()), cols))
    seed_rows = _seed_rows(run_dir, cfg)
    if seed_rows:
        table += "<h2>Spread over training seeds</h2>" + _html_table(seed_rows, SEED_COLUMNS)
    rerank_rows, rerank_cols, _ = _rerank_table(run_dir, cfg, state)
    if rerank_cols:
        table += "<h2>Reranking: chosen candidate per source</h2>" + _html_table(rerank_rows, rerank_cols)
    imgs = "".join(f"<h3>{html.escape(t)}</h3><img src='data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}'/>"
                   for t, p in figs)
    page = ("<!doctype html><meta charset='utf-8'><title>csem report</title><style>body{font-family:sans-serif;"
            "max-width:960px;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}"
            "</style>" + "\n".join(body) + "<h2>Agreement table</h2>" + table + imgs)
    html_path = run_dir / "report.html"
    html_path.write_text(page, encoding="utf-8")
    return [md_path, html_path, *[p for _, p in figs]]
