"""``csem meta-eval``: correlate metric/judge scores with human judgments and print the papers' table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from csem.cli import app, fail, parse_pairs

def _split(values: Optional[list[str]]) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


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

    from csem.data.records import check_output_path
    from csem.meta import evaluate
    from csem.meta.correlation import LEVELS, level_name

    console = Console()
    try:
        levels = list(LEVELS) if level == "all" else list(dict.fromkeys(level_name(lv) for lv in _split([level])))
    except ValueError:
        raise typer.BadParameter(f"unknown level(s) in {level!r}; use summary, system, dataset or all",
                                 param_hint="--level") from None
    methods = _split([method])
    if out is not None:  # the output paths are checked before any work
        check_output_path(out.with_name(out.name + ".csv"))
    if plot is not None:
        check_output_path(plot, kind="folder")
    records = _load_records(console, data, data_path, data_option, _split(pred), _split(baseline), multi_ref)
    humans, metrics = _columns(records, _split(aspect), _split(metric))
    with console.status(f"correlating {len(metrics)} score column(s) with {len(humans)} aspect(s)"):
        df = evaluate(records, metrics, humans, levels=levels, methods=methods, bootstrap=bootstrap, seed=seed)
    tables = _print_tables(console, df, levels, len(records))
    comparison = _compare(console, records, df, compare, levels, methods[0], bootstrap, seed) if compare else None
    if out is not None:
        _write_outputs(console, out, df, tables, comparison,
                       {"data": str(data), "pred": _split(pred), "baselines": _split(baseline), "levels": levels,
                        "methods": methods, "bootstrap": bootstrap, "seed": seed, "n_records": len(records),
                        "kendall": "tau-b"})
    if plot is not None:
        _write_plots(console, plot, records, df, levels, methods[0], humans, metrics, plot_aspect, plot_metric)


# ---------------------------------------------------------------------------------------------- its steps

def _load_records(console, data: str, data_path: Optional[Path], data_option: Optional[list[str]],
                  pred: list[str], baseline: list[str], multi_ref: str) -> list[dict]:
    """The human-judgment records with the prediction files joined on and the baselines computed."""
    from csem.baselines import compute_baselines
    from csem.meta.inputs import join_predictions, load_data

    options = {k.replace("-", "_"): int(v) if v.isdigit() else v
               for k, v in parse_pairs(data_option, "--data-option", "judge=gpt-3.5-turbo-0301").items()}
    records = load_data(data, path=data_path, **options)
    join_predictions(records, pred)
    if baseline:
        with console.status(f"computing baselines {baseline} on {len(records)} records"):
            compute_baselines(records, baseline, multi_ref=multi_ref)
    return records


def _columns(records: list[dict], aspects: list[str], metrics: list[str]) -> tuple[list[str], list[str]]:
    """(human columns, score columns) to correlate; ``fail`` when an aspect is unknown or nothing is scored."""
    from csem.data.columns import aspect_of, format_column, score_columns
    from csem.meta.inputs import PREDICTION_KINDS

    humans = score_columns(records, ("human",))
    if aspects:
        missing = [a for a in aspects if f"human.{a}" not in humans]
        if missing:
            raise fail(f"aspect(s) {missing} not in the data; aspects: {[aspect_of(h) for h in humans]}")
        humans = [format_column("human", a) for a in aspects]
    metrics = metrics or score_columns(records, PREDICTION_KINDS)
    if not metrics:
        raise fail("nothing to evaluate: give --pred files, --baseline names or a data file "
                   "with metric.*/judge.* columns")
    return humans, metrics


def _print_tables(console, df, levels: list[str], n_records: int) -> dict:
    """Print the papers' table of every level; return them by level."""
    from csem.meta import correlation_table
    from csem.report import to_rich

    tables = {}
    for lv in levels:
        tables[lv] = correlation_table(df, lv)
        sub = df[df["level"] == lv]
        note = (f"{lv}-level, {n_records} records, "
                f"groups used {int(sub['n_groups'].min())}-{int(sub['n_groups'].max())}, "
                f"skipped {int(sub['n_skipped'].min())}-{int(sub['n_skipped'].max())}, "
                f"missing pairs {int(sub['n_missing'].max())}; Kendall = tau-b")
        _print_pivot(console, tables[lv], note, to_rich)
    return tables


def _compare(console, records, df, compare: str, levels: list[str], method: str, bootstrap: int, seed: int):
    """Paired tests of ``--compare A,B``; printed and returned (DataFrame)."""
    from csem.meta import compare as compare_metrics

    pair = _split([compare])
    if len(pair) != 2:
        raise fail(f"--compare needs two row names A,B, got {compare!r}")
    comparison = compare_metrics(records, df, pair[0], pair[1], levels=levels, method=method,
                                 n=bootstrap or 1000, seed=seed)
    _print_comparison(console, comparison, pair[0], pair[1], bootstrap or 1000)
    return comparison


def _write_outputs(console, out: Path, df, tables: dict, comparison, settings: dict) -> None:
    """``OUT.csv`` (the long table) and ``OUT.json`` (settings, rows, tables, comparison; NaN -> null)."""
    from csem.data.jsonio import write_json

    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out.with_name(out.name + ".csv"), index=False)
    write_json(out.with_name(out.name + ".json"), {
        **settings,
        "rows": df.to_dict(orient="records"),
        "tables": {lv: {str(m): {f"{a}/{meth}": float(v) for (a, meth), v in row.items()} for m, row in p.iterrows()}
                   for lv, p in tables.items()},
        "comparison": None if comparison is None else comparison.to_dict(orient="records"),
    }, indent=1)
    console.print(f"wrote {out}.csv and {out}.json")


def _write_plots(console, plot: Path, records, df, levels, method: str, humans, metrics,
                 plot_aspect: Optional[str], plot_metric: Optional[str]) -> None:
    """Bar charts per level and one scatter plot (metric vs human) into the ``--plot`` folder."""
    from csem.data.columns import aspect_of, format_column
    from csem.data.filenames import path_in
    from csem.report import plot_correlations, plot_scatter

    written = [plot_correlations(df, path_in(plot, "correlations", lv, method, suffix=".png"), level=lv, method=method)
               for lv in levels]
    h = format_column("human", plot_aspect) if plot_aspect else humans[0]
    m = plot_metric or next((c for c in metrics if aspect_of(c) == aspect_of(h)), metrics[0])
    written.append(plot_scatter(records, m, h, path_in(plot, "scatter", m, h, suffix=".png")))
    console.print("wrote " + ", ".join(str(p) for p in written))
