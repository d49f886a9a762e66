"""The rubric: evaluation criteria, steps, score scale and prompt template, as data.

A rubric is what G-Eval (Liu et al., 2023, "G-Eval: NLG Evaluation using GPT-4 with Better Human
Alignment", Sec. 2 and Fig. 1) feeds its judge: a task introduction, the evaluation criteria of one
aspect, chain-of-thought evaluation steps, the inputs (source, optionally reference, the candidate)
and an "Evaluation Form (scores ONLY)" that ends right before the score.

A *multi-aspect* rubric (the CSEM paper's Table II) lists several aspects in one prompt. It yields
one score per aspect: the prompt is rendered once per aspect and differs only in its last line
(``- <Aspect> (1-5 stars):``), so the long shared part (criteria of all aspects, source, reference,
candidate) is evaluated once per candidate by a backend that reuses its KV cache.

Templates are Jinja2 (rendered in a sandbox, texts are variables and never re-parsed as template
code). Variables: ``intro``, ``criteria`` (list of [`Criterion`][csem.rubrics.model.Criterion]), ``steps`` (numbered text),
``source``, ``reference`` (one string; several references are numbered), ``candidate``,
``aspect`` (the aspect being scored, title case), ``min``, ``max``, ``unit``, ``uses_source``,
``uses_reference``, ``source_label``, ``reference_label``, ``candidate_label``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from csem.errors import InputError, MissingInputError

# Prompt parts shared by the rating template here and the comparison template of
# `csem.rubrics.pairwise` (one text, so the two stay alike).
PROMPT_HEAD = """\
{{ intro }}

Please make sure you read and understand these instructions carefully. Please keep this document open while reviewing, and refer to it as needed.

Evaluation Criteria:

"""

PROMPT_INPUTS = """\
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
"""

DEFAULT_TEMPLATE = PROMPT_HEAD + """\
{% for c in criteria %}
{{ c.title }} ({{ min }}-{{ max }}{{ unit }}) - {{ c.criteria }}

{% endfor %}
""" + PROMPT_INPUTS + """\
{{ candidate_label }}:

{{ candidate }}


Evaluation Form (scores ONLY):

- {{ aspect }}{% if unit %} ({{ min }}-{{ max }}{{ unit }}){% endif %}:"""


# Without it a small instruction-tuned judge starts its answer with "To evaluate ..." (Qwen2.5-1.5B put
# ~5% of next-token mass on 1-5 with G-Eval's user prompt alone, >99% with this system message).
DEFAULT_SYSTEM = "You are a strict evaluator. Reply with the score only: a single number."


class Scale(BaseModel):
    """Integer score scale ``[min, max]`` (inclusive); G-Eval: 1-5 (fluency 1-3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min: int = 1
    max: int = 5

    @model_validator(mode="after")
    def _check(self) -> "Scale":
        if self.max <= self.min:
            raise InputError(f"scale max ({self.max}) must be greater than min ({self.min})")
        if self.min < 0:
            raise InputError(f"scale min ({self.min}) must be >= 0")
        if self.max - self.min > 100:
            raise InputError(f"scale {self.min}-{self.max} has more than 101 points")
        return self

    @property
    def values(self) -> list[int]:
        return list(range(self.min, self.max + 1))


class Criterion(BaseModel):
    """One aspect of a rubric: its name, criteria text and evaluation steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    aspect: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="lower-case key, e.g. 'coherence'")
    criteria: str = Field(min_length=1)
    steps: list[str] = Field(default_factory=list)
    title: str = ""

    @model_validator(mode="after")
    def _title(self) -> "Criterion":
        if not self.title:
            object.__setattr__(self, "title", self.aspect.replace("_", " ").title())
        return self


class RubricBase(BaseModel):
    """What rating ([`Rubric`][csem.rubrics.model.Rubric]) and comparison (`csem.rubrics.pairwise.PairwiseRubric`)
    rubrics share, validated in one place: identity, the inputs shown and their labels, the template
    check (valid Jinja2 showing `template_needs`), the fingerprint, and reading a record's texts
    for a prompt (a missing input or a NUL byte is an error naming the rubric, record id and field).

    Subclasses declare ``intro``, ``system`` and ``template`` with their own defaults.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: template variables a template of this kind must show
    template_needs: ClassVar[tuple[str, ...]] = ("candidate",)

    id: str = Field(min_length=1)
    name: str = ""
    task: str = "summ"
    version: str = "1"
    description: str = ""
    uses_source: bool = True
    uses_reference: bool = False
    source_label: str = "Source Text"
    reference_label: str = "Reference"
    candidate_label: str = "Summary"

    @field_validator("template", check_fields=False)
    @classmethod
    def _template_parses(cls, v: str) -> str:
        from jinja2 import TemplateSyntaxError, meta

        try:
            names = meta.find_undeclared_variables(_env().parse(v))
        except TemplateSyntaxError as exc:
            raise InputError(f"template is not valid Jinja2 (line {exc.lineno}): {exc.message}") from exc
        lacking = [n for n in cls.template_needs if n not in names]
        if lacking:
            raise InputError("template never shows " + " nor ".join(f"'{{{{ {n} }}}}'" for n in lacking))
        return v

    @property
    def fingerprint(self) -> str:
        """sha256 (16 hex) of the rubric's full content: changes whenever the prompt can change."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def _need(self, record: Mapping[str, Any], field: str) -> Any:
        """``record[field]`` for a prompt. Raises KeyError (absent or empty) or ValueError (a NUL byte)."""
        rid = record.get("id", "?")
        v = record.get(field)
        if v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise MissingInputError(f"rubric {self.id} needs '{field}' but record {rid} has none")
        if any("\x00" in t for t in ([v] if isinstance(v, str) else v if isinstance(v, list) else [])
               if isinstance(t, str)):  # never passed into a prompt silently (read_records refuses it too)
            raise InputError(f"record {rid}: '{field}' contains a NUL byte; remove it before judging")
        return v

    def _inputs(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The template variables of the inputs: ``source`` and ``reference`` (several references
        numbered one a line) where the rubric uses them, else None, and the input flags and labels."""
        source = self._need(record, "source") if self.uses_source else None
        reference = None
        if self.uses_reference:
            ref = self._need(record, "reference")
            refs = [ref] if isinstance(ref, str) else list(ref)
            reference = refs[0] if len(refs) == 1 else "\n".join(f"{i}. {r}" for i, r in enumerate(refs, 1))
        return {"source": source, "reference": reference,
                "uses_source": self.uses_source, "uses_reference": self.uses_reference,
                "source_label": self.source_label, "reference_label": self.reference_label,
                "candidate_label": self.candidate_label}

    def _messages(self, text: str) -> list[dict[str, str]]:
        system = getattr(self, "system", None)
        return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]


class Paraphrase(BaseModel):
    """A second wording of a rubric ([`Rubric.paraphrased`][csem.rubrics.model.Rubric.paraphrased]): the
    parts of the prompt it replaces.

    The same aspects, scale, inputs and template, other words: it measures the same thing with
    different wording noise, so the agreement of one judge's scores under the two wordings is that
    judge's repeatability ([`csem.judge.repeat`][]). Every built-in rating rubric ships one.

    Attributes:
        intro: the task introduction (None: keep the rubric's).
        criteria, steps: a single-aspect rubric's criteria text and its (or a multi-aspect rubric's
            shared) evaluation steps (None: keep).
        aspects: a multi-aspect rubric's aspects reworded (same names, same order).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    intro: str | None = None
    criteria: str | None = None
    steps: list[str] | None = None
    aspects: list[Criterion] | None = None


class Rubric(RubricBase):
    """A judging rubric (one aspect, or several for a multi-aspect rubric).

    Attributes:
        id: e.g. ``geval/summeval-coherence`` or ``csem/mt-accuracy-ref-free``.
        name: human-readable name. task: ``summ`` | ``mt`` | ``tst`` | ``dialogue`` | any string.
        aspect, criteria, steps: the single aspect (leave empty when ``aspects`` is given).
        aspects: the aspects of a multi-aspect rubric (one score each).
        scale: integer score range. unit: text after the range in the prompt (e.g. ``" stars"``).
        uses_source, uses_reference: which inputs the prompt shows; a record lacking a needed
            input is an error, not a silent omission.
        intro, labels, template: prompt parts (see the module docstring).
        answer_format: ``text`` (default) or ``json``: the prompt asks for ``{"score": N}`` and, in
            ``parse``/``sample`` mode, a backend that can constrain its answers to a JSON schema (JSON
            mode / ``response_format`` on OpenAI-compatible servers) is asked to; the parser reads the
            field either way.
        system: system message (default `DEFAULT_SYSTEM`, asks for the score only; ``null``
            in a file drops it).
        version: bumped whenever the prompt changes (it is part of every judgment's record).
    """

    aspect: str | None = None
    criteria: str | None = None
    steps: list[str] = Field(default_factory=list)
    aspects: list[Criterion] = Field(default_factory=list)
    scale: Scale = Field(default_factory=Scale)
    unit: str = ""
    intro: str = "You will be given one summary written for a news article.\n\nYour task is to rate the summary on one metric."
    system: str | None = DEFAULT_SYSTEM
    template: str = DEFAULT_TEMPLATE
    answer_format: Literal["text", "json"] = "text"
    #: a second wording of the same rubric, for the judge's repeatability (not part of the prompt)
    paraphrase: Paraphrase | None = None

    @model_validator(mode="after")
    def _paraphrase_fits(self) -> "Rubric":
        p = self.paraphrase
        if p is None or not (self.aspects or (self.aspect and self.criteria)):
            return self  # no paraphrase, or a form _one_form refuses with its own message
        names = [c.aspect for c in self.criteria_list]
        if p.aspects is not None and [c.aspect for c in p.aspects] != names:
            raise InputError(f"paraphrase.aspects must reword the aspects {names} in order")
        if not self.aspects and p.aspects is not None:
            raise InputError("paraphrase.aspects is for a multi-aspect rubric; write paraphrase.criteria")
        if self.aspects and p.criteria is not None:
            raise InputError("paraphrase.criteria is for a single-aspect rubric; write paraphrase.aspects")
        return self

    @property
    def fingerprint(self) -> str:
        """sha256 (16 hex) of the rubric's prompt content (its paraphrase, not part of the prompt, left
        out): changes whenever the prompt can change."""
        blob = json.dumps(self.model_dump(mode="json", exclude={"paraphrase"}), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def paraphrased(self) -> "Rubric":
        """The rubric under its second wording (``paraphrase``): id ``<id>~paraphrase``, version
        ``<version>~paraphrase``, the paraphrase's intro, criteria, steps and aspects in place of the
        rubric's; scale, inputs, labels and template unchanged.

        Raises:
            ValueError: the rubric has no ``paraphrase``.
        """
        p = self.paraphrase
        if p is None:
            raise InputError(f"rubric {self.id} has no paraphrase (a second wording for the judge's repeatability); "
                             "add a 'paraphrase' section to it or give a second rubric file")
        data = {**self.model_dump(), "id": f"{self.id}~paraphrase", "version": f"{self.version}~paraphrase",
                "paraphrase": None}
        data.update({k: v for k, v in p.model_dump().items() if v is not None})
        return type(self).model_validate(data)

    @model_validator(mode="after")
    def _one_form(self) -> "Rubric":
        single = self.aspect is not None or self.criteria is not None
        if single and self.aspects:
            raise InputError("give either 'aspect'+'criteria' (single aspect) or 'aspects' (multi-aspect), not both")
        if not single and not self.aspects:
            raise InputError("a rubric needs 'aspect' and 'criteria', or a non-empty 'aspects' list")
        if single and (not self.aspect or not self.criteria):
            raise InputError("a single-aspect rubric needs both 'aspect' and 'criteria'")
        if single:
            Criterion(aspect=self.aspect, criteria=self.criteria, steps=self.steps)  # validates the key
        names = [c.aspect for c in self.criteria_list]
        if len(set(names)) != len(names):
            raise InputError(f"duplicate aspect names: {names}")
        return self

    @property
    def criteria_list(self) -> list[Criterion]:
        """The aspects as [`Criterion`][csem.rubrics.model.Criterion] objects (one for a single-aspect rubric)."""
        if self.aspects:
            return list(self.aspects)
        return [Criterion(aspect=self.aspect or "", criteria=self.criteria or "", steps=self.steps)]

    @property
    def aspect_names(self) -> list[str]:
        """Score keys this rubric produces, e.g. ``["coherence"]``."""
        return [c.aspect for c in self.criteria_list]

    @property
    def is_multi(self) -> bool:
        return bool(self.aspects)

    def render(self, record: Mapping[str, Any], aspect: str | None = None) -> list[dict[str, str]]:
        """Chat messages judging ``record`` on ``aspect`` (default: the rubric's only aspect).

        Args:
            record: a csem record with ``candidate`` and, when the rubric uses them, ``source``
                and ``reference`` (a string or a list of strings).
            aspect: which aspect's score the prompt asks for (multi-aspect rubrics).

        Returns:
            ``[{"role": "system", ...}?, {"role": "user", "content": prompt}]``; the assistant turn
            that follows starts with the score.

        Raises:
            ValueError: unknown aspect, or a text holds a NUL byte (record id and field named);
            KeyError: the record lacks a text the rubric uses (message names the rubric, record id and
            field).
        """
        crits = self.criteria_list
        if aspect is None:
            if len(crits) != 1:
                raise InputError(f"rubric {self.id} has aspects {self.aspect_names}; name the one to render")
            target = crits[0]
        else:
            found = [c for c in crits if c.aspect == aspect]
            if not found:
                raise InputError(f"rubric {self.id} has no aspect '{aspect}' (has {self.aspect_names})")
            target = found[0]
        candidate = self._need(record, "candidate")
        inputs = self._inputs(record)
        if len(crits) == 1:
            steps = "\n".join(f"{i}. {s}" for i, s in enumerate(target.steps, 1))
        else:
            steps = "\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1))
        text = _env().from_string(self.template).render(
            intro=self.intro, criteria=crits, steps=steps, candidate=candidate, aspect=target.title,
            min=self.scale.min, max=self.scale.max, unit=self.unit, **inputs)
        if self.answer_format == "json":
            text += (f'\n\nAnswer with a JSON object only: {{"score": <an integer from {self.scale.min} to '
                     f'{self.scale.max}>}}')
        return self._messages(text)

    def answer_schema(self) -> dict | None:
        """The JSON schema of an answer when ``answer_format`` is ``json`` (``{"score": integer in the
        scale}``; requested as structured output where the backend can, see
        [`csem.llm.GenerateConfig`][]), else None."""
        if self.answer_format != "json":
            return None
        return {"type": "object", "properties": {"score": {"type": "integer", "minimum": self.scale.min,
                                                           "maximum": self.scale.max}},
                "required": ["score"]}


_ENV = None


def _env():
    global _ENV
    if _ENV is None:
        from jinja2.sandbox import SandboxedEnvironment
        from jinja2 import StrictUndefined

        _ENV = SandboxedEnvironment(undefined=StrictUndefined, trim_blocks=True, keep_trailing_newline=False,
                                    autoescape=False)
    return _ENV
