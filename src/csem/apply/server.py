"""An HTTP scoring endpoint over any loaded metric (FastAPI + uvicorn), with dynamic batching.

``csem serve --model DIR`` keeps a student in memory and answers::

    GET  /health  -> {"status": "ok", "metric": ..., "columns": [...], "needs_reference": bool}
    POST /score   {"records": [{"id"?, "source", "candidate", "reference"?}, ...]}
                  -> {"results": [{"id": ..., "scores": {column: float | null}}], "columns": [...]}

Each request may carry many records (a batch); besides, requests that arrive while the model is
busy are queued and scored together in one model call of at most ``max_batch`` records
(``max_wait_ms`` bounds how long the first waits for company), so many small concurrent requests
are answered at batch speed. Order and batch composition never change a score (the student's
results are keyed). A request with a bad record gets 422 with the record and field named; it never
fails the requests batched with it. The server library is FastAPI over uvicorn (``serve`` extra).

:func:`load_test` measures requests/s and latency percentiles against a running server.
"""


import asyncio
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from csem.apply.metrics import Metric

MAX_RECORDS_PER_REQUEST = 4096


class RequestError(ValueError):
    """A request body that cannot be scored (HTTP 422); the message names the record and field."""


def check_records(body: Any, metric: Metric) -> list[dict]:
    """The records of a ``/score`` body, validated for ``metric``.

    Raises:
        RequestError: not ``{"records": [...]}``, too many records, or a record without a needed
            text (names its position and field).
    """
    from csem.data.records import references_of

    if not isinstance(body, Mapping) or not isinstance(body.get("records"), list):
        raise RequestError('the body must be a JSON object {"records": [{"source": ..., "candidate": ...}, ...]}')
    recs = body["records"]
    if not recs:
        raise RequestError("'records' is empty")
    if len(recs) > MAX_RECORDS_PER_REQUEST:
        raise RequestError(f"{len(recs)} records in one request; the limit is {MAX_RECORDS_PER_REQUEST}")
    needs_source = getattr(metric, "mode", "ref-free") not in ("fluency", "fluency-ref")
    out = []
    for i, r in enumerate(recs):
        if not isinstance(r, Mapping):
            raise RequestError(f"records[{i}] is not an object")
        if not isinstance(r.get("candidate"), str):
            raise RequestError(f"records[{i}]: field 'candidate' is missing or not a string")
        if needs_source and not isinstance(r.get("source"), str):
            raise RequestError(f"records[{i}]: field 'source' is missing or not a string")
        if metric.needs_reference and not references_of(r):
            raise RequestError(f"records[{i}]: field 'reference' is needed by {metric.name}")
        out.append(dict(r, id=str(r.get("id", i))))
    return out


class Batcher:
    """Queues scoring jobs and runs them in batches of at most ``max_batch`` records, one model call
    at a time, in a worker thread (the event loop keeps accepting requests meanwhile).

    Attributes:
        calls: model calls made; records: records scored; batched_requests: requests served.
    """

    def __init__(self, metric: Metric, max_batch: int = 256, max_wait_ms: float = 2.0):
        self.metric, self.max_batch, self.max_wait = metric, max_batch, max_wait_ms / 1000
        self.queue: asyncio.Queue | None = None
        self.calls = self.records = self.batched_requests = 0
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self.queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def submit(self, records: list[dict]) -> dict[str, list]:
        fut = asyncio.get_running_loop().create_future()
        await self.queue.put((records, fut))
        return await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await self.queue.get()]
            size = len(jobs[0][0])
            deadline = loop.time() + self.max_wait
            while size < self.max_batch:
                try:
                    nxt = self.queue.get_nowait() if loop.time() >= deadline else \
                        await asyncio.wait_for(self.queue.get(), deadline - loop.time())
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
                if size + len(nxt[0]) > self.max_batch:
                    self.queue.put_nowait(nxt)  # next round (order among waiting jobs may change: results are keyed)
                    break
                jobs.append(nxt)
                size += len(nxt[0])
            await self._score(jobs)

    async def _score(self, jobs: list) -> None:
        flat = [r for recs, _ in jobs for r in recs]
        try:
            scores = await asyncio.to_thread(self.metric.score, flat)
        except Exception:
            if len(jobs) > 1:  # one bad request must not fail the others: score them one by one
                for job in jobs:
                    await self._score([job])
                return
            jobs[0][1].set_exception(RequestError(f"scoring failed: {_one_line()}"))
            return
        self.calls += 1
        self.records += len(flat)
        self.batched_requests += len(jobs)
        start = 0
        for recs, fut in jobs:
            part = {c: v[start:start + len(recs)] for c, v in scores.items()}
            start += len(recs)
            if not fut.done():
                fut.set_result(part)


def _one_line() -> str:
    import sys

    exc = sys.exc_info()[1]
    return str(exc).splitlines()[0] if exc else "unknown error"


def create_app(metric: Metric, *, max_batch: int = 256, max_wait_ms: float = 2.0) -> Any:
    """The FastAPI application serving ``metric`` (see the module docstring)."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    batcher = Batcher(metric, max_batch=max_batch, max_wait_ms=max_wait_ms)

    @asynccontextmanager
    async def lifespan(app: Any):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="csem scoring endpoint", lifespan=lifespan)
    app.state.batcher = batcher

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "metric": metric.name, "columns": list(metric.columns),
                "needs_reference": metric.needs_reference,
                "served": {"requests": batcher.batched_requests, "records": batcher.records,
                           "model_calls": batcher.calls}}

    @app.post("/score")
    async def score(request: Request) -> Any:
        try:
            body = await request.json()
        except Exception:
            return JSONResponse({"error": "the body is not valid JSON"}, status_code=400)
        try:
            recs = check_records(body, metric)
            scores = await batcher.submit(recs)
        except RequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        cols = list(scores)
        return {"columns": cols,
                "results": [{"id": r["id"], "scores": {c: scores[c][i] for c in cols}} for i, r in enumerate(recs)]}

    return app


def serve(metric: Metric, host: str = "127.0.0.1", port: int = 8000, *, max_batch: int = 256,
          max_wait_ms: float = 2.0, log_level: str = "warning") -> None:
    """Run the endpoint until interrupted (uvicorn, one process; the model is loaded once)."""
    import uvicorn

    uvicorn.run(create_app(metric, max_batch=max_batch, max_wait_ms=max_wait_ms), host=host, port=port,
                log_level=log_level)


class BackgroundServer:
    """The endpoint in a background thread on loopback (tests, benchmarks): ``url`` once started.

    Use as a context manager; port 0 picks a free port.
    """

    def __init__(self, metric: Metric, host: str = "127.0.0.1", port: int = 0, **options: Any):
        import uvicorn

        self.config = uvicorn.Config(create_app(metric, **options), host=host, port=port, log_level="warning",
                                     lifespan="on")
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url: str | None = None

    def __enter__(self) -> "BackgroundServer":
        self.thread.start()
        t0 = time.perf_counter()
        while not self.server.started:
            if not self.thread.is_alive() or time.perf_counter() - t0 > 60:
                raise RuntimeError("the scoring server did not start")
            time.sleep(0.02)
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@dataclass
class LoadTestResult:
    """``requests`` sent with ``records_per_request`` each by ``concurrency`` clients; ``errors``:
    non-200 answers; ``requests_per_s``, ``records_per_s``; latency percentiles in milliseconds."""

    requests: int
    records_per_request: int
    concurrency: int
    errors: int
    seconds: float
    requests_per_s: float
    records_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation (numpy's default rule)."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def load_test(url: str, records: Sequence[Mapping[str, Any]], *, requests: int = 200, records_per_request: int = 1,
              concurrency: int = 8, timeout: float = 600.0) -> LoadTestResult:
    """Send ``requests`` POST /score requests from ``concurrency`` concurrent clients (httpx) and time
    each; the records cycle through ``records``. Latency is measured from send to full answer."""
    import httpx

    recs = [dict(r) for r in records]
    bodies = [{"records": [recs[(i * records_per_request + j) % len(recs)] for j in range(records_per_request)]}
              for i in range(requests)]

    async def run() -> tuple[list[float], int, float]:
        lat: list[float] = []
        errors = 0
        nxt = iter(range(requests))
        async with httpx.AsyncClient(base_url=url, timeout=timeout,
                                     limits=httpx.Limits(max_connections=concurrency)) as client:
            async def worker() -> None:
                nonlocal errors
                for i in nxt:
                    t = time.perf_counter()
                    resp = await client.post("/score", json=bodies[i])
                    lat.append(time.perf_counter() - t)
                    if resp.status_code != 200:
                        errors += 1
            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return lat, errors, time.perf_counter() - t0

    lat, errors, secs = asyncio.run(run())
    ms = [x * 1000 for x in lat]
    return LoadTestResult(requests, records_per_request, concurrency, errors, secs, requests / secs,
                          requests * records_per_request / secs, percentile(ms, 50), percentile(ms, 90),
                          percentile(ms, 99), statistics.fmean(ms))
