"""The one judging executor (issue 21): rating and comparison share cache, probs -> parse fallback,
stop on a refused key, give-up, error collection and counting (``csem.judge.executor``); comparison
adds no semaphore of its own over the model wrapper's concurrency. Against the scripted real HTTP
server on loopback (``fake_openai``: logprobs refusals, 401s and 5xx on demand) and the FAKE backend."""

from __future__ import annotations

import json
import math

import pytest

from csem.data.columns import Column
from csem.judge import judge_records, rubric_columns
from csem.judge.comparison import compare_records
from csem.judge.executor import Job, execute
from csem.judge.cache import JudgmentCache
from csem.judge.scoring import Judgment
from csem.llm import BackendAuthError, BackendError, LogprobsUnsupported, get_model, run_sync
from csem.rubrics import Rubric

from fake_openai import ScriptedServer, completion, error

RUBRIC = "pairwise/summ-coherence-ref-free"
FAST = {"backoff": 0.01, "backoff_max": 0.05}


@pytest.fixture()
def cands():
    return [{"id": f"c{i}", "doc_id": "d0", "system_id": f"s{i}", "source": "The river flooded the old mill on Monday.",
             "candidate": f"Summary number {i}: the mill flooded."} for i in range(4)]


def _first_is(label: str, body) -> bool:
    """True when the prompt shows candidate ``label`` in the first slot (A)."""
    text = json.dumps(body["messages"])
    pos = text.find(f"Summary number {label}")
    return pos >= 0 and pos < min(
        (p for p in (text.find(f"Summary number {k}") for k in "0123" if k != label) if p >= 0), default=10**9)


def _prefers_lowest(body):
    """A consistent judge: prefers the candidate with the lower number (A when it is first)."""
    text = json.dumps(body["messages"])
    nums = [k for k in "0123" if f"Summary number {k}" in text]
    order = sorted(nums, key=lambda k: text.find(f"Summary number {k}"))
    return "A" if order[0] < order[1] else "B"


def test_rubric_columns_are_the_grammars_column_objects():
    a = Rubric(id="x/one", aspect="coherence", criteria="c", template="{{ candidate }}", system=None)
    b = Rubric(id="x/two", aspect="coherence", criteria="c", template="{{ candidate }}", system=None)
    c = Rubric(id="x/three", aspect="fluency", criteria="c", template="{{ candidate }}", system=None)
    cols = rubric_columns([a, c])
    assert cols[("x/one", "coherence")] == Column("judge", "coherence") and str(cols[("x/three", "fluency")]) == "judge.fluency"
    shared = rubric_columns([a, b])
    assert [str(x) for x in shared.values()] == ["judge.coherence@x/one", "judge.coherence@x/two"]
    assert str(shared[("x/two", "coherence")].with_side("missing")) == "judge.coherence@x/two.missing"


def test_comparison_falls_back_to_parse_like_rating(cands):
    def step(body):
        if body.get("logprobs"):
            return error(400, "logprobs are not supported by this model")
        return 200, completion(_prefers_lowest(body))

    with ScriptedServer([step]) as srv:
        rows, summ = compare_records(cands, RUBRIC, "openai:m", progress=False,
                                     backend_options={"base_url": srv.url, "concurrency": 2, **FAST})
    assert summ.fallback and "used mode 'parse'" in summ.fallback
    assert summ.calls == 12 and summ.judged == 12 and summ.failed == 0
    assert all(r["judge.coherence"] == 1.0 for r in rows)  # i < j in every pair: the lower number wins both orders


def test_comparison_adds_no_semaphore_over_the_wrapper(cands):
    """The wrapper's concurrency is the only limit: exactly that many requests in flight."""
    top = [("A", -0.3), ("B", -1.4)]
    with ScriptedServer([("sleep", 0.2, 200, completion("A", top_logprobs=top))]) as srv:
        rows, summ = compare_records(cands, RUBRIC, "openai:m", progress=False,
                                     backend_options={"base_url": srv.url, "concurrency": 3})
        assert srv.max_in_flight == 3 and len(srv.requests) == 12
    pa = math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.4))
    assert summ.position_bias == pytest.approx(pa)
    assert all(r["judge.coherence"] == pytest.approx(0.5) for r in rows)  # always "A": the bias cancels
    assert all(r["judge.coherence.mass"] == pytest.approx(math.exp(-0.3) + math.exp(-1.4)) for r in rows)


def test_a_waiting_retry_holds_no_slot(cands):
    """While one order waits out a 429's Retry-After, the wrapper's two slots keep serving the other
    orders (an outer semaphore of comparison's own would hold one slot during the wait)."""
    top = [("A", -0.3), ("B", -1.4)]
    with ScriptedServer([(429, error(429, "slow down")[1], {"Retry-After": "1.5"}),
                         ("sleep", 0.3, 200, completion("A", top_logprobs=top))]) as srv:
        rows, summ = compare_records(cands, RUBRIC, "openai:m", progress=False,
                                     backend_options={"base_url": srv.url, "concurrency": 2, **FAST})
        t = srv.times
    assert summ.judged == 12 and summ.failed == 0
    during = [x for x in t[1:] if t[0] < x < t[0] + 1.4]  # arrivals while the first order waits
    assert len(during) >= 4, (t, during)
    gaps = [b - a for a, b in zip(during, during[1:])]
    assert min(gaps) < 0.15, gaps  # two requests started together: both slots in use during the wait


def test_comparison_cache_and_errors_go_through_the_executor(cands, tmp_path):
    db = tmp_path / "c.sqlite"
    top = [("A", -0.1), ("B", -2.5)]

    def step(body):  # the orders with candidate 3 first fail with a 500 (every retry too)
        return error(500, "upstream exploded") if _first_is("3", body) else (200, completion("A", top_logprobs=top))

    with ScriptedServer([step]) as srv:
        opts = {"base_url": srv.url, "max_retries": 1, "concurrency": 1, **FAST}
        rows, summ = compare_records(cands, RUBRIC, "openai:m", cache=db, progress=False, backend_options=opts)
        assert summ.failed == 3 and summ.judged == 9 and "HTTP 500: upstream exploded" in summ.errors[0]
        assert summ.missing == {"backend error": 3}
        missing = [r for r in rows if r["judge.coherence"] is None]
        assert len(missing) == 3 and all(r["judge.coherence.missing"].startswith("backend error: ") for r in missing)
        n = len(srv.requests)
        rows2, summ2 = compare_records(cands, RUBRIC, "openai:m", cache=db, progress=False, backend_options=opts)
        assert summ2.cached == 9 and summ2.failed == 3 and summ2.judged == 0  # failures never cached: retried
        assert len(srv.requests) - n == 3 * 2  # only the failed orders asked again (with one retry each)


def test_comparison_gives_up_on_a_dead_backend(cands):
    with ScriptedServer([error(503, "down")]) as srv:
        rows, summ = compare_records(cands, RUBRIC, "openai:m", progress=False, max_consecutive_failures=2,
                                     backend_options={"base_url": srv.url, "concurrency": 1, "max_retries": 0, **FAST})
        assert len(srv.requests) == 2  # then given up: the other 10 orders are not attempted
    assert summ.failed == 12 and all(r["judge.coherence"] is None for r in rows)
    assert any("not attempted" in (r["judge.coherence.missing"] or "") for r in rows)


def test_refused_key_stops_rating_and_comparison_alike(cands, tiny_rubric):
    for run in (lambda o: compare_records(cands, RUBRIC, "openai:m", progress=False, backend_options=o),
                lambda o: judge_records(cands, tiny_rubric, "openai:m", progress=False, backend_options=o)):
        with ScriptedServer([error(401, "Invalid API key")]) as srv:
            with pytest.raises(BackendAuthError):
                run({"base_url": srv.url, "concurrency": 1})
            assert len(srv.requests) == 1


class _Task:
    """A minimal JudgingTask (pure logic): 'probs' is refused, 'parse' answers the job's key."""

    fallback = "parse"

    def __init__(self, fallback="parse"):
        self.fallback = fallback
        self.calls = []

    def cache_mode(self, mode):
        return f"t-{mode}"

    def params(self, mode, job):
        return {"mode": mode}

    async def compute(self, model, job, mode):
        self.calls.append((job.key, mode))
        if mode == "probs":
            raise LogprobsUnsupported("no probabilities here")
        if job.key == "bad":
            raise BackendError("broken", transient=True)
        return Judgment(float(len(job.key)), mode=mode, prompt_tokens=3), None

    def from_cache(self, row, mode):
        return Judgment(row["score"], row["missing"], cached=True)

    def labels(self, job):
        return "t@1", "aspect"


def test_executor_rules_with_a_minimal_task(fake_llm):
    model = get_model(fake_llm)
    jobs = [Job("ab", [{"role": "user", "content": "ab"}]), Job("bad", [{"role": "user", "content": "bad"}]),
            Job("abcd", [{"role": "user", "content": "abcd"}])]
    with JudgmentCache(None) as store:
        task = _Task()
        res, tally = run_sync(execute(jobs, task, model, store, mode="probs"))
        assert res["ab"].score == 2.0 and res["abcd"].score == 4.0 and res["bad"].missing == "backend error: broken"
        assert (tally.judged, tally.cached, tally.failed, tally.prompt_tokens) == (2, 0, 1, 6)
        assert tally.fallback and "no probabilities here" in tally.fallback and tally.errors == ["broken"]
        res, tally = run_sync(execute(jobs, task, model, store, mode="parse"))
        assert (tally.judged, tally.cached, tally.failed) == (0, 2, 1) and res["ab"].cached
        with pytest.raises(LogprobsUnsupported):  # fallback "none": raised
            run_sync(execute(jobs, _Task(fallback="none"), model, store, mode="probs"))
