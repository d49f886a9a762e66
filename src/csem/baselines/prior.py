"""The system prior: each candidate scored by its system's mean training label (no text read).

A learned metric that only recognises which system wrote a candidate can reach this baseline
without judging the text; a student's figure means something only beside it (Deutsch et al.
2022, "Re-Examining System-Level Correlations", make the same point for system-level scores).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from csem.errors import InputError


def _key(record: Mapping[str, Any], by: Sequence[str], i: int, side: str) -> tuple:
    missing = [f for f in by if record.get(f) is None]
    if missing:
        raise InputError(f"system prior: {side} record {record.get('id', i)!r} has no {missing[0]!r}")
    return tuple(record[f] for f in by)


def system_prior(train: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]],
                 labels: str | Sequence[str], *, by: str | Sequence[str] = "system_id",
                 unseen: str = "none") -> dict[str, list[float | None]]:
    """Score each test record by the mean training label of its system.

    For each label column ``c``: ``prior[c][i] = mean(train[j][c] for j with system(j) == system(test[i]))``
    over the training rows that carry a label (None and NaN labels are skipped).

    Args:
        train: records with ``by`` and the label columns (labels may be missing on some rows).
        test: records with ``by``; not modified.
        labels: one label column (``judge.coherence``) or several.
        by: the field(s) naming a system (default ``system_id``; ``("dataset", "system_id")``
            when several datasets share system names).
        unseen: what a test record of a system absent from the training labels gets: ``none``
            (None, left out of correlations) or ``mean`` (the mean over all training labels).

    Returns:
        ``{label column: [score or None per test record]}``, scores on the labels' own scale,
        in the order of ``labels`` and ``test``.

    Raises:
        ValueError: a record without ``by``; no training row labelled in a column; a label that is
            not a number ([`csem.model.validation.TrainingDataError`][]); unknown ``unseen``.
    """
    from csem.model.validation import label_value

    if unseen not in ("none", "mean"):
        raise InputError(f"system prior: unknown unseen={unseen!r}; choose 'none' or 'mean'")
    cols = [labels] if isinstance(labels, str) else list(labels)
    fields = (by,) if isinstance(by, str) else tuple(by)
    train_keys = [_key(r, fields, i, "training") for i, r in enumerate(train)]
    test_keys = [_key(r, fields, i, "test") for i, r in enumerate(test)]
    out: dict[str, list[float | None]] = {}
    for col in cols:
        groups: dict[tuple, list[float]] = {}
        for i, (r, k) in enumerate(zip(train, train_keys)):
            v = label_value(r.get(col), f"system prior: training record {r.get('id', i)!r}, column {col!r}")
            if v is not None:
                groups.setdefault(k, []).append(v)
        if not groups:
            raise InputError(f"system prior: no training record has a label in {col!r}")
        mean = {k: statistics.fmean(v) for k, v in groups.items()}
        default = statistics.fmean(x for v in groups.values() for x in v) if unseen == "mean" else None
        out[col] = [mean.get(k, default) for k in test_keys]
    return out
