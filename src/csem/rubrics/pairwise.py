"""Pairwise rubrics: the judge sees two candidates of one source and says which is better.

Comparison ranking is the CSEM paper's alternative to rating (Wang et al., Sec. VI-F, Fig. 6):
instead of a score per candidate, the judge answers ``A`` (the first candidate is better) or ``B``.
A pairwise rubric carries the same criteria and inputs as the star rubric of its aspect; its prompt
shows the source (and reference), then ``<label> A`` and ``<label> B``, and ends right before the
one-letter answer, so the preference probability can be read from the ``A``/``B`` tokens of one
forward pass (`csem.judge.comparison`).

Built-ins live in ``rubrics/builtin/pairwise/`` (one per aspect of the CSEM single-aspect star
rubrics, same ids after ``pairwise/``: ``pairwise/summ-coherence-ref-free`` ...), listed by
`list_pairwise_rubrics` ([`csem.rubrics.list_rubrics`][] lists rating rubrics; ``csem judge
--list-rubrics`` shows both, with their kind). What a pairwise rubric shares with a rating rubric
(inputs, labels, template check, fingerprint, reading a record) is `csem.rubrics.model.RubricBase`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Mapping

from pydantic import Field, field_validator

from csem.errors import InputError
from csem.rubrics.loader import BUILTIN_DIR, RubricError, _read_mapping, _validated
from csem.rubrics.model import PROMPT_HEAD, PROMPT_INPUTS, RubricBase, _env

PAIRWISE_DIR = BUILTIN_DIR / "pairwise"

DEFAULT_PAIRWISE_TEMPLATE = PROMPT_HEAD + """\
{{ title }} - {{ criteria }}

""" + PROMPT_INPUTS + """\
{{ candidate_label }} {{ first }}:

{{ candidate_a }}

{{ candidate_label }} {{ second }}:

{{ candidate_b }}


Evaluation Form (answer ONLY "{{ first }}" or "{{ second }}"):

- Which {{ candidate_label | lower }} has the better {{ title | lower }}?"""

DEFAULT_PAIRWISE_SYSTEM = "You are a strict evaluator. Reply with one letter only: A or B."


class PairwiseRubric(RubricBase):
    """A comparison rubric for one aspect.

    Attributes:
        id: e.g. ``pairwise/summ-coherence-ref-free``. aspect: the aspect key (``coherence``).
        criteria, steps, intro, labels: prompt parts (see the module docstring).
        choices: the two answer labels, first candidate then second (default ``("A", "B")``).
        uses_source, uses_reference: inputs shown (a record lacking one is an error).
        system: system message asking for one letter. version: bumped when the prompt changes.
    """

    template_needs: ClassVar[tuple[str, ...]] = ("candidate_a", "candidate_b")

    kind: str = "pairwise"
    aspect: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = ""
    criteria: str = Field(min_length=1)
    steps: list[str] = Field(default_factory=list)
    choices: tuple[str, str] = ("A", "B")
    intro: str = ("You will be given a news article and two summaries written for it.\n\n"
                  "Your task is to decide which summary is better on one metric.")
    system: str | None = DEFAULT_PAIRWISE_SYSTEM
    template: str = DEFAULT_PAIRWISE_TEMPLATE

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v != "pairwise":
            raise InputError(f"a pairwise rubric has kind 'pairwise', got '{v}'")
        return v

    @field_validator("choices")
    @classmethod
    def _choices(cls, v: tuple[str, str]) -> tuple[str, str]:
        if len(v) != 2 or not all(c.strip() for c in v) or v[0] == v[1]:
            raise InputError(f"choices must be two different non-empty labels, got {v}")
        return v

    def render(self, first: Mapping[str, Any], second: Mapping[str, Any]) -> list[dict[str, str]]:
        """Chat messages comparing ``first`` (shown as choice 0, ``A``) with ``second`` (``B``).

        Source and reference are taken from ``first`` (both records belong to one source).

        Raises:
            KeyError: a record lacks a text the rubric uses (names the rubric, record id and field);
            ValueError: a text holds a NUL byte (record id and field named).
        """
        text = _env().from_string(self.template).render(
            intro=self.intro, title=self.title or self.aspect.replace("_", " ").title(), criteria=self.criteria,
            steps="\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1)),
            candidate_a=self._need(first, "candidate"), candidate_b=self._need(second, "candidate"),
            first=self.choices[0], second=self.choices[1], **self._inputs(first))
        return self._messages(text)


def list_pairwise_rubrics() -> list[str]:
    """Ids of the built-in pairwise rubrics, sorted."""
    return sorted(f"pairwise/{p.stem}" for p in PAIRWISE_DIR.glob("*.yaml"))


def load_pairwise_rubrics(id_or_path: str | Path) -> list[PairwiseRubric]:
    """The pairwise rubrics one id names: a multi-aspect CSEM rubric's id (``csem/summ-multi-ref-free``
    or ``pairwise/summ-multi-ref-free``) names the pairwise twins of its aspects, in the rating rubric's
    aspect order (a comparison asks one question per prompt, so each aspect is its own judge call);
    any other id or file names one rubric (`load_pairwise_rubric`).

    Raises:
        RubricError: unknown id or file, or an aspect of the multi-aspect rubric without a twin (named).
    """
    key = str(id_or_path).strip()
    name = key.split("/", 1)[1] if key.startswith(("pairwise/", "csem/")) else None
    if name and "-multi-" in name and not (PAIRWISE_DIR / f"{name}.yaml").is_file():
        from csem.rubrics.loader import load_rubric

        multi = load_rubric(f"csem/{name}")
        task, ref = name.split("-multi-", 1)
        return [load_pairwise_rubric(f"pairwise/{task}-{a.aspect}-{ref}") for a in multi.aspects]
    return [load_pairwise_rubric(key)]


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
    return _validated(PairwiseRubric, data, path, "pairwise rubric")
