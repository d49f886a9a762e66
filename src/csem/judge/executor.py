"""The one judging executor: rating ([`csem.judge.judge_records`][]) and comparison
(`csem.judge.comparison.compare_records`) run their judge calls through `execute`.

As prometheus-eval's absolute and relative grading share one executor, the two kinds of judgment
differ only in a small task object (`JudgingTask`: the cache parameters of a job in a mode,
how to compute a judgment, how to read one back from the cache); everything else is done here,
once:

* **cache**: each job is looked up in the [`JudgmentCache`][csem.judge.cache.JudgmentCache] under
  ``judgment_key(model id, messages, cache mode, params)``; a computed judgment is stored as soon
  as it finishes (a killed run resumes); backend failures are never stored;
* **fallback**: when the backend has no token probabilities ([`LogprobsUnsupported`][csem.llm.LogprobsUnsupported])
  the run switches from ``probs`` to the task's fallback mode once, says so in
  `Tally.fallback`, and the job is tried again (``fallback="none"``: the error is raised);
* **stop**: a refused API key ([`BackendAuthError`][csem.llm.BackendAuthError]) stops the whole run at once
  (every other request would be refused too; pending jobs are cancelled);
* **give-up**: after the model wrapper gave up on the backend ([`BackendUnavailable`][csem.llm.BackendUnavailable])
  the remaining jobs are missing ``not attempted: backend unavailable``;
* **errors**: any other backend error makes the job missing ``backend error: <message>`` and counts
  it as failed (the run is partial); up to 5 distinct messages are kept;
* **deferred**: a transport that answers later (a batch job, [`csem.judge.batch`][]) raises
  `Deferred` for a request it has taken; the job is missing with that reason, counted in
  `Tally.deferred`, never cached, and answered by a later pass over the same jobs;
* **counts**: one `Tally` (judged now, cached, failed, deferred, tokens) from which both
  summaries are written.

While a job is computed, `REQUEST_KEY` holds its cache key, so a transport below the provider
(the batch transport) can name the request after the judgment it belongs to.

Concurrency is the model wrapper's alone ([`csem.llm.Model`][]: at most ``concurrency``
requests in flight, served in submission order); the executor adds no semaphore of its own, so it
submits the jobs in the order given (rating groups them by source for prefix reuse).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Hashable, Protocol, Sequence

from csem.judge.cache import JudgmentCache, judgment_key
from csem.judge.scoring import Judgment
from csem.llm import (NOT_ATTEMPTED, BackendAuthError, BackendError, BackendUnavailable, LogprobsUnsupported, Model,
                      gather_all)


#: the cache key of the judgment being computed (None outside `execute`)
REQUEST_KEY: ContextVar[str | None] = ContextVar("csem_request_key", default=None)


class Deferred(BackendError):
    """A transport took the request and answers it later (a batch job); the message says where the
    request is (``pending in batch ...``, ``written to ...``). Never retried by the wrapper, never cached."""


@dataclass
class Job:
    """One judge call: ``key`` identifies its result (``(record index, column)`` for a rating,
    ``(first, second)`` record indices for one order of a comparison), ``messages`` the rendered
    chat, ``spec`` what the task needs to judge it (a rubric and aspect, a pairwise rubric)."""

    key: Hashable
    messages: list[dict]
    spec: Any = None


class JudgingTask(Protocol):
    """What one kind of judgment (rating, comparison) adds to `execute`.

    Attributes:
        fallback: the mode used when the backend has no token probabilities (``"none"``: raise).
    """

    fallback: str

    def cache_mode(self, mode: str) -> str:
        """The mode string of the cache key and row (``probs``; ``compare-probs`` ...)."""
        ...

    def params(self, mode: str, job: Job) -> dict:
        """Every parameter that determines the judgment in ``mode`` (part of the cache key)."""
        ...

    async def compute(self, model: Model, job: Job, mode: str) -> tuple[Judgment, dict | None]:
        """Judge ``job`` now: the judgment and the probabilities to cache (or None).

        Raises:
            LogprobsUnsupported, BackendAuthError, BackendUnavailable, BackendError: from the backend.
        """
        ...

    def from_cache(self, row: dict, mode: str) -> Judgment:
        """The judgment stored in cache ``row`` (``cached=True``)."""
        ...

    def labels(self, job: Job) -> tuple[str, str]:
        """``(rubric id@version, aspect)`` stored beside a cached judgment."""
        ...


@dataclass
class Tally:
    """What `execute` did: ``total`` jobs = ``judged`` (the backend answered now, with or
    without a readable score) + ``cached`` + ``failed`` (no answer: any backend error or not
    attempted; never cached) + ``deferred`` (taken by a batch transport, answered later); token
    totals of the judgments computed now; ``fallback``: a note when
    ``probs`` fell back to another mode; ``errors``: up to 5 distinct backend error messages."""

    total: int = 0
    judged: int = 0
    cached: int = 0
    failed: int = 0
    deferred: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    evaluated_tokens: int = 0
    fallback: str | None = None
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < 5:
            self.errors.append(message)


def progress_bar(label: str, total: int, enabled: bool):
    """A rich progress bar on stderr (``label``, done/total, elapsed, ETA, a note), started; or None."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[note]}"),
                   console=Console(stderr=True), transient=False)
    bar.add_task(label, total=total, note="")
    return bar


async def execute(jobs: Sequence[Job], task: JudgingTask, model: Model, store: JudgmentCache, *, mode: str,
                  progress: bool = False, label: str = "judging") -> tuple[dict[Hashable, Judgment], Tally]:
    """Run every job through ``task`` on ``model`` with the cache, fallback, stop, give-up and error
    rules of the module docstring.

    Args:
        jobs: the judge calls, submitted in this order. task: the kind of judgment. model: the
            wrapped backend. store: the judgment cache (the caller opens and closes it).
        mode: the scoring mode to start in (``probs`` may fall back to ``task.fallback``).
        progress: show a progress bar on stderr, labelled ``label``.

    Returns:
        ``({job.key: Judgment}, Tally)``; a failed job's judgment has ``score=None``, its
        ``missing`` reason and ``transient`` set when a re-run may succeed.

    Raises:
        BackendAuthError: the API key was refused (the run stops; nothing else is attempted).
        LogprobsUnsupported: no token probabilities and ``task.fallback == "none"``.
    """
    tally = Tally(total=len(jobs))
    results: dict[Hashable, Judgment] = {}
    state = {"mode": mode}
    bar = progress_bar(label, len(jobs), progress)

    async def run(job: Job) -> None:
        j: Judgment | None = None
        failed = deferred = False
        for _attempt in range(2):  # a second pass only after a probs -> fallback switch
            m = state["mode"]
            cmode = task.cache_mode(m)
            key = judgment_key(model.id, job.messages, cmode, task.params(m, job))
            row = store.get(key)
            if row is not None:
                j = task.from_cache(row, m)
                break
            REQUEST_KEY.set(key)  # this job's own task context: read by a batch transport
            try:
                j, probs = await task.compute(model, job, m)
            except Deferred as exc:  # a batch transport took the request: answered by a later pass
                j, deferred = Judgment(score=None, missing=str(exc), mode=m, transient=True), True
                break
            except BackendUnavailable as exc:  # the wrapper gave up on the backend: not attempted (and why)
                j, failed = Judgment(score=None, missing=str(exc) or NOT_ATTEMPTED, mode=m, transient=True), True
                break
            except BackendAuthError:  # every other request would be refused too: stop the run at once
                raise
            except LogprobsUnsupported as exc:
                if task.fallback == "none":
                    raise
                if state["mode"] == "probs":
                    state["mode"] = task.fallback
                    tally.fallback = f"backend gives no token probabilities ({exc}); used mode '{task.fallback}'"
                continue
            except BackendError as exc:  # no answer: missing, never cached, and the run is partial
                j, failed = Judgment(score=None, missing=f"backend error: {exc}", mode=m, transient=exc.transient), True
                tally.error(str(exc))
                break
            rubric, aspect = task.labels(job)
            store.put(key, backend=model.id, mode=cmode, rubric=rubric, aspect=aspect, score=j.score,
                      missing=j.missing, raw=j.raw, mass=j.mass, probs=probs, prompt_tokens=j.prompt_tokens,
                      completion_tokens=j.completion_tokens, latency_s=j.latency_s)
            break
        assert j is not None
        results[job.key] = j
        if j.cached:
            tally.cached += 1
        elif deferred:
            tally.deferred += 1
        elif failed:
            tally.failed += 1
        else:
            tally.judged += 1
            tally.prompt_tokens += j.prompt_tokens
            tally.completion_tokens += j.completion_tokens
            tally.evaluated_tokens += j.evaluated_tokens if j.evaluated_tokens >= 0 else j.prompt_tokens
        if bar is not None:
            bar.update(bar.task_ids[0], advance=1, note=f"{tally.cached} cached, {tally.failed} failed")

    try:
        if bar is not None:
            bar.start()
        await gather_all([run(job) for job in jobs])  # an error that stops the run cancels the rest
    finally:
        if bar is not None:
            bar.stop()
    return results, tally


def uncached(jobs: Sequence[Job], task: JudgingTask, model: Model, store: JudgmentCache, *,
             mode: str) -> list[Job]:
    """The jobs that `execute` would send in ``mode`` (those not in the cache), in order; nothing
    is sent. A dry run prices these ([`csem.judge.cost`][])."""
    cmode = task.cache_mode(mode)
    return [job for job in jobs if store.get(judgment_key(model.id, job.messages, cmode, task.params(mode, job))) is None]


def reason_kind(reason: str | None) -> str:
    """Group missing reasons for a summary (drops the varying detail after the first ':' or ' (')."""
    r = reason or "unknown"
    if r.startswith("backend error"):
        return "backend error"
    return r.split(":")[0].split(" (")[0]
