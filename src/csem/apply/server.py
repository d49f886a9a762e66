"""An HTTP scoring endpoint over any loaded metric (FastAPI + uvicorn), with dynamic batching.

``csem serve --model DIR`` keeps a student in memory and answers::

    GET  /health  -> {"status": "ok", "metric": ..., "columns": [...], "needs_reference": bool,
                      "limits": {...}, "auth": bool, "served": {...}}
    POST /score   {"records": [{"id"?, "source", "candidate", "reference"?}, ...]}
                  -> {"results": [{"id": ..., "scores": {column: float | null}}], "columns": [...]}

Each request may carry many records (a batch); besides, requests that arrive while the model is
busy are queued and scored together in one model call of at most ``max_batch`` records
(``max_wait_ms`` bounds how long the first waits for company), so many small concurrent requests
are answered at batch speed. Order and batch composition never change a score (the student's
results are keyed). The server library is FastAPI over uvicorn (``serve`` extra).

Limits and errors ([`ServerLimits`][csem.apply.server.ServerLimits]; every error is a JSON body ``{"error": "..."}``, with
``record`` and ``field`` where one record is at fault):

====  ========================================================================================
400   the body is not valid UTF-8 JSON
401   a token is set (``--token`` / ``CSEM_SERVE_TOKEN``) and the request lacks
      ``Authorization: Bearer <token>`` (compared in constant time); ``/health`` stays open
413   the body is larger than ``max_body_bytes`` (read no further), or holds more than
      ``max_records`` records
415   the body is not declared JSON (``Content-Type: application/json`` or ``...+json``): a web page
      cannot post a form or ``text/plain`` to the endpoint without a CORS preflight
422   not ``{"records": [...]}``; a record that csem's file readers would reject
      ([`csem.data.records.normalize_record`][]: a missing, empty, whitespace-only or
      NUL-containing source/candidate/reference, a text that is not a string) or a text longer
      than ``max_text_chars``: names ``records[i]`` and the field; it never fails the requests
      batched with it
503   more than ``max_concurrency`` requests in flight (uvicorn's ``limit_concurrency``)
====  ========================================================================================

Memory stays bounded: a request's size is capped before it is parsed, at most ``max_concurrency``
requests are held at once, the model scores at most ``max_batch`` records per call, and after a
model call over many records the C heap is handed back to the system (glibc ``malloc_trim``), so a
large request does not leave the process larger for good (measured by
``benchmarks/bench_serve_faults.py``). ``/health`` names the metric without its file path (a student
by its ``config.name`` and the first 12 hex digits of its content hash).

[`load_test`][csem.apply.server.load_test] measures requests/s and latency percentiles against a running server.
"""


import asyncio
import hmac
import json
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from csem.apply.metrics import Metric
from csem.errors import InputError

MAX_RECORDS_PER_REQUEST = 512
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_TEXT_CHARS = 100_000
TOKEN_ENV = "CSEM_SERVE_TOKEN"


@dataclass(frozen=True)
class ServerLimits:
    """The endpoint's limits (see the module docstring for the answers).

    Attributes:
        max_body_bytes: largest request body (bytes; default 4 MiB).
        max_records: most records per request (default 512).
        max_text_chars: longest source, candidate or reference (characters; default 100,000: a
            student reads at most a few thousand tokens of any text).
        max_concurrency: most requests in flight at once (default 64; more get 503).
    """

    max_body_bytes: int = MAX_BODY_BYTES
    max_records: int = MAX_RECORDS_PER_REQUEST
    max_text_chars: int = MAX_TEXT_CHARS
    max_concurrency: int = 64

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if not isinstance(v, int) or v < 1:
                raise InputError(f"server limit {k} must be a positive integer, got {v!r}")


class RequestError(InputError):
    """A request that cannot be scored; ``status`` is its HTTP code (422 by default), ``record`` and
    ``field`` name the record (``records[i]``) and field at fault where there is one."""

    def __init__(self, message: str, status: int = 422, record: str | None = None, field: str | None = None):
        super().__init__(message)
        self.status, self.record, self.field = status, record, field

    def body(self) -> dict:
        out: dict[str, Any] = {"error": str(self)}
        if self.record is not None:
            out["record"] = self.record
        if self.field is not None:
            out["field"] = self.field
        return out


def check_records(body: Any, metric: Metric, limits: ServerLimits | None = None) -> list[dict]:
    """The records of a ``/score`` body, validated for ``metric`` as csem's file readers validate a
    file ([`csem.data.records.normalize_record`][]), plus the length limit.

    Raises:
        RequestError: not ``{"records": [...]}`` or empty (422); more than ``max_records`` records
            (413); a record without a needed text, an empty/whitespace/NUL text, or a text over
            ``max_text_chars`` (422, naming ``records[i]`` and the field).
    """
    from csem.data.records import RecordError, normalize_record, references_of

    limits = limits or ServerLimits()
    if not isinstance(body, Mapping) or not isinstance(body.get("records"), list):
        raise RequestError('the body must be a JSON object {"records": [{"source": ..., "candidate": ...}, ...]}')
    recs = body["records"]
    if not recs:
        raise RequestError("'records' is empty")
    if len(recs) > limits.max_records:
        raise RequestError(f"{len(recs)} records in one request; the limit is {limits.max_records}", 413)
    needs_source = getattr(metric, "needs_source", getattr(metric, "mode", "ref-free") not in ("fluency", "fluency-ref"))
    required = ("candidate",) + (("source",) if needs_source else ())
    out = []
    for i, r in enumerate(recs):
        where = f"records[{i}]"
        if not isinstance(r, Mapping):
            raise RequestError(f"{where} is not an object", record=where)
        for field in ("source", "candidate"):
            v = r.get(field)
            if isinstance(v, str) and len(v) > limits.max_text_chars:
                raise RequestError(f"{where}: field '{field}' has {len(v):,} characters; the limit is "
                                   f"{limits.max_text_chars:,}", record=where, field=field)
        ref = r.get("reference")
        for x in ([ref] if isinstance(ref, str) else ref if isinstance(ref, list) else []):
            if isinstance(x, str) and len(x) > limits.max_text_chars:
                raise RequestError(f"{where}: field 'reference' has {len(x):,} characters; the limit is "
                                   f"{limits.max_text_chars:,}", record=where, field="reference")
        if r.get("candidate", "") is None:  # null content is empty text (refused below like "")
            r = {**r, "candidate": ""}
        try:
            rec = normalize_record(r, required=required, path=where)
        except RecordError as exc:
            raise RequestError(str(exc), record=where, field=exc.field) from None
        if metric.needs_reference and not references_of(rec):
            raise RequestError(f"{where}, field 'reference': needed by this metric", record=where, field="reference")
        rec["id"] = str(r["id"]) if r.get("id") is not None else str(i)
        out.append(rec)
    return out


def public_name(metric: Metric) -> str:
    """The metric's name for ``/health``, without file paths: a student by ``config.name`` and the
    first 12 hex digits of its content hash; a judge by its rubrics and backend kind; a baseline by
    its name."""
    fp = getattr(metric, "fingerprint", None)
    if fp and getattr(metric, "metric_name", None):
        return f"student {metric.metric_name} (sha256 {fp[:12]})"
    if getattr(metric, "rubric_ids", None) is not None:
        backend = str(getattr(metric, "judge", "")).split(":", 1)[0]
        rubrics = "+".join(r if "/" not in r or not r.endswith((".yaml", ".yml", ".json")) else r.rsplit("/", 1)[-1]
                           for r in metric.rubric_ids)
        return f"judge:{rubrics}@{backend}"
    return str(metric.name)


def release_memory() -> bool:
    """Hand free C-heap pages back to the system (glibc ``malloc_trim(0)``); False where unavailable.
    Without it, glibc keeps the arenas a large batch grew, and the process stays that large."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


class Batcher:
    """Queues scoring jobs and runs them in batches of at most ``max_batch`` records, one model call
    at a time, in one dedicated worker thread (the event loop keeps accepting requests meanwhile; one
    thread keeps the C heap in one malloc arena instead of one per pool thread).

    After a model call over at least ``trim_above`` records, or ``trim_every_s`` seconds after the last
    trim, free heap pages are handed back to the system ([`release_memory`][csem.apply.server.release_memory]).

    Attributes:
        calls: model calls made; records: records scored; batched_requests: requests served.
    """

    def __init__(self, metric: Metric, max_batch: int = 256, max_wait_ms: float = 2.0, trim_above: int = 64,
                 trim_every_s: float = 2.0):
        self.metric, self.max_batch, self.max_wait = metric, max_batch, max_wait_ms / 1000
        self.trim_above, self.trim_every_s = trim_above, trim_every_s
        self.queue: asyncio.Queue | None = None
        self.calls = self.records = self.batched_requests = 0
        self._task: asyncio.Task | None = None
        self._pool: Any = None
        self._last_trim = time.monotonic()

    async def start(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.queue = asyncio.Queue()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="csem-score")
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

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
            scores = await asyncio.get_running_loop().run_in_executor(self._pool, self._call, flat)
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


    def _call(self, records: list[dict]) -> dict[str, list]:
        try:
            return self.metric.score(records)
        finally:
            now = time.monotonic()
            if len(records) >= self.trim_above or now - self._last_trim >= self.trim_every_s:
                release_memory()
                self._last_trim = now


def _one_line() -> str:
    import sys

    exc = sys.exc_info()[1]
    return str(exc).splitlines()[0] if exc else "unknown error"


def create_app(metric: Metric, *, max_batch: int = 256, max_wait_ms: float = 2.0, limits: ServerLimits | None = None,
               token: str | None = None) -> Any:
    """The FastAPI application serving ``metric`` (see the module docstring for routes, limits and
    errors).

    Args:
        metric: a loaded metric ([`csem.apply.metrics.load_metric`][]).
        max_batch, max_wait_ms: dynamic batching ([`Batcher`][csem.apply.server.Batcher]).
        limits: [`ServerLimits`][csem.apply.server.ServerLimits] (default: its defaults).
        token: the bearer token ``/score`` requires (None or empty: no authentication).
    """
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    limits = limits or ServerLimits()
    batcher = Batcher(metric, max_batch=max_batch, max_wait_ms=max_wait_ms)
    expected = f"Bearer {token}".encode() if token else None
    name = public_name(metric)

    @asynccontextmanager
    async def lifespan(app: Any):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="csem scoring endpoint", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.batcher = batcher
    app.state.limits = limits

    def error(exc: RequestError) -> Any:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "metric": name, "columns": list(metric.columns),
                "needs_reference": metric.needs_reference, "auth": expected is not None,
                "limits": asdict(limits),
                "served": {"requests": batcher.batched_requests, "records": batcher.records,
                           "model_calls": batcher.calls}}

    async def read_body(request: Request) -> Any:
        if expected is not None:
            got = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(got, expected):
                raise RequestError("missing or wrong bearer token (send 'Authorization: Bearer <token>')", 401)
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
            raise RequestError(f"the body must be JSON (Content-Type: application/json), got '{ctype or 'none'}'",
                               415)
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
            raise RequestError(f"the body has {int(declared):,} bytes; the limit is {limits.max_body_bytes:,}", 413)
        chunks, size = [], 0
        async for chunk in request.stream():  # a body without Content-Length is cut at the limit too
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise RequestError(f"the body exceeds the limit of {limits.max_body_bytes:,} bytes", 413)
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise RequestError("the body is not valid UTF-8 JSON", 400) from None

    @app.post("/score")
    async def score(request: Request) -> Any:
        try:
            body = await read_body(request)
            recs = check_records(body, metric, limits)
            del body
            scores = await batcher.submit(recs)
        except RequestError as exc:
            return error(exc)
        cols = list(scores)
        return {"columns": cols,
                "results": [{"id": r["id"], "scores": {c: scores[c][i] for c in cols}} for i, r in enumerate(recs)]}

    return app


def serve(metric: Metric, host: str = "127.0.0.1", port: int = 8000, *, max_batch: int = 256,
          max_wait_ms: float = 2.0, limits: ServerLimits | None = None, token: str | None = None,
          log_level: str = "warning") -> None:
    """Run the endpoint until interrupted (uvicorn, one process; the model is loaded once)."""
    import uvicorn

    limits = limits or ServerLimits()
    uvicorn.run(create_app(metric, max_batch=max_batch, max_wait_ms=max_wait_ms, limits=limits, token=token),
                host=host, port=port, log_level=log_level, limit_concurrency=limits.max_concurrency)


class BackgroundServer:
    """The endpoint in a background thread on loopback (tests, benchmarks): ``url`` once started.

    Use as a context manager; port 0 picks a free port. ``options``: [`create_app`][csem.apply.server.create_app]'s.
    """

    def __init__(self, metric: Metric, host: str = "127.0.0.1", port: int = 0, **options: Any):
        import uvicorn

        limits = options.get("limits") or ServerLimits()
        self.config = uvicorn.Config(create_app(metric, **options), host=host, port=port, log_level="warning",
                                     lifespan="on", limit_concurrency=limits.max_concurrency)
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
    p95_ms: float
    p99_ms: float
    mean_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation (numpy's default rule)."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def load_test(url: str, records: Sequence[Mapping[str, Any]], *, requests: int = 200, records_per_request: int = 1,
              concurrency: int = 8, timeout: float = 600.0, token: str | None = None,
              max_seconds: float | None = None) -> LoadTestResult:
    """Send up to ``requests`` POST /score requests from ``concurrency`` concurrent clients (httpx)
    and time each; the records cycle through ``records``. Latency is measured from send to full
    answer. ``token``: sent as a bearer token. ``max_seconds``: no request is started after this
    many seconds (the result counts the requests actually sent)."""
    import httpx

    recs = [dict(r) for r in records]
    bodies = [{"records": [recs[(i * records_per_request + j) % len(recs)] for j in range(records_per_request)]}
              for i in range(requests)]
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def run() -> tuple[list[float], int, float]:
        lat: list[float] = []
        errors = 0
        nxt = iter(range(requests))
        async with httpx.AsyncClient(base_url=url, timeout=timeout, headers=headers,
                                     limits=httpx.Limits(max_connections=concurrency)) as client:
            async def worker() -> None:
                nonlocal errors
                for i in nxt:
                    if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                        break
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
    sent = len(lat)
    return LoadTestResult(sent, records_per_request, concurrency, errors, secs, sent / secs,
                          sent * records_per_request / secs, percentile(ms, 50), percentile(ms, 90),
                          percentile(ms, 95), percentile(ms, 99), statistics.fmean(ms))
