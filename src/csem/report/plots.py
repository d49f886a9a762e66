"""Figures of a meta-evaluation (matplotlib, Agg backend: no display needed).

* [`plot_correlations`][csem.report.plots.plot_correlations]: grouped bars, one group per aspect, one bar per metric, with
  bootstrap CI whiskers; the figure a person looks at instead of the table.
* [`plot_scatter`][csem.report.plots.plot_scatter]: metric score against human score for one aspect (jittered, one colour
  per system), with the dataset-level correlation in the title.
* [`plot_training_curve`][csem.report.plots.plot_training_curve]: dev correlation per training epoch (the run report's figure).
* [`plot_scaling_curve`][csem.report.plots.plot_scaling_curve]: correlation against the number of training labels (mean ± sd over
  seeds, a log-linear fit, trivial baselines as lines): the CSEM paper's Fig. 3 question.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from csem.errors import InputError
from csem.report.tables import METHOD_SYMBOL

LEVEL_TITLE = {"summary": "summary-level (per document, averaged)", "system": "system-level",
               "dataset": "dataset-level (pooled)"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_correlations(df: pd.DataFrame, path: str | Path, *, level: str = "summary", method: str = "spearman",
                      title: str | None = None, ylabel: str | None = None) -> Path:
    """Bar chart of correlations per aspect and metric with CI whiskers; writes a PNG.

    Args:
        df: long table of `csem.meta.evaluate` (needs ``value``, ``ci_low``, ``ci_high``).
        path: output file (.png). level, method: which slice to draw. ylabel: the y axis (default:
            ``<method> <symbol> with human``).

    Returns:
        ``path``.

    Raises:
        ValueError: no rows for (level, method).
    """
    plt = _pyplot()
    sub = df[(df["level"] == level) & (df["method"] == method)]
    if sub.empty:
        raise InputError(f"no correlations for level={level!r}, method={method!r}")
    aspects = list(dict.fromkeys(sub["aspect"]))
    metrics = list(dict.fromkeys(sub["metric"]))
    width = 0.8 / max(len(metrics), 1)
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 2.0 + 0.35 * len(aspects) * len(metrics))), 4.2))
    cmap = plt.get_cmap("tab10" if len(metrics) <= 10 else "tab20")
    x = np.arange(len(aspects))
    for j, m in enumerate(metrics):
        vals, lo, hi = [], [], []
        for a in aspects:
            row = sub[(sub["metric"] == m) & (sub["aspect"] == a)]
            v = float(row["value"].iloc[0]) if len(row) else math.nan
            vals.append(v)
            lo.append(float(row["ci_low"].iloc[0]) if len(row) else math.nan)
            hi.append(float(row["ci_high"].iloc[0]) if len(row) else math.nan)
        vals_a, lo_a, hi_a = np.array(vals), np.array(lo), np.array(hi)
        pos = x - 0.4 + width * (j + 0.5)
        ax.bar(pos, np.nan_to_num(vals_a), width * 0.92, label=m, color=cmap(j % cmap.N))
        has_ci = ~(np.isnan(lo_a) | np.isnan(hi_a) | np.isnan(vals_a))
        if has_ci.any():
            yerr = np.vstack([vals_a[has_ci] - lo_a[has_ci], hi_a[has_ci] - vals_a[has_ci]])
            ax.errorbar(pos[has_ci], vals_a[has_ci], yerr=np.clip(yerr, 0, None), fmt="none", ecolor="black",
                        elinewidth=1, capsize=2)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels(aspects)
    ax.set_ylabel(ylabel or f"{method} {METHOD_SYMBOL.get(method, '')} with human")
    has_any_ci = sub["ci_low"].notna().any()
    ax.set_title(title or f"{LEVEL_TITLE.get(level, level)} correlation"
                 + (" with 95% bootstrap CI" if has_any_ci else ""), fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, ncol=min(len(metrics), 4), loc="upper left", bbox_to_anchor=(0, -0.1), frameon=False)
    return save_figure(fig, path)


def plot_scatter(records: Sequence[Mapping], metric: str, human: str, path: str | Path, *,
                 jitter: float = 0.06, seed: int = 0, title: str | None = None) -> Path:
    """Scatter of ``metric`` (y) against ``human`` (x) over all records with both present.

    Human scores are jittered horizontally by ``jitter`` (they are discrete means), and metric
    scores vertically when they take at most 12 values (a 1-5 judge), so that overlapping points
    stay visible; one colour per ``system_id`` when there are at most 20 systems; a black line
    joins the mean metric score at each human score value. The title gives the pooled Spearman
    rho and Kendall tau-b (on the unjittered scores) and the pair count.

    Returns:
        ``path``.

    Raises:
        ValueError: fewer than 2 complete pairs.
    """
    from scipy import stats

    plt = _pyplot()
    pairs = [(r.get(human), r.get(metric), r.get("system_id")) for r in records]
    pairs = [(float(h), float(m), s) for h, m, s in pairs if h is not None and m is not None
             and not (math.isnan(float(h)) or math.isnan(float(m)))]
    if len(pairs) < 2:
        raise InputError(f"fewer than 2 records with both '{metric}' and '{human}'")
    h = np.array([p[0] for p in pairs])
    m = np.array([p[1] for p in pairs])
    systems = [p[2] for p in pairs]
    rng = np.random.default_rng(seed)
    span = (h.max() - h.min()) or 1.0
    hj = h + rng.uniform(-jitter, jitter, len(h)) * span / 4
    discrete = len(np.unique(m)) <= 12  # e.g. a 1-5 judge: jitter vertically too
    mspan = (m.max() - m.min()) or 1.0
    mj = m + rng.uniform(-jitter, jitter, len(m)) * mspan / 4 if discrete else m
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    uniq = list(dict.fromkeys(s for s in systems if s is not None))
    if 1 < len(uniq) <= 20:
        cmap = plt.get_cmap("tab20")
        for k, s in enumerate(uniq):
            idx = [i for i, x in enumerate(systems) if x == s]
            ax.scatter(hj[idx], mj[idx], s=10, alpha=0.6, color=cmap(k % 20), label=str(s), linewidths=0)
        ax.legend(fontsize=7, ncol=2, title="system", title_fontsize=7, loc="center left",
                  bbox_to_anchor=(1.01, 0.5), frameon=False)
    else:
        ax.scatter(hj, mj, s=10, alpha=0.5, linewidths=0)
    # mean metric score per human score value: the trend a reader looks for
    levels = np.unique(h)
    if len(levels) <= 40:
        ax.plot(levels, [m[h == v].mean() for v in levels], color="black", linewidth=1.5, marker="o",
                markersize=3, label="mean per human value")
    rho = stats.spearmanr(h, m).statistic
    tau = stats.kendalltau(h, m).statistic
    ax.set_xlabel(f"{human} (jittered)")
    ax.set_ylabel(metric + (" (jittered)" if discrete else ""))
    ax.set_title(title or f"{metric} vs {human}: dataset-level ρ = {rho:.3f}, τ-b = {tau:.3f}, n = {len(h)}",
                 fontsize=10)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def plot_training_curve(history: Sequence[Mapping], path: str | Path, *, methods: Sequence[str] = ("kendall", "spearman", "pearson"),
                        title: str = "training: dev correlation with the labels") -> Path:
    """Dev correlation per epoch (mean over aspects, one line per method); writes a PNG.

    Args:
        history: the metric card's ``validation_history``: one dict per epoch with ``epoch`` and
            ``mean`` = ``{method: value}`` (see `csem.model.validation.dev_correlations`).
        path: output file (.png). methods: which lines; title: the figure title.

    Returns:
        ``path``.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    epochs = [h.get("epoch") for h in history]
    for method in methods:
        ax.plot(epochs, [(h.get("mean") or {}).get(method) for h in history], marker="o",
                label=f"dev {METHOD_SYMBOL.get(method, method)}")
    ax.set_xlabel("epoch")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def plot_scaling_curve(curves: Mapping[str, Sequence[Mapping]], path: str | Path, *,
                       baselines: Mapping[str, float] | None = None, fit: Mapping | None = None,
                       ylabel: str = "summary-level Spearman", title: str = "student vs teacher as labels grow",
                       band: tuple[float, float, str] | None = None) -> Path:
    """Correlation against training labels (log x axis); writes a PNG.

    Args:
        curves: name -> points ``{"labels": int, "spearman": float | None, "sd": float | None}`` (mean and
            sample sd over seeds; a point without a value is left out), one line with error bars each.
        path: output file (.png).
        baselines: name -> a correlation that does not depend on the labels' number, drawn as a dashed
            horizontal line (e.g. length, extractiveness against the same target).
        fit: ``{"a", "b"}`` of ``value = a + b ln(labels)`` (drawn over the curves' label range, dotted).
        band: ``(low, high, label)``: a horizontal band (e.g. the judge's attenuation bound ``sqrt(r)``
            over its interval), shaded.
        ylabel, title: axis label and title.

    Returns:
        ``path``.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    xs_all: list[float] = []
    for name, points in curves.items():
        pts = [p for p in points if p.get("spearman") is not None]
        if not pts:
            continue
        x = [p["labels"] for p in pts]
        xs_all += x
        ax.errorbar(x, [p["spearman"] for p in pts], yerr=[p.get("sd") or 0.0 for p in pts], marker="o",
                    capsize=3, label=name)
    if fit and xs_all:
        grid = np.geomspace(min(xs_all), max(xs_all), 50)
        ax.plot(grid, fit["a"] + fit["b"] * np.log(grid), ":", color="black",
                label=f"fit {fit['a']:.3f} + {fit['b']:.3f} ln(labels)")
    for k, (name, value) in enumerate((baselines or {}).items()):
        if value is not None and not math.isnan(value):
            ax.axhline(value, linestyle="--", linewidth=1, color=f"C{(k + 3) % 10}", label=name)
    if band is not None:
        ax.axhspan(band[0], band[1], color="tab:green", alpha=0.15, label=band[2])
    ax.set_xscale("log")
    ax.set_xlabel("training labels")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def plot_student_vs_judge(records: Sequence[Mapping], student: str, judge: str, path: str | Path, *,
                          scale: tuple[float, float] | None = None, title: str | None = None) -> Path:
    """The student against the judge on held-out candidates: a scatter (one point per candidate, one colour
    per ``system_id``, the diagonal ``student = judge``) and, beside it, the summary-level Spearman of every
    source (one point per source, their mean dashed); writes a PNG.

    Args:
        records: held-out records with both columns (``doc_id``, ``system_id``). student, judge: the columns.
        path: output file (.png). scale: the label scale ``(min, max)`` for both axes (default: the data's).
        title: the figure's title.

    Returns:
        ``path``.

    Raises:
        ValueError: fewer than 2 records with both scores.
    """
    from csem.meta.correlation import ScoreTable, per_document

    plt = _pyplot()
    rows = [r for r in records if r.get(student) is not None and r.get(judge) is not None]
    if len(rows) < 2:
        raise InputError(f"fewer than 2 records with both '{student}' and '{judge}'")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.6, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    systems = list(dict.fromkeys(str(r.get("system_id")) for r in rows))
    cmap = plt.get_cmap("tab10" if len(systems) <= 10 else "tab20")
    for k, s in enumerate(systems):
        sub = [r for r in rows if str(r.get("system_id")) == s]
        ax.scatter([r[judge] for r in sub], [r[student] for r in sub], s=22, alpha=0.8, color=cmap(k % cmap.N),
                   label=s, linewidths=0)
    lo, hi = scale or (min(min(r[judge], r[student]) for r in rows), max(max(r[judge], r[student]) for r in rows))
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1, label="student = judge")
    ax.set_xlim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    ax.set_xlabel(judge)
    ax.set_ylabel(student)
    ax.legend(fontsize=7, title="system", title_fontsize=7, loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    table = ScoreTable.build([r[student] for r in rows], [r[judge] for r in rows], [r.get("doc_id") for r in rows])
    per = per_document(table, "spearman")
    docs = [(str(d), v) for d, v in zip(table.doc_keys, per) if not np.isnan(v)]
    docs.sort(key=lambda t: t[1])
    bx.scatter([v for _, v in docs], range(len(docs)), color="black", s=18, zorder=3)
    if docs:
        bx.axvline(float(np.mean([v for _, v in docs])), color="tab:blue", linestyle="--", linewidth=1,
                   label=f"mean {np.mean([v for _, v in docs]):.2f}")
        bx.legend(fontsize=7, frameon=False, loc="lower right")
    bx.axvline(0, color="black", linewidth=0.6)
    bx.set_yticks(range(len(docs)))
    bx.set_yticklabels([d[:18] for d, _ in docs], fontsize=7)
    bx.set_xlim(-1.05, 1.05)
    bx.set_xlabel("Spearman within the source")
    bx.grid(axis="x", alpha=0.3)
    fig.suptitle(title or f"{student} vs {judge}", fontsize=10)
    return save_figure(fig, path)


def plot_bars(groups: Mapping[str, Sequence[Mapping]], path: str | Path, *, ylabel: str, title: str,
              highlight: str | None = None) -> Path:
    """Horizontal bars with 95% interval whiskers, one panel per group (e.g. per aspect); writes a PNG.

    Args:
        groups: ``{group: [{"name", "value", "ci": [low, high] | None}]}``; bars in the order given.
        path: output file (.png). ylabel: the value axis; title: the figure title.
        highlight: the bar name drawn in a strong colour (the student), others grey.

    Returns:
        ``path``.
    """
    plt = _pyplot()
    n = max(len(groups), 1)
    height = max(len(v) for v in groups.values()) if groups else 1
    fig, axes = plt.subplots(1, n, figsize=(4.6 * n, 0.5 * height + 1.6), squeeze=False)
    for ax, (g, bars) in zip(axes[0], groups.items()):
        names = [b["name"] for b in bars]
        vals = np.array([np.nan if b.get("value") is None else b["value"] for b in bars], dtype=float)
        y = np.arange(len(bars))[::-1]
        ax.barh(y, np.nan_to_num(vals), color=["tab:blue" if nm == highlight else "lightgrey" for nm in names])
        for yy, b, v in zip(y, bars, vals):
            if b.get("ci") and not np.isnan(v):
                ax.errorbar(v, yy, xerr=[[max(v - b["ci"][0], 0)], [max(b["ci"][1] - v, 0)]], fmt="none",
                            ecolor="black", capsize=3, elinewidth=1)
        ax.set_yticks(y)
        ax.set_yticklabels(names, fontsize=8)
        ax.axvline(0, color="black", linewidth=0.6)
        ax.set_xlim(-1, 1)
        ax.set_xlabel(ylabel)
        ax.set_title(g, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def plot_gains(rows: Sequence[Mapping], columns: Sequence[str], path: str | Path, *, title: str) -> Path:
    """The reranking gain per source: for each source, the judge's score of the chosen candidate minus
    the mean of its N-best list (one bar per judge column); writes a PNG.

    Args:
        rows: one dict per source with ``doc_id`` and ``<column>.gain`` (floats or None).
        columns: the judge columns. path: output file (.png). title: the figure title.

    Returns:
        ``path``.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.55 * len(rows) + 2.0), 3.6))
    x = np.arange(len(rows))
    width = 0.8 / max(len(columns), 1)
    for j, c in enumerate(columns):
        vals = [np.nan if r.get(f"{c}.gain") is None else float(r[f"{c}.gain"]) for r in rows]
        ax.bar(x - 0.4 + width * (j + 0.5), np.nan_to_num(vals), width * 0.9, label=c, color=f"C{j}")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels([str(r.get("doc_id"))[:14] for r in rows], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("judge score: chosen - N-best mean")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def figure_marks(fig) -> dict:
    """What a figure draws, from its artists: ``{"points": scatter points, "longest_line": the most points
    of any line}`` (a scatter plot has many points; a line through the data has a long line)."""
    from matplotlib.collections import PathCollection

    points, longest = 0, 0
    for ax in fig.axes:
        points += sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
        longest = max([longest, *(len(line.get_xdata()) for line in ax.lines)])
    return {"points": points, "longest_line": longest}


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, write (PNG, 130 dpi) and close a matplotlib figure; create the folder; return the path.
    The PNG's ``Description`` text field records `figure_marks` as JSON."""
    import json

    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight", metadata={"Description": json.dumps(figure_marks(fig))})
    plt.close(fig)
    return path
