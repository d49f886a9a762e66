"""``csem meta-eval`` end to end: real SummEval records, a prediction file, baselines, CSV/JSON/PNG out."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.datasets import load_summeval, load_summeval_llm_ratings
from csem.data.records import write_records


@pytest.fixture(scope="module")
def files(tmp_path_factory, shared_data):
    tmp = tmp_path_factory.mktemp("meta")
    recs = load_summeval(shared_data / "summeval")
    docs = sorted({r["doc_id"] for r in recs})[:12]
    subset = [r for r in recs if r["doc_id"] in docs]
    data = write_records([{k: v for k, v in r.items() if k != "source_tokenized"} for r in subset],
                         tmp / "summeval12.jsonl")
    gpt4 = {r["id"]: r for r in load_summeval_llm_ratings(shared_data / "summeval_llm_shen2023")}
    preds = [{"id": r["id"], **{k: v for k, v in gpt4[r["id"]].items() if k.startswith("judge.")}}
             for r in subset if r["id"] in gpt4]
    pred = write_records(preds, tmp / "gpt4.csv")
    bad = write_records([{"id": "no-such-doc/M8", "judge.coherence": 3.0}], tmp / "bad.jsonl")
    return tmp, data, pred, bad, len(subset), len(preds)


def _run(args):
    _load_commands()
    return CliRunner().invoke(app, args, catch_exceptions=False)


def test_meta_eval_table_csv_json_png(files):
    tmp, data, pred, _, n, n_pred = files
    out = tmp / "res" / "table"
    res = _run(["meta-eval", "--data", str(data), "--pred", str(pred), "--baseline", "rouge1,chrf",
                "--level", "all", "--bootstrap", "50", "--out", str(out), "--plot", str(tmp / "fig")])
    assert res.exit_code == 0, res.output
    for lv in ("summary", "system", "dataset"):
        assert f"{lv}-level, {n} records" in res.output
    assert "coherence" in res.output and "average" in res.output and "rouge1" in res.output
    df = pd.read_csv(f"{out}.csv")
    assert set(df.metric) == {"judge", "rouge1", "chrf"}
    assert set(df.level) == {"summary", "system", "dataset"}
    # judge rows: 4 extractive systems have no GPT-4 rating -> counted as missing, not zero
    j = df[(df.metric == "judge") & (df.level == "dataset")]
    assert (j.n_missing == n - n_pred).all() and (j.n_pairs == n_pred).all()
    payload = json.loads((tmp / "res" / "table.json").read_text())
    assert payload["kendall"] == "tau-b" and payload["n_records"] == n
    assert set(payload["tables"]) == {"summary", "system", "dataset"}
    assert "average/spearman" in payload["tables"]["summary"]["rouge1"]
    pngs = sorted(p.name for p in (tmp / "fig").glob("*.png"))
    assert pngs == ["correlations_dataset_spearman.png", "correlations_summary_spearman.png",
                    "correlations_system_spearman.png", "scatter_judge.coherence_human.coherence.png"]
    assert all((tmp / "fig" / p).stat().st_size > 10_000 for p in pngs)


def test_meta_eval_dataset_name_and_aspect_filter(files, shared_data):
    tmp, _, pred, _, _, _ = files
    res = _run(["meta-eval", "--data", "summeval", "--data-path", str(shared_data / "summeval"), "--pred", str(pred),
                "--aspect", "relevance", "--level", "summary", "--method", "kendall", "--bootstrap", "0",
                "--out", str(tmp / "rel")])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(tmp / "rel.csv")
    assert list(df.aspect) == ["relevance"] and list(df.method) == ["kendall"]
    assert df.n_missing.iloc[0] == 1600 - df.n_pairs.iloc[0]


def test_meta_eval_errors(files):
    tmp, data, _, bad, _, _ = files
    res = _run(["meta-eval", "--data", str(data), "--pred", str(bad)])
    assert res.exit_code == 2 and "no-such-doc/M8" in res.output and "not in the data" in res.output
    res = _run(["meta-eval", "--data", "no-such-set"])
    assert res.exit_code == 2 and "neither a file nor a dataset name" in res.output
    res = _run(["meta-eval", "--data", str(data), "--baseline", "rouge1", "--aspect", "tastiness"])
    assert res.exit_code == 2 and "tastiness" in res.output
    res = _run(["meta-eval", "--data", str(data)])
    assert res.exit_code == 2 and "nothing to evaluate" in res.output


def test_meta_eval_compare(files):
    tmp, data, pred, _, _, _ = files
    res = _run(["meta-eval", "--data", str(data), "--pred", str(pred), "--baseline", "rouge1",
                "--level", "summary", "--method", "kendall", "--bootstrap", "100", "--compare", "judge,rouge1",
                "--out", str(tmp / "cmp")])
    assert res.exit_code == 0, res.output
    assert "judge better than rouge1?" in res.output
    comp = json.loads((tmp / "cmp.json").read_text())["comparison"]
    assert [c["aspect"] for c in comp] == ["coherence", "consistency", "fluency", "relevance"]
    table = pd.read_csv(tmp / "cmp.csv")
    for c in comp:
        row = table[(table.metric == "judge") & (table.aspect == c["aspect"])].iloc[0]
        # the paired test compares on items where both are present: judge misses the 4 extractive systems
        assert c["metric_a"] == f"judge.{c['aspect']}" and c["n_common"] == row.n_pairs
        assert 0 <= c["p_value"] <= 1 and c["ci_low"] <= c["delta"] <= c["ci_high"]
    res = _run(["meta-eval", "--data", str(data), "--baseline", "rouge1", "--bootstrap", "0", "--compare", "rouge1"])
    assert res.exit_code == 2 and "two row names" in res.output
    res = _run(["meta-eval", "--data", str(data), "--baseline", "rouge1", "--bootstrap", "0", "--compare", "rouge1,bleu"])
    assert res.exit_code == 2 and "'bleu' is not a metric of the table" in res.output


def test_meta_eval_loader_options(shared_data, tmp_path):
    res = _run(["meta-eval", "--data", "summeval-shen2023", "--data-path", str(shared_data / "summeval_llm_shen2023"),
                "--data-option", "judge=gpt-3.5-turbo-0301", "--data-option", "method=mcq", "--aspect", "coherence",
                "--level", "summary", "--method", "spearman", "--bootstrap", "0", "--out", str(tmp_path / "mcq")])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(tmp_path / "mcq.csv")
    assert round(df.value.iloc[0], 3) == 0.427  # shared README: gpt-3.5 mcq coherence
    res = _run(["meta-eval", "--data", "summeval", "--data-option", "colour=blue", "--baseline", "rouge1"])
    assert res.exit_code == 2 and "colour" in res.output
