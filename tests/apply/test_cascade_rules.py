"""The cascade's deferral rules, combined column, scale map and two-stage reranking on constructed data
(pure logic: no model, no judge)."""

from __future__ import annotations

import math

import pytest

from csem.apply.cascade import (
    CascadeError,
    choose,
    combine,
    deferral_count,
    fit_calibration,
    judge_scale,
    neighbour_gap,
    shortlist,
    two_stage_pick,
    uncertainty,
)


def test_deferral_count_rounds_half_up_and_caps():
    assert deferral_count(10, share=0.2) == 2
    assert deferral_count(7, share=0.5) == 4  # 3.5 -> 4
    assert deferral_count(7, share=0.0) == 0
    assert deferral_count(7, share=1.0) == 7
    assert deferral_count(5, budget=3) == 3
    assert deferral_count(5, budget=50) == 5


@pytest.mark.parametrize("kwargs", [{}, {"share": 0.1, "budget": 2}, {"share": 1.5}, {"share": -0.1},
                                    {"budget": -1}, {"share": float("nan")}])
def test_deferral_count_rejects_bad_requests(kwargs):
    with pytest.raises(CascadeError):
        deferral_count(10, **kwargs)


def test_std_rule_defers_the_largest_deviations_ties_in_input_order():
    scores = [3.0, 3.1, 2.0, 4.0, 1.0]
    std = [0.1, 0.5, 0.5, 0.05, 0.3]
    assert choose("std", scores, share=0.4, std=std) == [1, 2]
    assert choose("mc", scores, budget=3, std=std) == [1, 2, 4]
    # the same deviations in another order pick the same records (keyed by position, not by order)
    perm = [4, 2, 0, 3, 1]
    picked = choose("std", [scores[i] for i in perm], share=0.4, std=[std[i] for i in perm])
    assert sorted(perm[i] for i in picked) == [1, 2]


def test_deviation_rules_need_deviations():
    with pytest.raises(CascadeError, match="seed ensemble"):
        uncertainty("std", [1.0, 2.0])
    with pytest.raises(CascadeError, match="MC-dropout"):
        uncertainty("mc", [1.0, 2.0])
    with pytest.raises(CascadeError, match="no deviation"):
        uncertainty("std", [1.0, 2.0], std=[0.1, None])
    with pytest.raises(CascadeError, match="unknown deferral rule"):
        uncertainty("entropy", [1.0])


def test_neighbour_gap_within_sources_only():
    # source a: 1.0, 1.1, 3.0 -> gaps 0.1, 0.1, 1.9; source b: 1.05 alone -> inf; source c: 2.0, 2.5
    scores = [1.0, 1.05, 1.1, 3.0, 2.0, 2.5]
    groups = ["a", "b", "a", "a", "c", "c"]
    gap = neighbour_gap(scores, groups)
    assert gap.tolist() == pytest.approx([0.1, math.inf, 0.1, 1.9, 0.5, 0.5])
    # nearest ties first; the lone record of source b is never deferred before a real rival
    assert choose("neighbours", scores, budget=2, groups=groups) == [0, 2]
    assert choose("neighbours", scores, budget=5, groups=groups) == [0, 2, 3, 4, 5]
    with pytest.raises(CascadeError, match="source"):
        uncertainty("neighbours", scores)


def test_random_rule_is_seeded_and_exact_in_size():
    scores = [float(i) for i in range(50)]
    a = choose("random", scores, share=0.2, seed=3)
    assert len(a) == 10 and a == choose("random", scores, share=0.2, seed=3)
    assert a != choose("random", scores, share=0.2, seed=4)


def test_combine_keeps_student_where_the_judge_gave_nothing():
    scores, source = combine([2.0, 3.0, 4.0, 5.0], {1: 1.0, 2: None, 3: float("nan")})
    assert scores == [2.0, 1.0, 4.0, 5.0]
    assert source == ["student", "judge", "student", "student"]


def test_judge_scale_identity_for_the_card_judge_and_refusal_otherwise():
    card = {"distilled_from": {"judge": "local", "rubric": "csem/summ-relevance-ref-free,geval/summeval-coherence"}}
    f, how = judge_scale(card, "local", "geval/summeval-coherence", rubric_scale=(1, 5), student_scale=(1, 5))
    assert f(4.2) == 4.2 and "identity" in how
    with pytest.raises(CascadeError, match="not 'openai:gpt-4o'"):
        judge_scale(card, "openai:gpt-4o", "geval/summeval-coherence", rubric_scale=(1, 5), student_scale=(1, 5))
    f, how = judge_scale(card, "openai:gpt-4o", "geval/summeval-fluency", rubric_scale=(1, 3), student_scale=(1, 5),
                         rescale=True)
    assert (f(1), f(2), f(3)) == (1.0, 3.0, 5.0) and "linear" in how


def test_two_stage_reranking_picks_the_judges_best_of_the_shortlist():
    # source x: student prefers 2 > 0 > 1 > 3; judge prefers 0; source y: one candidate
    student = [4.0, 3.0, 5.0, 1.0, 2.0]
    groups = ["x", "x", "x", "x", "y"]
    short = shortlist(student, groups, 2)
    assert short == {"x": [2, 0], "y": [4]}
    judge = {2: 3.0, 0: 4.5, 4: 2.0}
    assert two_stage_pick(short, judge) == {"x": 0, "y": 4}
    # a tie or a missing judgment leaves the student's order in charge
    assert two_stage_pick(short, {2: 4.0, 0: 4.0, 4: None}) == {"x": 2, "y": 4}
    with pytest.raises(CascadeError):
        shortlist(student, groups, 0)


def test_fit_calibration_maps_the_judge_onto_the_students_spread():
    judge = {0: 3.9, 1: 4.0, 2: 4.1, 4: 4.2}  # a compressed judge (probability-weighted scores)
    student = [2.0, 3.0, 4.0, 9.9, 5.0]  # a wider student; record 3 was not judged
    a, b = fit_calibration(judge, student)
    assert b == pytest.approx(10.0) and a + b * 4.0 == pytest.approx(3.0)
    assert fit_calibration({0: 1.0, 1: 2.0}, [1.0, 2.0]) is None  # fewer than 3 pairs
    assert fit_calibration({0: 1.0, 1: 2.0, 2: 3.0}, [3.0, 2.0, 1.0]) is None  # a line that reverses the judge
    assert fit_calibration({0: 2.0, 1: 2.0, 2: 2.0}, [1.0, 2.0, 3.0]) is None  # a constant judge
