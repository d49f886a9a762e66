"""Comparison ranking: the judge compares two candidates of one source (CSEM paper Sec. VI-F, Fig. 6).

* **Pairs** (`select_pairs`): per source, ``all`` pairs; a seeded ``random`` subset of
  ``per_source`` pairs; or ``adjacent`` pairs after a rating pass (the candidates sorted by an
  existing rating column, each paired with its neighbour: ``n - 1`` pairs that decide the order
  where ratings are closest).
* **Both orders**: every pair is judged as (a, b) and as (b, a), and the preference is
  ``p(a > b) = (p_first(a, b) + 1 - p_first(b, a)) / 2``, so a judge's position bias (a constant
  lean towards the first or second slot) cancels. A pair is missing when either order is.
* **Modes**: ``probs`` reads ``p_first = P(A) / (P(A) + P(B))`` from the answer distribution of one
  forward pass: exactly (chain rule over the label's tokens, with and without a leading space) on
  the in-process llama.cpp backend; from the first answer token's ``top_logprobs`` (up to 20) on
  backends that return token logprobs (OpenAI-compatible servers; a label outside the top 20 counts
  as 0). ``mass = P(A) + P(B)`` is kept. ``parse`` (and the fallback of a backend without
  probabilities) reads one greedy answer: ``1`` for A, ``0`` for B; no A/B in the answer is
  missing with its raw text.
* Every judgment is cached in SQLite ([`csem.judge.cache.JudgmentCache`][]) as it finishes, so a
  killed run resumes; the number of judge calls is ``2 x pairs``. The calls run through the one
  judging executor (`csem.judge.executor`, shared with rating: cache, probs -> parse fallback,
  a refused API key stops the run, backend errors are missing and make the run partial) with
  `ComparisonTask`; concurrency is the model wrapper's.

`compare_records` returns one row per pair (the preference file ``csem train --pairs``
reads): ``id`` (``<id_a>|<id_b>``), ``doc_id``, ``source``, ``reference``, ``id_a``, ``id_b``,
``candidate_a``, ``candidate_b``, ``system_a``, ``system_b``, ``judge.<aspect>`` (p(a > b) in
[0, 1], None when missing), ``judge.<aspect>.mass``, ``judge.<aspect>.missing``, and the two
orders' ``p_first`` in ``order_ab.<aspect>`` / ``order_ba.<aspect>``.
`preference_scores` turns pairs into one score per candidate (its mean preference over the
pairs it is in), for correlation with ratings or human scores.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from csem.data.columns import Column
from csem.errors import InputError
from csem.judge.cache import JudgmentCache
from csem.judge.executor import Job, execute, reason_kind
from csem.judge.scoring import Judgment
from csem.rubrics.pairwise import PairwiseRubric, load_pairwise_rubric

STRATEGIES = ("all", "random", "balanced", "adjacent")
COMPARE_MODES = ("probs", "parse")


@dataclass
class CompareSummary:
    """What a comparison run did: ``pairs``, ``calls`` (2 per pair), ``judged`` now, ``cached``,
    ``failed`` (backend errors: never cached, a re-run retries them), ``missing`` pairs by reason,
    mean ``position_bias`` (mean ``p_first`` over all judged orders: 0.5 = none), ``seconds``,
    ``fallback``, ``errors`` (up to 5 distinct backend error messages)."""

    pairs: int = 0
    calls: int = 0
    judged: int = 0
    cached: int = 0
    failed: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    position_bias: float | None = None
    seconds: float = 0.0
    fallback: str | None = None
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                for k, v in self.__dict__.items()}

    def __str__(self) -> str:
        bias = "n/a" if self.position_bias is None else f"{self.position_bias:.3f}"
        s = (f"{self.pairs} pairs, {self.calls} judge calls ({self.judged} new, {self.cached} cached, {self.failed} "
             f"failed); mean P(first is better) {bias}; {self.seconds:.1f} s")
        if self.missing:
            s += "\nmissing pairs: " + "; ".join(f"{r} x{n}" for r, n in self.missing.items())
        if self.fallback:
            s += f"\nnote: {self.fallback}"
        return s


def _group_key(rec: Mapping[str, Any]) -> tuple:
    ref = rec.get("reference")
    return (rec.get("source"), tuple(ref) if isinstance(ref, list) else ref)


def select_pairs(records: Sequence[Mapping[str, Any]], strategy: str = "all", *, per_source: int | None = None,
                 rating_col: str | None = None, seed: int = 0) -> list[tuple[int, int]]:
    """Pairs of record indices (same source and reference) to compare.

    Args:
        records: candidate records (``source``, ``candidate``, ``id``).
        strategy: ``all`` | ``random`` (``per_source`` pairs drawn per source, seeded by ``seed``
            and the source text, so adding sources never changes another's pairs) | ``balanced``
            (``per_source`` pairs in rounds of random perfect matchings, so every candidate is in
            ``2 * per_source / n`` pairs give or take one: at ``per_source = n / 2``, one rating
            pass's budget, each candidate is compared once, where ``random`` leaves about a third
            of them out; same seeding as ``random``) | ``adjacent``
            (sorted by ``rating_col`` descending, ties by id; neighbours paired).
        per_source: ``random`` / ``balanced``: pairs per source (all when it has fewer).
        rating_col: ``adjacent``: the rating column of an earlier rating pass.

    Returns:
        ``(i, j)`` index pairs with ``i < j`` (first appearance order), grouped by source.

    Raises:
        ValueError: unknown strategy, a missing ``per_source``/``rating_col``, or a record without
        the rating (named).
    """
    if strategy not in STRATEGIES:
        raise InputError(f"unknown pair strategy '{strategy}'; choose from {', '.join(STRATEGIES)}")
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(_group_key(r), []).append(i)
    out: list[tuple[int, int]] = []
    for key, idx in groups.items():
        if strategy == "all":
            out.extend(itertools.combinations(idx, 2))
        elif strategy in ("random", "balanced"):
            if per_source is None or per_source < 1:
                raise InputError(f"pair strategy '{strategy}' needs per_source >= 1 (--pairs-per-source)")
            combos = list(itertools.combinations(idx, 2))
            rng = random.Random(f"{seed}|{key[0]}|{key[1]}")
            if strategy == "random":
                out.extend(sorted(rng.sample(combos, min(per_source, len(combos)))))
            else:
                out.extend(_balanced_pairs(idx, min(per_source, len(combos)), rng))
        else:
            if not rating_col:
                raise InputError("pair strategy 'adjacent' needs the rating column of a rating pass (--rating-col)")
            for i in idx:
                v = records[i].get(rating_col)
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    raise InputError(f"record '{records[i].get('id')}' has no rating in '{rating_col}' "
                                     "(adjacent pairs need every candidate rated)")
            order = sorted(idx, key=lambda i: (-float(records[i][rating_col]), str(records[i].get("id"))))
            out.extend(tuple(sorted(p)) for p in zip(order, order[1:]))  # type: ignore[misc]
    return out


def _balanced_pairs(idx: list[int], k: int, rng: random.Random) -> list[tuple[int, int]]:
    """``k`` distinct pairs of ``idx`` in rounds of random perfect matchings: each round shuffles the
    candidates not yet used in it, least-compared first, and pairs each with the first partner it has
    not met; an odd one out waits for the next round."""
    seen: set[tuple[int, int]] = set()
    count = dict.fromkeys(idx, 0)
    while len(seen) < k:
        order = sorted(idx, key=lambda i: (count[i], rng.random()))
        free, added = list(order), 0
        while free and len(seen) < k:
            a = free.pop(0)
            b = next((j for j in free if tuple(sorted((a, j))) not in seen), None)
            if b is None:
                continue
            free.remove(b)
            seen.add(tuple(sorted((a, b))))  # type: ignore[arg-type]
            count[a] += 1
            count[b] += 1
            added += 1
        if not added:  # every remaining pair involves only exhausted candidates (cannot happen for k <= n(n-1)/2)
            break
    return sorted(seen)


_CHOICE_RE = r"(?:^|[^A-Za-z0-9])({})(?![A-Za-z0-9])"


def parse_choice(text: str | None, choices: Sequence[str] = ("A", "B")) -> int | None:
    """Index of the choice a free-text answer names first (``"B"``, ``"Summary B."``, ``"**A**"``), or None.

    Only whole-word, case-sensitive labels count, so ``"A"`` in ``"As both ..."`` does not.
    """
    if not text:
        return None
    pat = re.compile(_CHOICE_RE.format("|".join(re.escape(c) for c in choices)))
    m = pat.search(text.strip())
    return None if m is None else list(choices).index(m.group(1))


async def choice_probabilities(model: Any, messages: Sequence[dict], choices: Sequence[str]) -> tuple[dict[str, float], str | None]:
    """``{choice: P(answer starts with it)}`` and the top token, from one forward pass.

    Backends that return token logprobs (``"logprobs"`` in the provider's ``features``: OpenAI-
    compatible servers) are read from the first answer token's ``top_logprobs`` (20); the
    in-process llama.cpp provider computes each label's exact probability with the chain rule
    (its ``score_distribution`` takes answer texts).

    Raises:
        LogprobsUnsupported: the backend has no token probabilities. BackendError: the call failed.
    """
    from csem.llm import GenerateConfig, LogprobsUnsupported

    features = set(getattr(getattr(model, "api", model), "features", ()) or ())
    if "logprobs" in features:
        cfg = GenerateConfig(n=1, max_tokens=1, temperature=0.0, seed=0, logprobs=True, top_logprobs=20)
        out = await model.generate(messages, cfg)
        lps = out[0].logprobs if out else None
        if not lps or not lps[0].get("top"):
            raise LogprobsUnsupported(f"{model.id}: server returned no logprobs")
        top = lps[0]["top"]
        probs = {c: float(sum(math.exp(lp) for t, lp in top.items() if (t or "").strip() == c and lp is not None
                              and lp > -1e9)) for c in choices}
        return probs, out[0].text
    dist = await model.score_distribution(messages, list(choices))
    return {c: float(dist.probs.get(c, 0.0)) for c in choices}, dist.top


class ComparisonTask:
    """One order of a pair: the `csem.judge.executor.JudgingTask` of `acompare_records`.
    A judgment's ``score`` is ``p_first`` in [0, 1] (``probs``: ``P(A) / (P(A) + P(B))``, ``mass =
    P(A) + P(B)``; ``parse``: 1 for A, 0 for B); it falls back to ``parse``."""

    fallback = "parse"

    def __init__(self, rubric: PairwiseRubric):
        self.rubric = rubric

    def cache_mode(self, mode: str) -> str:
        return f"compare-{mode}"

    def params(self, mode: str, job: Job) -> dict:
        from csem.llm import GenerateConfig

        if mode == "probs":
            return {"choices": list(self.rubric.choices)}
        return GenerateConfig(n=1, max_tokens=8, temperature=0.0, top_k=0, top_p=1.0, seed=0).cache_params()

    async def compute(self, model: Any, job: Job, mode: str) -> tuple[Judgment, dict | None]:
        from csem.llm import GenerateConfig

        choices = self.rubric.choices
        t0 = time.perf_counter()
        if mode == "probs":
            probs, top = await choice_probabilities(model, job.messages, choices)
            mass = sum(probs.values())
            if mass <= 0:
                return Judgment(None, f"no probability on {'/'.join(choices)}", top, mass, mode=mode,
                                latency_s=time.perf_counter() - t0), probs
            return Judgment(probs[choices[0]] / mass, None, top, mass, mode=mode,
                            latency_s=time.perf_counter() - t0), probs
        out = await model.generate(job.messages, GenerateConfig(**self.params(mode, job)))
        text = out[0].text if out else ""
        k = parse_choice(text, choices)
        return Judgment(None if k is None else float(k == 0),
                        None if k is not None else f"unparseable answer: no {'/'.join(choices)}", text, None,
                        mode=mode, prompt_tokens=out[0].prompt_tokens if out else 0,
                        completion_tokens=out[0].tokens if out else 0, latency_s=time.perf_counter() - t0), None

    def from_cache(self, row: dict, mode: str) -> Judgment:
        return Judgment(row["score"], row["missing"], row["raw"], row["mass"], mode=mode, cached=True)

    def labels(self, job: Job) -> tuple[str, str]:
        return f"{self.rubric.id}@{self.rubric.version}", self.rubric.aspect


async def acompare_records(
    records: Iterable[Mapping[str, Any]],
    rubric: str | PairwiseRubric,
    judge: Any,
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    strategy: str = "all",
    per_source: int | None = None,
    rating_col: str | None = None,
    seed: int = 0,
    mode: str = "probs",
    cache: str | Path | JudgmentCache | None = None,
    progress: bool = True,
    backend_options: Mapping[str, Any] | None = None,
    max_consecutive_failures: int = 3,
) -> tuple[list[dict], CompareSummary]:
    """Async core of `compare_records` (same arguments and result)."""
    from csem.llm import get_model

    if mode not in COMPARE_MODES:
        raise InputError(f"unknown comparison mode '{mode}'; choose from {', '.join(COMPARE_MODES)}")
    t0 = time.perf_counter()
    recs = [dict(r) for r in records]
    rub = rubric if isinstance(rubric, PairwiseRubric) else load_pairwise_rubric(rubric)
    if pairs is None:
        pairs = select_pairs(recs, strategy, per_source=per_source, rating_col=rating_col, seed=seed)
    jobs: list[Job] = []  # both orders of each pair
    for i, j in pairs:
        for a, b in ((i, j), (j, i)):
            try:
                jobs.append(Job((a, b), rub.render(recs[a], recs[b])))
            except KeyError as exc:
                raise InputError(f"record {a + 1} (id {recs[a].get('id')!r}): {exc.args[0]}") from None
    model = get_model(judge, max_consecutive_failures=max_consecutive_failures, **dict(backend_options or {}))
    own = not isinstance(cache, JudgmentCache)
    store = cache if isinstance(cache, JudgmentCache) else JudgmentCache(cache)
    try:
        results, tally = await execute(jobs, ComparisonTask(rub), model, store, mode=mode, progress=progress,
                                       label="comparing")
    finally:
        if own:
            store.close()
    summary = CompareSummary(pairs=len(pairs), calls=tally.total, judged=tally.judged, cached=tally.cached,
                             failed=tally.failed, fallback=tally.fallback, errors=tally.errors)
    col = Column("judge", rub.aspect)
    missing, raw, mass = (str(col.with_side(s)) for s in ("missing", "raw", "mass"))
    rows = []
    firsts = []
    for i, j in pairs:
        ab, ba = results[(i, j)], results[(j, i)]
        ra, rb = recs[i], recs[j]
        row = {"id": f"{ra.get('id')}|{rb.get('id')}", "doc_id": ra.get("doc_id"), "source": ra.get("source"),
               "reference": ra.get("reference"), "id_a": ra.get("id"), "id_b": rb.get("id"),
               "candidate_a": ra.get("candidate"), "candidate_b": rb.get("candidate"),
               "system_a": ra.get("system_id"), "system_b": rb.get("system_id"),
               f"order_ab.{rub.aspect}": ab.score, f"order_ba.{rub.aspect}": ba.score}
        firsts += [p for p in (ab.score, ba.score) if p is not None]
        if ab.score is None or ba.score is None:
            reason = ab.missing if ab.score is None else ba.missing
            row[str(col)] = None
            row[missing] = reason
            kind = reason_kind(reason)
            summary.missing[kind] = summary.missing.get(kind, 0) + 1
            raws = [x.raw for x in (ab, ba) if x.score is None and x.raw]
            if raws:
                row[raw] = raws[0]
        else:
            row[str(col)] = (ab.score + 1.0 - ba.score) / 2.0
            if ab.mass is not None and ba.mass is not None:
                row[mass] = (ab.mass + ba.mass) / 2.0
        rows.append(row)
    summary.position_bias = sum(firsts) / len(firsts) if firsts else None
    summary.seconds = time.perf_counter() - t0
    return rows, summary


def compare_records(records: Iterable[Mapping[str, Any]], rubric: str | PairwiseRubric, judge: Any,
                    **kwargs: Any) -> tuple[list[dict], CompareSummary]:
    """Judge pairs of candidates of each source in both orders (see the module docstring).

    Args:
        records: candidate records (``source``, ``candidate``, ``id``, optional ``reference``,
            ``doc_id``, ``system_id``).
        rubric: a pairwise rubric id (``pairwise/summ-coherence-ref-free``; the rating rubric id
            ``csem/summ-coherence-ref-free`` names the same), a file, or a `PairwiseRubric`.
        judge: backend URI (``local``, ``llama-cpp:...``, ``openai:MODEL``) or a model.
        pairs: explicit ``(i, j)`` index pairs; else chosen by ``strategy`` / ``per_source`` /
            ``rating_col`` / ``seed`` (`select_pairs`).
        mode: ``probs`` (preference probability from the A/B tokens) | ``parse`` (one greedy answer).
        cache: SQLite file (resumable) or an open [`JudgmentCache`][csem.judge.JudgmentCache]; None = in memory.
        progress, backend_options, max_consecutive_failures: as [`csem.judge.judge_records`][].

    Returns:
        ``(pair rows, CompareSummary)``; the rows' columns are listed in the module docstring.

    Raises:
        ValueError: unknown mode/strategy, or a record lacks a text the rubric shows (named).
        RubricError: unknown rubric. BackendError: the backend cannot be created.
    """
    from csem.llm import run_sync

    return run_sync(acompare_records(records, rubric, judge, **kwargs))


def preference_scores(pair_rows: Sequence[Mapping[str, Any]], column: str) -> dict[str, float]:
    """One score per candidate id: its mean preference over the pairs it is in (``p(a > b)`` for
    ``a``, ``1 - p(a > b)`` for ``b``), in [0, 1]; pairs missing ``column`` are skipped.

    This is the win rate of Copeland-style aggregation with soft wins; with all pairs of a source it
    orders the candidates as the Bradley-Terry model's maximum-likelihood scores do in most cases.
    """
    tot: dict[str, list[float]] = {}
    for r in pair_rows:
        p = r.get(column)
        if p is None:
            continue
        tot.setdefault(str(r["id_a"]), []).append(float(p))
        tot.setdefault(str(r["id_b"]), []).append(1.0 - float(p))
    return {k: sum(v) / len(v) for k, v in tot.items()}
