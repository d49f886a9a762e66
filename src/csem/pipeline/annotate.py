"""CSEM stage ii: annotate collected candidates with the LLM judge.

A thin layer over :func:`csem.judge.judge_records` that reads a candidate file and writes the
labelled file ``csem train`` reads; the judge's SQLite cache makes it resumable and free to re-run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from csem.data.records import read_records, write_records


def provenance_path(labelled: str | Path) -> Path:
    """The sidecar ``<labelled>.judge.json`` that :func:`annotate_file` writes beside its output."""
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
        raise ValueError(f"{p}: broken judge provenance file ({exc}); delete it or re-run csem annotate") from exc
    if not isinstance(data, dict) or not isinstance(data.get("columns", {}), dict):
        raise ValueError(f"{p}: not a judge provenance file (expected an object with 'columns')")
    return data


def annotate_file(candidates: str | Path, out: str | Path, *, rubrics: Sequence[str], judge: str = "local",
                  mode: str = "probs", n: int = 20, temperature: float = 1.0, cache: str | Path | None = None,
                  columns: Mapping[str, str] | None = None, progress: bool = True,
                  backend_options: Mapping | None = None) -> dict:
    """Judge every candidate of ``candidates`` on every rubric aspect and write ``out``.

    Args:
        candidates: a candidate file (``csem collect`` output or any csem record file).
        out: the labelled file: the input columns plus ``judge.<aspect>`` (rubric scale, None when
            missing), ``judge.<aspect>.missing`` (reason), ``judge.<aspect>.mass``, ``judge.<aspect>.raw``.
        rubrics, judge, mode, n, temperature: as :func:`csem.judge.judge_records`.
        cache: SQLite judgment cache; default ``<out>.judge_cache.sqlite`` beside the output.

    Returns:
        The judge summary as a dict (total, judged, cached, missing by reason, tokens, seconds).
        Beside ``out`` it writes ``<out>.judge.json`` (:func:`read_provenance`): judge, mode and each
        label column's rubric and declared scale, which ``csem train`` uses as the label range and
        for the metric card.

    Raises:
        RecordError: a malformed candidate file. RubricError: unknown rubric.
    """
    from csem.judge import judge_records
    from csem.judge.runner import score_columns
    from csem.rubrics import load_rubrics

    out = Path(out)
    recs = read_records(candidates, columns=columns)
    loaded = load_rubrics(list(rubrics))
    cache = cache if cache is not None else out.with_name(out.name + ".judge_cache.sqlite")
    labelled, summary = judge_records(recs, loaded, judge, mode=mode, n=n, temperature=temperature,
                                      cache=cache, progress=progress, backend_options=backend_options)
    write_records(labelled, out)
    by_id = {r.id: r for r in loaded}
    cols = {f"judge.{c}": {"rubric": rid, "aspect": a, "scale": [by_id[rid].scale.min, by_id[rid].scale.max]}
            for (rid, a), c in score_columns(loaded).items()}
    provenance_path(out).write_text(json.dumps({"judge": judge, "mode": mode, "rubrics": list(rubrics),
                                                "columns": cols}, indent=2), encoding="utf-8")
    return summary.as_dict()
