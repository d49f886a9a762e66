"""issue 11: one error mapping for every command (csem.cli): exit codes, one-line messages that name the
file, outputs checked before any work, and CSEM_DEBUG=1 tracebacks for every command."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app, error_message, exit_code
from csem.data.records import RecordError, write_records

_load_commands()


def _invoke(*args, env=None):
    res = CliRunner().invoke(app, [str(a) for a in args], env=env)
    return res.exit_code, res.output


def test_exit_code_table():
    """Exit codes by origin: only what csem raises on purpose for bad input (InputError) is exit 2; a
    plain ValueError, KeyError, RuntimeError or TypeError is a bug (None: traceback, exit 1)."""
    from csem.errors import InputError, MissingInputError
    from csem.llm import BackendError

    assert exit_code(RecordError("f.jsonl", 3, "source", "missing")) == 2
    assert exit_code(InputError("bad option")) == 2
    assert exit_code(MissingInputError("no column")) == 2 and error_message(MissingInputError("no column")) == "no column"
    assert exit_code(FileNotFoundError(2, "No such file or directory", "x.jsonl")) == 2
    assert error_message(FileNotFoundError(2, "No such file or directory", "x.jsonl")) == "x.jsonl: No such file or directory"
    assert exit_code(IsADirectoryError(21, "Is a directory", "d")) == 2
    assert exit_code(BackendError("a backend that cannot be reached")) == 1
    assert exit_code(PermissionError(13, "Permission denied", "out.jsonl")) == 1
    for bug in (TypeError("a bug"), ValueError("expected sequence of length 41 at dim 1 (got 28)"), KeyError("x"),
                RuntimeError("shape mismatch")):
        assert exit_code(bug) is None  # bugs keep their traceback


def test_an_internal_value_error_is_a_bug_not_bad_input(tmp_path, monkeypatch):
    """An exception csem did not raise on purpose (here an internal ValueError injected into scoring, as
    torch's "expected sequence of length ..." was) shows its traceback and ``csem: internal error``, exit
    1, not the one-line bad-input error with exit 2; the same path with bad input still exits 2."""
    import importlib

    ev = importlib.import_module("csem.meta.evaluate")

    def broken(*a, **k):
        raise ValueError("expected sequence of length 41 at dim 1 (got 28)")

    data = write_records([{"id": str(i), "doc_id": str(i // 2), "system_id": f"s{i % 2}", "candidate": f"c{i}",
                           "human.coherence": float(i % 3), "metric.m": float(i)} for i in range(6)],
                         tmp_path / "h.jsonl")
    code, out = _invoke("meta-eval", "--data", data, "--bootstrap", "0", "--metric", "metric.nothing")
    assert code == 2 and "csem: error:" in out and "Traceback" not in out, out  # bad input, on purpose
    monkeypatch.setattr(ev, "ScoreTable", type("Broken", (), {"build": staticmethod(broken)}))
    code, out = _invoke("meta-eval", "--data", data, "--bootstrap", "0")
    assert code == 1, out
    assert "Traceback" in out and "ValueError: expected sequence of length 41" in out, out
    assert "csem: internal error: ValueError" in out and "csem: error:" not in out, out


@pytest.fixture()
def humans(tmp_path):
    return write_records([{"id": str(i), "doc_id": str(i // 2), "system_id": f"s{i % 2}", "candidate": f"c{i}",
                           "human.coherence": float(i % 3), "metric.m": float(i)} for i in range(6)],
                         tmp_path / "humans.jsonl")


def test_meta_eval_directory_and_output_checked_first(tmp_path, humans):
    (tmp_path / "folder").mkdir()
    code, out = _invoke("meta-eval", "--data", tmp_path / "folder", "--bootstrap", "0")
    assert code == 2 and "is a directory" in out, out
    (tmp_path / "file").write_text("x")
    code, out = _invoke("meta-eval", "--data", tmp_path / "nothing-here", "--out", tmp_path / "file" / "m")
    assert code == 2 and "is a file, not a folder" in out, out  # before the data is even looked at
    code, out = _invoke("meta-eval", "--data", humans, "--bootstrap", "0", "--plot", tmp_path / "file")
    assert code == 2 and "not a folder" in out, out
    code, out = _invoke("meta-eval", "--data", humans, "--data-option", "oops", "--bootstrap", "0")
    assert code == 2 and "KEY=VALUE" in out


def test_train_output_checked_first(tmp_path):
    (tmp_path / "model").write_text("not a folder")
    code, out = _invoke("train", "--data", tmp_path / "missing.jsonl", "--label-col", "judge.x", "--out",
                        tmp_path / "model")
    assert code == 2 and "model: exists and is not a folder" in out, out
    code, out = _invoke("train", "--data", tmp_path, "--label-col", "judge.x", "--out", tmp_path / "m2")
    assert code == 2 and "is a directory" in out, out


@pytest.mark.parametrize("args", [
    ("meta-eval", "--data", "{tmp}/folder", "--bootstrap", "0"),
    ("train", "--data", "{tmp}/folder", "--label-col", "judge.x", "--out", "{tmp}/m"),
    ("score", "--model", "{tmp}/m", "--data", "{tmp}/folder", "--out", "{tmp}/o.jsonl"),
])
def test_debug_traceback_for_every_command(tmp_path, args):
    (tmp_path / "folder").mkdir()
    args = [a.format(tmp=tmp_path) for a in args]
    code, out = _invoke(*args, env={"CSEM_DEBUG": "1"})
    assert code == 2 and "Traceback (most recent call last)" in out and "csem: error:" in out, out
    code, out = _invoke(*args, env={"CSEM_DEBUG": ""})
    assert code == 2 and "Traceback" not in out and out.count("csem: error:") == 1, out


def test_collect_output_checked_first_and_empty_sources(tmp_path):
    src = write_records([{"id": "1", "source": "An article."}], tmp_path / "s.jsonl")
    # the generator does not exist: the output path is refused before it is looked at
    code, out = _invoke("collect", "--sources", src, "--generator", f"llama-cpp:{tmp_path}/no.gguf",
                        "--out", tmp_path / "o.xlsx")
    assert code == 2 and "unknown file format" in out, out
    (tmp_path / "e.jsonl").write_text("")
    code, out = _invoke("collect", "--sources", tmp_path / "e.jsonl", "--generator", f"llama-cpp:{tmp_path}/no.gguf",
                        "--out", tmp_path / "o.jsonl")
    assert code == 2 and "no sources" in out, out


def test_command_summary_first_sentence_one_line():
    from csem.cli import command_summary

    doc = """Sample candidates per source (top-k 50 by default), add the reference,
    and write one row per candidate. Samples are requested concurrently.

    Second paragraph."""
    assert command_summary(doc) == ("Sample candidates per source (top-k 50 by default), add the reference, "
                                    "and write one row per candidate.")
    assert command_summary("Score records with a learned metric.") == "Score records with a learned metric."
    assert command_summary("No full stop\nat the end") == "No full stop at the end"
    # a full stop inside a sentence (an equation number, a version) does not end it
    assert command_summary("MRT (Eq. 12) + MLE. More.") == "MRT (Eq. 12) + MLE."


def test_help_lists_each_command_on_its_sentence():
    """``csem --help``: each command's summary is its first sentence, not the docstring's hard-wrapped
    first paragraph (which rich printed line by line, breaking sentences mid-way)."""
    _load_commands()
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": "100"}).output
    flat = " ".join(line.strip("│ ").strip() for line in out.splitlines())
    flat = " ".join(flat.split())
    assert "add the reference, and write one candidate per row with its provenance." in flat
    assert "Samples are requested concurrently" not in flat  # the second sentence stays in `csem collect --help`
    assert all(info.short_help and "\n" not in info.short_help for info in app.registered_commands)


@pytest.mark.parametrize("option, value", [("--truncated", "cut"), ("--keep", "some"), ("--empty", "x"),
                                           ("--duplicates", "x")])
def test_collect_choices_name_the_option(tmp_path, option, value):
    src = write_records([{"id": "a", "source": "A river flooded."}], tmp_path / "s.jsonl")
    code, out = _invoke("collect", "--sources", src, "--generator", "llama-cpp:smollm2", "--out",
                        tmp_path / "c.jsonl", option, value)
    assert code == 2 and f"Invalid value for '{option}'" in out and f"'{value}' is not one of" in out
    assert not (tmp_path / "c.jsonl").exists()


def test_train_on_an_empty_file_names_the_file(tmp_path):
    empty = tmp_path / "labelled.jsonl"
    empty.write_text("")
    code, out = _invoke("train", "--data", empty, "--label-col", "judge.coherence", "--out", tmp_path / "m")
    assert code == 2 and f"{empty}: no records to train on (the file is empty)" in out, out
    assert not (tmp_path / "m").exists()
