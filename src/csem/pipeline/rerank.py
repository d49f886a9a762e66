"""The rerank stage of ``csem run``: the trained student picks one candidate per source.

With a ``rerank:`` section ([`csem.pipeline.config.RerankConfig`][]) the pipeline reranks the
N-best lists the collect stage wrote (the candidates of one source, grouped by ``doc_id``) after
the student is trained and has scored them, with the apply layer's reranking
([`csem.apply.reranking.rerank_scored`][], CSEM Eq. 7 for one score column, Eq. 8 for a
weighted sum)::

    rerank:
      metrics: [student]          # default; student#coherence: one head; or any `csem rerank --metric`
      weights: null               # 1 each; [w1, w2] | {column: w} | "w1,w2" | weights.json | mert
      normalize: none             # none | zscore (per source, per column, before weighting)
      sources: held-out           # held-out (the test split) | all

``student`` names the score stage's columns of the train stage's student (``metric.<name>.<aspect>``
in ``scored.jsonl``, one per aspect it was trained on), so the student is not run twice; other
metric specifications go through [`csem.apply.reranking.score_specs`][] (a score column already in
the records is used as it is, e.g. ``judge.coherence`` for the judge's own choice). ``weights: mert``
tunes the Eq. 8 weights with Och's MERT ([`csem.apply.tune.tune_weights_report`][]) on the
training and dev sources' N-best lists, the objective being the judge's score of the chosen
candidate (the mean of the student's judge columns); the tuning report goes to
``rerank_weights.json`` (readable by ``csem rerank --weights``).

Writes ``reranked.jsonl`` (the chosen candidate of each source with every score column,
``rerank.score`` and ``rerank.chosen``) and ``reranked.scores.jsonl`` (every reranked candidate), as
``csem rerank --out`` and ``--scores`` do. The stage summary and the report compare, per source, the
judge's score of the chosen candidate with the mean judge score of its N-best list (what a random
pick gets in expectation) and its best (`choice_rows`, `gain_summary`). A source whose
candidates all lack a weighted score gets no choice; it is listed (``no_choice``), never guessed.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Sequence

from csem.data.records import write_records
from csem.errors import InputError
from csem.pipeline.agreement import aspect_of, student_col
from csem.pipeline.config import student_spec

STUDENT = "student"


def resolve_specs(records: list[dict], specs: Sequence[str], *, label_cols: Sequence[str], base: Path) -> list[str]:
    """Metric specifications for [`csem.apply.reranking.score_specs`][]: ``student[#a+b]`` becomes
    the score stage's student columns; a relative student folder is resolved against ``base``.

    Raises:
        ValueError: ``student#ASPECT`` for an aspect the student was not trained on.
    """
    out: list[str] = []
    for spec in specs:
        name, sep, heads = spec.strip().partition("#")
        if name == STUDENT:
            out += [student_col(records, a) for a in student_heads(spec, label_cols, "rerank.metrics")]
            continue
        p = Path(name).expanduser()
        if not p.is_absolute() and (base / p).is_dir():
            spec = str(base / p) + (sep + heads if sep else "")
        out.append(spec)
    return out


def student_heads(spec: str, label_cols: Sequence[str], field: str) -> list[str]:
    """The aspects of ``student`` (every one the student was trained on: ``label_cols``' aspects) or
    ``student#a+b`` (those).

    Raises:
        ValueError: an aspect the student has no head for (the message starts ``field 'spec':``).
    """
    aspects = [aspect_of(c) for c in label_cols]
    name, heads = student_spec(spec)
    if not name:
        raise InputError(f"{field} '{spec}': name the heads after '#' (student#coherence+relevance) or drop the '#'")
    chosen = heads or aspects
    unknown = [a for a in chosen if a not in aspects]
    if unknown:
        raise InputError(f"{field} '{spec}': the student has no head for {unknown}; it has {aspects}")
    return chosen


def _named(field: str, exc: Exception) -> str:
    """``exc``'s message on one line, led by the setting it concerns unless it already names one of
    its stage's (``rerank.``, ``mrt.``)."""
    msg = str(exc.args[0]) if exc.args else str(exc)
    msg = " ".join(msg.split())
    stage = field.split(".", 1)[0].split(" ", 1)[0]
    return msg if msg.startswith(f"{stage}.") else f"{field}: {msg}"


def weights_file(cfg) -> Path | None:
    """The ``csem tune-weights`` JSON file that ``rerank.weights`` names, or None."""
    w = cfg.weights
    return Path(w).expanduser() if isinstance(w, str) and w.endswith(".json") else None


def run_rerank(records: list[dict], cfg, *, label_cols: Sequence[str], base: Path, run_dir: Path,
               judge_cache: Path | None = None) -> dict:
    """Rerank ``records`` (the score stage's ``scored.jsonl``: every candidate with ``split``, the
    judge's and the student's columns) as ``cfg`` ([`RerankConfig`][csem.pipeline.config.RerankConfig]) says
    and write ``reranked.jsonl`` and ``reranked.scores.jsonl`` (and ``rerank_weights.json`` with
    ``weights: mert``) into ``run_dir``.

    Returns:
        the stage summary: ``sources``, ``candidates``, ``columns``, ``weights``, ``normalize``,
        ``no_choice``, ``tuned`` (MERT's sources and dev objective, or None) and ``gain``
        (`gain_summary`).

    Raises:
        ValueError: no records to rerank, bad weights (count, names), unknown metrics or aspects,
            a reference-based metric without references (each message starts ``rerank``).
    """
    from csem.apply.reranking import rerank_scored, score_specs

    target = records if cfg.sources == "all" else [r for r in records if r.get("split") == "test"]
    if not target:
        raise InputError("rerank: no held-out candidates to rerank (rerank.sources 'held-out')")
    mert = cfg.weights == "mert"
    tune_recs = [r for r in records if r.get("split") in ("train", "dev")] if mert else []
    try:
        specs = resolve_specs(records, cfg.metrics, label_cols=label_cols, base=base)
        rows, columns = score_specs(target + tune_recs, specs, judge_cache=judge_cache)
    except (KeyError, ValueError) as exc:
        raise InputError(_named("rerank.metrics", exc)) from exc
    rows, tune_rows = rows[: len(target)], rows[len(target):]
    weights: Any = cfg.weights
    normalize = cfg.normalize
    tuned = None
    wfile = weights_file(cfg)
    if wfile is not None:
        from csem.apply.tune import check_weights_cover, load_weights_file

        wpath = base / wfile if not wfile.is_absolute() else wfile
        weights, file_norm = load_weights_file(wpath)
        check_weights_cover(wpath, weights, columns)
        normalize = normalize or file_norm
    elif mert:
        from csem.apply.tune import tune_weights_report
        from csem.data.jsonio import write_json

        try:
            report = tune_weights_report(tune_rows, columns, ",".join(label_cols), normalize=normalize or "none",
                                         restarts=cfg.restarts, seed=cfg.seed)
        except ValueError as exc:
            raise InputError(_named("rerank.weights 'mert'", exc)) from exc
        write_json(run_dir / "rerank_weights.json", report)
        weights = dict(zip(report["columns"], report["weights"]))
        tuned = {"sources": report["sources"], "objective": report["objective"], "value": report["value"],
                 "start_value": report["mert"].get("start_value")}
    try:
        res = rerank_scored(rows, columns, weights, normalize or "none")
    except ValueError as exc:
        raise InputError(_named("rerank.weights", exc)) from exc
    write_records(res.chosen, run_dir / "reranked.jsonl")
    write_records(res.scored, run_dir / "reranked.scores.jsonl")
    return {"sources": len(res.chosen) + len(res.no_choice), "candidates": len(res.scored), "columns": res.columns,
            "weights": res.weights, "normalize": res.normalize, "no_choice": res.no_choice, "tuned": tuned,
            "gain": gain_summary(choice_rows(res.scored, label_cols), label_cols)}


def choice_rows(scored: Sequence[dict], judge_cols: Sequence[str]) -> list[dict]:
    """Per source of ``scored`` (every reranked candidate, with ``rerank.chosen``; grouped as the
    reranking grouped them): ``doc_id``, ``candidates``, ``chosen`` (id, or None without a choice),
    ``system_id`` and for each judge column ``<col>`` (the chosen candidate's score),
    ``<col>.mean`` (mean over the list's judged candidates: a random pick in expectation),
    ``<col>.best`` and ``<col>.gain`` (chosen - mean; None when either is missing)."""
    from csem.apply.reranking import group_sources

    keys, index = group_sources(scored)
    out = []
    for key, idx in zip(keys, index):
        cands = [scored[i] for i in idx]
        pick = next((c for c in cands if c.get("rerank.chosen")), None)
        row: dict[str, Any] = {"doc_id": key, "candidates": len(cands),
                               "chosen": None if pick is None else pick.get("id"),
                               "system_id": None if pick is None else pick.get("system_id")}
        for col in judge_cols:
            vals = [float(c[col]) for c in cands if c.get(col) is not None]
            mean = statistics.fmean(vals) if vals else None
            got = None if pick is None or pick.get(col) is None else float(pick[col])
            row[col] = got
            row[f"{col}.mean"] = mean
            row[f"{col}.best"] = max(vals) if vals else None
            row[f"{col}.gain"] = None if got is None or mean is None else got - mean
        out.append(row)
    return out


def gain_summary(rows: Sequence[dict], judge_cols: Sequence[str]) -> dict[str, dict]:
    """``{judge column: {"sources", "chosen", "mean", "best", "gain"}}``: means over the sources of
    `choice_rows` where the gain is defined (``sources`` counts them; the means are None
    when it is 0)."""
    out = {}
    for col in judge_cols:
        ok = [r for r in rows if r.get(f"{col}.gain") is not None]
        mean = (lambda k: statistics.fmean(r[k] for r in ok) if ok else None)  # noqa: E731
        out[col] = {"sources": len(ok), "chosen": mean(col), "mean": mean(f"{col}.mean"),
                    "best": mean(f"{col}.best"), "gain": mean(f"{col}.gain")}
    return out
