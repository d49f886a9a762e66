"""Judge many records with one or more rubrics: cache, resume, prefix-friendly order, progress, summary.

[`judge_records`][csem.judge.runner.judge_records] (sync) wraps [`ajudge_records`][csem.judge.runner.ajudge_records] (async core). Jobs are run grouped by
(rubric, source, reference) in order of first appearance, so an in-process backend evaluates a
source's prompt prefix once; results are keyed by (record, column), so neither input order nor
batch composition changes a score. Each judgment is written to the SQLite cache as soon as it
finishes; a re-run judges only what is missing. Backend failures (server down, 5xx, 429, timeouts,
deadline, a malformed reply) are recorded as missing with their reason but never cached. The cache,
the probs fallback, stopping on a refused key and counting are the one judging executor's
(`csem.judge.executor`, shared with comparison); concurrency, retries, the deadline and giving
up on a dead backend are the LLM wrapper's ([`csem.llm.Model`][]). This module adds the rating
task (`RatingTask`) and the output columns ([`csem.data.columns`][]).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from csem.data.columns import Column
from csem.errors import InputError
from csem.judge.cache import JudgmentCache, judgment_key
from csem.judge.executor import Job, execute, reason_kind
from csem.judge.scoring import MODES, Judgment, score_probs, score_sample, weighted_score
from csem.llm import GenerateConfig, Model, ModelAPI, get_model, run_sync
from csem.rubrics import Rubric, load_rubrics

if TYPE_CHECKING:  # pragma: no cover
    from csem.judge.batch import BatchOptions
    from csem.judge.cost import Estimate, Prices


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
        pending: judgments whose requests wait in a batch job (or were written to a request file);
        missing ``pending ...``, not failed. batches: per batch job of the run's state folder its
        id, status and request counts. request_files: the batch request files written.
        cost_usd: the judgments computed now at the given prices (batch-discounted for a batch job;
        None without prices).
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
    pending: int = 0
    batches: list[dict] = field(default_factory=list)
    request_files: list[str] = field(default_factory=list)
    cost_usd: float | None = None

    @property
    def n_missing(self) -> int:
        return sum(self.missing.values())

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("total", "judged", "cached", "missing", "failed", "prompt_tokens",
                                               "completion_tokens", "evaluated_tokens", "seconds", "fallback", "errors",
                                               "pending", "batches", "request_files", "cost_usd")}

    def __str__(self) -> str:
        s = (f"judged {self.judged}, cached {self.cached}, failed {self.failed}, missing {self.n_missing} of "
             f"{self.total}; "
             f"tokens {self.prompt_tokens} prompt ({self.evaluated_tokens} evaluated) + {self.completion_tokens} "
             f"completion; {self.seconds:.1f} s")
        if self.cost_usd is not None:
            s += f"; cost ${self.cost_usd:.4f}"
        if self.pending:
            s += f"\npending: {self.pending} in batch jobs ({', '.join(b['id'] or '?' for b in self.batches)})"
        if self.missing:
            s += "\nmissing: " + "; ".join(f"{r} x{n}" for r, n in sorted(self.missing.items(), key=lambda x: -x[1]))
        if self.fallback:
            s += f"\nnote: {self.fallback}"
        return s


def rubric_columns(rubrics: Sequence[Rubric]) -> dict[tuple[str, str], Column]:
    """The score column of each (rubric id, aspect): ``judge.<aspect>``, or
    ``judge.<aspect>@<rubric id>`` when two requested rubrics share an aspect name
    ([`csem.data.columns.Column`][]; ``str()`` gives the name, ``.with_side("missing")`` its
    side fields)."""
    counts = Counter(a for r in rubrics for a in r.aspect_names)
    return {(r.id, a): Column("judge", a, tag=None if counts[a] == 1 else r.id) for r in rubrics for a in r.aspect_names}


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


def rating_cache_key(backend_id: str, rubric: str | Rubric, record: Mapping[str, Any], aspect: str | None = None, *,
                     mode: str = "probs", n: int = 20, temperature: float = 1.0, max_tokens: int = 10,
                     top_p: float = 1.0, top_k: int = 0, seed: int = 0, structured: bool = False) -> str:
    """The judgment-cache key under which [`judge_records`][csem.judge.judge_records] stores the rating of
    ``record`` on ``aspect``: the one rule the judge uses (rendered prompt, cache mode, every generation
    parameter), for reading a cache without loading the model.

    Args:
        backend_id: the backend's id as the cache stores it (``Model.id``, e.g. ``llama-cpp:<sha256>``).
        rubric: a rubric or its id (``geval/summeval-coherence``). record: the record to render.
        aspect: the rubric's aspect (default: its first). mode: ``probs``, ``sample`` or ``parse``;
            the remaining arguments as [`judge_records`][csem.judge.judge_records] (``structured``: the
            backend constrains answers to the rubric's JSON schema).

    Returns:
        The sha256 hex key ([`judgment_key`][csem.judge.judgment_key]).

    Raises:
        KeyError: the record lacks a field the rubric's prompt needs.
    """
    (rub,) = [rubric] if isinstance(rubric, Rubric) else load_rubrics(rubric)
    aspect = aspect or rub.aspect_names[0]
    task = RatingTask(n=n, temperature=temperature, max_tokens=max_tokens, top_p=top_p, top_k=top_k, seed=seed,
                      min_mass=0.0, fallback="parse", structured=structured)
    job = Job(None, rub.render(record, aspect), (rub, aspect))
    return judgment_key(backend_id, job.messages, task.cache_mode(mode), task.params(mode, job))


def _prepare(records: Iterable[Mapping[str, Any]], rubrics: str | Rubric | Sequence[str | Rubric], *, mode: str,
             fallback: str, n: int) -> tuple[list[dict], dict[tuple[str, str], Column], list[Job]]:
    """Check the settings, load the rubrics and render every prompt (bad input fails before any
    judging, naming record and field): ``(record copies, columns, jobs)``."""
    if mode not in MODES:
        raise InputError(f"unknown mode '{mode}'; choose from {MODES}")
    if fallback not in ("parse", "sample", "none"):
        raise InputError(f"unknown fallback '{fallback}'; choose parse, sample or none")
    if n < 1:
        raise InputError(f"n must be >= 1, got {n}")
    recs = [dict(r) for r in records]
    if isinstance(rubrics, (str, Rubric)):
        rubrics = [rubrics]
    rubric_list: list[Rubric] = []
    for r in rubrics:
        rubric_list.extend([r] if isinstance(r, Rubric) else load_rubrics(r))
    columns = rubric_columns(rubric_list)
    jobs: list[Job] = []
    for i, r, a in _group_order(recs, rubric_list):
        try:
            msgs = r.render(recs[i], a)
        except KeyError as exc:
            raise InputError(f"record {i + 1} (id {recs[i].get('id')!r}): {exc.args[0]}") from None
        jobs.append(Job((i, columns[(r.id, a)]), msgs, (r, a)))
    return recs, columns, jobs


class RatingTask:
    """Rating on a rubric's scale (G-Eval): the `csem.judge.executor.JudgingTask` of
    [`ajudge_records`][csem.judge.runner.ajudge_records]. A job's ``spec`` is ``(rubric, aspect)``."""

    def __init__(self, *, n: int, temperature: float, max_tokens: int, top_p: float, top_k: int, seed: int,
                 min_mass: float, fallback: str, structured: bool):
        self.n, self.temperature, self.max_tokens, self.top_p, self.top_k, self.seed = (
            n, temperature, max_tokens, top_p, top_k, seed)
        self.min_mass, self.fallback, self.structured = min_mass, fallback, structured

    def cache_mode(self, mode: str) -> str:
        return mode

    def params(self, mode: str, job: Job) -> dict:
        rubric = job.spec[0]
        if mode == "probs":
            return {"scores": rubric.scale.values}
        # a JSON rubric asks a backend that can constrain its answers for structured output
        fmt = rubric.answer_schema() if self.structured else None
        if mode == "sample":
            return GenerateConfig(n=self.n, max_tokens=self.max_tokens, temperature=self.temperature, top_k=self.top_k,
                                  top_p=self.top_p, seed=self.seed, response_format=fmt).cache_params()
        return GenerateConfig(n=1, max_tokens=self.max_tokens, temperature=0.0, top_k=0, top_p=1.0, seed=0,
                              response_format=fmt).cache_params()

    async def compute(self, model: Model, job: Job, mode: str) -> tuple[Judgment, dict | None]:
        rubric, aspect = job.spec
        if mode == "probs":
            j = await score_probs(model, job.messages, rubric.scale.values, min_mass=self.min_mass)
            return j, j.probs
        cfg = GenerateConfig(**self.params(mode, job))
        return await score_sample(model, job.messages, (rubric.scale.min, rubric.scale.max), cfg, aspect=aspect), None

    def from_cache(self, row: dict, mode: str) -> Judgment:
        probs = {int(k): float(v) for k, v in row["probs"].items()} if row.get("probs") else None
        score, missing = row["score"], row["missing"]
        if mode == "probs" and probs is not None:
            score, _, missing = weighted_score(probs, min_mass=self.min_mass)
        return Judgment(score=score, missing=missing, raw=row["raw"], mass=row["mass"], probs=probs, mode=mode,
                        prompt_tokens=row["prompt_tokens"] or 0, completion_tokens=row["completion_tokens"] or 0,
                        latency_s=row["latency_s"] or 0.0, cached=True)

    def labels(self, job: Job) -> tuple[str, str]:
        rubric, aspect = job.spec
        return f"{rubric.id}@{rubric.version}", aspect


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
    batch: "BatchOptions | None" = None,
    prices: "Prices | None" = None,
) -> tuple[list[dict], JudgeSummary]:
    """Async core of [`judge_records`][csem.judge.runner.judge_records] (same arguments and result)."""
    t_start = time.perf_counter()
    recs, columns, jobs = _prepare(records, rubrics, mode=mode, fallback=fallback, n=n)
    if batch is not None and isinstance(judge, str) and judge.partition(":")[0].strip().lower() != "openai":
        raise InputError(f"batch jobs need an OpenAI-compatible judge (openai:MODEL, Azure OpenAI), not '{judge}'")
    backend = get_model(judge, max_consecutive_failures=max_consecutive_failures, **dict(backend_options or {}))
    task = RatingTask(n=n, temperature=temperature, max_tokens=max_tokens, top_p=top_p, top_k=top_k, seed=seed,
                      min_mass=min_mass, fallback=fallback,
                      structured="response_format" in (getattr(backend.api, "features", None) or ()))
    own_cache = not isinstance(cache, JudgmentCache)
    store = cache if isinstance(cache, JudgmentCache) else JudgmentCache(cache)
    run = None
    try:
        if batch is None:
            results, tally = await execute(jobs, task, backend, store, mode=mode, progress=progress, label="judging")
        else:  # the same executor; the requests travel as batch jobs (csem.judge.batch)
            from csem.judge.batch import BatchRun

            run = BatchRun(batch, progress=progress)
            results, tally = await run.execute(jobs, task, backend, store, mode=mode)
    finally:
        if own_cache:
            store.close()
    summary = JudgeSummary(total=tally.total, judged=tally.judged, cached=tally.cached, failed=tally.failed,
                           prompt_tokens=tally.prompt_tokens, completion_tokens=tally.completion_tokens,
                           evaluated_tokens=tally.evaluated_tokens, fallback=tally.fallback, errors=tally.errors,
                           pending=tally.deferred)
    if run is not None:
        summary.batches = run.state.summary() if run.state is not None else []
        summary.request_files = [str(p) for p in run.written]
    if prices is not None:
        summary.cost_usd = prices.cost(tally.prompt_tokens, tally.completion_tokens,
                                       batch=batch is not None and batch.request_file is None)

    order = list(columns.values())
    by_record: dict[int, list[Column]] = {}
    for job in jobs:
        by_record.setdefault(job.key[0], []).append(job.key[1])
    out = []
    for i, rec in enumerate(recs):
        row = dict(rec)
        for col in sorted(by_record.get(i, []), key=order.index):
            j = results[(i, col)]
            missing, raw, mass = (str(col.with_side(s)) for s in ("missing", "raw", "mass"))
            row[str(col)] = j.score
            for k in (missing, raw, mass):
                row.pop(k, None)
            if j.score is None:
                row[missing] = j.missing
                kind = reason_kind(j.missing)
                summary.missing[kind] = summary.missing.get(kind, 0) + 1
            if keep_raw and (j.mode != "probs" or j.score is None) and j.raw is not None:
                row[raw] = j.raw
            if j.mass is not None:
                row[mass] = j.mass
        out.append(row)
    summary.seconds = time.perf_counter() - t_start
    return out, summary


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
    batch: "BatchOptions | None" = None,
    prices: "Prices | None" = None,
) -> tuple[list[dict], JudgeSummary]:
    """Judge every record on every aspect of every rubric.

    Args:
        records: csem records (``source``, ``candidate``, optional ``reference``, ``id`` ...).
        rubrics: rubric ids/paths (comma list allowed) or [`Rubric`][csem.rubrics.model.Rubric] objects.
        judge: backend URI (``local``, ``llama-cpp:smollm2``, ``openai:MODEL``) or a backend.
        mode: ``probs`` (probability-weighted, G-Eval Eq. 1) | ``sample`` (mean of ``n`` parsed
            samples at ``temperature``, G-Eval's GPT-4 procedure) | ``parse`` (one greedy answer).
        n, temperature, max_tokens, top_p, top_k, seed: generation parameters (sample/parse).
        min_mass: probs mode: a judgment whose valid-score probability mass is below this is
            missing (default 0: missing only when no mass at all).
        fallback: mode used when the backend gives no token probabilities (``none``: raise).
        cache: SQLite file (or an open [`JudgmentCache`][csem.judge.JudgmentCache]; None = in memory only).
        progress: show a rich progress bar with ETA on stderr.
        keep_raw: add ``judge.<aspect>.raw`` (the answer text) for parse/sample and for missing.
        max_consecutive_failures: after this many transient backend failures in a row the rest
            is not attempted (recorded as missing ``not attempted: backend unavailable``).
        backend_options: keyword options for the backend when ``judge`` is a URI.
        batch: send the requests as batch jobs of an OpenAI-compatible judge, or write them to a
            request file, or read their results from result files
            ([`csem.judge.batch.BatchOptions`][]; the same prompts, requests, parsing and cache).
        prices: the judge's prices ([`csem.judge.cost.Prices`][]): the summary's ``cost_usd``.

    Returns:
        ``(records, summary)``: copies of the input records in input order, each with
        ``judge.<aspect>`` (float in the rubric's scale or None), ``judge.<aspect>.missing``
        (reason, only when None), ``judge.<aspect>.mass`` (probs: valid mass in [0, 1]) and
        ``judge.<aspect>.raw``; and a [`JudgeSummary`][csem.judge.runner.JudgeSummary]. Aspect names shared by two rubrics
        become ``judge.<aspect>@<rubric id>``.

    Raises:
        ValueError: unknown mode, or a record lacks an input a rubric uses (names record and field).
        RubricError: unknown rubric. BackendError: the backend cannot be created.
    """
    return run_sync(ajudge_records(records, rubrics, judge, mode=mode, n=n, temperature=temperature,
                                   max_tokens=max_tokens, top_p=top_p, top_k=top_k, seed=seed, min_mass=min_mass,
                                   fallback=fallback, cache=cache, progress=progress, keep_raw=keep_raw,
                                   max_consecutive_failures=max_consecutive_failures,
                                   backend_options=backend_options, batch=batch, prices=prices))


def estimate_records(
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
    cache: str | Path | JudgmentCache | None = None,
    backend_options: Mapping[str, Any] | None = None,
    prices: "Prices | None" = None,
) -> "Estimate":
    """A dry run of [`judge_records`][csem.judge.judge_records] with the same arguments: render every
    prompt, look each judgment up in the cache, count the prompt tokens of the rest with the judge's
    own tokenizer and price them; no request is sent.

    Returns:
        The [`csem.judge.cost.Estimate`][] (judgments, cached, to send, prompt and completion
        tokens, the tokenizer used, the cost synchronously and as a batch job when ``prices`` are given).

    Raises:
        as [`judge_records`][csem.judge.judge_records] for bad input.
    """
    from csem.judge.cost import estimate
    from csem.judge.executor import uncached

    _, _, jobs = _prepare(records, rubrics, mode=mode, fallback="parse", n=n)
    backend = get_model(judge, **dict(backend_options or {}))
    task = RatingTask(n=n, temperature=temperature, max_tokens=max_tokens, top_p=top_p, top_k=top_k, seed=seed,
                      min_mass=0.0, fallback="parse",
                      structured="response_format" in (getattr(backend.api, "features", None) or ()))
    own_cache = not isinstance(cache, JudgmentCache)
    store = cache if isinstance(cache, JudgmentCache) else JudgmentCache(cache)
    try:
        todo = uncached(jobs, task, backend, store, mode=mode)
    finally:
        if own_cache:
            store.close()
    return estimate([j.messages for j in todo], judgments=len(jobs), api=backend.api, mode=mode, n=n,
                    max_tokens=max_tokens, prices=prices, scale_max=[j.spec[0].scale.max for j in todo])
