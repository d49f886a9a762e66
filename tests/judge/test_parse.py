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


# issue 11: every case decided deliberately (rules in csem.judge.parse's docstring)
@pytest.mark.parametrize("text, expected", [
    # natural sentences with the aspect or the summary as subject
    ("The coherence of this summary is 2", 2), ("I'd give this summary a 2", 2), ("This summary deserves a 4.", 4),
    ("My rating is 4", 4), ("I would score it 3", 3), ("The summary is coherent. Actually, I think it deserves a 2.", 2),
    # numbers in other spellings
    ("three and a half", 3.5), ("Three and a half stars", 3.5), ("4,5", 4.5), ("Score: 4.5", 4.5),
    # self-corrections: the corrected value wins
    ("3 out of 5, no wait, 4 out of 5", 4), ("Score: 2. On second thought, Score: 3", 3),
    ("Score: 4. Actually the summary is good.", 4),
    # scale declarations that agree with the rubric are fine
    ("Score: 4 (on a 1-5 scale)", 4), ("Score (out of 5): 4", 4), ("on a scale of 1 to 5, I'd give it a 4", 4),
    ("Score: 4 out of 5 stars", 4), ("Score: 4/5 (80%)", 4),
    # judges' own conventions
    ("[RESULT] 4", 4), ("Feedback: The response is clear but misses one point.\n[RESULT] 4", 4),
    ("Feedback: ... [RESULT] (3)", 3), ('{"score": 4, "reason": "clear and complete"}', 4),
    ('```json\n{"coherence": 3, "explanation": "mostly 2 topics"}\n```', 3),
    ('{"score": 4, "reason": "The summ', 4),  # cut off by max_tokens after the score
    ('{"scores": {"coherence": 5, "relevance": 2}}', 5), ('{"score": "4/5"}', 4), ("<score>4</score>", 4),
    ("<rating> 2 </rating>", 2), ("Rating: [[4]]", 4), ("[[3]]", 3),
    # echoed prompt text is not the verdict
    ("Score 1: The summary is incoherent.\nScore 5: The summary is perfectly coherent.\nMy verdict: 3", 3),
    ("Reference Answer (Score 5): The summary covers all 5 key points.\n\nFeedback: weaker.\nScore: 3", 3),
    ("The reference answer (Score 5) is better; the response gets a score of 2", 2),
    ("###Reference Answer (Score 5):\nA perfect summary.\n###Feedback: it misses a point. [RESULT] 4", 4),
    ("Score: 3. (A score of 5 would mean a perfect summary.)", 3),
])
def test_parses_score_issue11(text, expected):
    r = parse_score(text, SCALE, aspect="coherence")
    assert r.score == pytest.approx(expected), (text, r)
    assert r.reason is None


@pytest.mark.parametrize("text, reason", [
    ("Score: -2", "out of scale"), ("-2", "out of scale"), ("Rating: \u22123", "out of scale"),
    ("1e3", "out of scale"), ("Score: 1,000", "out of scale"), ('{"score": 7}', "out of scale"),
    # ranges and hedges: the judge did not decide; never the lower end
    ("4-5", "ambiguous score"), ("Score: 3-4", "ambiguous score"), ("3 to 4", "ambiguous score"),
    ("2 or 3", "ambiguous score"), ("Coherence: between 3 and 4", "ambiguous score"),
    ("<score>4-5</score>", "ambiguous score"), ("I'd rate it 3 or 4.", "ambiguous score"),
    # a scale in words or parentheses that is not the rubric's
    ("4 out of ten", "score on another scale"), ("Score: 4 (on a 1-10 scale)", "score on another scale"),
    ("On a scale of 1 to 10, I'd give it a 4", "score on another scale"),
    # no verdict at all
    ("It is often 3 sentences long", "no score found"), ("In 2015 the team scored 3 goals.", "no score found"),
    ("5 - excellent\n4 - good\n3 - fair\n2 - poor\n1 - bad", "no score found"),  # an echoed scale
    ('{"reason": "a fine summary"}', "no score found"),
])
def test_missing_issue11(text, reason):
    r = parse_score(text, SCALE, aspect="coherence")
    assert r.score is None and r.reason.startswith(reason), (text, r)


def test_structured_answer_beats_numbers_in_its_reasoning():
    text = '{"reason": "Score 5 would need all 3 points; it has 2.", "score": 2}'
    assert parse_score(text, SCALE).score == 2
    assert parse_score("Coherence: 4\n[RESULT] 2", SCALE, aspect="coherence").score == 2


# issue 20: answer families the parser must read (each family decided deliberately; rules 0, 1 and 4
# of csem.judge.parse's docstring)
THINK = "<think>The summary is clear, but 5 would need every point; 3 seems low. Say 4.</think>\n"


@pytest.mark.parametrize("text, expected", [
    # reasoning models: the answer after the reasoning block, never a number inside it
    (THINK + "Score: 4", 4), (THINK + "4", 4), ("<think>2? 5?</think>\n\n**Coherence: 3**", 3),
    ("</think>\n\nScore: 2", 2),  # the opening tag was part of the prompt
    ("<thinking>Maybe 1.</thinking>\nRating: 5/5", 5), ("<THINK>hmm 2</THINK> [RESULT] 4", 4),
    # LaTeX boxed final answers
    ("The final answer is $\\boxed{4}$.", 4), ("\\boxed{3}", 3), ("So the score is \\boxed{\\text{2}}", 2),
    ("\\boxed{4/5}", 4), (THINK + "\\boxed{5}", 5),
    # labels in other languages
    ("Note : 4", 4), ("Note : 4/5", 4), ("Note : 4 sur 5", 4), ("Puntuación: 4", 4), ("Calificación: 3.", 3),
    ("Bewertung: 4/5", 4), ("Bewertung: 4 von 5 Punkten", 4), ("Punteggio: 3 su 5", 3), ("Pontuação: 2", 2),
    ("Оценка: 4", 4), ("评分：4", 4), ("评分: 4分", 4), ("该摘要的得分为4分。", 4), ("評価：４", 4), ("점수: 5", 5),
    ("Le résumé est clair.\nNote : 5", 5), ("Nota: 4 - el resumen es coherente", 4),
    # Markdown tables: the aspect's row, a single score column, an aspect column, an overall row
    ("| Aspect | Score |\n|---|---|\n| Coherence | 4 |\n| Fluency | 2 |", 4),
    ("| Criterion | Score (1-5) | Comment |\n|:--|:-:|---|\n| **Coherence** | **3** | 2 points out of order |", 3),
    ("| Score | Explanation |\n|-------|-------------|\n| 4 | Well organised, 2 minor slips |", 4),
    ("Here is my assessment:\n\n| Coherence | Fluency |\n|---|---|\n| 4 | 3 |", 4),
    ("| Criterion | Score |\n|---|---|\n| Relevance | 3 |\n| Fluency | 2 |\n| **Overall** | **4** |", 4),
    ("Aspect | Rating\n--- | ---\nCoherence | 4/5", 4),
    ("| Aspect | Score | Max |\n|---|---|---|\n| Coherence | 4 | 5 |\n| Fluency | 3 | 5 |", 4),  # the score column ("| Aspect | Note |\n|---|---|\n| Coherence | 4 |", 4),
])
def test_parses_answer_families_issue20(text, expected):
    r = parse_score(text, SCALE, aspect="coherence")
    assert r.score == pytest.approx(expected), (text, r)
    assert r.reason is None


@pytest.mark.parametrize("text, reason", [
    # an unclosed reasoning block: the model ran out of tokens while thinking; numbers inside are not read
    ("<think>The summary is good, I would say 4", "unfinished reasoning"),
    ("<think>Score: 4</think><think>On reflection maybe 3", "unfinished reasoning"),
    (THINK, "empty answer after the reasoning block"), (THINK + "   \n", "empty answer"),
    (THINK + "The summary is fine.", "no score found"),
    # other languages: out of scale, another scale, an English "Note:" that is not a score
    ("Note : 4 sur 10", "score on another scale"), ("Bewertung: 4/10", "score on another scale"),
    ("评分：9", "out of scale"), ("Note: the summary covers 3 of the 5 points.", "no score found"),
    ("Note: 4 sentences are too long.", "no score found"),
    # boxed: out of scale or a range
    ("\\boxed{7}", "out of scale"), ("\\boxed{3-4}", "ambiguous score"),
    # tables: scored rows but none for the aspect (never one of them picked), two numbers in the row
    ("| Criterion | Score |\n|---|---|\n| Relevance | 3 |\n| Fluency | 2 |", "no score found"),
    ("| Aspect | Judge 1 | Judge 2 |\n|---|---|---|\n| Coherence | 4 | 5 |", "ambiguous score"),
    ("| Year | Goals |\n|---|---|\n| 2015 | 3 |", "no score found"),  # a table without scores
    ("| Aspect | Score |\n|---|---|\n| Coherence | 9 |", "out of scale"),
])
def test_missing_answer_families_issue20(text, reason):
    r = parse_score(text, SCALE, aspect="coherence")
    assert r.score is None and r.reason.startswith(reason), (text, r)
