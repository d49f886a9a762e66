"""csem: turn an LLM judge into a fast, customised, learned evaluation metric.

Two ideas, end to end: the G-Eval LLM judge (rubric -> prompt -> probability-weighted score) and
CSEM (Wang et al.): collect candidates, annotate them with the judge, train a small encoder
model on the judge's ratings, meta-evaluate it against human judgments, and apply it.
"""

__version__ = "0.1.0"
