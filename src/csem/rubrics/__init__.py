"""Rubrics as data: criteria, evaluation steps, score scale, inputs used, prompt template.

Built-ins live in ``builtin/`` (YAML); users load their own YAML/TOML files by path.

>>> from csem.rubrics import load_rubric, list_rubrics
>>> r = load_rubric("geval/summeval-coherence")
>>> r.scale.min, r.scale.max
(1, 5)
"""

from __future__ import annotations

from csem.rubrics.loader import RubricError, list_rubrics, load_rubric, load_rubric_file, load_rubrics
from csem.rubrics.model import DEFAULT_TEMPLATE, Criterion, Rubric, Scale

__all__ = ["Rubric", "Criterion", "Scale", "DEFAULT_TEMPLATE", "RubricError", "list_rubrics", "load_rubric",
           "load_rubric_file", "load_rubrics"]
