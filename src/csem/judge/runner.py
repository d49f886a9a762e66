"""Judge many records with one or more rubrics: cache, resume, prefix-friendly order, progress, summary.

:func:`judge_records` (sync) wraps :func:`ajudge_records` (async core). Jobs are run grouped by
(rubric, source, reference) in order of first appearance, so an in-process backend evaluates a
source's prompt prefix once; results are keyed by (record, column), so neither input order nor
batch composition changes a score. Each judgment is written to the SQLite cache as soon as it
finishes; a re-run judges only what is missing. Transient backend failures (server down, 5xx, 429,
timeouts, deadline) are recorded as missing with their reason but never cached. Concurrency,
retries, the deadline and giving up on a dead backend are the LLM wrapper's
(:class:`csem.llm.Model`); the runner only switches the scoring mode when the backend has no token
probabilities.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from csem.data.columns import Column
from csem.judge.cache import JudgmentCache, judgment_key
from csem.judge.scoring import MODES, Judgment, score_probs, score_sample, weighted_score
from csem.llm import (NOT_ATTEMPTED, BackendAuthError, BackendError, BackendUnavailable, GenerateConfig,
                      LogprobsUnsupported, Model, ModelAPI, gather_all, get_model, run_sync)
from csem.rubrics import Rubric, load_rubrics


@dataclass
class JudgeSummary:
    """What a run did.

    Attributes:
        total: judgments requested (records x aspects) = judged + cached + failed. judged: the
        backend answered now (a score, or missing when the answer has none). cached: served from the
        cache. failed: the backend gave no answer (any backend error: unreachable, 5xx, a prompt
        longer than its context ...; never cached, a re-run retries them): the run is partial.
        missing: ``{reason: count}`` over all results without a score (cached, judged or failed).
        prompt_tokens, completion_tokens, evaluated_tokens: totals of the judgments computed now.
        seconds: wall time. fallback: note when ``probs`` fell back to another mode.
        errors: up to 5 distinct backend error messages (API keys redacted by the backend).
    """

    total: int = 0
    judged: int = 0
    cached: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    evaluated_tokens: int = 0
    seconds: float = 0.0
    fallback: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def n_missing(self) -> int:
        return sum(self.missing.values())

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("total", "judged", "cached", "missing", "failed", "prompt_tokens",
                                               "completion_tokens", "evaluated_tokens", "seconds", "fallback", "errors")}

    def __str__(self) -> str:
        s = (f"judged {self.judged}, cached {self.cached}, failed {self.failed}, missing {self.n_missing} of "
             f"{self.total}; "
             f"tokens {self.prompt_tokens} prompt ({self.evaluated_tokens} evaluated) + {self.completion_tokens} "
             f"completion; {self.seconds:.1f} s")
        if self.missing:
            s += "\nmissing: " + "; ".join(f"{r} x{n}" for r, n in sorted(self.missing.items(), key=lambda x: -x[1]))
        if self.fallback:
            s += f"\nnote: {self.fallback}"
        return s


@dataclass
class _Job:
    index: int
    rubric: Rubric
    aspect: str
    column: str
    messages: list[dict]


def rubric_columns(rubrics: Sequence[Rubric]) -> dict[tuple[str, str], str]:
    """Column name (without ``judge.``) of each (rubric id, aspect): the aspect, or
    ``<aspect>@<rubric id>`` when two requested rubrics share an aspect name."""
    counts = Counter(a for r in rubrics for a in r.aspect_names)
    return {(r.id, a): (a if counts[a] == 1 else f"{a}@{r.id}") for r in rubrics for a in r.aspect_names}


def _group_order(records: Sequence[Mapping[str, Any]], rubrics: Sequence[Rubric]) -> list[tuple[int, Rubric, str]]:
    order = []
    for r in rubrics:
        groups: dict[tuple, list[int]] = {}
        for i, rec in enumerate(records):
            key = (rec.get("source") if r.uses_source else None, str(rec.get("reference")) if r.uses_reference else None)
            groups.setdefault(key, []).append(i)
        for idxs in groups.values():
            for i in idxs:
                for a in r.aspect_names:
                    order.append((i, r, a))
    return order


def _progress(enabled: bool):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[note]}"),
                    console=Console(stderr=True), transient=False)


async def ajudge_records(
    records: Iterable[Mapping[str, Any]],
    rubrics: str | Rubric | Sequence[str | Rubric],
    judge: str | ModelAPI | Model,
    *,
    mode: str = "probs",
    n: int = 20,
    temperature: float = 1.0,
    max_tokens: int = 10,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    min_mass: float = 0.0,
    fallback: str = "parse",
    cache: str | Path | JudgmentCache | None = None,
    progress: bool = True,
    keep_raw: bool = True,
    max_consecutive_failures: int = 3,
    backend_options: Mapping[str, Any] | None = None,
) -> tuple[list[dict], JudgeSummary]:
    """Async core of :func:`judge_records` (same arguments and result)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}'; choose from {MODES}")
    if fallback not in ("parse", "sample", "none"):
        raise ValueError(f"unknown fallback '{fallback}'; choose parse, sample or none")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    t_start = time.perf_counter()
    recs = [dict(r) for r in records]
    if isinstance(rubrics, (str, Rubric)):
        rubrics = [rubrics]
    rubric_list: list[Rubric] = []
    for r in rubrics:
        rubric_list.extend([r] if isinstance(r, Rubric) else load_rubrics(r))
    columns = rubric_columns(rubric_list)

    # render every prompt first: bad input fails before any judging, naming record and field
    jobs: list[_Job] = []
    for i, r, a in _group_order(recs, rubric_list):
        try:
            msgs = r.render(recs[i], a)
        except KeyError as exc:
            raise ValueError(f"record {i + 1} (id {recs[i].get('id')!r}): {exc.args[0]}") from None
        jobs.append(_Job(i, r, a, columns[(r.id, a)], msgs))

    backend = get_model(judge, max_consecutive_failures=max_consecutive_failures, **dict(backend_options or {}))
    own_cache = not isinstance(cache, JudgmentCache)
    store = cache if isinstance(cache, JudgmentCache) else JudgmentCache(cache)
    summary = JudgeSummary(total=len(jobs))
    results: dict[tuple[int, str], Judgment] = {}
    state = {"mode": mode}
    bar = _progress(progress)
    task_id = bar.add_task("judging", total=len(jobs), note="") if bar else None

    structured = "response_format" in (getattr(backend.api, "features", None) or ())

    def params_for(m: str, r: Rubric) -> dict:
        if m == "probs":
            return {"scores": r.scale.values}
        # a JSON rubric asks a backend that can constrain its answers for structured output
        fmt = r.answer_schema() if structured else None
        if m == "sample":
            return GenerateConfig(n=n, max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                  seed=seed, response_format=fmt).cache_params()
        return GenerateConfig(n=1, max_tokens=max_tokens, temperature=0.0, top_k=0, top_p=1.0, seed=0,
                              response_format=fmt).cache_params()

    def from_cache(row: dict, m: str) -> Judgment:
        probs = {int(k): float(v) for k, v in row["probs"].items()} if row.get("probs") else None
        score, missing = row["score"], row["missing"]
        if m == "probs" and probs is not None:
            score, _, missing = weighted_score(probs, min_mass=min_mass)
        return Judgment(score=score, missing=missing, raw=row["raw"], mass=row["mass"], probs=probs, mode=m,
                        prompt_tokens=row["prompt_tokens"] or 0, completion_tokens=row["completion_tokens"] or 0,
                        latency_s=row["latency_s"] or 0.0, cached=True)

    async def compute(job: _Job, m: str) -> Judgment:
        scale = (job.rubric.scale.min, job.rubric.scale.max)
        if m == "probs":
            return await score_probs(backend, job.messages, job.rubric.scale.values, min_mass=min_mass)
        cfg = GenerateConfig(**params_for(m, job.rubric))
        return await score_sample(backend, job.messages, scale, cfg, aspect=job.aspect)

    async def run(job: _Job) -> None:
        j: Judgment | None = None
        failed = False
        for _attempt in range(2):  # a second pass only after a probs -> fallback switch
            m = state["mode"]
            key = judgment_key(backend.id, job.messages, m, params_for(m, job.rubric))
            row = store.get(key)
            if row is not None:
                j = from_cache(row, m)
                break
            try:
                j = await compute(job, m)
            except BackendUnavailable:  # the wrapper gave up on the backend: not attempted
                j, failed = Judgment(score=None, missing=NOT_ATTEMPTED, mode=m, transient=True), True
                break
            except BackendAuthError:  # every other request would be refused too: stop the run at once
                raise
            except LogprobsUnsupported as exc:
                if fallback == "none":
                    raise
                if state["mode"] == "probs":
                    state["mode"] = fallback
                    summary.fallback = f"backend gives no token probabilities ({exc}); used mode '{fallback}'"
                continue
            except BackendError as exc:  # no answer: missing, never cached, and the run is partial
                msg = str(exc)
                j, failed = Judgment(score=None, missing=f"backend error: {msg}", mode=m, transient=exc.transient), True
                if msg not in summary.errors and len(summary.errors) < 5:
                    summary.errors.append(msg)
                break
            store.put(key, backend=backend.id, mode=j.mode, rubric=f"{job.rubric.id}@{job.rubric.version}",
                      aspect=job.aspect, score=j.score,
                      missing=j.missing, raw=j.raw, mass=j.mass, probs=j.probs, prompt_tokens=j.prompt_tokens,
                      completion_tokens=j.completion_tokens, latency_s=j.latency_s)
            break
        assert j is not None
        results[(job.index, job.column)] = j
        if j.cached:
            summary.cached += 1
        elif failed:
            summary.failed += 1
        else:
            summary.judged += 1
            summary.prompt_tokens += j.prompt_tokens
            summary.completion_tokens += j.completion_tokens
            summary.evaluated_tokens += max(j.evaluated_tokens, 0) if j.evaluated_tokens >= 0 else j.prompt_tokens
        if bar is not None:
            bar.update(task_id, advance=1, note=f"{summary.cached} cached, {summary.failed} failed")

    try:
        if bar is not None:
            bar.start()
        await gather_all([run(job) for job in jobs])  # an error that stops the run cancels the rest
    finally:
        if bar is not None:
            bar.stop()
        if own_cache:
            store.close()

    by_record: dict[int, list[str]] = {}
    for job in jobs:
        by_record.setdefault(job.index, []).append(job.column)
    out = []
    for i, rec in enumerate(recs):
        row = dict(rec)
        for job_col in sorted(by_record.get(i, []), key=list(columns.values()).index):
            j = results[(i, job_col)]
            aspect, _, tag = job_col.partition("@")
            col = Column("judge", aspect, tag=tag or None)  # judge.<aspect>[@<rubric id>] and its side fields
            row[str(col)] = j.score
            side = {s: str(col.with_side(s)) for s in ("missing", "raw", "mass")}
            for k in side.values():
                row.pop(k, None)
            if j.score is None:
                row[side["missing"]] = j.missing
                summary.missing[_reason_kind(j.missing)] = summary.missing.get(_reason_kind(j.missing), 0) + 1
            if keep_raw and (j.mode != "probs" or j.score is None) and j.raw is not None:
                row[side["raw"]] = j.raw
            if j.mass is not None:
                row[side["mass"]] = j.mass
        out.append(row)
    summary.seconds = time.perf_counter() - t_start
    return out, summary


def _reason_kind(reason: str | None) -> str:
    """Group missing reasons for the summary (drops the varying detail after the first ':')."""
    r = reason or "unknown"
    if r.startswith("backend error"):
        return "backend error"
    return r.split(":")[0].split(" (")[0]


def judge_records(
    records: Iterable[Mapping[str, Any]],
    rubrics: str | Rubric | Sequence[str | Rubric],
    judge: str | ModelAPI | Model,
    *,
    mode: str = "probs",
    n: int = 20,
    temperature: float = 1.0,
    max_tokens: int = 10,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    min_mass: float = 0.0,
    fallback: str = "parse",
    cache: str | Path | JudgmentCache | None = None,
    progress: bool = True,
    keep_raw: bool = True,
    max_consecutive_failures: int = 3,
    backend_options: Mapping[str, Any] | None = None,
) -> tuple[list[dict], JudgeSummary]:
    """Judge every record on every aspect of every rubric.

    Args:
        records: csem records (``source``, ``candidate``, optional ``reference``, ``id`` ...).
        rubrics: rubric ids/paths (comma list allowed) or :class:`Rubric` objects.
        judge: backend URI (``local``, ``llama-cpp:smollm2``, ``openai:MODEL``) or a backend.
        mode: ``probs`` (probability-weighted, G-Eval Eq. 1) | ``sample`` (mean of ``n`` parsed
            samples at ``temperature``, G-Eval's GPT-4 procedure) | ``parse`` (one greedy answer).
        n, temperature, max_tokens, top_p, top_k, seed: generation parameters (sample/parse).
        min_mass: probs mode: a judgment whose valid-score probability mass is below this is
            missing (default 0: missing only when no mass at all).
        fallback: mode used when the backend gives no token probabilities (``none``: raise).
        cache: SQLite file (or an open :class:`JudgmentCache`; None = in memory only).
        progress: show a rich progress bar with ETA on stderr.
        keep_raw: add ``judge.<aspect>.raw`` (the answer text) for parse/sample and for missing.
        max_consecutive_failures: after this many transient backend failures in a row the rest
            is not attempted (recorded as missing ``not attempted: backend unavailable``).
        backend_options: keyword options for the backend when ``judge`` is a URI.

    Returns:
        ``(records, summary)``: copies of the input records in input order, each with
        ``judge.<aspect>`` (float in the rubric's scale or None), ``judge.<aspect>.missing``
        (reason, only when None), ``judge.<aspect>.mass`` (probs: valid mass in [0, 1]) and
        ``judge.<aspect>.raw``; and a :class:`JudgeSummary`. Aspect names shared by two rubrics
        become ``judge.<aspect>@<rubric id>``.

    Raises:
        ValueError: unknown mode, or a record lacks an input a rubric uses (names record and field).
        RubricError: unknown rubric. BackendError: the backend cannot be created.
    """
    return run_sync(ajudge_records(records, rubrics, judge, mode=mode, n=n, temperature=temperature,
                                   max_tokens=max_tokens, top_p=top_p, top_k=top_k, seed=seed, min_mass=min_mass,
                                   fallback=fallback, cache=cache, progress=progress, keep_raw=keep_raw,
                                   max_consecutive_failures=max_consecutive_failures,
                                   backend_options=backend_options))
