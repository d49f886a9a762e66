"""CSEM stage ii: annotate collected candidates with the LLM judge.

A thin layer over :func:`csem.judge.judge_records` that reads a candidate file and writes the
labelled file ``csem train`` reads; the judge's SQLite cache makes it resumable and free to re-run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from csem.data.records import read_records, write_records


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

    Raises:
        RecordError: a malformed candidate file. RubricError: unknown rubric.
    """
    from csem.judge import judge_records

    out = Path(out)
    recs = read_records(candidates, columns=columns)
    cache = cache if cache is not None else out.with_name(out.name + ".judge_cache.sqlite")
    labelled, summary = judge_records(recs, list(rubrics), judge, mode=mode, n=n, temperature=temperature,
                                      cache=cache, progress=progress, backend_options=backend_options)
    write_records(labelled, out)
    return summary.as_dict()
