"""Pure tests of the answer parser (prometheus-eval style): many real-world answer strings."""

from __future__ import annotations

import math

import pytest

from csem.judge.parse import parse_score

SCALE = (1, 5)


@pytest.mark.parametrize("text, expected", [
    ("4", 4), ("4.", 4), (" 4\n", 4), ("**4**", 4), ("4/5", 4), ("4 / 5", 4), ("4 out of 5", 4),
    ("Score: 4", 4), ("score:4", 4), ("Rating - 4", 4), ("- Coherence: 4", 4), ("Coherence: 4/5", 4),
    ("- Coherence (1-5): 3", 3), ("Consistency (1-5 stars): 5", 5), ("score of 2", 2), ("I would rate it 4", 4),
    ("I'd give it a 3 out of 5.", 3), ("4 stars", 4), ("Four stars", 4), ("four", 4), ("★★★★☆", 4),
    ("**Score: 5**", 5), ("Final score: 2", 2), ("3.5", 3.5), ("4 - the summary is clear and well organised", 4),
    ("Sure! Here is my evaluation:\n\nCoherence: 5", 5),
    ("The summary mentions 3 key points and omits 2. Score: 4", 4),
    ("Relevance: 2\nCoherence: 4", 4),  # the rubric's aspect label wins
    ("Coherence: 3\nThe summary has 2 grammatical errors.", 3),
    ("`5`", 5), ("# 2", 2), ("(3)", 3), ("Overall quality: 4.", 4),
])
def test_parses_score(text, expected):
    r = parse_score(text, SCALE, aspect="coherence")
    assert r.score == pytest.approx(expected), (text, r)
    assert r.reason is None and r.ok


@pytest.mark.parametrize("text, reason", [
    ("", "empty answer"), ("   \n", "empty answer"), (None, "empty answer"), ("**", "empty answer"),
    ("The summary covers 3 of the 5 key points, so it is incomplete.", "no score found"),
    ("In 2015 the team scored 3 goals.", "no score found"),
    ("1. Read the article.\n2. Compare the summary.", "no score found"),
    ("To evaluate the summary I need to read the article", "no score found"),
    ("7", "out of scale"), ("0", "out of scale"), ("Score: 9", "out of scale"),
    ("4/10", "score on another scale"), ("5 out of 10", "score on another scale"),
])
def test_missing_with_reason_never_zero(text, reason):
    r = parse_score(text, SCALE, aspect="coherence")
    assert r.score is None and not r.ok
    assert r.reason.startswith(reason), r
    assert not (isinstance(r.score, float) and math.isnan(r.score))


def test_scale_object_and_other_scales():
    from csem.rubrics import Scale

    assert parse_score("3", Scale(min=1, max=3)).score == 3
    assert parse_score("4", Scale(min=1, max=3)).reason.startswith("out of scale")
    assert parse_score("Score: 87", (0, 100)).score == 87
    assert parse_score("7/10", (1, 10)).score == 7
    assert parse_score("10", (1, 10)).score == 10


def test_last_labelled_score_wins_and_matched_text_is_kept():
    r = parse_score("Score: 2 ... on reflection, Score: 4", SCALE)
    assert r.score == 4 and "4" in r.matched
