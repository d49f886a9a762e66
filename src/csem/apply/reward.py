"""A learned metric as a reward function for RL libraries (TRL's ``reward_funcs``).

TRL (``GRPOTrainer``, ``RLOOTrainer``...) calls each reward function as
``fn(prompts=..., completions=..., **dataset_columns) -> list[float]``, where prompts and
completions are strings (standard format) or chat message lists (conversational format), and
every other column of the training dataset is passed as a keyword list. [`trl_reward`][csem.apply.reward.trl_reward] builds
such a callable around a student folder that is loaded once and stays in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from csem.errors import InputError


def _content(message: Mapping) -> str:
    """A chat message's text: its ``content`` string; ``None`` or no content is empty text (a refused
    or tool-calling turn), a list of parts (``[{"type": "text", "text": ...}]``) their texts joined."""
    c = message.get("content")
    if c is None:
        return ""
    if isinstance(c, list):
        return "".join(str(p.get("text") or "") if isinstance(p, Mapping) else str(p) for p in c)
    return str(c)


def _text(x: Any) -> str:
    """Plain text of a TRL prompt/completion: a string, or the content of a chat message list
    (the completion's assistant turn; for a prompt, the last user turn); ``None`` content is empty text."""
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        return _content(x)
    if isinstance(x, Sequence):
        msgs = [m for m in x if isinstance(m, Mapping)]
        users = [m for m in msgs if m.get("role") == "user"]
        pick = users[-1] if users else (msgs[-1] if msgs else None)
        if len(msgs) == len(x) and any(m.get("role") == "assistant" for m in msgs):
            pick = [m for m in msgs if m.get("role") == "assistant"][-1]
        return "" if pick is None else _content(pick)
    raise InputError(f"cannot read text from a {type(x).__name__}")


class TRLReward:
    """A TRL reward function over a csem student (see [`trl_reward`][csem.apply.reward.trl_reward]).

    Attributes:
        __name__: ``csem_<metric name>`` (TRL logs each reward function under its ``__name__``).
        metric: the loaded [`csem.apply.metrics.StudentMetric`][].
        weights: column -> weight of the aspect heads (finite numbers).
        floor: the reward of a degenerate completion: ``sum_k w_k * min_k`` over the columns'
            scales (the lowest reward the scales allow when the weights are non-negative).
        calls, scored: how many calls and completions this function has served.
    """

    def __init__(self, model: str | Path | Any, aspects: Sequence[str] | None = None,
                 weights: Sequence[float] | Mapping[str, float] | None = None, *, source_key: str = "source",
                 reference_key: str = "reference", batch_size: int = 64, precision: str = "auto"):
        from csem.apply.metrics import StudentMetric
        from csem.apply.reranking import check_finite

        self.metric = StudentMetric(model, aspects, batch_size=batch_size, precision=precision)
        cols, aspects_kept = self.metric.columns, self.metric.aspects
        if weights is None:
            self.weights = {c: 1.0 / len(cols) for c in cols}
        elif isinstance(weights, Mapping):
            unknown = [a for a in weights if a not in aspects_kept and a not in cols]
            if unknown:
                raise InputError(f"weights for unknown aspect(s) {unknown}; the reward uses {aspects_kept}")
            self.weights = {c: _number(weights.get(a, weights.get(c, 0.0))) for c, a in zip(cols, aspects_kept)}
        else:
            w = [_number(x) for x in weights]
            if len(w) != len(cols):
                raise InputError(f"{len(w)} weight(s) for {len(cols)} aspect(s) {aspects_kept}")
            self.weights = dict(zip(cols, w))
        check_finite(list(self.weights.values()), list(self.weights), "TRL reward weights")
        self.floor = float(sum(w * self.metric.scales[c][0] for c, w in self.weights.items()))
        self.source_key, self.reference_key = source_key, reference_key
        self.__name__ = f"csem_{self.metric.metric_name}"
        self.calls = self.scored = 0

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **kwargs: Any) -> list[float]:
        """One reward per completion: the weighted sum of the student's aspect scores.

        The source is the dataset column ``source_key`` when TRL passes it, else the prompt text
        (last user turn); references come from ``reference_key`` (needed by a reference-based
        student). A completion that csem's readers would reject (empty, whitespace only, or holding
        a NUL character) is never sent to the student: it gets `floor`, each aspect's scale
        minimum weighted (the scoring path's ``degenerate="floor"``, `csem.model.scoring`).

        Returns:
            ``len(completions)`` finite floats.

        Raises:
            ValueError: no completions; prompts, sources or references whose count differs from the
                completions'; no prompts and no source column for a student that reads the source
                (mode ``ref-free``/``ref-based``); a reference-based student without references; an
                empty or NUL-containing source or reference (names the record).
        """
        if completions is None:
            raise InputError("TRL reward: no completions")
        n = len(completions)
        for what, values in (("prompts", prompts), (self.source_key, kwargs.get(self.source_key)),
                             (self.reference_key, kwargs.get(self.reference_key))):
            if values is not None and len(values) != n:
                raise InputError(f"TRL reward: {len(values)} {what} for {n} completions; "
                                 "give one per completion")
        sources = kwargs.get(self.source_key)
        if sources is None and prompts is not None:
            sources = [_text(p) for p in prompts]
        if sources is None and self.metric.needs_source:
            raise InputError(f"TRL reward: the student {self.metric.name} (mode '{self.metric.mode}') reads the "
                             f"source: pass prompts or a '{self.source_key}' column")
        refs = kwargs.get(self.reference_key)
        if self.metric.needs_reference and refs is None:
            raise InputError(f"the student {self.metric.name} is reference-based: pass a "
                             f"'{self.reference_key}' column in the dataset")
        records = []
        for i, c in enumerate(completions):
            rec = {"id": str(i), "candidate": _text(c)}
            if sources is not None:
                rec["source"] = sources[i] if isinstance(sources[i], str) else _text(sources[i])
            if refs is not None:
                rec["reference"] = refs[i]
            records.append(rec)
        scores = self.metric.score(records)
        self.calls += 1
        self.scored += n
        return [float(sum(w * scores[c][i] for c, w in self.weights.items())) for i in range(n)]


def _number(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise InputError(f"TRL reward weights must be numbers, got {x!r}") from None


def trl_reward(model_dir: str | Path | Any, aspects: Sequence[str] | None = None,
               weights: Sequence[float] | Mapping[str, float] | None = None, **options: Any) -> TRLReward:
    """A TRL reward function ``(prompts, completions, **kwargs) -> list[float]`` over a student.

    Args:
        model_dir: a student folder written by ``csem train`` (or a loaded ``EvaluationModel``);
            loaded once, kept in memory for every call.
        aspects: heads to use (default: all).
        weights: per aspect (list in ``aspects`` order, or ``{aspect: weight}``); default: the mean.
        options: ``source_key``, ``reference_key`` (dataset columns), ``batch_size``, ``precision``.

    Example::

        from trl import GRPOConfig, GRPOTrainer
        reward = trl_reward("my-metric", aspects=["coherence", "relevance"], weights=[0.5, 0.5])
        GRPOTrainer(model=..., reward_funcs=reward, train_dataset=ds, args=GRPOConfig(...)).train()

    A degenerate completion (empty, whitespace, NUL) gets the weighted scale minima (``floor``),
    never a score of the student; see `TRLReward.__call__`.

    Raises:
        csem.model.ModelFolderError: not a model folder. ValueError: unknown aspect, wrong count of
        weights, a weight that is not a finite number.
    """
    return TRLReward(model_dir, aspects, weights, **options)
