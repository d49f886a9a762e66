"""File names built from data stay inside their folder: the one safe-name function
(`csem.data.filenames`) and every writer that builds a name from data (``csem meta-eval --plot``'s
bar charts and scatter plot, the run report's per-aspect figures), fed ``../``, absolute paths, NUL,
a Windows device name and 300-character names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.filenames import MAX_NAME, path_in, safe_filename
from csem.data.records import write_records

_load_commands()

NASTY = ["x/../../escaped", "../../../../tmp/evil", "/etc/passwd", "a\x00b", "C:\\Windows\\system32", "NUL",
         "a" * 300, "..", ".hidden", "über/ñ"]


def _written(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", NASTY)
def test_safe_filename_keeps_a_name_inside_its_folder(name, tmp_path):
    safe = safe_filename(name)
    assert safe and len(safe) <= MAX_NAME and "/" not in safe and "\\" not in safe and "\x00" not in safe
    assert ".." not in safe and not safe.startswith((".", "-"))
    p = path_in(tmp_path, "scatter", name, suffix=".png")
    assert p.parent == tmp_path and p.resolve().parent == tmp_path.resolve()
    p.write_bytes(b"x")  # the file system accepts it
    assert len(p.name.encode()) <= 255


def test_safe_filename_is_stable_readable_and_tells_names_apart():
    assert safe_filename("metric.csem.coherence") == "metric.csem.coherence"  # a plain name is kept as is
    assert safe_filename("a/b") != safe_filename("a_b")  # a changed name carries a hash of the original
    assert safe_filename("a" * 300) != safe_filename("a" * 301)
    assert safe_filename("x/../../escaped") == safe_filename("x/../../escaped")
    assert safe_filename("NUL").startswith("_")


@pytest.mark.parametrize("aspect", NASTY)
def test_meta_eval_plots_stay_in_the_plot_folder(aspect, tmp_path):
    """``csem meta-eval --plot DIR`` with a human and a metric column named from ``aspect``: every file
    lands directly in DIR."""
    human, metric = f"human.{aspect}", f"metric.m.{aspect}"
    data = tmp_path / "data" / "h.jsonl"
    data.parent.mkdir()
    write_records([{"id": str(i), "doc_id": str(i // 3), "system_id": f"s{i % 3}", "candidate": f"c{i}",
                    human: float(i % 4), metric: float((i * 7) % 5)} for i in range(12)], data)
    plots = tmp_path / "deep" / "er" / "plots"
    res = CliRunner().invoke(app, ["meta-eval", "--data", str(data), "--bootstrap", "0", "--plot", str(plots)])
    assert res.exit_code == 0, res.output
    written = [p for p in _written(tmp_path) if p.suffix == ".png"]
    assert len(written) >= 2 and all(p.parent == plots for p in written), written
    assert any(p.name.startswith("scatter_") for p in written)


@pytest.mark.parametrize("aspect", ["x/../../escaped", "/etc/passwd", "a\x00b", "a" * 300])
def test_run_report_figures_stay_in_the_figures_folder(aspect, tmp_path):
    """The run report's per-aspect figure (student vs judge on held-out sources) for a label column
    named from ``aspect``."""
    from csem.pipeline import report

    run = tmp_path / "a" / "b" / "run"
    figs = run / "figures"
    figs.mkdir(parents=True)
    label, student = f"judge.{aspect}", f"metric.s.{aspect}"
    write_records([{"id": str(i), "doc_id": str(i // 3), "system_id": f"s{i % 3}", "candidate": f"c{i}",
                    "source": f"source {i // 3}", "split": "test", label: float(i % 5 + 1), student: float((i * 3) % 5 + 1)} for i in range(12)],
                  run / "scored.jsonl")
    (run / "meta.json").write_text(json.dumps([]))
    state = {"train": {"summary": {"label_cols": [label]}}}
    report._agreement_section(run, state, {label: (1.0, 5.0)}, figs)
    written = [p for p in _written(tmp_path) if p.suffix == ".png"]
    assert written and all(p.parent == figs for p in written), written
