"""The answer conventions of popular open judges and evaluation harnesses, each read by
`csem.judge.parse.parse_score` as its authors' own parser reads it, and never a guess: an answer with
two candidate scores and no rule to choose between them is missing.

Every case names the source the convention was read from (the judge's prompt or its own parser):

* Prometheus (prometheus-eval/prometheus-eval, ``libs/prometheus-eval/prometheus_eval/parser.py``,
  ``_parse_output_absolute``): ``[RESULT] N``, ``[SCORE] N``, ``Score: N``, ``Result: N``,
  ``[Result]: N``, ``score of N``, the number optionally in ``(...)`` or ``[...]``, ``/5`` or ``out of 5``.
* MT-Bench (lm-sys/FastChat, ``fastchat/llm_judge/common.py``): ``one_score_pattern``
  ``\\[\\[(\\d+\\.?\\d*)\\]\\]`` with the backup ``\\[(\\d+\\.?\\d*)\\]``; pairwise grading's
  ``two_score_pattern`` ``[[8, 7]]``.
* Auto-J (GAIR-NLP/auto-j, ``codes/usage/example.py``, ``extract_single_rating``): the last
  ``Rating: [[N]]``.
* JudgeLM (baaivision/JudgeLM, ``judgelm/llm_judge/common.py``): "first output a single line containing
  only two values indicating the scores for Assistant 1 and 2 ... separated by a space"; its
  ``parse_score`` splits the first line.
* FLASK (kaistAI/FLASK, ``gpt_review/gpt4_eval.py``, ``parse_score``): the last ``{...}`` of the
  review read with ``ast.literal_eval`` (a Python dict, single quotes), ``_`` read as a space, ``N/A`` /
  ``not applicable`` values.
* G-Eval (nlpyang/geval, ``prompts/summeval/coh_detailed.txt`` ends ``Evaluation Form (scores ONLY):
  - Coherence:``; ``meta_eval_summeval.py``, ``parse_output``: ``^ ?([\\d\\.]+)``).
* Final-answer phrases (openai/simple-evals ``common.py``: ``ANSWER_PATTERN = (?i)Answer\\s*:\\s*(...)``;
  allenai OLMo 3's answer regexes: ``the answer is``, ``Therefore, the answer is``).
* A verbal label with its number in parentheses (``Good (4)``): the choice-with-numeric-value form of
  Likert rubrics, e.g. MLflow's prompt-based judges (categories such as excellent/good/poor mapped to
  numbers).
"""

from __future__ import annotations

import pytest

from csem.judge.parse import REASON_AMBIGUOUS, REASON_NOT_APPLICABLE, parse_score

FIVE, TEN = (1, 5), (1, 10)

# (source, answer, scale, aspect, expected score)
READ = [
    ("prometheus-eval parser.py", "Feedback: The summary is clear and covers the key points. [RESULT] 4", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear. [RESULT] (4)", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear. [RESULT]: [4]", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear. [SCORE] 4", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear. Result: 4", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear. [Result]: 4", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear, so I give it a score of 4 out of 5.", FIVE, None, 4),
    ("prometheus-eval parser.py", "Feedback: Clear. Score: 4/5", FIVE, None, 4),
    ("FastChat common.py one_score_pattern", "The answer is helpful and accurate.\n\nRating: [[7]]", TEN, None, 7),
    ("FastChat common.py one_score_pattern_backup", "The answer is helpful and accurate. Rating: [7]", TEN, None, 7),
    ("FastChat common.py one_score_pattern", "Decimal ratings are allowed: [[7.5]]", TEN, None, 7.5),
    ("auto-j example.py extract_single_rating", "The response misses one step.\nRating: [[3]]\n", TEN, None, 3),
    ("auto-j example.py extract_single_rating (the last one)",
     "An earlier draft said Rating: [[5]]; after checking the numbers again:\nRating: [[3]]", TEN, None, 3),
    ("FLASK gpt4_eval.py parse_score", "The response is mostly correct.\n{'logical correctness': 3, 'completeness': 4}",
     FIVE, "logical_correctness", 3),
    ("FLASK gpt4_eval.py parse_score (the last dict)",
     "Draft: {'completeness': 2}\nFinal: {'completeness': 4, 'insightfulness': 'N/A'}", FIVE, "completeness", 4),
    ("G-Eval meta_eval_summeval.py parse_output", " 4", FIVE, "coherence", 4),
    ("G-Eval prompts/summeval (the form echoed)", "- Coherence: 4", FIVE, "coherence", 4),
    ("G-Eval prompts/summeval (the criterion line echoed)", "Coherence (1-5): 4", FIVE, "coherence", 4),
    ("simple-evals ANSWER_PATTERN", "The summary omits the date.\nAnswer: 3", FIVE, None, 3),
    ("OLMo 3 answer regexes", "Weighing both, my final answer is 4.", FIVE, None, 4),
    ("OLMo 3 answer regexes", "Therefore, the answer is 2 because the summary contradicts the article.", FIVE, None, 2),
    ("verbal label (Likert choice with value)", "Overall: Good (4)", FIVE, None, 4),
    ("verbal label (Likert choice with value)", "Rating: Very good (5/5)", FIVE, None, 5),
    ("verbal label (Likert choice with value)", "Fluency is fair (3): a few awkward phrases.", FIVE, None, 3),
]

MISSING = [
    ("FastChat common.py two_score_pattern (pairwise)", "Assistant A is better.\n[[8, 7]]", TEN, None, REASON_AMBIGUOUS),
    ("JudgeLM common.py parse_score (two scores, space)", "8 7\nAssistant 1 gave more detail.", TEN, None,
     REASON_AMBIGUOUS),
    ("JudgeLM common.py parse_score (two scores, comma)", "8, 7\nAssistant 1 gave more detail.", TEN, None,
     REASON_AMBIGUOUS),
    ("JudgeLM single mode (the reference's 10 first)", "10 6\nThe answer misses the second part.", TEN, None,
     REASON_AMBIGUOUS),
    ("FLASK gpt4_eval.py parse_score (N/A)", "{'harmlessness': 'N/A', 'completeness': 4}", FIVE, "harmlessness",
     REASON_NOT_APPLICABLE),
    ("FLASK gpt4_eval.py parse_score (not applicable)", "{'coherence': 'not applicable'}", FIVE, "coherence",
     REASON_NOT_APPLICABLE),
    ("verbal labels, two numbers", "Between Good (4) and Excellent (5).", FIVE, None, REASON_AMBIGUOUS),
    ("Prometheus scale, another scale", "Feedback: fine. [RESULT] 8/10", FIVE, None, "score on another scale"),
]


@pytest.mark.parametrize("source,answer,scale,aspect,expected", READ, ids=[f"{c[0]}: {c[1][:30]}" for c in READ])
def test_convention_is_read(source, answer, scale, aspect, expected):
    r = parse_score(answer, scale, aspect=aspect)
    assert r.score == pytest.approx(expected), (source, answer, r)
    assert r.reason is None


@pytest.mark.parametrize("source,answer,scale,aspect,reason", MISSING, ids=[f"{c[0]}: {c[1][:30]}" for c in MISSING])
def test_two_candidates_without_a_rule_stay_missing(source, answer, scale, aspect, reason):
    r = parse_score(answer, scale, aspect=aspect)
    assert r.score is None, (source, answer, r)
    assert r.reason.startswith(reason), (source, r.reason)


def test_a_decimal_comma_is_not_judgelms_pair():
    """``4,5`` (no space) stays the decimal-comma 4.5 the parser has always read; ``4, 5`` is two scores."""
    assert parse_score("4,5", FIVE).score == pytest.approx(4.5)
    assert parse_score("4, 5\nreasons", FIVE).score is None


def test_a_python_literal_is_read_never_evaluated():
    """FLASK's dicts are read with ``ast.literal_eval``: an expression is no dict and gives nothing."""
    r = parse_score("{'coherence': __import__('os').getpid()}", FIVE, aspect="coherence")
    assert r.score is None
