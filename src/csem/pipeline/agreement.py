"""How well the student agrees with its teacher judge (and both with humans) on held-out sources.

For every aspect: the student's score column ``metric.<name>.<aspect>`` against the judge's
``judge.<aspect>`` and, where present, against ``human.<aspect>``; the judge against the humans
too. Spearman, Kendall tau-b and Pearson at summary level (per source, averaged) and dataset level
(pooled), from the one evaluator, [`csem.meta.correlation.correlations`][]; and the spread of
those figures over students trained with different seeds (`seed_spread`); and the same
figures for the trivial baselines that could explain a student (`baseline_rows`).
"""

from __future__ import annotations

import math
import statistics

from csem.data.columns import format_column, parse_column, score_columns
from csem.errors import MissingInputError
from csem.meta.bootstrap import bootstrap_ci
from csem.meta.correlation import METHODS, correlations

#: resamples of the held-out sources behind each agreement figure's 95% interval in a run's ``meta.json``
#: (``spearman_ci``; the pipeline's meta_eval stage passes it to `agreement_table`)
BOOTSTRAP = 1000


def aspect_of(col: str) -> str:
    """``judge.coherence`` -> ``coherence`` (a name outside the column grammar is its own aspect)."""
    c = parse_column(col)
    return c.aspect if c is not None and c.aspect else col


def student_col(records: list[dict], aspect: str) -> str:
    """The student's own score column for an aspect: ``metric.<name>.<aspect>@student`` where a
    cascade wrote one (its untagged ``metric.<name>.<aspect>`` is then the combined score, which holds
    the judge's scores on the deferred rows and is never measured against the judge's labels), else
    ``metric.<name>.<aspect>`` (untagged). Every agreement figure of a run (meta-eval, curve, verdict,
    seeds, rerank, the report's plots) reads the student through this function.

    Raises:
        MissingInputError: no such column in ``records``.
    """
    from csem.apply.cascade import STUDENT

    plain = None
    for k in score_columns(records, ("metric",)):
        c = parse_column(k)
        if c.aspect == aspect and c.tag == STUDENT:
            return k
        if c.aspect == aspect and c.tag is None and plain is None:
            plain = k
    if plain is None:
        raise MissingInputError(f"no student score column metric.<name>.{aspect} in the scored records")
    return plain


def agreement_table(records: list[dict], label_cols: list[str], *, human_cols: list[str] = (),
                    levels: tuple[str, ...] = ("summary", "dataset"), bootstrap: int = 0,
                    seed: int = 0) -> list[dict]:
    """Rows ``{aspect, scorer, target, level, spearman, kendall, pearson, n_groups, n_skipped,
    n_pairs, n_missing}`` for the student vs judge, student vs human and judge vs human.

    Args:
        bootstrap: with ``n`` > 0, each row also gets ``spearman_ci``: ``[low, high]``, the 95%
            percentile interval of its Spearman over ``n`` resamples of the sources (documents drawn
            with replacement, [`csem.meta.bootstrap_ci`][]; Deutsch, Dror & Roth 2021, "A Statistical
            Analysis of Summarization Evaluation Metrics Using Resampling Methods"), None where no
            resample gives a defined value. With a handful of held-out sources this interval, not the
            point estimate, says what the figure can tell apart. ``seed``: the resampling seed (same
            seed, same interval).

    Raises:
        KeyError: a label column has no matching student column.
    """
    rows = []
    groups = [r.get("doc_id") for r in records]
    for label in label_cols:
        aspect = aspect_of(label)
        pairs = [("student", student_col(records, aspect), "judge", label)]
        human = format_column("human", aspect)
        if human in human_cols or any(r.get(human) is not None for r in records):
            pairs += [("student", student_col(records, aspect), "human", human), ("judge", label, "human", human)]
        for scorer, xcol, target, ycol in pairs:
            x, y = [r.get(xcol) for r in records], [r.get(ycol) for r in records]
            new = _rows(aspect, scorer, target, x, y, groups, levels)
            rows += _add_ci(new, x, y, groups, bootstrap, seed)
    return rows


def scorer_rows(aspect: str, scorer: str, target: str, x: list, y: list, groups: list, *,
                levels: tuple[str, ...] = ("summary", "dataset"), bootstrap: int = 0, seed: int = 0) -> list[dict]:
    """`agreement_table`'s rows (one per level) for any scorer's values ``x`` against a target's
    values ``y`` of the same records (``groups``: each record's source), with ``spearman_ci`` when
    ``bootstrap`` > 0."""
    return _add_ci(_rows(aspect, scorer, target, x, y, groups, levels), x, y, groups, bootstrap, seed)


def _add_ci(rows: list[dict], x: list, y: list, groups: list, bootstrap: int, seed: int) -> list[dict]:
    """``rows`` with ``spearman_ci`` (the 95% interval over ``bootstrap`` resampled sources) when
    ``bootstrap`` > 0."""
    for row in rows if bootstrap > 0 else ():
        ci = bootstrap_ci(x, y, level=row["level"], method="spearman", groups=groups, n=bootstrap, seed=seed)
        row["spearman_ci"] = None if math.isnan(ci.low) or math.isnan(ci.high) else [round(ci.low, 4), round(ci.high, 4)]
    return rows


def _rows(aspect: str, scorer: str, target: str, x: list, y: list, groups: list, levels: tuple[str, ...]) -> list[dict]:
    """One agreement row per level: ``x`` (the scorer's values) against ``y`` (the target's)."""
    values = correlations(x, y, levels=levels, methods=METHODS, groups=groups)
    rows = []
    for level in levels:
        row = {"aspect": aspect, "scorer": scorer, "target": target, "level": level}
        for method in METHODS:
            res = values[(level, method)]
            row[method] = None if math.isnan(res.value) else round(res.value, 4)
            row.update(n_groups=res.n_groups, n_skipped=res.n_skipped, n_pairs=res.n_pairs, n_missing=res.n_missing)
        rows.append(row)
    return rows


def seed_spread(per_seed: dict[str, list[dict]], methods: tuple[str, ...] = METHODS) -> list[dict]:
    """The spread over training seeds of `agreement_table` rows.

    Args:
        per_seed: ``{seed: agreement rows}``, one student per seed, all on the same held-out sources.
        methods: correlation columns to summarise (Spearman, Kendall tau-b, Pearson).

    Returns:
        Rows ``{aspect, scorer, target, level, method, n_seeds, mean, sd, min, max, values}`` (one per
        aspect, pair, level and method, in the order of the first seed's rows). ``sd`` is the sample
        standard deviation (n - 1 denominator, `statistics.stdev`), None for fewer than two
        values; ``values`` lists the per-seed figures in the order of ``per_seed`` (None where a
        correlation was undefined; such seeds are left out of mean, sd, min and max and of ``n_seeds``).
    """
    key = lambda r: (r["aspect"], r["scorer"], r["target"], r["level"])  # noqa: E731
    tables = {seed: {key(r): r for r in rows} for seed, rows in per_seed.items()}
    first = next(iter(per_seed.values()), [])
    out = []
    for row in first:
        for method in methods:
            values = [tables[s].get(key(row), {}).get(method) for s in per_seed]
            got = [v for v in values if v is not None]
            out.append({"aspect": row["aspect"], "scorer": row["scorer"], "target": row["target"],
                        "level": row["level"], "method": method, "n_seeds": len(got),
                        "mean": round(statistics.fmean(got), 4) if got else None,
                        "sd": round(statistics.stdev(got), 4) if len(got) > 1 else None,
                        "min": min(got) if got else None, "max": max(got) if got else None, "values": values})
    return out


#: the trivial baselines of `baseline_rows`, in their order
BASELINE_SCORERS = ("length", "extractiveness", "system prior", "overlap fit")


def _overlap_fit(train: list[dict], test: list[dict], label_cols: list[str]) -> dict[str, dict[str, list]]:
    """``{"overlap fit": {label column: scores}}``, or ``{}`` where it cannot be fitted (a record without a
    source, too few labelled training rows)."""
    from csem.baselines import overlap_least_squares

    if not test or not train or not all(isinstance(r.get("source"), str) for r in train + test):
        return {}
    try:
        return {"overlap fit": overlap_least_squares(train, test, label_cols)}
    except ValueError:  # fewer labelled rows than coefficients: no fit to report
        return {}


def baseline_scores(train: list[dict], test: list[dict], label_cols: list[str]) -> dict[str, dict[str, list]]:
    """The trivial baselines' scores of the held-out records (see `baseline_rows`):
    ``{baseline: {label column: [score per test record]}}``, baselines that cannot be computed left out."""
    from csem.baselines import extractiveness, length, system_prior

    scores: dict[str, dict[str, list]] = {"length": {c: length(test) for c in label_cols}}
    if all(isinstance(r.get("source"), str) for r in test):  # a candidate-only data set has no extractiveness
        scores["extractiveness"] = {c: extractiveness(test) for c in label_cols}
    if test and all(r.get("system_id") is not None for r in test + train):
        scores["system prior"] = system_prior(train, test, label_cols)
    scores.update(_overlap_fit(train, test, label_cols))
    return scores


def baseline_rows(train: list[dict], test: list[dict], label_cols: list[str], *,
                  levels: tuple[str, ...] = ("summary", "dataset"), bootstrap: int = 0, seed: int = 0) -> list[dict]:
    """Rows of `agreement_table`'s layout (``scorer`` = the baseline, ``target`` = ``judge``) for the
    trivial baselines on the held-out records: could they explain the student's agreement?

    * ``length``: the candidate's words ([`csem.baselines.lexical.length`][]);
    * ``extractiveness``: share of its trigrams found in the source ([`csem.baselines.lexical.extractiveness`][];
      no row where a source is missing);
    * ``system prior``: the mean training label of the candidate's system (``system_id``;
      [`csem.baselines.prior.system_prior`][]; candidates of systems without training labels are
      left out and counted in ``n_missing``);
    * ``overlap fit``: the overlap features (candidate against its source) fitted to the training labels
      by least squares ([`csem.baselines.overlap_least_squares`][]; no row where a source is missing or
      the training rows are fewer than its coefficients).

    Correlations are signed as computed (a judge that prefers short candidates gives length a negative
    figure). Records without ``system_id`` give the prior no row.

    Args:
        train: the training records (with the label columns); test: the held-out records.
        label_cols: the judge's columns (``judge.<aspect>``). levels: correlation levels.
        bootstrap, seed: as `agreement_table` (``spearman_ci``).

    Returns:
        One row per label column, baseline and level.
    """
    scores = baseline_scores(train, test, label_cols)
    groups = [r.get("doc_id") for r in test]
    rows = []
    for label in label_cols:
        y = [r.get(label) for r in test]
        for name in BASELINE_SCORERS:
            if name in scores:
                x = scores[name][label]
                rows += _add_ci(_rows(aspect_of(label), name, "judge", x, y, groups, levels), x, y, groups, bootstrap,
                                seed)
    return rows
