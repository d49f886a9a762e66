"""The verdict rule (csem.report.verdict) on constructed cases: a student clearly above every baseline, one
level with one, one below, a flat curve, the ceiling, and the within- vs across-source sentence."""

from __future__ import annotations

import math

import pytest

from csem.meta.curve import labels_to, log_fit
from csem.report.verdict import CEILING_MARGIN, STATUS_TEXT, AspectEvidence, aspect_verdict, verdict

BASE = {"length": 0.10, "extractiveness": 0.35, "system prior": 0.30, "overlap fit": 0.20}


def _e(**kw) -> AspectEvidence:
    args = dict(aspect="relevance", student=0.60, student_ci=[0.45, 0.75], n_sources=6, student_dataset=0.62,
                baselines=dict(BASE), diff_ci=[0.10, 0.40], r=0.49, r_ci=[0.3, 0.6])
    args.update(kw)
    return AspectEvidence(**args)


def test_clearly_above_every_baseline_and_near_the_ceiling_replaces():
    v = aspect_verdict(_e())  # sqrt(0.49) = 0.70; 0.60 >= 0.70 - 0.10
    assert v["status"] == "replace" and v["versus_baseline"] == "above" and v["best_baseline"] == "extractiveness"
    assert v["sqrt_r"] == pytest.approx(0.7) and v["near_ceiling"]
    assert "better than extractiveness" in v["sentences"][0] and "distinguishable" in v["sentences"][0]
    assert "The judge agrees with itself at 0.49" in " ".join(v["sentences"])


def test_above_the_baselines_but_short_of_the_ceiling_is_usable_with_care():
    v = aspect_verdict(_e(student=0.50, r=0.81))  # sqrt(r) 0.9: 0.50 < 0.80
    assert v["status"] == "use-with-care" and not v["near_ceiling"]
    assert aspect_verdict(_e(r=None, r_ci=None))["status"] == "use-with-care"  # no r: never "replace"


def test_level_with_a_baseline_is_not_yet_a_replacement():
    v = aspect_verdict(_e(student=0.35, student_ci=[-0.05, 0.75], diff_ci=[-0.20, 0.15]))
    assert v["status"] == "not-yet" and v["versus_baseline"] == "level"
    assert "about as well as extractiveness" in v["sentences"][0] and "not distinguishable" in v["sentences"][0]


def test_below_a_baseline_is_do_not_use():
    v = aspect_verdict(_e(student=0.05, student_ci=[-0.2, 0.2], diff_ci=[-0.5, -0.1]))
    assert v["status"] == "do-not-use" and v["versus_baseline"] == "below"


def test_without_a_paired_interval_the_students_own_interval_decides():
    assert aspect_verdict(_e(diff_ci=None, student_ci=[0.36, 0.8]))["versus_baseline"] == "above"
    assert aspect_verdict(_e(diff_ci=None, student_ci=[0.2, 0.8]))["versus_baseline"] == "level"
    assert aspect_verdict(_e(diff_ci=None, student=0.1, student_ci=[0.0, 0.3]))["versus_baseline"] == "below"


def test_the_run_takes_its_weakest_aspect():
    v = verdict([_e(aspect="coherence"), _e(student=0.35, diff_ci=[-0.2, 0.15])])
    assert v["status"] == "not-yet" and v["headline"] == STATUS_TEXT["not-yet"]
    assert v["text"].startswith("coherence:") and v["text"].endswith(STATUS_TEXT["not-yet"])
    assert v["rule"]["ceiling_margin"] == CEILING_MARGIN


def test_a_flat_curve_says_more_labels_are_unlikely_to_help():
    fit = log_fit([(25, 0.40), (50, 0.405), (100, 0.40), (25, 0.41), (50, 0.395), (100, 0.405)])
    assert fit["trend"] == "flat" and abs(fit["gain_per_doubling"]) < 0.01
    text = " ".join(aspect_verdict(_e(curve=fit))["sentences"])
    assert "unlikely to help" in text and "flat" in text


def test_a_rising_curve_gives_the_gain_and_the_labels_to_the_target():
    pts = [(n, 0.1 + 0.1 * math.log2(n / 25) + d) for n in (25, 50, 100) for d in (-0.01, 0.01)]
    fit = log_fit(pts)
    assert fit["trend"] == "rising" and fit["gain_per_doubling"] == pytest.approx(0.1, abs=1e-9)
    assert fit["gain_ci"][0] > 0
    fit["labels_to_target"] = labels_to(fit, 0.65)  # 0.1 + 0.1 log2(n / 25) = 0.65 at n = 25 * 2^5.5
    assert fit["labels_to_target"] == pytest.approx(25 * 2 ** 5.5, rel=1e-6)
    text = " ".join(aspect_verdict(_e(student=0.3, diff_ci=[0.01, 0.2], curve=fit))["sentences"])
    assert "More labels are likely to help (+0.10 per doubling" in text and "at about 1,131 labels" in text


def test_a_falling_or_far_target_is_said_so():
    fit = log_fit([(n, 0.5 - 0.1 * math.log2(n / 25) + d) for n in (25, 50, 100) for d in (-0.01, 0.01)])
    assert fit["trend"] == "falling" and labels_to(fit, 0.9) is None
    assert "falls" in " ".join(aspect_verdict(_e(curve=fit))["sentences"])
    rising = log_fit([(25, 0.1), (50, 0.11), (100, 0.12)])
    assert labels_to(rising, 0.95) is None  # far beyond 100x the labels measured: no answer


def test_pooled_agreement_far_above_within_source_is_named():
    text = " ".join(aspect_verdict(_e(student=0.3, student_dataset=0.7, diff_ci=[0.01, 0.2]))["sentences"])
    assert "Pooled over sources it reaches 0.70" in text
