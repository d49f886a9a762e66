"""The one record type of csem, and its readers and writers (JSONL, CSV, Parquet).

A record is a plain ``dict`` with these well-known keys (any other key is kept untouched):

* ``id`` (str): unique key of the sample; derived from the row number when absent.
* ``source`` (str): the input text (article, source sentence, dialogue context).
* ``candidate`` (str): the generated text being evaluated (aliases on read:
  ``hypothesis``, ``summary``, ``translation``, ``response``, ``output``).
* ``reference`` (str | list[str] | None): one or several references.
* ``doc_id``, ``system_id`` (str, optional): grouping keys for summary- and system-level
  correlations.
* score columns: ``human.<aspect>``, ``judge.<aspect>``, ``metric.<name>[.<aspect>]`` (float or
  None) and their side fields (``.missing``/``.raw`` text, ``.mass``/``.std`` numbers), named by the
  grammar of [`csem.data.columns`][]. A score that is not a number (``"four"``) is an error; an
  empty cell, ``null``, ``NaN``, ``NA`` or ``N/A`` is a missing score (None).

Readers never drop columns they did not produce, and writers write back every column.
Every malformed row raises [`RecordError`][csem.data.records.RecordError] naming the file, the line (1-based, for CSV
the physical row including the header) and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from csem.data.columns import side_kind
from csem.errors import InputError

CANDIDATE_ALIASES = ("candidate", "hypothesis", "summary", "translation", "response", "output")
REFERENCE_ALIASES = ("reference", "references", "ref", "refs")
TEXT_FIELDS = ("source", "candidate")
MAX_TEXT_CHARS = 1_000_000  # a text longer than this is almost always a broken file


class RecordError(InputError):
    """A row of an input file is malformed. ``str(err)`` names file, line and field."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = f"{self.path}" + (f", line {line}" if line is not None else "")
        where += f", field '{field}'" if field else ""
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # picklable (raised in a worker process: Ray, multiprocessing)
        return (type(self), (self.path, self.line, self.field, self.message))


def _format(path: Path, fmt: str | None) -> str:
    if fmt:
        return fmt.lower()
    suffixes = [s.lower() for s in path.suffixes]
    for s in reversed(suffixes):
        if s in (".jsonl", ".ndjson", ".json"):
            return "jsonl"
        if s in (".csv", ".tsv"):
            return s[1:]
        if s in (".parquet", ".pq"):
            return "parquet"
    raise RecordError(path, None, None, f"unknown file format '{path.suffix}' (use .jsonl, .csv, .tsv or .parquet)")


def _iter_raw(path: Path, fmt: str) -> Iterator[tuple[int, dict]]:
    """Yield (line number, raw row dict)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a broken file
            raise RecordError(path, None, None, f"cannot read Parquet file: {exc}") from exc
        for i, row in enumerate(table.to_pylist(), start=1):
            yield i, row
        return
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecordError(path, line, None, f"not valid UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start}); "
                          "re-encode the file as UTF-8") from exc
    if fmt == "jsonl":
        stripped = text.lstrip()
        if stripped.startswith("["):  # a JSON array file is accepted too
            try:
                rows = json.loads(text)
            except json.JSONDecodeError as exc:
                raise RecordError(path, exc.lineno, None, f"malformed JSON: {exc.msg}") from exc
            for i, row in enumerate(rows, start=1):
                if not isinstance(row, dict):
                    raise RecordError(path, i, None, f"item {i} of the JSON array is not an object")
                yield i, row
            return
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(path, i, None, f"malformed JSON: {exc.msg} (column {exc.colno})") from exc
            if not isinstance(row, dict):
                raise RecordError(path, i, None, "a JSONL line must be a JSON object")
            yield i, row
        return
    delimiter = "\t" if fmt == "tsv" else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    for row in reader:
        if None in row:
            raise RecordError(path, reader.line_num, None, "more values than header columns")
        yield reader.line_num, {k: _csv_value(v, k) for k, v in row.items()}


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """csem's one JSONL reader: ``(1-based line, object)`` for every non-empty line (a file holding
    one JSON array of objects is accepted too; a UTF-8 BOM is skipped).

    Raises:
        RecordError: bytes that are not UTF-8, malformed JSON, or a line that is not an object
            (file and line named).
    """
    return _iter_raw(Path(path), "jsonl")


def _csv_value(v: Any, key: str | None = None) -> Any:
    if v is None or v == "":
        return None
    if isinstance(v, str) and v[:1] in "[{" and side_kind(key) != "text":  # a judge's raw answer stays text
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v


MISSING_MARKERS = ("", "nan", "null", "none", "na", "n/a")  # read as a missing score (case-insensitive)


def _to_score(value: Any, path: str | Path, line: int | None, field: str) -> float | None:
    """A score cell as float or None; anything else that is not a number is a [`RecordError`][csem.data.records.RecordError]."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in MISSING_MARKERS:
        return None
    if not isinstance(value, bool):
        try:
            f = float(value)
        except (TypeError, ValueError):
            f = None
        if f is not None:
            if math.isinf(f):
                raise RecordError(path, line, field, f"score {value!r} is infinite")
            return None if math.isnan(f) else f
    raise RecordError(path, line, field, f"score {value!r} is not a number "
                      "(write a number, or leave the cell empty / null for a missing score)")


def _convert_scores(rec: dict, numeric: Sequence[str], path: str | Path, line: int | None) -> None:
    """Score columns and numeric side fields to float/None, text side fields to str/None (in place)."""
    for k in list(rec):
        kind = "score" if k in numeric else side_kind(k)
        if kind in ("score", "number"):
            rec[k] = _to_score(rec[k], path, line, k)
        elif kind == "text" and rec[k] is not None and not isinstance(rec[k], str):
            rec[k] = json.dumps(rec[k], ensure_ascii=False) if isinstance(rec[k], (list, dict)) else str(rec[k])


def normalize_record(
    row: Mapping[str, Any],
    *,
    columns: Mapping[str, str] | None = None,
    required: Sequence[str] = TEXT_FIELDS,
    path: str | Path = "<records>",
    line: int | None = None,
    numeric: Sequence[str] = (),
) -> dict:
    """Map a raw row onto the csem record schema.

    Args:
        row: the raw row.
        columns: user column mapping ``{csem_field: user_column}``, e.g. ``{"source": "article"}``.
        required: fields that must be present and non-empty.
        path, line: used in error messages.
        numeric: further columns that must hold numbers or be empty, as score columns do
            (e.g. a label column named outside the score-column grammar).

    Returns:
        A new dict: csem field names first, every other column kept as is.

    Raises:
        RecordError: a required field is missing or empty, a text is not a string or is longer
            than ``MAX_TEXT_CHARS``, a mapped column is absent, a score is not a number.
    """
    columns = dict(columns or {})
    rec: dict[str, Any] = {}
    used: set[str] = set()
    for field, col in columns.items():
        if col not in row:
            raise RecordError(path, line, col, f"column '{col}' (mapped to '{field}') is missing; "
                              f"columns present: {sorted(row)}")
        rec[field] = row[col]
        used.add(col)
    if "candidate" not in rec:
        for alias in CANDIDATE_ALIASES:
            if alias in row and alias not in used:
                rec["candidate"] = row[alias]
                used.add(alias)
                break
    if "reference" not in rec:
        for alias in REFERENCE_ALIASES:
            if alias in row and alias not in used:
                rec["reference"] = row[alias]
                used.add(alias)
                break
    for k, v in row.items():
        if k not in used and k not in rec:
            rec[k] = v
    for field in required:
        value = rec.get(field)
        if value is None:
            raise RecordError(path, line, columns.get(field, field), f"required field '{field}' is missing"
                              + (f" (map a column with --col {field}=COLUMN)" if field in (*TEXT_FIELDS, "reference") else ""))
        if field in TEXT_FIELDS and isinstance(value, str) and not value.strip():
            raise RecordError(path, line, columns.get(field, field), f"'{field}' is empty")
    for field in TEXT_FIELDS:
        value = rec.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise RecordError(path, line, field, f"'{field}' must be a string, got {type(value).__name__}")
        if "\x00" in value:
            raise RecordError(path, line, field, f"'{field}' contains a NUL byte (at character {value.index(chr(0))}); "
                              "the file is probably binary or corrupted: remove the NUL bytes")
        if len(value) > MAX_TEXT_CHARS:
            raise RecordError(path, line, field, f"'{field}' has {len(value):,} characters "
                              f"(limit {MAX_TEXT_CHARS:,}); is the file split into rows correctly?")
    ref = rec.get("reference")
    if any("\x00" in r for r in ([ref] if isinstance(ref, str) else ref if isinstance(ref, list) else [])
           if isinstance(r, str)):
        raise RecordError(path, line, "reference", "'reference' contains a NUL byte; the file is probably binary "
                          "or corrupted: remove the NUL bytes")
    if isinstance(ref, list):
        refs = [r for r in ref if isinstance(r, str) and r.strip()]
        if len(refs) != len(ref):
            raise RecordError(path, line, "reference", "every reference must be a non-empty string")
    elif ref is not None and not isinstance(ref, str):
        raise RecordError(path, line, "reference", f"'reference' must be a string or list of strings, got {type(ref).__name__}")
    elif isinstance(ref, str) and not ref.strip():
        rec["reference"] = None
    _convert_scores(rec, numeric, path, line)
    if rec.get("id") is None:
        rec["id"] = str(line) if line is not None else None
    else:
        rec["id"] = str(rec["id"])
    for k in ("doc_id", "system_id"):
        if rec.get(k) is not None:
            rec[k] = str(rec[k])
    return rec


#: the example and sample files shipped in csem, named ``package:NAME`` (pipeline files, quick-start data)
PACKAGE_FILES = Path(__file__).resolve().parents[1] / "pipeline" / "examples"


def package_path(path: str | Path) -> Path:
    """``package:NAME`` -> the file ``NAME`` shipped with csem (`PACKAGE_FILES`, e.g.
    ``package:quickstart/test.jsonl``); any other path unchanged.

    Raises:
        FileNotFoundError: no shipped file of that name (the message lists the shipped ones).
    """
    text = str(path)
    if not text.startswith("package:"):
        return Path(path)
    name = text.split(":", 1)[1]
    parts = name.replace("\\", "/").split("/")
    if not name or any(p in ("", ".", "..") for p in parts) or not (PACKAGE_FILES / name).is_file():
        shipped = sorted(p.relative_to(PACKAGE_FILES).as_posix() for p in PACKAGE_FILES.rglob("*")
                         if p.is_file() and p.suffix in (".jsonl", ".yaml"))
        raise FileNotFoundError(f"{text}: no such file shipped with csem (shipped: {', '.join(shipped)})")
    return PACKAGE_FILES.joinpath(*parts)


def read_records(
    path: str | Path,
    *,
    columns: Mapping[str, str] | None = None,
    required: Sequence[str] = TEXT_FIELDS,
    fmt: str | None = None,
    numeric: Sequence[str] = (),
) -> list[dict]:
    """Read a JSONL/CSV/TSV/Parquet file into csem records.

    Args:
        path: input file (or ``package:NAME``, a file shipped with csem: [`package_path`][csem.data.records.package_path]); the
            format comes from the suffix unless ``fmt`` is given.
        columns: ``{csem_field: user_column}`` mapping (``--source-col`` etc. on the CLI).
        required: fields every row must have (default: ``source`` and ``candidate``).
        numeric: further columns that must hold numbers or be empty (score columns always must).

    Returns:
        One dict per row, in file order; ``id`` defaults to the 1-based line number.

    Raises:
        FileNotFoundError: no such file.
        RecordError: a directory, unknown format, non-UTF-8 bytes, malformed JSON, missing/empty
            field, a NUL byte in a text, a score that is not a number, duplicate ``id``; the message
            names the file, line and field.
    """
    path = package_path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise RecordError(path, None, None, "is a directory, not a records file (.jsonl, .csv, .tsv or .parquet)")
    kind = _format(path, fmt)
    out: list[dict] = []
    seen: dict[str, int] = {}
    for line, row in _iter_raw(path, kind):
        rec = normalize_record(row, columns=columns, required=required, path=path, line=line, numeric=numeric)
        if rec["id"] in seen:
            raise RecordError(path, line, "id", f"duplicate id '{rec['id']}' (first at line {seen[rec['id']]})")
        seen[rec["id"]] = line
        out.append(rec)
    return out


def check_output_path(path: str | Path, *, fmt: str | None = None, kind: str = "records file") -> Path:
    """Check, before any work, that a records file can be written at ``path``.

    ``kind="folder"`` checks a folder to be created or filled instead (no format). Nothing is written.

    Raises:
        RecordError: unknown format (for a records file), ``path`` is a directory (records file) or a
            file (folder), or its parent folder cannot be created or written.
    """
    import os

    path = Path(path)
    if kind == "folder":
        if path.exists() and not path.is_dir():
            raise RecordError(path, None, None, "exists and is not a folder")
    else:
        if path.is_dir():
            raise RecordError(path, None, None, "is a directory; give a file name (.jsonl, .csv, .tsv or .parquet)")
        _format(path, fmt)
    parent = path.parent if kind != "folder" or not path.exists() else path
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise RecordError(path, None, None, f"cannot be created: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RecordError(path, None, None, f"cannot be written: no write permission in {probe}")
    return path


def write_records(records: Iterable[Mapping[str, Any]], path: str | Path, *, fmt: str | None = None) -> Path:
    """Write records to JSONL/CSV/TSV/Parquet (by suffix), keeping every column.

    The file is written to a temporary sibling and renamed, so a crash never leaves half a file.
    CSV cells holding lists or dicts are JSON-encoded (and decoded again by [`read_records`][csem.data.records.read_records]).
    """
    path = Path(path)
    kind = _format(path, fmt)
    rows = [dict(r) for r in records]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if kind == "jsonl":
        with tmp.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    elif kind in ("csv", "tsv"):
        keys: list[str] = []
        for r in rows:
            keys.extend(k for k in r if k not in keys)
        with tmp.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, delimiter="\t" if kind == "tsv" else ",")
            w.writeheader()
            for r in rows:
                w.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v
                            for k, v in r.items()})
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if any(isinstance(r.get("reference"), list) for r in rows):
            # one Arrow type per column: a single reference becomes a one-element list
            rows = [dict(r, reference=[r["reference"]]) if isinstance(r.get("reference"), str) else r for r in rows]
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)
    return path


def references_of(record: Mapping[str, Any]) -> list[str]:
    """The record's references as a list (empty when it has none)."""
    ref = record.get("reference")
    if ref is None:
        return []
    return [ref] if isinstance(ref, str) else list(ref)


def parse_column_map(pairs: Iterable[str]) -> dict[str, str]:
    """Parse CLI ``FIELD=COLUMN`` pairs into a column mapping (``source=article``)."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise InputError(f"column mapping '{p}' must look like FIELD=COLUMN, e.g. source=article")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
