"""The public API (``import csem``): every stage through ``csem.judge / annotate / train /
load_metric(...).score / evaluate / rerank``, the README's Python example run as written, and the
same student from the API as from ``csem train`` (a multi-judge one with separate heads).

Fast tier: the FAKE in-process LLM backend (``tests/fake_llm.py``, ``fake:test``; its scores mean
nothing) and the tiny RANDOM encoder (``tests/tiny_encoder.py``): what is tested is that each
function runs the library's one path and returns what it documents, not what a model learns.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import csem
from csem.data.records import read_records, write_records

REPO = Path(__file__).resolve().parents[1]
RUBRIC = "csem/summ-coherence-ref-free"
SOURCES = [
    "The river flooded the old mill on Monday. Nobody was hurt, but the bridge is closed until Friday.",
    "A new bakery opened on Main Street. It sells bread, cakes and coffee from seven in the morning.",
    "The city council approved a new bus line to the airport. Buses will run every twenty minutes.",
    "Heavy snow closed the mountain pass overnight. Road crews expect to reopen it by the weekend.",
]
CANDIDATES = [
    ["The river flooded the mill; the bridge is closed until Friday.", "Mill bridge Monday river.",
     "A bakery opened in town."],
    ["A bakery selling bread, cakes and coffee opened on Main Street.", "Street main cake the.",
     "Snow closed the pass."],
    ["A new airport bus line will run every twenty minutes.", "Council bus airport minutes twenty.",
     "The mill flooded."],
    ["Snow closed the mountain pass; crews expect to reopen it by the weekend.", "Pass snow weekend crews.",
     "A bus line was approved."],
]
TINY = dict(max_length=40, source_max_length=40, hidden_sizes=[16], dropout=0.0, max_epochs=1, batch_size=6,
            lr=1e-2, head_lr=1e-2, seed=3)


def candidate_records(human: bool = False) -> list[dict]:
    rows = []
    for d, (src, cands) in enumerate(zip(SOURCES, CANDIDATES)):
        for k, cand in enumerate(cands):
            row = {"id": f"d{d}-s{k}", "doc_id": f"d{d}", "system_id": f"s{k}", "source": src, "candidate": cand}
            if human:
                row["human.coherence"] = [5.0, 2.0, 1.0][k] + 0.1 * d
            rows.append(row)
    return rows


def test_import_csem_loads_no_model_library():
    code = "import sys, csem; print(sorted(m for m in ('torch', 'llama_cpp', 'transformers', 'csem.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_csem_judge_is_the_package_and_the_function(fake_llm):
    import csem.judge.runner  # the package loaded first: the attribute is still callable

    assert csem.judge.judge_records is csem.judge.runner.judge_records
    rows, summary = csem.judge(candidate_records()[:3], RUBRIC, fake_llm)
    assert [r["id"] for r in rows] == ["d0-s0", "d0-s1", "d0-s2"]
    assert all(1.0 <= r["judge.coherence"] <= 5.0 for r in rows)
    assert summary.judged == 3


def test_every_stage_through_the_api(fake_llm, tiny_encoder, tmp_path):
    cands = tmp_path / "cands.jsonl"
    write_records(candidate_records(), cands)
    labelled = tmp_path / "labelled.jsonl"
    summary = csem.annotate(cands, RUBRIC, fake_llm, out=labelled)
    assert summary["judged"] == 12 and summary.get("failed", 0) == 0
    prov = json.loads((tmp_path / "labelled.jsonl.judge.json").read_text())
    assert prov["columns"]["judge.coherence"]["scale"] == [1, 5]

    model = csem.train(labelled, "judge.coherence", out_dir=tmp_path / "m", encoder=str(tiny_encoder), **TINY)
    assert model.card["distilled_from"]["judge"] == fake_llm and (tmp_path / "m" / "metric_card.json").exists()
    assert [s.min for s in model.config.labels] == [1.0] and [s.max for s in model.config.labels] == [5.0]

    metric = csem.load_metric(tmp_path / "m")
    new = candidate_records(human=True)
    assert isinstance(metric, csem.model.EvaluationModel)  # what csem.train returns, too
    result = metric.predict(new)
    col = "metric.csem.coherence"
    assert list(result.scores) == result.columns == [col] and len(result.scores[col]) == len(new)
    assert result.system_score[col] == pytest.approx(sum(result.scores[col]) / len(new), rel=1e-12)
    assert [r[col] for r in result.records] == result.scores[col]
    # the one scoring method: the model csem.train returned gives the same numbers
    assert result.scores[col] == pytest.approx(model.predict(new).scores[col], abs=1e-6)
    # the settings hash: the same model and settings give the same hash; it names what produced the scores
    assert result.hash == csem.load_metric(tmp_path / "m").predict(new[:2]).hash
    assert result.hash.startswith("csem(coherence)_ref-free_model=") and f"version={csem.__version__}" in result.hash
    assert "_fp32_" in result.hash

    table = csem.evaluate(result.records, humans=["human.coherence"], bootstrap=0)
    from csem.meta import evaluate as meta_evaluate

    ref = meta_evaluate(result.records, [col], ["human.coherence"], bootstrap=0)
    assert table["value"].tolist() == pytest.approx(ref["value"].tolist(), nan_ok=True)
    assert set(table["level"]) == {"summary", "system", "dataset"}

    chosen = csem.rerank(result.records, [metric]).chosen
    assert len(chosen) == len(SOURCES)
    for pick in chosen:
        own = [r for r in result.records if r["doc_id"] == pick["doc_id"]]
        assert pick["candidate"] == max(own, key=lambda r: r[col])["candidate"]


def test_api_and_cli_train_the_same_multi_judge_student(tiny_encoder, tmp_path):
    import csem.cli.score  # noqa: F401  (registers the commands: with one only, typer drops its name)
    import csem.cli.train  # noqa: F401
    from csem.cli import app

    rows = candidate_records()
    for i, r in enumerate(rows):
        r["judge.coherence@a"] = float(1 + i % 5)
        r["judge.coherence@b"] = float(1 + (i * 3) % 5) if i != 4 else None
    data = tmp_path / "wide.jsonl"
    write_records(rows, data)
    spec = "judge.coherence@a+judge.coherence@b"
    api_model = csem.train(data, spec, normalise="zscore", combine="heads", out_dir=tmp_path / "api",
                           encoder=str(tiny_encoder), **TINY)
    res = CliRunner().invoke(app, [
        "train", "--data", str(data), "--label-col", spec, "--normalise", "zscore", "--combine", "heads",
        "--out", str(tmp_path / "cli"), "--encoder", str(tiny_encoder), "--set", "model.max_length=40",
        "--set", "model.source_max_length=40", "--set", "model.hidden_sizes=[16]", "--set", "model.dropout=0",
        "--epochs", "1",
        "--set", "train.batch_size=6", "--set", "train.lr=1e-2", "--set", "train.head_lr=1e-2", "--seed", "3"])
    assert res.exit_code == 0, res.output
    cli_card = json.loads((tmp_path / "cli" / "metric_card.json").read_text())
    assert cli_card["labels"] == api_model.card["labels"]
    assert api_model.card["labels"]["ensembles"] == {"coherence": ["coherence@a", "coherence@b"]}
    a = csem.load_metric(tmp_path / "api").predict(rows)
    c = csem.load_metric(tmp_path / "cli").predict(rows)
    # each judge's head, then the ensemble aspect (the mean of the two heads on [0, 1])
    assert a.columns == ["metric.csem.coherence@a", "metric.csem.coherence@b", "metric.csem.coherence"]
    assert a.scores == c.scores and a.hash == c.hash


def test_train_rejects_an_unknown_setting(tmp_path):
    with pytest.raises(TypeError, match="no_such_setting"):
        csem.train(candidate_records(), "judge.coherence", no_such_setting=1)


def test_read_data_names_what_it_cannot_read(tmp_path):
    from csem.api import read_data

    with pytest.raises(FileNotFoundError, match="not a dataset name"):
        read_data(str(tmp_path / "missing.jsonl"))
    rows = candidate_records()
    assert read_data(rows) == rows and read_data(rows)[0] is not rows[0]


def _readme_python() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("<!-- --8<-- [start:python] -->")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert block, "the README's Python section has a python block"
    return block.group(1)


def _run_readme_python(code: str, where) -> dict:
    cwd = os.getcwd()
    os.chdir(where)
    try:
        scope: dict = {}
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    return scope


def test_readme_python_example_runs_as_written(fake_llm, tiny_encoder, tmp_path, capsys):
    """The README's Python quick start on the sample files shipped with csem (``package:quickstart/...``),
    with two substitutions: the FAKE judge for the embedded one, the tiny encoder and one short epoch."""
    code = _readme_python()
    for stage in ("csem.annotate(", "csem.train(", ".predict(", "csem.evaluate("):
        assert stage in code
    assert '"local",' in code and 'out_dir="my-metric")' in code
    code = code.replace('"local",', f'"{fake_llm}",')
    code = code.replace('out_dir="my-metric")', f'out_dir="my-metric", encoder={str(tiny_encoder)!r}, **{TINY!r})')
    scope = _run_readme_python(code, tmp_path)
    labelled = read_records(tmp_path / "labelled.jsonl")
    assert len(labelled) == 9 and all(r["judge.coherence"] is not None for r in labelled)
    pred = scope["pred"]
    assert pred.columns == ["metric.csem.coherence"] and len(pred.ids) == 12
    assert pred.hash in capsys.readouterr().out
    table = scope["table"]
    assert set(table["level"]) == {"summary"} and table["n_pairs"].tolist()[0] == 12


@pytest.mark.slow  # the embedded local judge (Qwen2.5-Coder 1.5B through llama.cpp) and MiniLM
def test_readme_python_quick_start_with_the_real_local_judge(tmp_path, capsys):
    """The README's Python quick start exactly as written: the local judge annotates the 9 shipped
    candidates, the default student trains on them and scores the 12 shipped SummEval summaries."""
    import torch

    torch.set_num_threads(2)
    scope = _run_readme_python(_readme_python(), tmp_path)
    labelled = read_records(tmp_path / "labelled.jsonl")
    assert len(labelled) == 9 and sum(r["judge.coherence"] is not None for r in labelled) >= 8
    assert (tmp_path / "my-metric" / "metric_card.json").exists()
    pred = scope["pred"]
    values = pred.scores["metric.csem.coherence"]
    assert len(values) == 12 and all(1.0 <= v <= 5.0 for v in values)
    out = capsys.readouterr().out
    assert "metric.csem.coherence" in out and pred.hash in out
    summary = scope["table"]
    assert set(summary["level"]) == {"summary"} and (summary["n_groups"] + summary["n_skipped"] == 3).all()


def test_readme_cli_quick_start_runs_on_the_shipped_files(fake_llm, tiny_encoder, tmp_path):
    """The README's command-line quick start (annotate, train, score, meta-eval) on the shipped sample
    files, with the FAKE judge and the tiny encoder; ``csem example`` and ``csem run`` load real models
    (their own tests cover them)."""
    import shlex

    from typer.testing import CliRunner

    from csem.cli import _load_commands, app

    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("<!-- --8<-- [start:cli] -->")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    lines = [ln.split("  #")[0].strip() for ln in block.replace("\\\n", " ").splitlines()]
    steps = [shlex.split(ln)[1:] for ln in lines if ln.startswith("csem ")
             and ln.split()[1] in ("annotate", "train", "score", "meta-eval")]
    assert [s[0] for s in steps] == ["annotate", "train", "score", "meta-eval"]
    _load_commands()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for args in steps:
            args = [fake_llm if a == "local" else a for a in args]
            if args[0] == "train":
                args += ["--encoder", str(tiny_encoder), "--epochs", "1", "--set", "model.max_length=40",
                         "--set", "model.hidden_sizes=[16]"]
            res = CliRunner().invoke(app, args)
            assert res.exit_code == 0, (args, res.output)
    finally:
        os.chdir(cwd)
    scored = read_records(tmp_path / "scored.jsonl", required=())
    assert len(scored) == 12 and all("metric.csem.coherence" in r for r in scored)


def test_comparison_then_training_on_the_pairs(fake_llm, tiny_encoder, tmp_path):
    """csem.annotate(compare=True) writes a preference file; csem.train(pairs=True) learns from it
    (Eq. 3) as `csem train --pairs` does, recording the pairs in the card."""
    pairs_file = tmp_path / "pairs.jsonl"
    summary = csem.annotate(candidate_records(), RUBRIC, fake_llm, out=pairs_file, compare=True, pairs="all")
    assert summary["pairs"] == 4 * 3  # every pair of the 3 candidates of each of 4 sources
    prov = json.loads((tmp_path / "pairs.jsonl.judge.json").read_text())
    assert prov["comparison"] is True and prov["columns"]["judge.coherence"]["scale"] == [0, 1]
    model = csem.train(pairs_file, "judge.coherence", pairs=True, encoder=str(tiny_encoder), **TINY)
    assert model.config.loss == "pairwise"
    assert model.card["labels"] == {"preference_pairs": 12, "loss": "Eq. 3 on judged pairs"}
    with pytest.raises(ValueError, match="--pairs trains on one preference column"):
        csem.train(pairs_file, "judge.coherence", pairs=True, normalise="zscore")


def _scored(with_doc: bool = True, with_system: bool = True) -> list[dict]:
    rows = []
    for d in range(3):
        for s in range(4):
            r = {"id": f"{d}-{s}", "candidate": "text", "human.coherence": float((d + s) % 5),
                 "metric.m.coherence": float((d * 2 + s) % 5) + 0.1 * s}
            if with_doc:
                r["doc_id"] = f"d{d}"
            if with_system:
                r["system_id"] = f"s{s}"
            rows.append(r)
    return rows


def test_evaluate_skips_a_level_the_records_cannot_support_with_a_warning():
    rows = _scored(with_system=False)
    with pytest.warns(UserWarning, match="system level skipped: 12 of 12 records have no 'system_id'"):
        table = csem.evaluate(rows, bootstrap=0)
    assert set(table["level"]) == {"summary", "dataset"} and table["value"].notna().all()
    with pytest.warns(UserWarning, match="summary level skipped: no record has a 'doc_id'"):
        table = csem.evaluate(_scored(with_doc=False), levels=("summary", "dataset"), bootstrap=0)
    assert set(table["level"]) == {"dataset"} and table["value"].notna().all()
    with pytest.warns(UserWarning, match="summary level skipped"):  # nothing left: an empty table, no NaN
        table = csem.evaluate(_scored(with_doc=False), levels=("summary",), bootstrap=0)
    assert table.empty and list(table.columns)[:4] == ["metric", "column", "aspect", "level"]
    unique = [dict(r, doc_id=r["id"]) for r in _scored()]  # one record per document: no within-document ranking
    with pytest.warns(UserWarning, match="no 'doc_id' is shared by two or more records"):
        csem.evaluate(unique, levels=("summary", "dataset"), bootstrap=0)


def test_evaluate_with_every_field_warns_nothing():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = csem.evaluate(_scored(), bootstrap=0)
    assert set(table["level"]) == {"summary", "system", "dataset"}
