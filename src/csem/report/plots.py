"""Figures of a meta-evaluation (matplotlib, Agg backend: no display needed).

* :func:`plot_correlations`: grouped bars, one group per aspect, one bar per metric, with
  bootstrap CI whiskers; the figure a person looks at instead of the table.
* :func:`plot_scatter`: metric score against human score for one aspect (jittered, one colour
  per system), with the dataset-level correlation in the title.
* :func:`plot_training_curve`: dev correlation per training epoch (the run report's figure).
* :func:`plot_scaling_curve`: correlation against the number of training labels (mean ± sd over
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
                      title: str | None = None) -> Path:
    """Bar chart of correlations per aspect and metric with CI whiskers; writes a PNG.

    Args:
        df: long table of :func:`csem.meta.evaluate` (needs ``value``, ``ci_low``, ``ci_high``).
        path: output file (.png). level, method: which slice to draw.

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
    ax.set_ylabel(f"{method} {METHOD_SYMBOL.get(method, '')} with human")
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
            ``mean`` = ``{method: value}`` (see :func:`csem.model.validation.dev_correlations`).
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
                       ylabel: str = "summary-level Spearman", title: str = "student vs teacher as labels grow") -> Path:
    """Correlation against training labels (log x axis); writes a PNG.

    Args:
        curves: name -> points ``{"labels": int, "spearman": float | None, "sd": float | None}`` (mean and
            sample sd over seeds; a point without a value is left out), one line with error bars each.
        path: output file (.png).
        baselines: name -> a correlation that does not depend on the labels' number, drawn as a dashed
            horizontal line (e.g. length, extractiveness against the same target).
        fit: ``{"a", "b"}`` of ``value = a + b ln(labels)`` (drawn over the curves' label range, dotted).
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
    ax.set_xscale("log")
    ax.set_xlabel("training labels")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, write (PNG, 130 dpi) and close a matplotlib figure; create the folder; return the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path
