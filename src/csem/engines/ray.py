"""Scoring and judging on a Ray cluster through Ray Data (``pip install 'csem[ray]'``).

Two callable classes for `ray.data.Dataset.map_batches`, each a thin stage over csem's own
code path, so a score or a judgment is the one ``csem score`` / ``csem annotate`` would give:

* [`RayScorer`][csem.engines.ray.RayScorer]: loads a student once per actor ([`csem.model.EvaluationModel.load`][])
  and scores each batch of records with the student's one scoring method
  ([`csem.model.EvaluationModel.predict`][], what ``csem score`` calls); out come the same
  ``metric.<name>.<aspect>`` (and ``.std``) columns.
* [`RayJudge`][csem.engines.ray.RayJudge]: judges each batch with [`csem.judge.judge_records`][] over any judge URI
  (typically ``openai:MODEL`` with ``base_url`` pointing at a vLLM or llama.cpp OpenAI-compatible
  server) and its SQLite cache: the cache keys are ``csem annotate``'s, so a re-run, or a later
  ``csem annotate`` with the same cache file, resumes instead of judging again.

[`score_dataset`][csem.engines.ray.score_dataset] / [`judge_dataset`][csem.engines.ray.judge_dataset] add the stage to a dataset (a fixed pool of
``workers`` actors, ``cpus_per_worker`` CPUs each); [`score_files`][csem.engines.ray.score_files] reads Parquet or JSONL
files through Ray Data, scores them streaming (a corpus larger than memory flows through in
blocks) and writes a folder of part files (``csem score --engine ray``).

Fault tolerance is Ray's: Ray Data creates the actors of a pool with ``max_restarts=-1`` and
``max_task_retries=-1`` (its defaults, ``actor_pool_map_operator.py`` in Ray 2.60), so a worker
process that dies mid-batch is restarted and its batch is re-run; the written output holds every
row exactly once (tests/engines/test_ray.py kills one). A bad record is not retried: the run stops
with a [`RecordError`][csem.data.records.RecordError] naming the input, the record (its ``id``) and the
field.

Records arrive as Arrow tables (``batch_format="pyarrow"``) and are turned into csem records by
[`csem.data.records.normalize_record`][], the same normalisation ``csem score`` applies when it
reads a file (candidate aliases such as ``hypothesis``, ``id`` as a string, score columns as
numbers). Ray reads files in parallel blocks, so a record's line number is not known: give records
an ``id`` column (a record without one keeps ``id`` null, where ``csem score`` numbers the lines).
Ids are not checked for duplicates across blocks.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pyarrow as pa

from csem.errors import InputError

try:
    import ray
    import ray.data
    from ray.data import ActorPoolStrategy, BlockBasedFileDatasink
except ImportError as exc:  # the optional extra
    raise ImportError("csem's Ray engine needs Ray Data: pip install 'csem[ray]' "
                      "(or pip install 'ray[data]')") from exc

from csem.data.records import normalize_record
from csem.engines.files import check_input, check_output_folder, file_format


# ----------------------------------------------------------------------------------------------
# records <-> Arrow batches
# ----------------------------------------------------------------------------------------------

def _label(row: Mapping[str, Any]) -> str:
    """How an error names a raw row: its id, else the start of its first text."""
    if row.get("id") is not None:
        return f"id '{row['id']}'"
    for field in ("candidate", "source", "hypothesis", "summary"):
        text = row.get(field)
        if isinstance(text, str) and text.strip():
            return f"without id, {field} {text[:40]!r}"
    return "without id"


def to_records(batch: pa.Table, *, where: str, columns: Mapping[str, str] | None = None,
               required: Sequence[str] = ("candidate",)) -> list[dict]:
    """csem records from an Arrow batch, through [`csem.data.records.normalize_record`][].

    Args:
        batch: rows of a Ray Data block (any columns). where: the input's name for errors.
        columns: ``{csem_field: user_column}`` (``--col``). required: fields every row must have.

    Raises:
        RecordError: a malformed row; the message names ``where``, the record (id) and the field.
    """
    return [normalize_record(row, columns=columns, required=required, path=f"{where}, record {_label(row)}")
            for row in batch.to_pylist()]


def to_table(rows: Sequence[Mapping[str, Any]], like: pa.Schema) -> pa.Table:
    """Arrow table of ``rows``, typed like the input batch where a column is all null in this batch
    (so every block of a run writes one schema); a new all-null column becomes float64 for a score
    column (``metric.``/``judge.``/``human.``), else string."""
    table = pa.Table.from_pylist(list(rows))
    for i, field in enumerate(table.schema):
        if pa.types.is_null(field.type):
            if field.name in like.names and not pa.types.is_null(like.field(field.name).type):
                typ = like.field(field.name).type
            elif field.name.split(".")[0] in ("metric", "judge", "human") and not field.name.endswith(
                    (".missing", ".raw")):
                typ = pa.float64()
            else:
                typ = pa.string()
            table = table.set_column(i, field.name, table.column(i).cast(typ))
    return table


def _user_error(exc: BaseException) -> BaseException | None:
    """The csem error a Ray task raised (a RecordError or another ValueError), unwrapped from
    Ray's ``RayTaskError``/``UserCodeException`` chain; None when there is none."""
    from ray.exceptions import RayError, RayTaskError

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ValueError) and not isinstance(cur, RayError) and type(cur).__module__.startswith("csem"):
            return cur
        nxt = cur.cause if isinstance(cur, RayTaskError) else None
        cur = nxt or cur.__cause__ or cur.__context__
    return None


# ----------------------------------------------------------------------------------------------
# scoring
# ----------------------------------------------------------------------------------------------

def required_fields(model: Any) -> tuple[str, ...]:
    """The texts a loaded model's mode needs in every record (as ``csem score`` requires them)."""
    from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE

    mode = model.config.mode
    return (("candidate",) + (("source",) if NEEDS_SOURCE.get(mode) else ())
            + (("reference",) if NEEDS_REFERENCE.get(mode) else ()))


class RayScorer:
    """A student as a Ray Data stage: ``ds.map_batches(RayScorer, fn_constructor_kwargs={...},
    batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=N))``.

    Each actor loads the model once (``__init__``) and scores every batch it is given
    (``__call__``: Arrow table in, the same rows plus ``metric.<name>.<aspect>`` float64 columns
    out, as ``csem score`` writes them; ``.std`` columns with MC dropout).

    Args:
        model: model folder written by ``csem train`` (on a multi-node cluster: a path every node
            can read, e.g. a shared file system).
        name: metric name in the columns (default: the model's). batch_size: sequences per encoder
            call. mc_dropout, precision: as ``csem score``. threads: torch CPU threads of the actor
            (default: leave torch's). columns: ``--col`` mapping. where: the input's name, for errors.

    Raises (from ``__call__``):
        RecordError: a record lacks a text the model's mode needs, or holds a bad one (names it).
    """

    def __init__(self, model: str, *, name: str | None = None, batch_size: int = 64, mc_dropout: int = 0,
                 precision: str = "auto", threads: int | None = None, columns: Mapping[str, str] | None = None,
                 where: str = "<records>"):
        import torch

        from csem.model import EvaluationModel

        if threads:
            torch.set_num_threads(int(threads))
        self.model = EvaluationModel.load(model)
        self.name, self.where, self.columns = name, where, dict(columns or {})
        self.options = {"batch_size": batch_size, "mc_dropout": mc_dropout, "precision": precision}
        self.required = required_fields(self.model)

    def __call__(self, batch: pa.Table) -> pa.Table:
        records = to_records(batch, where=self.where, columns=self.columns, required=self.required)
        table = to_table(records, batch.schema)
        pred = self.model.predict(records, name=self.name, **self.options)
        for col, values in pred.written().items():
            table = table.append_column(col, pa.array(values, type=pa.float64()))
        return table


def score_dataset(ds: "ray.data.Dataset", model: str | Path, *, workers: int = 1, cpus_per_worker: float = 1,
                  gpus_per_worker: float = 0, records_per_batch: int = 1024, scorer_class: type = None,
                  **scorer: Any) -> "ray.data.Dataset":
    """``ds`` with a [`RayScorer`][csem.engines.ray.RayScorer] stage (lazy: nothing runs until the dataset is consumed).

    Args:
        ds: a Ray dataset of records. model: the model folder.
        workers: actors in the pool (each loads the model once). cpus_per_worker: CPUs reserved per
            actor (also its torch threads unless ``threads`` is given). gpus_per_worker: GPUs per
            actor (0: CPU). records_per_batch: rows per ``__call__`` (the scorer pools the distinct
            texts of a batch, so larger batches share more encodings; memory grows with it).
        scorer_class: [`RayScorer`][csem.engines.ray.RayScorer] or a subclass of it (default RayScorer).
        scorer: its keyword arguments (name, batch_size, mc_dropout, precision, threads, columns, where).
    """
    if workers < 1 or cpus_per_worker <= 0 or records_per_batch < 1:
        raise InputError(f"workers ({workers}), cpus_per_worker ({cpus_per_worker}) and records_per_batch "
                         f"({records_per_batch}) must be positive")
    scorer.setdefault("threads", max(1, int(cpus_per_worker)))
    # streaming split of large blocks (one Parquet row group, one JSONL file) so every actor gets work
    ds = ds.repartition(target_num_rows_per_block=records_per_batch)
    return ds.map_batches(scorer_class or RayScorer, fn_constructor_args=(str(model),), fn_constructor_kwargs=scorer,
                          batch_size=records_per_batch, batch_format="pyarrow",
                          compute=ActorPoolStrategy(size=workers), num_cpus=cpus_per_worker,
                          num_gpus=gpus_per_worker or None)


# ----------------------------------------------------------------------------------------------
# files: read, write (a folder of part files), and the whole `csem score --engine ray` run
# ----------------------------------------------------------------------------------------------

def read_dataset(path: str | Path) -> "ray.data.Dataset":
    """A Ray dataset over a Parquet/JSONL file or a folder of them (read lazily, in parallel blocks).

    Raises:
        FileNotFoundError: no such file or folder. RecordError: not Parquet or JSONL.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    fmt = file_format(path)
    if fmt == "parquet":
        return ray.data.read_parquet(str(path))
    # pyarrow's JSON reader (Arrow types as csem's Parquet reader gives them); one file per read task,
    # so a corpus larger than memory is a folder of files
    return ray.data.read_json(str(path), file_extensions=["jsonl", "ndjson", "json"])


class JsonlDatasink(BlockBasedFileDatasink):
    """Writes each block as one ``.jsonl`` part file with csem's JSON encoding (``json.dumps``, UTF-8,
    floats written exactly, as [`csem.data.records.write_records`][])."""

    def __init__(self, path: str, **kwargs: Any):
        super().__init__(path, file_format="jsonl", **kwargs)

    def write_block_to_file(self, block: Any, file: Any) -> None:
        import json

        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in block.to_arrow().to_pylist())
        file.write(lines.encode("utf-8"))


def write_dataset(ds: "ray.data.Dataset", out: str | Path, fmt: str) -> None:
    """Write ``ds`` as part files into the folder ``out`` (Parquet, or JSONL through
    [`JsonlDatasink`][csem.engines.ray.JsonlDatasink]); fails if ``out`` already holds files."""
    from ray.data import SaveMode

    if fmt == "parquet":
        ds.write_parquet(str(out), mode=SaveMode.ERROR)
    else:
        ds.write_datasink(JsonlDatasink(str(out), mode=SaveMode.ERROR))


def count_rows(out: str | Path, fmt: str) -> int:
    """Rows in a folder of part files (Parquet: from the footers; JSONL: lines)."""
    n = 0
    for p in sorted(Path(out).iterdir()):
        if fmt == "parquet" and p.suffix == ".parquet":
            import pyarrow.parquet as pq

            n += pq.ParquetFile(p).metadata.num_rows
        elif fmt == "jsonl" and p.suffix == ".jsonl":
            with p.open("rb") as f:
                n += sum(1 for line in f if line.strip())
    return n


def ensure_ray(*, num_cpus: float | None = None, **options: Any) -> bool:
    """Connect to Ray: the running session, else the cluster ``RAY_ADDRESS`` names, else a new
    local one with ``num_cpus`` logical CPUs. Returns True when this call started it (the caller
    then shuts it down)."""
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        ray.init(**options)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, **options)
    return True


def score_files(model: str | Path, data: str | Path, out: str | Path, *, workers: int = 1,
                cpus_per_worker: float = 1, gpus_per_worker: float = 0, records_per_batch: int = 1024,
                preserve_order: bool = True, **scorer: Any) -> dict:
    """``csem score --engine ray``: read ``data`` (a Parquet/JSONL file or folder), score it on a
    pool of ``workers`` actors, write the folder ``out`` (Parquet or JSONL part files, by its suffix).

    Streams: blocks are read, scored and written as they flow, so the corpus need not fit in
    memory (one input file must fit in a read task's memory; split a huge JSONL file). Starts a
    local Ray (``workers * cpus_per_worker + 1`` logical CPUs, at least the machine's) unless one is
    running or ``RAY_ADDRESS`` names a cluster. ``preserve_order``: part files follow the input
    order (Ray Data's ``preserve_order``; False lets fast blocks overtake slow ones).

    Returns:
        ``{"rows": rows written, "columns": score columns added, "format": "parquet"|"jsonl",
        "out": folder}``.

    Raises:
        RecordError: bad input or output (named), or a bad record (input, record id, field).
        ModelFolderError: the model folder cannot be loaded (checked here before Ray starts).
        FileNotFoundError: no input.
    """
    from csem.model import EvaluationModel

    fmt = check_output_folder(out)  # before any work: the output, the input, the model
    check_input(data)
    model = Path(model)
    probe = EvaluationModel.load(model)  # a bad folder fails here, once, not in every actor
    columns = probe.predict([], name=scorer.get("name")).columns
    del probe
    started = ensure_ray(num_cpus=max(float(os.cpu_count() or 1), workers * cpus_per_worker + 1))
    data_log = logging.getLogger("ray.data")  # its error report of a bad record is csem's one line here
    ctx = ray.data.DataContext.get_current()  # a dataset copies the context when it is created: set it first
    saved = (data_log.level, ctx.execution_options.preserve_order, ctx.raise_original_map_exception)
    data_log.setLevel(logging.CRITICAL)
    ctx.execution_options.preserve_order = preserve_order
    ctx.raise_original_map_exception = True  # a bad record's RecordError, not Ray's UserCodeException
    try:
        scored = score_dataset(read_dataset(data), model, workers=workers, cpus_per_worker=cpus_per_worker,
                               gpus_per_worker=gpus_per_worker, records_per_batch=records_per_batch,
                               where=str(data), **scorer)
        try:
            write_dataset(scored, out, fmt)
        except Exception as exc:  # a csem error in a worker: re-raised as itself (one line, exit 2)
            err = _user_error(exc)
            if err is not None:
                raise err from None
            raise
    finally:
        data_log.setLevel(saved[0])
        ctx.execution_options.preserve_order, ctx.raise_original_map_exception = saved[1:]
        if started:
            ray.shutdown()
    return {"rows": count_rows(out, fmt), "columns": columns, "format": fmt, "out": str(out)}


# ----------------------------------------------------------------------------------------------
# judging
# ----------------------------------------------------------------------------------------------

class RayJudge:
    """An LLM judge as a Ray Data stage: each batch goes through [`csem.judge.judge_records`][]
    (the code of ``csem annotate``), with its SQLite cache and the backend's own concurrency.

    Args:
        rubrics: rubric ids/paths (as ``csem annotate --rubric``) or [`Rubric`][csem.rubrics.Rubric]
            objects. judge: judge URI, e.g.
            ``openai:MODEL`` (vLLM or llama.cpp server) or ``local``.
        cache: SQLite judgment cache file (default None: in memory, no resume). Actors on one
            machine share the file (WAL mode); on several machines give each node its own file, or
            one on a file system with working POSIX locks. The keys are ``csem annotate``'s.
        backend_options: ``--judge-opt`` pairs (``base_url``, ``api_key``, ``concurrency`` ...).
        columns: ``--col`` mapping. where: the input's name, for errors. options: further
            [`judge_records`][csem.judge.judge_records] arguments (``mode``, ``n``, ``temperature``,
            ``max_tokens``, ``min_mass``, ``fallback``, ``keep_raw``).

    ``__call__``: Arrow table in, the same rows plus ``judge.<aspect>`` (float64, null when missing)
    and its side columns (``.missing``, ``.mass``, ``.raw``) out. A judgment the backend failed to
    make is missing with its reason (never cached: a re-run retries it).
    """

    def __init__(self, rubrics: Any, judge: str, *, cache: str | Path | None = None,
                 backend_options: Mapping[str, Any] | None = None, columns: Mapping[str, str] | None = None,
                 where: str = "<records>", **options: Any):
        from csem.rubrics import Rubric, load_rubrics

        items = [rubrics] if isinstance(rubrics, (str, Rubric)) else list(rubrics)
        self.rubrics = [x for r in items for x in ([r] if isinstance(r, Rubric) else load_rubrics(r))]
        self.judge, self.cache = judge, None if cache is None else str(cache)
        self.backend_options = dict(backend_options or {})
        self.columns, self.where, self.options = dict(columns or {}), where, options

    def __call__(self, batch: pa.Table) -> pa.Table:
        from csem.judge import judge_records

        records = to_records(batch, where=self.where, columns=self.columns)
        rows, _summary = judge_records(records, self.rubrics, self.judge, cache=self.cache, progress=False,
                                       backend_options=self.backend_options, **self.options)
        return to_table(rows, batch.schema)


def judge_dataset(ds: "ray.data.Dataset", rubrics: Any, judge: str, *, workers: int = 1,
                  cpus_per_worker: float = 0.25, records_per_batch: int = 64, **judge_args: Any) -> "ray.data.Dataset":
    """``ds`` with a [`RayJudge`][csem.engines.ray.RayJudge] stage (lazy). A judge actor mostly waits on HTTP, so it
    reserves a fraction of a CPU by default; the load on the server is ``workers`` times the
    backend's ``concurrency`` option.

    Args:
        judge_args: [`RayJudge`][csem.engines.ray.RayJudge] keyword arguments (cache, backend_options, columns, mode ...).
    """
    if workers < 1 or records_per_batch < 1:
        raise InputError(f"workers ({workers}) and records_per_batch ({records_per_batch}) must be positive")
    ds = ds.repartition(target_num_rows_per_block=records_per_batch)
    return ds.map_batches(RayJudge, fn_constructor_args=(rubrics, judge), fn_constructor_kwargs=judge_args,
                          batch_size=records_per_batch, batch_format="pyarrow",
                          compute=ActorPoolStrategy(size=workers), num_cpus=cpus_per_worker)
