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
    # issue 11: a score that is not a number is an error, never a silent null
    ("label.jsonl", '{"source": "s", "candidate": "c", "judge.coherence": 4}\n'
     '{"source": "s", "candidate": "c2", "judge.coherence": "four"}\n', 2, "judge.coherence", "not a number"),
    ("label.csv", "source,candidate,human.fluency\ns,c,3\ns,c2,good\n", 3, "human.fluency", "not a number"),
    ("bool.jsonl", '{"source": "s", "candidate": "c", "metric.x": true}\n', 1, "metric.x", "not a number"),
    ("nul.jsonl", '{"source": "s", "candidate": "c"}\n{"source": "s\\u0000x", "candidate": "c"}\n', 2, "source",
     "NUL byte"),
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


def test_numeric_columns_outside_the_grammar(tmp_path):
    p = _write(tmp_path, "r.jsonl", '{"source": "s", "candidate": "c", "rating": "4"}\n'
               '{"source": "s", "candidate": "c2", "rating": "four"}\n')
    assert read_records(p)[1]["rating"] == "four"  # not a score column: kept as it is
    with pytest.raises(RecordError, match="not a number") as err:
        read_records(p, numeric=["rating"])
    assert err.value.line == 2 and err.value.field == "rating"


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_judged_file_round_trips_side_fields(tmp_path, suffix):
    """issue 11: the reasons and raw answers of a judged file survive writing and reading back."""
    rows = [
        {"id": "1", "source": "s", "candidate": "c", "judge.coherence": 4.25, "judge.coherence.mass": 0.97,
         "judge.coherence.raw": "4", "judge.fluency": None, "judge.fluency.missing": "unparseable answer: no score found",
         "judge.fluency.raw": '{"reason": "fine", "verdict": "good"}', "metric.csem.coherence": 3.5,
         "metric.csem.coherence.std": 0.25},
        {"id": "2", "source": "s", "candidate": "d", "judge.coherence": 2.0, "judge.coherence.mass": 1.0,
         "judge.coherence.raw": "2", "judge.fluency": None, "judge.fluency.missing": "backend error: prompt too long",
         "judge.fluency.raw": '["3 or 4", "maybe"]', "metric.csem.coherence": 2.5, "metric.csem.coherence.std": 0.5},
    ]
    back = read_records(write_records(rows, tmp_path / f"judged{suffix}"))
    for want, got in zip(rows, back):
        for k, v in want.items():
            assert got[k] == v, (suffix, k, got[k])


def test_directory_is_named_as_such(tmp_path):
    for d in (tmp_path / "data.jsonl", tmp_path / "folder"):
        d.mkdir()
        with pytest.raises(RecordError, match="is a directory"):
            read_records(d)


def test_check_output_path(tmp_path):
    from csem.data.records import check_output_path

    assert check_output_path(tmp_path / "new" / "deeper" / "out.jsonl") == tmp_path / "new" / "deeper" / "out.jsonl"
    assert not (tmp_path / "new").exists()  # nothing is created
    with pytest.raises(RecordError, match="unknown file format"):
        check_output_path(tmp_path / "out.xlsx")
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(RecordError, match="is a directory"):
        check_output_path(tmp_path / "d.jsonl")
    (tmp_path / "file").write_text("x")
    with pytest.raises(RecordError, match="is a file, not a folder"):
        check_output_path(tmp_path / "file" / "out.jsonl")
    with pytest.raises(RecordError, match="not a folder"):
        check_output_path(tmp_path / "file", kind="folder")
    check_output_path(tmp_path / "model-dir", kind="folder")
