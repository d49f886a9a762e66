"""MRT's rewards: a metric's weighted columns as a reward function, and the reward log/cache keyed by
the metric's content ([`reward_identity`][csem.apply.mrt.rewards.reward_identity]), so a resumed run never reuses another metric's rewards."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from csem.errors import InputError


class RewardCache:
    """Rewards per (source id, candidate text), in memory and in an append-only JSONL log
    ([`csem.data.jsonio.JsonlLog`][]: a line cut by a kill is skipped on reading and cut off before
    the next append).

    ``fn(records) -> list[float | None]`` scores records that miss from the cache; None (a metric
    that gave no score) is cached as None and used as the mean of the other samples' rewards.

    Attributes:
        hits, misses: rewards reused and computed. skipped: unreadable lines of the log at start.
    """

    def __init__(self, fn: Callable[[list[dict]], list[float | None]], path: str | Path | None = None,
                 namespace: str = ""):
        from csem.data.jsonio import JsonlLog

        self.fn, self.path, self.namespace = fn, Path(path) if path else None, namespace
        self.log = JsonlLog(self.path)
        self.memo: dict[str, float | None] = {}
        self.hits = self.misses = 0
        for row in self.log.read():
            if "key" in row and "reward" in row:
                self.memo[row["key"]] = row["reward"]
        self.skipped = self.log.skipped

    def key(self, source_id: str, candidate: str) -> str:
        """The cache key: sha256 of (namespace = the metric and its weights, source id, candidate)."""
        return hashlib.sha256(f"{self.namespace}\x00{source_id}\x00{candidate}".encode()).hexdigest()

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> list[float | None]:
        keys = [self.key(str(r["doc_id"]), r["candidate"]) for r in records]
        todo = {}
        for k, r in zip(keys, records):
            if k in self.memo:
                self.hits += 1
            elif k not in todo:
                todo[k] = dict(r)
        if todo:
            self.misses += len(todo)
            values = self.fn(list(todo.values()))
            with self.log:
                for k, v in zip(todo, values):
                    v = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                    self.memo[k] = v
                    self.log.append({"key": k, "reward": v})
        return [self.memo[k] for k in keys]


def reward_identity(reward: Any) -> str:
    """What the reward cache is keyed by: a metric's content, never its name or path.

    A student ([`csem.apply.metrics.StudentMetric`][]): ``student:<sha256 of its config and
    weights>`` plus its columns (`csem.model.scoring.model_fingerprint`), so a retrained student
    in the same folder never reuses an earlier one's rewards. A judge: its backend URI, the sha256 of
    its rubrics' JSON and its options. A baseline: its name (its code is the package's). A plain
    function: its ``csem_identity`` attribute when it has one, else its qualified name (pass a
    metric for content keying).
    """
    import hashlib

    if getattr(reward, "fingerprint", None):
        return json.dumps(["student", reward.fingerprint, list(getattr(reward, "columns", []))])
    rubrics = getattr(reward, "rubrics", None)
    if rubrics is not None:
        body = json.dumps([r.model_dump(mode="json") if hasattr(r, "model_dump") else repr(r) for r in rubrics],
                          sort_keys=True, default=str)
        return json.dumps(["judge", getattr(reward, "judge", None), hashlib.sha256(body.encode()).hexdigest(),
                           getattr(reward, "options", None)], sort_keys=True, default=str)
    if hasattr(reward, "columns"):
        return json.dumps(["metric", getattr(reward, "name", None), list(reward.columns)])
    return str(getattr(reward, "csem_identity", None) or getattr(reward, "__qualname__", None)
               or getattr(reward, "__name__", None) or type(reward).__qualname__)


def metric_reward(metric: Any, weights: Mapping[str, float] | None = None) -> Callable[[list[dict]], list[float | None]]:
    """A reward function over records from a loaded [`csem.apply.metrics.Metric`][]: the weighted
    sum of its columns (default: their mean); None when a weighted column is missing.

    Raises:
        ValueError: a weight names a column the metric does not write.
    """
    cols = list(metric.columns)
    if weights:
        unknown = [c for c in weights if c not in cols]
        if unknown:
            raise InputError(f"reward weights name {unknown}; the metric writes {cols}")
        w = {c: float(weights.get(c, 0.0)) for c in cols}
        from csem.apply.reranking import check_finite

        check_finite(list(w.values()), list(w), "reward weights")
    else:
        w = {c: 1.0 / len(cols) for c in cols}

    def fn(records: list[dict]) -> list[float | None]:
        scores = metric.score(records)
        out = []
        for i in range(len(records)):
            vals = [(scores[c][i], wc) for c, wc in w.items() if wc != 0]
            out.append(None if any(v is None for v, _ in vals) else float(sum(v * wc for v, wc in vals)))
        return out

    return fn

