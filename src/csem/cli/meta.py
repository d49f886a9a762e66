"""``csem meta-eval``: correlate metric/judge scores with human judgments and print the papers' table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from csem.cli import app, fail, parse_pairs

ALL_LEVELS = ("summary", "system", "dataset")


def _split(values: Optional[list[str]]) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def _clean(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def _print_pivot(console, pivot, title: str, to_rich) -> None:
    """The whole table when it fits the terminal, else one table per correlation method."""
    width = 4 + max(len(str(i)) for i in pivot.index) + 9 * len(pivot.columns)
    if width <= console.width:
        console.print(to_rich(pivot, title=title))
        return
    console.print(title)
    for method in dict.fromkeys(m for _, m in pivot.columns):
        sub = pivot.loc[:, [c for c in pivot.columns if c[1] == method]]
        console.print(to_rich(sub, title=f"{method}"))


def _print_comparison(console, comparison, a: str, b: str, n: int) -> None:
    from rich.table import Table

    first = comparison.iloc[0]
    t = Table(title=f"paired {first['test']} test ({first['method']}, {n} resamples): {a} better than {b}?",
              caption="one-sided p over documents (Koehn 2004; Deutsch et al. 2021)")
    for c in ("aspect", "level", "A", "B", "delta", "95% CI of delta", "p"):
        t.add_column(c, justify="left" if c in ("aspect", "level") else "right")
    for _, r in comparison.iterrows():
        t.add_row(r["aspect"], r["level"], f"{r['value_a']:.3f}", f"{r['value_b']:.3f}", f"{r['delta']:+.3f}",
                  f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]",
                  f"< {1 / n:.2g}" if r["p_value"] == 0 else f"{r['p_value']:.3f}")
    console.print(t)


@app.command("meta-eval")
def meta_eval(
    data: str = typer.Option(..., "--data", help="records file with human.<aspect> columns, or a dataset name "
                             "(summeval, topical_chat, newsroom, realsumm, qags, wmt21-mqm, wmt23-da, ...)"),
    data_path: Optional[Path] = typer.Option(None, "--data-path", help="local copy of the named dataset "
                                             "(default: $CSEM_DATA or ../shared/data)"),
    data_option: Optional[list[str]] = typer.Option(None, "--data-option", help="KEY=VALUE passed to the dataset "
                                                    "loader, e.g. judge=gpt-3.5-turbo-0301 method=mcq (repeatable)"),
    pred: Optional[list[str]] = typer.Option(None, "--pred", help="prediction file(s) with metric.*/judge.* "
                                             "columns and the data's id (comma-separated or repeated)"),
    baseline: Optional[list[str]] = typer.Option(None, "--baseline", help="compute baselines on the fly: "
                                                 "rouge1,rouge2,rougeL,rougeLsum,bleu,chrf,bertscore"),
    multi_ref: str = typer.Option("max", "--multi-ref", help="ROUGE with several references: max (rouge-score) "
                                  "or mean (Perl ROUGE -f A, the SummEval convention)"),
    metric: Optional[list[str]] = typer.Option(None, "--metric", help="score columns to evaluate "
                                               "(default: every metric.* and judge.* column)"),
    aspect: Optional[list[str]] = typer.Option(None, "--aspect", help="human aspects to use (default: all)"),
    level: str = typer.Option("all", "--level", help="summary | system | dataset | all"),
    method: str = typer.Option("spearman,kendall,pearson", "--method",
                               help="comma-separated: spearman, kendall (tau-b), kendall_c, pearson"),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="bootstrap resamples of documents for CIs (0 = none)"),
    seed: int = typer.Option(0, "--seed"),
    compare: Optional[str] = typer.Option(None, "--compare", help="A,B: paired bootstrap test that metric A "
                                          "correlates better than B (row names of the table), per aspect and level"),
    out: Optional[Path] = typer.Option(None, "--out", help="write PREFIX.csv (long table) and PREFIX.json"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="folder for PNG figures"),
    plot_aspect: Optional[str] = typer.Option(None, "--plot-aspect", help="aspect of the scatter plot"),
    plot_metric: Optional[str] = typer.Option(None, "--plot-metric", help="score column of the scatter plot"),
) -> None:
    """Correlate metric/judge scores with human judgments at summary, system and dataset level.

    Prints one table per level (rows: metrics; columns: aspect x Spearman/Kendall tau-b/Pearson,
    and their average over aspects), as in G-Eval Table 1 and the CSEM paper.
    """
    from rich.console import Console

    from csem.baselines import compute_baselines
    from csem.data.records import check_output_path
    from csem.meta import correlation_table, evaluate
    from csem.data.columns import aspect_of, format_column, score_columns
    from csem.meta.inputs import PREDICTION_KINDS, join_predictions, load_data
    from csem.report import plot_correlations, plot_scatter, to_rich

    console = Console()
    levels = list(ALL_LEVELS) if level == "all" else _split([level])
    bad = [lv for lv in levels if lv not in ALL_LEVELS]
    if bad:
        raise typer.BadParameter(f"unknown level(s) {bad}; use summary, system, dataset or all", param_hint="--level")
    methods = _split([method])
    if out is not None:  # the output paths are checked before any work
        check_output_path(out.with_name(out.name + ".csv"))
    if plot is not None:
        check_output_path(plot, kind="folder")
    options = {k.replace("-", "_"): int(v) if v.isdigit() else v
               for k, v in parse_pairs(data_option, "--data-option", "judge=gpt-3.5-turbo-0301").items()}
    records = load_data(data, path=data_path, **options)
    join_predictions(records, _split(pred))
    names = _split(baseline)
    if names:
        with console.status(f"computing baselines {names} on {len(records)} records"):
            compute_baselines(records, names, multi_ref=multi_ref)
    humans = score_columns(records, ("human",))
    wanted = _split(aspect)
    if wanted:
        missing = [a for a in wanted if f"human.{a}" not in humans]
        if missing:
            raise fail(f"aspect(s) {missing} not in the data; aspects: {[aspect_of(h) for h in humans]}")
        humans = [format_column("human", a) for a in wanted]
    metrics = _split(metric) or score_columns(records, PREDICTION_KINDS)
    if not metrics:
        raise fail("nothing to evaluate: give --pred files, --baseline names or a data file "
                   "with metric.*/judge.* columns")
    with console.status(f"correlating {len(metrics)} score column(s) with {len(humans)} aspect(s)"):
        df = evaluate(records, metrics, humans, levels=levels, methods=methods, bootstrap=bootstrap, seed=seed)
    pivots = {}
    for lv in levels:
        pivots[lv] = correlation_table(df, lv)
        sub = df[df["level"] == lv]
        note = (f"{lv}-level, {len(records)} records, "
                f"groups used {int(sub['n_groups'].min())}-{int(sub['n_groups'].max())}, "
                f"skipped {int(sub['n_skipped'].min())}-{int(sub['n_skipped'].max())}, "
                f"missing pairs {int(sub['n_missing'].max())}; Kendall = tau-b")
        _print_pivot(console, pivots[lv], note, to_rich)
    comparison = None
    if compare:
        from csem.meta import compare as compare_metrics

        pair = _split([compare])
        if len(pair) != 2:
            raise fail(f"--compare needs two row names A,B, got {compare!r}")
        comparison = compare_metrics(records, df, pair[0], pair[1], levels=levels, method=methods[0],
                                     n=bootstrap or 1000, seed=seed)
        _print_comparison(console, comparison, pair[0], pair[1], bootstrap or 1000)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out.with_name(out.name + ".csv"), index=False)
        payload = {
            "data": str(data), "pred": _split(pred), "baselines": _split(baseline), "levels": levels,
            "methods": methods, "bootstrap": bootstrap, "seed": seed, "n_records": len(records),
            "kendall": "tau-b",
            "rows": [{k: _clean(v) for k, v in row.items()} for row in df.to_dict(orient="records")],
            "tables": {lv: {str(m): {f"{a}/{meth}": _clean(float(v)) for (a, meth), v in row.items()}
                            for m, row in p.iterrows()} for lv, p in pivots.items()},
            "comparison": None if comparison is None else
            [{k: _clean(v) for k, v in row.items()} for row in comparison.to_dict(orient="records")],
        }
        out.with_name(out.name + ".json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
        console.print(f"wrote {out}.csv and {out}.json")
    if plot is not None:
        written = []
        meth0 = methods[0]
        for lv in levels:
            written.append(plot_correlations(df, plot / f"correlations_{lv}_{meth0}.png", level=lv, method=meth0))
        h = format_column("human", plot_aspect) if plot_aspect else humans[0]
        m = plot_metric or next((c for c in metrics if aspect_of(c) == aspect_of(h)), metrics[0])
        written.append(plot_scatter(records, m, h, plot / f"scatter_{m.replace('/', '_')}_{h}.png"))
        console.print("wrote " + ", ".join(str(p) for p in written))
