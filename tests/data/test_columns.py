"""Pure tests of the score-column grammar (csem.data.columns)."""

from __future__ import annotations

import pytest

from csem.data.columns import (Column, aspect_of, format_column, is_score_column, is_side_column, parse_column,
                               score_columns, side_kind)


@pytest.mark.parametrize("name, expected", [
    ("human.coherence", Column("human", "coherence")),
    ("judge.coherence", Column("judge", "coherence")),
    ("judge.coherence.missing", Column("judge", "coherence", side="missing")),
    ("judge.coherence.raw", Column("judge", "coherence", side="raw")),
    ("judge.coherence.mass", Column("judge", "coherence", side="mass")),
    ("judge.coherence@geval/summeval-coherence", Column("judge", "coherence", tag="geval/summeval-coherence")),
    ("judge.coherence@geval/summeval-coherence.missing",
     Column("judge", "coherence", tag="geval/summeval-coherence", side="missing")),
    ("judge.coherence@preds.v2", Column("judge", "coherence", tag="preds.v2")),
    ("metric.rouge1", Column("metric", None, name="rouge1")),
    ("metric.rouge1@run2", Column("metric", None, name="rouge1", tag="run2")),
    ("metric.csem.coherence", Column("metric", "coherence", name="csem")),
    ("metric.csem.coherence.std", Column("metric", "coherence", name="csem", side="std")),
    ("metric.csem.coherence@b.std", Column("metric", "coherence", name="csem", tag="b", side="std")),
    ("metric.rouge1.std", Column("metric", None, name="rouge1", side="std")),
])
def test_parse_and_format_round_trip(name, expected):
    c = parse_column(name)
    assert c == expected
    assert str(c) == name
    assert is_score_column(name) == (expected.side is None)
    assert is_side_column(name) == (expected.side is not None)


@pytest.mark.parametrize("name", ["source", "id", "judge_name", "judge", "human.", "judge.", "metric.",
                                  "metric.csem.", "judge.@x", "judge.coherence@", "missing", "human_coherence",
                                  "Judge.coherence"])
def test_not_a_score_column(name):
    assert parse_column(name) is None
    assert not is_score_column(name) and not is_side_column(name)
    assert side_kind(name) is None


def test_side_kinds_and_aspects():
    assert side_kind("judge.coherence") == "score"
    assert side_kind("judge.coherence.missing") == "text" and side_kind("judge.coherence.raw") == "text"
    assert side_kind("judge.coherence.mass") == "number" and side_kind("metric.csem.fluency.std") == "number"
    assert aspect_of("human.relevance") == "relevance"
    assert aspect_of("judge.coherence@gpt4") == "coherence"
    assert aspect_of("metric.csem.coherence.std") == "coherence"
    assert aspect_of("metric.rouge1") is None and aspect_of("source") is None
    assert parse_column("judge.coherence.mass").score == Column("judge", "coherence")
    assert str(parse_column("judge.coherence").with_side("missing")) == "judge.coherence.missing"
    assert str(parse_column("judge.coherence.raw").with_tag("f")) == "judge.coherence@f.raw"


def test_format_rejects_what_would_not_parse_back():
    assert format_column("metric", "coherence", name="csem") == "metric.csem.coherence"
    assert format_column("judge", "fluency", tag="r/x", side="raw") == "judge.fluency@r/x.raw"
    for kwargs in ({"kind": "robot", "aspect": "a"}, {"kind": "judge", "aspect": None},
                   {"kind": "metric", "aspect": "a"}, {"kind": "judge", "aspect": "a.b"},
                   {"kind": "judge", "aspect": "missing"}, {"kind": "metric", "aspect": None, "name": "std"},
                   {"kind": "judge", "aspect": "a", "side": "probs"}, {"kind": "human", "aspect": "a", "name": "x"},
                   {"kind": "judge", "aspect": "a@b"}):
        with pytest.raises(ValueError):
            format_column(**kwargs)


def test_score_columns_exclude_side_fields_in_first_seen_order():
    records = [
        {"id": "1", "source": "s", "judge.coherence": 4.0, "judge.coherence.mass": 0.9, "human.coherence": 3.0},
        {"id": "2", "judge.coherence": None, "judge.coherence.missing": "no score found", "judge.coherence.raw": "hm",
         "metric.csem.coherence": 3.2, "metric.csem.coherence.std": 0.1, "metric.rouge1": 0.3, "judge_name": "x"},
    ]
    assert score_columns(records) == ["judge.coherence", "human.coherence", "metric.csem.coherence", "metric.rouge1"]
    assert score_columns(records, ("human",)) == ["human.coherence"]
    assert score_columns(records, ("metric", "judge")) == ["judge.coherence", "metric.csem.coherence",
                                                           "metric.rouge1"]
    with pytest.raises(ValueError):
        score_columns(records, ("humans",))
