"""Training on preference pairs directly (comparison data, CSEM paper Eq. 3).

A preference file has one row per judged pair of candidates of one source, as
`csem.judge.comparison.compare_records` (``csem annotate --compare``) writes it: ``id_a``,
``id_b``, ``candidate_a``, ``candidate_b``, ``source``, optional ``reference``, ``doc_id``,
``system_a``/``system_b``, and per aspect ``judge.<aspect>`` = the judge's probability that ``a``
is better than ``b`` (in [0, 1]; 1 or 0 for a hard preference).

`pairs_to_training` checks the file's columns and values and builds the candidate records (each
distinct candidate once, keyed by its id) and the `csem.model.pairs.PreferenceTable` through the one
builder, `csem.model.pairs.pair_training`; ``fit(..., pairs=True)`` trains on them with the ranking
loss over the pairs whose two candidates share a batch (batches hold whole sources, so every pair does,
unless one source has more candidates than ``batch_size``). Scores are then relative (the loss fixes
differences, not the level), as with ``loss: pairwise``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from csem.data.columns import score_columns
from csem.model.config import LabelSpec
from csem.model.pairs import PreferenceTable, pair_training  # noqa: F401  (PreferenceTable: its old home)
from csem.model.validation import TrainingDataError, aspect_name, label_value


def pairs_to_training(pair_rows: Sequence[Mapping[str, Any]], label_cols: Sequence[str] | str,
                      where: str = "preference data") -> tuple[list[dict], PreferenceTable]:
    """Candidate records and the `csem.model.pairs.PreferenceTable` of a preference file.

    Args:
        pair_rows: rows as described in the module docstring.
        label_cols: preference columns, one per aspect (``judge.coherence``).
        where: the file, named in errors.

    Returns:
        ``(records, table)``: one record per distinct candidate id (``id``, ``candidate``,
        ``source``, ``reference``, ``doc_id``, ``system_id``), in order of first appearance; the
        aspects' scales are [0, 1] (scores are relative).

    Raises:
        TrainingDataError: a missing column, a preference outside [0, 1] or not a number, one
            candidate id with two different texts, a pair of a candidate with itself (each named with
            its row).
    """
    cols = [c.strip() for c in label_cols.split(",")] if isinstance(label_cols, str) else list(label_cols)
    if not pair_rows:
        raise TrainingDataError(f"{where}: no rows")
    present = set().union(*(r.keys() for r in pair_rows))
    need = [c for c in ("id_a", "id_b", "candidate_a", "candidate_b") if c not in present]
    if need:
        raise TrainingDataError(f"{where}: column(s) {need} not found; a preference file has one row per pair "
                                "(id_a, id_b, candidate_a, candidate_b, source, judge.<aspect>), as written by "
                                "`csem annotate --compare`")
    missing = [c for c in cols if c not in present]
    if missing:
        score_cols = sorted(score_columns(pair_rows))
        raise TrainingDataError(f"{where}: preference column(s) {missing} not found; present: {score_cols}")

    def targets(row: Mapping[str, Any], k: int) -> list[tuple[int, float]]:
        out = []
        for x, col in enumerate(cols):
            p = label_value(row.get(col), f"{where}: row '{row.get('id')}', column '{col}'")
            if p is None:
                continue
            if not 0.0 <= p <= 1.0:
                raise TrainingDataError(f"{where}: row '{row.get('id')}', column '{col}': preference {p} outside "
                                        "[0, 1] (the probability that candidate a is better than b)")
            out.append((x, p))
        return out

    specs = [LabelSpec(aspect=aspect_name(c, cols), column=c, min=0.0, max=1.0) for c in cols]
    return pair_training(pair_rows, specs, targets, where=where, keep_unjudged=True)
