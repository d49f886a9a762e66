"""The records layer (csem.data.records): round trips, column mapping, kept columns, errors that name
file, line and field."""

from __future__ import annotations

import json

import pytest

from csem.data.records import RecordError, normalize_record, parse_column_map, read_records, references_of, write_records

ROWS = [
    {"id": "a", "source": "Der Hund bellt.", "candidate": "The dog barks.", "reference": ["The dog barks.", "A dog is barking."],
     "doc_id": 1, "system_id": "sysA", "human.fluency": 4.5, "judge.fluency": None, "note": "ünïcode ✓", "n": 3},
    {"id": "b", "source": "Die Katze schläft.", "candidate": "The cat sleeps.", "reference": "The cat is sleeping.",
     "doc_id": 1, "system_id": "sysB", "human.fluency": 3.0, "judge.fluency": 2.25, "note": "comma, \"quote\"\nnewline",
     "n": 4},
]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv", ".parquet"])
def test_round_trip_mixed_reference_types(tmp_path, suffix):
    """One record with several references (list), one with a single reference (str). Parquet holds one
    type per column, so there a single reference comes back as a one-element list."""
    _round_trip(tmp_path, suffix, ROWS)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv", ".parquet"])
def test_round_trip_keeps_every_column(tmp_path, suffix):
    rows = [dict(r, reference=[r["reference"]] if isinstance(r["reference"], str) else r["reference"]) for r in ROWS]
    _round_trip(tmp_path, suffix, rows)


def _round_trip(tmp_path, suffix, rows):
    p = write_records(rows, tmp_path / f"r{suffix}")
    got = read_records(p)
    assert [r["id"] for r in got] == ["a", "b"]
    for g, o in zip(got, rows):
        assert g["source"] == o["source"] and g["candidate"] == o["candidate"]
        if suffix == ".parquet":
            assert references_of(g) == references_of(o)
        else:
            assert g["reference"] == o["reference"]  # list stays a list, str stays a str
        assert g["doc_id"] == "1" and g["system_id"] == o["system_id"]
        assert g["human.fluency"] == o["human.fluency"] and g["judge.fluency"] == o["judge.fluency"]
        assert g["note"] == o["note"]  # unknown columns kept verbatim (CSV quoting, unicode, newline)
        assert str(g["n"]) == str(o["n"])
    # a second round trip is stable
    again = read_records(write_records(got, tmp_path / f"r2{suffix}"))
    assert again == got


def test_column_mapping_aliases_and_defaults(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"article": "src text", "summary": "cand", "refs": ["r1"], "keep": 1}) + "\n"
                 + json.dumps({"article": "src 2", "summary": "cand 2", "refs": None, "keep": 2}) + "\n")
    got = read_records(p, columns={"source": "article"})
    assert got[0]["source"] == "src text" and got[0]["candidate"] == "cand" and got[0]["reference"] == ["r1"]
    assert got[0]["keep"] == 1 and "article" not in got[0] and "summary" not in got[0]
    assert [r["id"] for r in got] == ["1", "2"]  # ids default to line numbers
    assert references_of(got[0]) == ["r1"] and references_of(got[1]) == []
    assert parse_column_map(["source=article", " candidate = hyp "]) == {"source": "article", "candidate": "hyp"}
    with pytest.raises(ValueError, match="FIELD=COLUMN"):
        parse_column_map(["source"])
    with pytest.raises(RecordError, match="column 'text' \\(mapped to 'source'\\) is missing"):
        read_records(p, columns={"source": "text"})


def test_nan_and_non_numeric_scores_become_missing_not_zero():
    r = normalize_record({"source": "s", "candidate": "c", "human.x": float("nan"), "metric.y": "n/a", "judge.z": "3"})
    assert r["human.x"] is None and r["metric.y"] is None and r["judge.z"] == 3.0


def _write(tmp_path, name, text: str | bytes):
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


@pytest.mark.parametrize("name, content, line, field, message", [
    ("missing.jsonl", '{"source": "s", "candidate": "c"}\n{"source": "s"}\n', 2, "candidate", "missing"),
    ("empty.jsonl", '{"source": "s", "candidate": "c"}\n{"source": "  ", "candidate": "c"}\n', 2, "source", "empty"),
    ("bad.jsonl", '{"source": "s", "candidate": "c"}\n{"source": "s", "candidate": \n', 2, None, "malformed JSON"),
    ("notobj.jsonl", '{"source": "s", "candidate": "c"}\n[1, 2]\n', 2, None, "JSON object"),
    ("missing.csv", "source,candidate\ns,c\ns2,\n", 3, "candidate", "missing"),
    ("extra.csv", "source,candidate\ns,c,surplus\n", 2, None, "more values than header"),
    ("dup.jsonl", '{"id": 1, "source": "s", "candidate": "c"}\n{"id": 1, "source": "s", "candidate": "c"}\n', 2, "id",
     "duplicate id"),
    ("type.jsonl", '{"source": "s", "candidate": 5}\n', 1, "candidate", "must be a string"),
])
def test_errors_name_file_line_and_field(tmp_path, name, content, line, field, message):
    p = _write(tmp_path, name, content)
    with pytest.raises(RecordError, match=message) as err:
        read_records(p)
    e = err.value
    assert e.path == str(p) and e.line == line and e.field == field
    assert str(p) in str(e) and f"line {line}" in str(e)


def test_non_utf8_names_the_line(tmp_path):
    p = _write(tmp_path, "latin.jsonl", b'{"source": "s", "candidate": "c"}\n{"source": "caf\xe9", "candidate": "c"}\n')
    with pytest.raises(RecordError, match="not valid UTF-8") as err:
        read_records(p)
    assert err.value.line == 2


def test_unknown_format_missing_file_and_broken_parquet(tmp_path):
    with pytest.raises(RecordError, match="unknown file format"):
        read_records(_write(tmp_path, "x.xlsx", "x"))
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        read_records(tmp_path / "nope.jsonl")
    with pytest.raises(RecordError, match="cannot read Parquet"):
        read_records(_write(tmp_path, "x.parquet", b"not parquet at all"))


def test_writer_is_atomic_and_keeps_old_file_on_error(tmp_path):
    p = write_records(ROWS, tmp_path / "out.jsonl")
    before = p.read_text()

    class Boom:
        def __iter__(self):
            yield ROWS[0]
            raise RuntimeError("generator failed")

    with pytest.raises(RuntimeError):
        write_records(Boom(), p)
    assert p.read_text() == before
