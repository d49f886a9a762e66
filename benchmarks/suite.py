"""The benchmark suite's registry, its one results writer and the helpers its modules share.

A suite benchmark is one module ``benchmarks/NAME.py`` over csem's public API that defines
``run(quick: bool = False) -> dict`` (JSON-able figures; ``quick=True`` runs a small slice in seconds
to a minute) and ``report(results: dict) -> str`` (Markdown). ``python -m benchmarks run NAME``
calls them and [`write_results`][] writes ``benchmarks/results/NAME.json`` and ``NAME.md``; a
module never writes files itself. Pieces:

* [`BENCHMARKS`][] (name -> one-line description), [`available`][], [`load`][], [`FAST`][].
* [`RECIPES`][]: the training recipes the suite names (``csem.train`` keyword arguments).
* Data through csem's loaders: [`summeval`][], [`summeval_llm_ratings`][]; correlations through the
  one evaluator: [`summary_row`][], [`aspect_rows`][]; tables: ``fmt``, ``markdown_table``.
* [`write_results`][], [`machine`][], [`now`][], [`log`][], [`threads`][].
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

from csem.data.datasets import SUMMEVAL_ASPECTS, default_data_dir
from csem.data.jsonio import write_json
from csem.meta.correlation import column_correlations
from csem.report.tables import fmt, markdown_table

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache"  # judge caches, trained models, generated files (git-ignored)
POOL = HERE / "data" / "teacher_pool"  # the judged teacher pool (README.md there)
ASPECTS = SUMMEVAL_ASPECTS

# name -> what it measures (one line); the order of `python -m benchmarks list`
BENCHMARKS: dict[str, str] = {
    "main_job": "the shipped pipeline (csem run package:summarization.yaml): stage times, student vs judge vs baselines",
    "judge_summeval": "the G-Eval judge (local GGUF) on SummEval: summary-level correlation with the experts, speed",
    "baselines_summeval": "lexical and embedding baselines (ROUGE, BLEU, chrF, BERTScore) on SummEval",
    "student_summeval": "the default student trained on GPT-4's SummEval ratings vs its teacher and trivial baselines",
    "teacher_pool": "the student vs its own judge as labels grow on the judged teacher pool (CSEM Fig. 3)",
    "repeatability": "the judge's repeatability on the teacher pool (a second rendering of the rubric)",
    "cascade": "the student with deferral to the judge: correlation and cost as the deferred share grows",
    "scoring_speed": "scoring throughput: one student, a seed ensemble and COMET on the same rows and threads",
    "apply": "applying the student: N-best reranking, MERT, MBR, MRT and the HTTP scoring server",
    "collect_concurrency": "candidate collection through a llama.cpp server: throughput by concurrency",
    "fault_sweep": "csem under the faults a user meets (judge server errors, secrets in URLs, bad files, names "
                   "from data, None content, kill -9): expected, observed, verdict per case",
    "llama_kernels": "llama.cpp kernels: the AMX / weight-repacking probe and its fallback, judging speed",
    "scale": "scale out: judging through an OpenAI-compatible server and scoring through Ray Data",
}

# benchmarks whose quick run loads no model and takes seconds: the fast test tier runs them; every other
# quick run loads a real model (GGUF judge, MiniLM, a generator) and is in the slow tier
FAST: frozenset[str] = frozenset({"repeatability"})

# the training recipes the suite names: csem.train keyword arguments
RECIPES: dict[str, dict[str, Any]] = {
    "default": {},  # csem train's defaults
    "pool-cv": {"epochs": 3, "lr": 1e-4, "head_lr": 1e-4},  # chosen by grouped CV on the pool's training rows
}

__all__ = ["ASPECTS", "BENCHMARKS", "CACHE", "FAST", "POOL", "RECIPES", "RESULTS", "aspect_rows", "available",
           "fmt", "load", "log", "machine", "markdown_table", "now", "summary_row", "summeval",
           "summeval_llm_ratings", "threads", "write_results"]

_log = logging.getLogger("bench")


def available() -> list[str]:
    """The registered benchmarks whose module is present, in [`BENCHMARKS`][]'s order."""
    return [n for n in BENCHMARKS if (HERE / f"{n}.py").exists()]


def load(name: str) -> ModuleType:
    """The module ``benchmarks.NAME``.

    Raises:
        KeyError: ``name`` is not a registered benchmark (the message lists them).
    """
    if name not in available():
        raise KeyError(f"unknown benchmark {name!r}; choose from {', '.join(available())}")
    return importlib.import_module(f"benchmarks.{name}")


def write_results(name: str, results: Mapping, markdown: str, results_dir: str | Path = RESULTS) -> tuple[Path, Path]:
    """The suite's one writer: ``<results_dir>/NAME.json`` (strict JSON, NaN -> null, atomic) and ``NAME.md``.

    Args:
        name: the benchmark's name. results: its ``run`` result. markdown: its ``report`` text.
        results_dir: the folder (default ``benchmarks/results``; created when missing).

    Returns:
        The two paths written.
    """
    folder = Path(results_dir)
    js = write_json(folder / f"{name}.json", dict(results))
    md = folder / f"{name}.md"
    tmp = md.with_name(md.name + ".tmp")
    tmp.write_text(markdown.rstrip("\n") + "\n", encoding="utf-8")
    os.replace(tmp, md)
    return js, md


def log(msg: str) -> None:
    """One timestamped progress line on stdout."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S",
                            stream=sys.stdout)
    _log.setLevel(logging.INFO)
    _log.info(msg)


def threads() -> int:
    """Torch / llama.cpp threads for a benchmark: ``$CSEM_BENCH_THREADS`` (default 2)."""
    return max(1, int(os.environ.get("CSEM_BENCH_THREADS", "2")))


def machine() -> str:
    """``"x86_64, 2 CPUs, load 1.9/1.5/1.2, python 3.11.7"``: what the figures were measured on."""
    load_ = os.getloadavg()
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
            f"{load_[0]:.1f}/{load_[1]:.1f}/{load_[2]:.1f}, python {sys.version.split()[0]}")


def now() -> str:
    """UTC time stamp for a results file."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def _select(records: list[dict], docs: slice | None) -> list[dict]:
    keep = sorted({r["doc_id"] for r in records})[docs or slice(None)]
    order = {d: i for i, d in enumerate(keep)}
    out = [r for r in records if r["doc_id"] in order]
    out.sort(key=lambda r: (order[r["doc_id"]], r["system_id"]))
    return out


def summeval(docs: slice | None = None, **options: Any) -> list[dict]:
    """SummEval records (100 documents x 16 systems, ``human.<aspect>`` = expert means), ordered by
    (sorted doc_id, system_id); ``docs`` slices the sorted doc ids; ``options`` go to ``load_summeval``.

    Raises:
        FileNotFoundError: no SummEval under ``$CSEM_DATA`` (the message says where to get it).
    """
    from csem.data.datasets import load_summeval

    return _select(load_summeval(Path(default_data_dir()) / "summeval", **options), docs)


def summeval_llm_ratings(docs: slice | None = None, **options: Any) -> list[dict]:
    """GPT-4's published SummEval ratings (Shen et al. 2023: 12 abstractive systems x 100 documents,
    ``judge.<aspect>`` and ``human.<aspect>``), ordered and sliced as [`summeval`][]."""
    from csem.data.datasets import load_summeval_llm_ratings

    folder = Path(default_data_dir())
    recs = load_summeval_llm_ratings(folder / "summeval_llm_shen2023", summeval_path=folder / "summeval", **options)
    return _select(recs, docs)


def summary_row(records: Sequence[Mapping], metric_col: str, human_col: str, *,
                methods: Sequence[str] = ("spearman", "kendall")) -> dict:
    """Summary-level correlation of two columns (per ``doc_id``, averaged; Kendall tau-b).

    Returns:
        ``{<method>: value or None, "n_docs", "n_skipped", "n_pairs", "n_missing"}`` (None, never NaN).
    """
    res = column_correlations(records, metric_col, human_col, levels=("summary",), methods=methods)
    row: dict[str, Any] = {m: (None if math.isnan(res[("summary", m)].value) else res[("summary", m)].value)
                           for m in methods}
    c = res[("summary", methods[0])]
    row.update(n_docs=c.n_groups, n_skipped=c.n_skipped, n_pairs=c.n_pairs, n_missing=c.n_missing)
    return row


def aspect_rows(records: Sequence[Mapping], metric: str | Callable[[str], str], *,
                aspects: Sequence[str] = ASPECTS, methods: Sequence[str] = ("spearman", "kendall"),
                human: Callable[[str], str] = lambda a: f"human.{a}") -> dict:
    """[`summary_row`][] for every aspect plus ``"average"`` (mean over the aspects; None if one is undefined).

    Args:
        metric: the metric column for every aspect, or ``aspect -> column``. human: ``aspect -> human column``.
    """
    col = metric if callable(metric) else (lambda a: metric)
    out: dict[str, Any] = {a: summary_row(records, col(a), human(a), methods=methods) for a in aspects}
    vals = {m: [out[a][m] for a in aspects] for m in methods}
    out["average"] = {m: (None if any(v is None for v in vs) else sum(vs) / len(vs)) for m, vs in vals.items()}
    return out
