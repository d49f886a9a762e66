"""Files of the Ray engine, checked before Ray is imported (a usage error costs no Ray start-up):
the input is a Parquet or JSONL file or a folder of them, the output a folder of part files named
like its format (``scored.parquet/``, ``scored.jsonl/``). No Ray import here."""

from __future__ import annotations

from pathlib import Path

from csem.data.records import RecordError

#: file formats the Ray engine reads and writes (by suffix, as csem's own readers)
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


def file_format(path: str | Path) -> str:
    """``parquet`` or ``jsonl`` from the suffix of a file or folder (a folder without a suffix: from
    the files in it).

    Raises:
        RecordError: another format (CSV: convert it, or use ``csem score`` without ``--engine``),
            or a folder with no Parquet/JSONL file.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None and path.is_dir():
        found = {FORMATS[p.suffix.lower()] for p in path.iterdir() if p.suffix.lower() in FORMATS}
        if len(found) == 1:
            fmt = found.pop()
        elif found:
            raise RecordError(path, None, None, "holds both Parquet and JSONL files; give one format per folder")
    if fmt is None:
        raise RecordError(path, None, None, f"the Ray engine reads and writes Parquet or JSONL (.parquet, .jsonl), "
                          f"not '{path.suffix or 'a folder without such files'}'; convert it or score without "
                          "--engine ray")
    return fmt


def check_output_folder(out: str | Path) -> str:
    """The output format, checked before any work: ``out`` is a folder to be created (or an empty
    one) whose suffix names the format (``scored.parquet/``, ``scored.jsonl/``).

    Raises:
        RecordError: a file, a non-empty folder, or a suffix other than Parquet/JSONL.
    """
    from csem.data.records import check_output_path

    out = Path(out)
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise RecordError(out, None, None, "the Ray engine writes a folder of part files named like the format: "
                          "give --out a .parquet or .jsonl name (e.g. scored.parquet)")
    check_output_path(out, kind="folder")
    if out.is_dir() and any(out.iterdir()):
        raise RecordError(out, None, None, "exists and is not empty; remove it or give another --out folder")
    return fmt


def check_input(data: str | Path) -> str:
    """The input's format ([`file_format`][csem.engines.files.file_format]), checked before any work.

    Raises:
        FileNotFoundError: no such file or folder. RecordError: not Parquet or JSONL.
    """
    if not Path(data).exists():
        raise FileNotFoundError(f"{data}: no such file or folder")
    return file_format(data)
