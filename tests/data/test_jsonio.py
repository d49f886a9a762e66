"""The one JSON writer (strict JSON, atomic) and the one Markdown table renderer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from csem.data.jsonio import json_safe, write_json
from csem.report.tables import fmt, markdown_table


def test_write_json_is_strict_and_replaces_atomically(tmp_path):
    p = tmp_path / "sub" / "state.json"
    write_json(p, {"a": math.nan, "b": [1.5, float("inf"), np.float32(0.25), np.int64(3)], "c": {"d": None}})
    text = p.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.5, None, 0.25, 3], "c": {"d": None}}
    write_json(p, {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1}
    assert [q.name for q in p.parent.iterdir()] == ["state.json"]  # no temporary file left behind
    assert json_safe((math.nan, 2)) == [None, 2]


def test_write_json_refuses_what_it_cannot_encode_without_default(tmp_path):
    with pytest.raises(TypeError):
        write_json(tmp_path / "x.json", {"a": object()}, default=None)
    assert not (tmp_path / "x.json").exists()


def test_markdown_table_of_dicts_and_sequences():
    rows = [{"metric": "rouge1", "rho": 0.17123, "n": 100}, {"metric": "bleu", "rho": math.nan, "n": 99}]
    assert markdown_table(rows, ["metric", "rho", "n"], align="lrr").splitlines() == [
        "| metric | rho | n |", "| --- | ---: | ---: |", "| rouge1 | 0.171 | 100 |", "| bleu | – | 99 |"]
    assert markdown_table([["a", None]], ["x", "y"], headers=["X", "Y"], missing="").splitlines()[2] == "| a |  |"
    assert fmt(0.5, 2) == "0.50" and fmt(None) == "–" and fmt(True) == "True" and fmt("n/a") == "n/a"
