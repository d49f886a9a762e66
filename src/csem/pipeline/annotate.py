"""CSEM stage ii: annotate collected candidates with the LLM judge.

A thin layer over [`csem.judge.judge_records`][] that reads a candidate file and writes the
labelled file ``csem train`` reads; the judge's SQLite cache makes it resumable and free to re-run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from csem.data.columns import format_column
from csem.data.jsonio import write_json
from csem.data.records import read_records, write_records
from csem.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from csem.judge.batch import BatchOptions
    from csem.judge.cost import Prices


def repeatability_path(labelled: str | Path) -> Path:
    """The sidecar ``<labelled>.repeatability.json`` that `annotate_file`
    writes with ``repeatability`` > 0 (the judge's repeatability, [`csem.judge.repeat`][])."""
    labelled = Path(labelled)
    return labelled.with_name(labelled.name + ".repeatability.json")


def read_repeatability(labelled: str | Path) -> dict | None:
    """The judge's repeatability written beside a labelled file, or None without one."""
    p = repeatability_path(labelled)
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


def provenance_path(labelled: str | Path) -> Path:
    """The sidecar ``<labelled>.judge.json`` that `annotate_file` writes beside its output."""
    labelled = Path(labelled)
    return labelled.with_name(labelled.name + ".judge.json")


def read_provenance(labelled: str | Path) -> dict | None:
    """The judge provenance of a labelled file (``{"judge", "mode", "rubrics", "columns": {col:
    {"rubric", "aspect", "scale": [min, max]}}}``), or None when the file has no sidecar.

    Raises:
        ValueError: the sidecar exists but is not valid JSON or not a provenance object (named).
    """
    p = provenance_path(labelled)
    if not p.exists():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: broken judge provenance file ({exc}); delete it or re-run csem annotate") from exc
    if not isinstance(data, dict) or not isinstance(data.get("columns", {}), dict):
        raise InputError(f"{p}: not a judge provenance file (expected an object with 'columns')")
    return data


def annotate_file(candidates: str | Path | Sequence[Mapping], out: str | Path, *, rubrics: Sequence[str], judge: str = "local",
                  mode: str = "probs", n: int = 20, temperature: float = 1.0, cache: str | Path | None = None,
                  columns: Mapping[str, str] | None = None, progress: bool = True,
                  backend_options: Mapping | None = None, repeatability: float = 0.0,
                  repeat_rubrics: Sequence[str] | None = None, repeat_seed: int = 0,
                  batch: "BatchOptions | None" = None, prices: "Prices | None" = None) -> dict:
    """Judge every candidate of ``candidates`` on every rubric aspect and write ``out``.

    Args:
        candidates: a candidate file (``csem collect`` output or any csem record file), or the
            candidate records themselves.
        out: the labelled file: the input columns plus ``judge.<aspect>`` (rubric scale, None when
            missing), ``judge.<aspect>.missing`` (reason), ``judge.<aspect>.mass``, ``judge.<aspect>.raw``.
        rubrics, judge, mode, n, temperature: as [`csem.judge.judge_records`][].
        cache: SQLite judgment cache; default ``<out>.judge_cache.sqlite`` beside the output.
        repeatability: share of the sources (0-1) whose candidates the judge scores a second time under a
            second rendering of each rubric (its paraphrase; in ``sample`` mode a second set of samples;
            or ``repeat_rubrics``, one second rubric file per rubric), into ``judge.<aspect>.repeat``, a side
            field that is never a training label ([`csem.judge.repeat`][]); 0: none. repeat_seed: the draw
            of those sources.
        batch: send the requests as batch jobs ([`csem.judge.batch.BatchOptions`][]; the state folder
            defaults to ``<out>.batch``), write them to a request file, or read result files. While
            requests are pending (or only written), ``out`` is not written: the summary's ``pending``
            and ``batches`` say what waits, and the same call collects it later.
        prices: the judge's prices ([`csem.judge.cost.Prices`][]): ``cost_usd`` in the summary and
            the provenance.

    Returns:
        The judge summary as a dict (total, judged, cached, missing by reason, tokens, seconds; with
        ``repeatability`` also ``repeat``: the second pass's judged, cached, failed and seconds, its
        failures counted in ``failed``). With ``repeatability`` it writes ``<out>.repeatability.json``
        (`read_repeatability`): the sources drawn and, per
        judge column, the repeatability ``r`` (summary and dataset level, 95% interval) and ``sqrt(r)``.
        Beside ``out`` it writes ``<out>.judge.json`` (`read_provenance`): judge, mode and each
        label column's rubric and declared scale, which ``csem train`` uses as the label range and
        for the metric card.

    Raises:
        RecordError: a malformed candidate file. ValueError: a file without records (named).
        RubricError: unknown rubric.
    """
    from csem.judge import judge_records
    from csem.judge.runner import rubric_columns
    from csem.rubrics import load_rubrics

    out = Path(out)
    recs = read_records(candidates, columns=columns) if isinstance(candidates, (str, Path)) else list(candidates)
    if not recs:
        raise InputError(f"{candidates if isinstance(candidates, (str, Path)) else 'candidates'}: "
                         "no records to annotate (the file is empty)")
    loaded = load_rubrics(list(rubrics))
    cache = cache if cache is not None else out.with_name(out.name + ".judge_cache.sqlite")
    if repeatability and batch is not None and batch.offline:
        raise InputError("--repeatability goes with synchronous judging or --batch, not with --batch-file or "
                         "--batch-results (the second rendering's requests are not in the request file)")
    if repeatability:  # a bad second rendering (no paraphrase, mismatched files) fails before any judging
        from csem.judge.repeat import repeat_sources, second_rendering

        second_rendering(loaded, mode, repeat_rubrics)
        repeat_sources(recs, repeatability, repeat_seed)
    if batch is not None and batch.state_dir is None and not batch.offline:
        from dataclasses import replace

        batch = replace(batch, state_dir=out.with_name(out.name + ".batch"))
    labelled, summary = judge_records(recs, loaded, judge, mode=mode, n=n, temperature=temperature,
                                      cache=cache, progress=progress, backend_options=backend_options,
                                      batch=batch, prices=prices)
    if summary.pending or summary.request_files:  # the output is written when the results are in
        return summary.as_dict()
    repeat = None
    if repeatability:
        from csem.judge.repeat import judge_again

        labelled, repeat = judge_again(labelled, loaded, judge, share=repeatability, seed=repeat_seed,
                                       repeat_rubrics=repeat_rubrics, mode=mode, n=n, temperature=temperature,
                                       cache=cache, progress=progress, backend_options=backend_options, batch=batch)
        if repeat["judge"].get("pending"):  # the second pass waits in batch jobs: written when it is in
            return {**summary.as_dict(), "pending": repeat["judge"]["pending"], "batches": repeat["judge"]["batches"]}
    write_records(labelled, out)
    by_id = {r.id: r for r in loaded}
    cols = {str(c): {"rubric": rid, "aspect": a, "scale": [by_id[rid].scale.min, by_id[rid].scale.max]}
            for (rid, a), c in rubric_columns(loaded).items()}
    write_json(provenance_path(out), {"judge": judge, "mode": mode, "rubrics": list(rubrics), "columns": cols,
                                      **_usage(summary, batch, prices)})
    result = summary.as_dict()
    if repeat is not None:
        write_json(repeatability_path(out), repeat)
        j = repeat["judge"]
        result["repeat"] = {k: j[k] for k in ("total", "judged", "cached", "failed", "seconds")}
        result["failed"] += j["failed"]
        result["errors"] = result["errors"] + [e for e in j.get("errors", []) if e not in result["errors"]]
    else:
        repeatability_path(out).unlink(missing_ok=True)
    return result


def _usage(summary: Any, batch: Any, prices: Any) -> dict:
    """The provenance's record of what the run cost: the provider's token counts of the judgments
    made now, the cost at ``prices``, and the batch jobs (ids, status, request counts)."""
    out: dict = {"usage": {"prompt_tokens": summary.prompt_tokens, "completion_tokens": summary.completion_tokens,
                           "judged": summary.judged, "cached": summary.cached},
                 "cost_usd": summary.cost_usd, "prices": prices.model_dump() if prices is not None else None}
    if batch is not None:
        out["batch"] = {"state": str(batch.state_dir) if batch.state_dir else None, "batches": summary.batches,
                        "result_files": [str(p) for p in batch.result_files]}
    return out


def compare_file(candidates: str | Path | Sequence[Mapping], out: str | Path, *, rubrics: Sequence[str], judge: str = "local",
                 mode: str = "probs", strategy: str = "all", per_source: int | None = None,
                 rating_col: str | None = None, seed: int = 0, cache: str | Path | None = None,
                 columns: Mapping[str, str] | None = None, progress: bool = True,
                 backend_options: Mapping | None = None) -> dict:
    """Comparison ranking (CSEM Sec. VI-F): judge pairs of candidates of each source, both orders.

    Args:
        candidates: a candidate file (for ``adjacent`` pairs: with the rating column of a rating pass),
            or the candidate records themselves.
        out: the preference file, one row per pair (`csem.judge.comparison`); ``csem train
            --pairs`` reads it. Several rubrics add one ``judge.<aspect>`` column each.
        rubrics: pairwise rubric ids or files (a CSEM rating rubric id such as
            ``csem/summ-coherence-ref-free`` names its pairwise version; a multi-aspect one such as
            ``csem/summ-multi-ref-free`` names the pairwise versions of its aspects).
        strategy, per_source, rating_col, seed: which pairs (`csem.judge.comparison.select_pairs`).
        mode: ``probs`` (preference probability from the A/B tokens) | ``parse``.
        cache: SQLite judgment cache; default ``<out>.judge_cache.sqlite``.

    Returns:
        The summary as a dict (pairs, calls, judged, cached, failed, missing pairs, position bias,
        seconds). Writes ``<out>.judge.json`` with ``"comparison": true`` and each column's scale [0, 1].
    """
    from csem.judge.comparison import compare_records, select_pairs
    from csem.rubrics.pairwise import load_pairwise_rubrics

    out = Path(out)
    recs = read_records(candidates, columns=columns) if isinstance(candidates, (str, Path)) else list(candidates)
    if not recs:
        raise InputError(f"{candidates if isinstance(candidates, (str, Path)) else 'candidates'}: "
                         "no records to compare (the file is empty)")
    loaded = [rub for r in rubrics for rub in load_pairwise_rubrics(r)]
    aspects = [r.aspect for r in loaded]
    if len(set(aspects)) != len(aspects):
        raise InputError(f"two pairwise rubrics judge the same aspect: {aspects}")
    pairs = select_pairs(recs, strategy, per_source=per_source, rating_col=rating_col, seed=seed)
    cache = cache if cache is not None else out.with_name(out.name + ".judge_cache.sqlite")
    rows: list[dict] | None = None
    total: dict = {}
    for rub in loaded:
        got, summary = compare_records(recs, rub, judge, pairs=pairs, mode=mode, cache=cache, progress=progress,
                                       backend_options=dict(backend_options or {}))
        s = summary.as_dict()
        for k in ("pairs",):
            total[k] = s[k]
        for k in ("calls", "judged", "cached", "failed", "seconds"):
            total[k] = total.get(k, 0) + s[k]
        total.setdefault("missing", {}).update({f"{rub.aspect}: {k}": v for k, v in s["missing"].items()})
        total.setdefault("position_bias", {})[rub.aspect] = s["position_bias"]
        if s.get("fallback"):
            total["fallback"] = s["fallback"]
        total.setdefault("errors", []).extend(e for e in s.get("errors", []) if e not in total["errors"])
        if rows is None:
            rows = got
        else:
            for row, new in zip(rows, got):
                row.update({k: v for k, v in new.items() if k not in row})
    write_records(rows or [], out)
    cols = {format_column("judge", r.aspect): {"rubric": r.id, "aspect": r.aspect, "scale": [0, 1]} for r in loaded}
    write_json(provenance_path(out), {"judge": judge, "mode": mode, "comparison": True,
                                      "pairs": {"strategy": strategy, "per_source": per_source,
                                                "rating_col": rating_col, "seed": seed},
                                      "rubrics": [r.id for r in loaded], "columns": cols})
    return total
