"""The benchmarks' shared harness: arguments, logging, data through csem's loaders, the one
evaluator, and one results writer. A benchmark is a short script that imports from here.

A script in ``benchmarks/`` imports it as ``from harness import ...`` (Python puts the running
script's folder first on ``sys.path``; nothing is patched). Pieces:

* :func:`parser` -> ``argparse.ArgumentParser`` with the shared options ``--threads``, ``--seed``,
  ``--out``, ``--data-dir`` and, on request, ``--quick``; :func:`setup` applies them (logging,
  offline model hub, torch threads) and returns the logger; :func:`log` prints a timestamped line.
* :func:`summeval`, :func:`summeval_llm_ratings`: SummEval records from csem's loaders
  (:mod:`csem.data.datasets`), documents in sorted ``doc_id`` order, optionally a slice of them
  (``"50:70"``); :func:`doc_ids`, :func:`doc_slice`.
* :func:`summary_row` (one metric column vs one human column) and :func:`aspect_rows` (every
  aspect plus the average): summary-level correlations from
  :func:`csem.meta.correlation.column_correlations`, the one evaluator.
* :func:`write_results`: ``<out>.json`` (strict JSON, NaN -> null, atomic: :func:`csem.data.jsonio.write_json`)
  and ``<out>.md``; :func:`markdown_table` and :func:`fmt` render tables and numbers
  (:mod:`csem.report.tables`); :func:`machine` describes the machine for the record.
* :class:`Results`: a results file rewritten as a benchmark goes (after every stage or model), and
  :func:`previous_results`, what an earlier run wrote there: a re-run resumes from it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from csem.data.datasets import SUMMEVAL_ASPECTS, default_data_dir
from csem.data.jsonio import write_json
from csem.meta.correlation import column_correlations
from csem.report.tables import fmt, markdown_table

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache"  # judge cache, trained models, candidate files (git-ignored)
ASPECTS = SUMMEVAL_ASPECTS

__all__ = ["ASPECTS", "CACHE", "HERE", "RESULTS", "Results", "aspect_rows", "doc_ids", "doc_slice", "fmt", "log",
           "machine", "markdown_table", "now", "parser", "previous_results", "setup", "summary_row", "summeval",
           "summeval_llm_ratings", "write_results"]

_log = logging.getLogger("bench")


# ----------------------------------------------------------------------------------------------
# arguments and logging
# ----------------------------------------------------------------------------------------------

def parser(description: str, *, out: str, threads: int = 2, seed: int | None = 0,
           quick: bool = False) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the options every benchmark shares.

    Args:
        description: the script's docstring (shown by ``--help``, layout kept).
        out: default results stem, relative to ``benchmarks/results/`` (``judge_summeval`` ->
            ``results/judge_summeval.json`` and ``.md``).
        threads: default of ``--threads`` (torch and llama.cpp threads).
        seed: default of ``--seed`` (None: no ``--seed``, for a script with its own ``--seeds``).
        quick: add ``--quick`` (a smoke run; its results go to a temporary folder, never over the
            benchmark's figures).

    Returns:
        The parser; add the script's own options, then call :func:`setup` on the parsed args.
    """
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=threads, help=f"torch / llama.cpp threads (default {threads})")
    if seed is not None:
        ap.add_argument("--seed", type=int, default=seed, help=f"random seed (default {seed})")
    ap.add_argument("--out", type=Path, default=RESULTS / out,
                    help=f"results stem: writes OUT.json and OUT.md (default results/{out})")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="folder of the human-judgment datasets (default: $CSEM_DATA or ../shared/data)")
    if quick:
        ap.add_argument("--quick", action="store_true",
                        help="a tiny smoke run (not the benchmark); results go to a temporary folder")
    return ap


def setup(args: argparse.Namespace, *, verbose: Sequence[str] = ("csem",)) -> logging.Logger:
    """Apply the shared options: timestamped logging (INFO for ``bench`` and ``verbose`` loggers),
    no model-hub access (``HF_HUB_OFFLINE``), torch threads = ``--threads`` (when torch is
    installed), and under ``--quick`` ``args.out`` moved to the temporary folder.

    Returns:
        The ``bench`` logger (also what :func:`log` writes to).
    """
    logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stdout, force=True)
    for name in ("bench", *verbose):
        logging.getLogger(name).setLevel(logging.INFO)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch

        torch.set_num_threads(max(1, int(args.threads)))
    except ImportError:  # a benchmark without torch
        pass
    if getattr(args, "quick", False):
        import tempfile

        args.out = Path(tempfile.gettempdir()) / "csem-bench-quick" / Path(args.out).name
    return _log


def log(msg: str) -> None:
    """One timestamped progress line on stdout (flushed)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S",
                            stream=sys.stdout)
        _log.setLevel(logging.INFO)
    _log.info(msg)
    for h in logging.getLogger().handlers:
        h.flush()


def machine() -> str:
    """``"x86_64, 2 CPUs, load 1.9/1.5/1.2, python 3.11.7"``: what the figures were measured on."""
    load = os.getloadavg()
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
            f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}, python {sys.version.split()[0]}")


# ----------------------------------------------------------------------------------------------
# data (through csem's loaders)
# ----------------------------------------------------------------------------------------------

def doc_slice(spec: str | slice | None) -> slice:
    """``"50:70"`` -> ``slice(50, 70)`` (``":10"``, ``"90:"`` too); a slice or None passes through (None = all).

    Raises:
        ValueError: not ``START:STOP``.
    """
    if spec is None:
        return slice(None)
    if isinstance(spec, slice):
        return spec
    a, sep, b = str(spec).partition(":")
    if not sep:
        raise ValueError(f"document range {spec!r} is not START:STOP (e.g. 50:70)")
    return slice(int(a) if a else None, int(b) if b else None)


def doc_ids(records: Sequence[Mapping]) -> list[str]:
    """The records' ``doc_id`` values, sorted (the order every SummEval benchmark slices)."""
    return sorted({r["doc_id"] for r in records})


def _select(records: list[dict], docs: str | slice | None) -> list[dict]:
    keep = doc_ids(records)[doc_slice(docs)]
    order = {d: i for i, d in enumerate(keep)}
    out = [r for r in records if r["doc_id"] in order]
    out.sort(key=lambda r: (order[r["doc_id"]], r["system_id"]))
    return out


def summeval(data_dir: str | Path | None = None, *, docs: str | slice | None = None, **options: Any) -> list[dict]:
    """SummEval records (:func:`csem.data.datasets.load_summeval`: 100 documents x 16 systems,
    ``human.<aspect>`` = expert means), ordered by (sorted doc_id, system_id).

    Args:
        data_dir: the datasets folder (``--data-dir``); default :func:`csem.data.datasets.default_data_dir`.
        docs: a slice of the sorted doc ids (``"50:70"``); default all.
        options: keyword arguments of ``load_summeval`` (``source_field``, ``target``).

    Raises:
        FileNotFoundError: no SummEval under ``data_dir`` (the message says where to get it).
    """
    from csem.data.datasets import load_summeval

    folder = Path(data_dir or default_data_dir()) / "summeval"
    return _select(load_summeval(folder, **options), docs)


def summeval_llm_ratings(data_dir: str | Path | None = None, *, docs: str | slice | None = None,
                         **options: Any) -> list[dict]:
    """The published LLM ratings of SummEval (Shen et al. 2023; :func:`csem.data.datasets.load_summeval_llm_ratings`:
    12 abstractive systems x 100 documents, ``judge.<aspect>`` and ``human.<aspect>``), ordered
    by (sorted doc_id, system_id).

    Args:
        data_dir, docs: as :func:`summeval`. options: ``judge``, ``method``, ``score_field``.
    """
    from csem.data.datasets import load_summeval_llm_ratings

    folder = Path(data_dir or default_data_dir())
    recs = load_summeval_llm_ratings(folder / "summeval_llm_shen2023", summeval_path=folder / "summeval", **options)
    return _select(recs, docs)


# ----------------------------------------------------------------------------------------------
# correlations (the one evaluator)
# ----------------------------------------------------------------------------------------------

def summary_row(records: Sequence[Mapping], metric_col: str, human_col: str, *,
                methods: Sequence[str] = ("spearman", "kendall"), digits: int | None = None) -> dict:
    """Summary-level correlation of two columns (per ``doc_id``, averaged; Kendall = tau-b).

    Returns:
        ``{<method>: value or None, "n_docs": documents averaged, "n_skipped": documents skipped
        (a side constant or < 2 pairs), "n_pairs", "n_missing"}``; values rounded to ``digits``
        when given; None where undefined (never NaN).
    """
    res = column_correlations(records, metric_col, human_col, levels=("summary",), methods=methods)
    row: dict[str, Any] = {}
    for m in methods:
        v = res[("summary", m)].value
        row[m] = None if math.isnan(v) else (round(v, digits) if digits is not None else v)
    c = res[("summary", methods[0])]
    row.update(n_docs=c.n_groups, n_skipped=c.n_skipped, n_pairs=c.n_pairs, n_missing=c.n_missing)
    return row


def aspect_rows(records: Sequence[Mapping], metric: str | Callable[[str], str], *,
                aspects: Sequence[str] = ASPECTS, methods: Sequence[str] = ("spearman", "kendall"),
                human: Callable[[str], str] = lambda a: f"human.{a}", average: bool = True,
                digits: int | None = None) -> dict:
    """:func:`summary_row` for every aspect, plus ``"average"`` (mean over the aspects of each method).

    Args:
        metric: the metric column for every aspect (``metric.rouge1``), or a function
            ``aspect -> column`` (``lambda a: f"judge.{a}"``).
        human: ``aspect -> human column`` (default ``human.<aspect>``).

    Returns:
        ``{aspect: row, ..., "average": {method: mean or None}}`` (None if any aspect is undefined).
    """
    col = metric if callable(metric) else (lambda a: metric)
    out: dict[str, Any] = {a: summary_row(records, col(a), human(a), methods=methods, digits=digits) for a in aspects}
    if average:
        avg = {}
        for m in methods:
            vals = [out[a][m] for a in aspects]
            mean = None if any(v is None for v in vals) else sum(vals) / len(vals)
            avg[m] = None if mean is None else (round(mean, digits) if digits is not None else mean)
        out["average"] = avg
    return out


# ----------------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------------

def write_results(out: str | Path, data: Mapping, markdown: str | Sequence[str]) -> tuple[Path, Path]:
    """Write ``<out>.json`` (strict JSON: NaN -> null; atomic) and ``<out>.md``; return both paths.

    Args:
        out: results stem (``benchmarks/results/judge_summeval``); a suffix is replaced.
        data: the figures (any JSON-encodable mapping; numpy scalars and NaN are handled).
        markdown: the report text, or its lines.
    """
    out = Path(out)
    js = write_json(out.with_suffix(".json"), dict(data))
    text = markdown if isinstance(markdown, str) else "\n".join(markdown)
    md = out.with_suffix(".md")
    tmp = md.with_name(md.name + ".tmp")
    tmp.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    os.replace(tmp, md)
    return js, md


def now() -> str:
    """UTC time stamp for a results file."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def previous_results(out: str | Path) -> dict:
    """What an earlier run wrote to ``<out>.json``, or ``{}`` when there is no such file.

    Raises:
        ValueError: the file is not a JSON object (the message names it; a broken file is never
            silently treated as no earlier run).
    """
    path = Path(out).with_suffix(".json")
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: not JSON ({exc.msg}); move it away to start afresh") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object of results")
    return data


class Results:
    """A results file (``<out>.json`` and ``<out>.md``) that a benchmark rewrites as it goes.

    ``data`` is the benchmark's figures (a dict it fills in); :meth:`save` writes them through
    :func:`write_results` with ``render(data)`` as the report. With ``resume``, the figures an
    earlier run wrote (:func:`previous_results`) are merged in first: by default its top-level
    entries replace the fresh ``data``'s (what an earlier run finished is kept); ``merge(data,
    previous)`` merges otherwise. The earlier figures stay readable as :attr:`previous`.

    Args:
        out: results stem (``benchmarks/results/student_summeval``).
        data: the fresh figures' skeleton.
        render: ``data -> markdown text or lines``.
        resume: merge an earlier run's figures. merge: the merge rule (changes ``data`` in place).
    """

    def __init__(self, out: str | Path, data: dict, render: Callable[[dict], str | Sequence[str]], *,
                 resume: bool = False, merge: Callable[[dict, dict], None] | None = None):
        self.path = Path(out)
        self.data = data
        self.render = render
        self.previous = previous_results(out) if resume else {}
        if self.previous:
            (merge or (lambda d, p: d.update(p)))(self.data, self.previous)

    def save(self) -> tuple[Path, Path]:
        """Write ``<out>.json`` and ``<out>.md`` now (atomically); return both paths."""
        return write_results(self.path, self.data, self.render(self.data))

