"""issue 11: `csem score` fails honestly: empty input (exit 2), a record without the text its mode needs
(file, line, field), an output path checked before any work, CSEM_DEBUG=1 tracebacks."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from csem.data.records import write_records


@pytest.fixture(scope="module")
def cli():
    from csem.cli import _load_commands, app

    _load_commands()
    return app


def _score(cli, *args, env=None):
    res = CliRunner().invoke(cli, ["score", *map(str, args)], env=env)
    return res.exit_code, res.output


def test_empty_file_is_bad_input(cli, trained, tmp_path):
    _, folder = trained
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out = _score(cli, "--model", folder, "--data", empty, "--out", tmp_path / "o.jsonl")
    assert code == 2 and "empty.jsonl: no rows to score" in out
    assert not (tmp_path / "o.jsonl").exists()


def test_missing_source_names_file_line_field(cli, trained, tmp_path, test_records):
    _, folder = trained
    rows = [dict(r) for r in test_records[:3]]
    del rows[1]["source"]
    data = write_records(rows, tmp_path / "nosrc.jsonl")
    code, out = _score(cli, "--model", folder, "--data", data, "--out", tmp_path / "o.jsonl")
    assert code == 2, out
    assert "nosrc.jsonl, line 2, field 'source'" in out and "missing" in out


def test_output_checked_before_any_work(cli, tmp_path):
    data = write_records([{"source": "s", "candidate": "c"}], tmp_path / "in.jsonl")
    (tmp_path / "taken.jsonl").mkdir()
    # the model folder does not even exist: the output is checked first
    for bad, message in ((tmp_path / "o.xlsx", "unknown file format"), (tmp_path / "taken.jsonl", "is a directory")):
        code, out = _score(cli, "--model", tmp_path / "no-model", "--data", data, "--out", bad)
        assert code == 2 and message in out, out


def test_debug_shows_the_traceback(cli, trained, tmp_path):
    _, folder = trained
    empty = tmp_path / "d.jsonl"
    (tmp_path / "dir.jsonl").mkdir()
    code, out = _score(cli, "--model", folder, "--data", tmp_path / "dir.jsonl", "--out", empty,
                       env={"CSEM_DEBUG": "1"})
    assert code == 2 and "Traceback (most recent call last)" in out and "is a directory" in out
    code, out = _score(cli, "--model", folder, "--data", tmp_path / "dir.jsonl", "--out", empty, env={"CSEM_DEBUG": ""})
    assert code == 2 and "Traceback" not in out
