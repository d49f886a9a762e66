"""Pairwise rubrics: the judge sees two candidates of one source and says which is better.

Comparison ranking is the CSEM paper's alternative to rating (Wang et al., Sec. VI-F, Fig. 6):
instead of a score per candidate, the judge answers ``A`` (the first candidate is better) or ``B``.
A pairwise rubric carries the same criteria and inputs as the star rubric of its aspect; its prompt
shows the source (and reference), then ``<label> A`` and ``<label> B``, and ends right before the
one-letter answer, so the preference probability can be read from the ``A``/``B`` tokens of one
forward pass (:mod:`csem.judge.comparison`).

Built-ins live in ``rubrics/builtin/pairwise/`` (one per aspect of the CSEM single-aspect star
rubrics, same ids after ``pairwise/``: ``pairwise/summ-coherence-ref-free`` ...); they are not
listed by :func:`csem.rubrics.list_rubrics`, which lists rating rubrics.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from csem.rubrics.loader import BUILTIN_DIR, RubricError, _read_mapping

PAIRWISE_DIR = BUILTIN_DIR / "pairwise"

DEFAULT_PAIRWISE_TEMPLATE = """\
{{ intro }}

Please make sure you read and understand these instructions carefully. Please keep this document open while reviewing, and refer to it as needed.

Evaluation Criteria:

{{ title }} - {{ criteria }}

Evaluation Steps:

{{ steps }}

Example:

{% if uses_source %}
{{ source_label }}:

{{ source }}

{% endif %}
{% if uses_reference %}
{{ reference_label }}:

{{ reference }}

{% endif %}
{{ candidate_label }} {{ first }}:

{{ candidate_a }}

{{ candidate_label }} {{ second }}:

{{ candidate_b }}


Evaluation Form (answer ONLY "{{ first }}" or "{{ second }}"):

- Which {{ candidate_label | lower }} has the better {{ title | lower }}?"""

DEFAULT_PAIRWISE_SYSTEM = "You are a strict evaluator. Reply with one letter only: A or B."


class PairwiseRubric(BaseModel):
    """A comparison rubric for one aspect.

    Attributes:
        id: e.g. ``pairwise/summ-coherence-ref-free``. aspect: the aspect key (``coherence``).
        criteria, steps, intro, labels: prompt parts (see the module docstring).
        choices: the two answer labels, first candidate then second (default ``("A", "B")``).
        uses_source, uses_reference: inputs shown (a record lacking one is an error).
        system: system message asking for one letter. version: bumped when the prompt changes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    kind: str = "pairwise"
    name: str = ""
    task: str = "summ"
    version: str = "1"
    description: str = ""
    aspect: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = ""
    criteria: str = Field(min_length=1)
    steps: list[str] = Field(default_factory=list)
    choices: tuple[str, str] = ("A", "B")
    uses_source: bool = True
    uses_reference: bool = False
    intro: str = ("You will be given a news article and two summaries written for it.\n\n"
                  "Your task is to decide which summary is better on one metric.")
    source_label: str = "Source Text"
    reference_label: str = "Reference"
    candidate_label: str = "Summary"
    system: str | None = DEFAULT_PAIRWISE_SYSTEM
    template: str = DEFAULT_PAIRWISE_TEMPLATE

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v != "pairwise":
            raise ValueError(f"a pairwise rubric has kind 'pairwise', got '{v}'")
        return v

    @field_validator("choices")
    @classmethod
    def _choices(cls, v: tuple[str, str]) -> tuple[str, str]:
        if len(v) != 2 or not all(c.strip() for c in v) or v[0] == v[1]:
            raise ValueError(f"choices must be two different non-empty labels, got {v}")
        return v

    @field_validator("template")
    @classmethod
    def _template(cls, v: str) -> str:
        from jinja2 import TemplateSyntaxError, meta

        from csem.rubrics.model import _env

        try:
            names = meta.find_undeclared_variables(_env().parse(v))
        except TemplateSyntaxError as exc:
            raise ValueError(f"template is not valid Jinja2 (line {exc.lineno}): {exc.message}") from exc
        if not {"candidate_a", "candidate_b"} <= names:
            raise ValueError("a pairwise template must show '{{ candidate_a }}' and '{{ candidate_b }}'")
        return v

    @property
    def fingerprint(self) -> str:
        """sha256 (16 hex) of the rubric's full content."""
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]

    def render(self, first: Mapping[str, Any], second: Mapping[str, Any]) -> list[dict[str, str]]:
        """Chat messages comparing ``first`` (shown as choice 0, ``A``) with ``second`` (``B``).

        Source and reference are taken from ``first`` (both records belong to one source).

        Raises:
            KeyError: a record lacks a text the rubric uses (names the rubric, record id and field).
        """
        from csem.rubrics.model import _env

        def need(rec: Mapping[str, Any], field: str) -> Any:
            v = rec.get(field)
            if v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
                raise KeyError(f"rubric {self.id} needs '{field}' but record {rec.get('id', '?')} has none")
            return v

        reference = None
        if self.uses_reference:
            ref = need(first, "reference")
            refs = [ref] if isinstance(ref, str) else list(ref)
            reference = refs[0] if len(refs) == 1 else "\n".join(f"{i}. {r}" for i, r in enumerate(refs, 1))
        text = _env().from_string(self.template).render(
            intro=self.intro, title=self.title or self.aspect.replace("_", " ").title(), criteria=self.criteria,
            steps="\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1)),
            source=need(first, "source") if self.uses_source else None, reference=reference,
            candidate_a=need(first, "candidate"), candidate_b=need(second, "candidate"),
            first=self.choices[0], second=self.choices[1], uses_source=self.uses_source,
            uses_reference=self.uses_reference, source_label=self.source_label,
            reference_label=self.reference_label, candidate_label=self.candidate_label)
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": text})
        return messages


def list_pairwise_rubrics() -> list[str]:
    """Ids of the built-in pairwise rubrics, sorted."""
    return sorted(f"pairwise/{p.stem}" for p in PAIRWISE_DIR.glob("*.yaml"))


def load_pairwise_rubric(id_or_path: str | Path) -> PairwiseRubric:
    """A built-in pairwise rubric by id (``pairwise/summ-coherence-ref-free``; the rating rubric's id
    ``csem/summ-coherence-ref-free`` names the same one) or a YAML/TOML file with ``kind: pairwise``.

    Raises:
        RubricError: unknown id, unreadable file, or a field that fails validation (named).
    """
    key = str(id_or_path).strip()
    name = key.split("/", 1)[1] if key.startswith(("pairwise/", "csem/")) else None
    path = PAIRWISE_DIR / f"{name}.yaml" if name else Path(key).expanduser()
    if not path.is_file():
        known = list_pairwise_rubrics()
        tail = key.split("/")[-1]
        close = [k for k in known if tail and tail.split("-")[0] in k][:6]
        raise RubricError(f"unknown pairwise rubric '{key}'" + (f"; did you mean {', '.join(close)}?" if close else
                                                                  f"; built-ins: {', '.join(known[:6])} ..."))
    data = _read_mapping(path)
    data.setdefault("id", f"pairwise/{path.stem}")
    try:
        return PairwiseRubric.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<rubric>'}: {e['msg']}" for e in exc.errors())
        raise RubricError(f"{path}: invalid pairwise rubric: {problems}") from exc
