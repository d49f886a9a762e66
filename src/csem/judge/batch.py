"""Batch jobs: the judge's requests sent as one asynchronous batch (OpenAI and Azure OpenAI
``/v1/batches``, half the price of synchronous requests, results within 24 hours), written as a
request file for vLLM's offline batch runner, or read back from a result file produced elsewhere.

The batch is a transport, not a second judging loop. The one executor
(`csem.judge.executor.execute`) renders, looks up the cache, calls the provider and parses, as
in synchronous judging; only the provider's request (``OpenAIBackend._request``, the same body:
``logprobs``/``top_logprobs`` in ``probs`` mode, ``n``, ``seed``, ``response_format`` ...) is
handed to a [`BatchTransport`][csem.judge.batch.BatchTransport] instead of the server. A pass of
the executor with the transport in place

* answers a request from the batch results when they hold it (the chat completion goes through
  the provider's own parsing and probability weighting, and the judgment into the cache);
* takes any other request for a batch and raises `csem.judge.executor.Deferred`, so
  the job is missing ``pending ...`` and nothing is cached.

[`BatchRun.execute`][csem.judge.batch.BatchRun.execute] repeats such passes: after the first it
writes the new requests as batch input files (at most 50,000 requests and 200 MB each, the
provider's limits), uploads them (Files API), creates one batch per file (Batches API) and records
each step in ``state.json`` of the state folder *before* waiting; then it polls until every batch
it waits for has ended, downloads the output and error files, and runs the last pass. A killed or
interrupted run leaves the batches running at the provider; the same command picks the recorded
batches up instead of submitting again. Each request's ``custom_id`` is the judgment's cache key
(64 hex characters; a job's further requests end in ``.1``, ``.2``...), so a request is never in two
live batches, and results are matched by id, never by position.

Per-request errors (the error file), requests without a result (an expired, cancelled or failed
batch; a malformed result line) become missing judgments with their reason and the run is partial;
``resubmit`` sends what is still missing in a new batch.

State folder ``<out>.batch/``: ``state.json`` (the batches: their ids, files, status, request
counts and custom ids), ``requests-NNN.jsonl`` (the input files as uploaded),
``batch-NNN.output.jsonl`` and ``batch-NNN.errors.jsonl`` (the results as downloaded).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable, Iterable, Sequence

from csem.data.jsonio import write_json
from csem.errors import InputError
from csem.judge.cache import JudgmentCache
from csem.judge.executor import REQUEST_KEY, Deferred, Job, JudgingTask, Tally, execute
from csem.judge.scoring import Judgment
from csem.llm import BackendError, Model

#: provider limits per batch input file (OpenAI and Azure OpenAI)
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
#: the request URL of a chat completion in a batch file (OpenAI, vLLM); Azure OpenAI takes ``/chat/completions``
CHAT_URL = "/v1/chat/completions"
AZURE_CHAT_URL = "/chat/completions"
#: a batch in one of these states runs no more
TERMINAL = ("completed", "failed", "expired", "cancelled")
#: the longest ``custom_id`` the providers take
MAX_CUSTOM_ID = 64


def custom_id(key: str, index: int = 0) -> str:
    """The ``custom_id`` of a job's ``index``-th request: its cache key (sha256 hex, 64 characters),
    with ``.<index>`` replacing the key's tail for a job's further requests (at most 64 characters)."""
    if index == 0:
        return key[:MAX_CUSTOM_ID]
    tail = f".{index}"
    return key[: MAX_CUSTOM_ID - len(tail)] + tail


def request_body(model: str, kwargs: dict) -> dict:
    """The JSON body of a chat completion as the ``openai`` client sends it: ``model`` plus the
    request's arguments, with ``extra_body`` fields merged in at the top level."""
    body = {"model": model}
    body.update({k: v for k, v in kwargs.items() if k != "extra_body"})
    body.update(kwargs.get("extra_body") or {})
    return body


def write_request_files(requests: dict[str, dict], folder: Path, *, url: str = CHAT_URL, prefix: str = "requests",
                        start: int = 1, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> list[Path]:
    """Write batch input files (one JSON line ``{"custom_id", "method": "POST", "url", "body"}`` per
    request), a new file whenever the next line would pass ``max_requests`` lines or ``max_bytes`` bytes.

    Args:
        requests: ``{custom_id: body}``, written in this order. folder: where the files go
            (``<prefix>-NNN.jsonl``, NNN counting from ``start``).

    Returns:
        The paths written, in order.

    Raises:
        InputError: one request alone is larger than ``max_bytes``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    chunk: list[bytes] = []
    size = 0

    def flush() -> None:
        nonlocal chunk, size
        if chunk:
            p = folder / f"{prefix}-{start + len(paths):03d}.jsonl"
            tmp = p.with_name(p.name + ".tmp")
            tmp.write_bytes(b"".join(chunk))
            tmp.replace(p)
            paths.append(p)
        chunk, size = [], 0

    for cid, body in requests.items():
        line = (json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body}, ensure_ascii=False)
                + "\n").encode("utf-8")
        if len(line) > max_bytes:
            raise InputError(f"request {cid} is {len(line)} bytes, more than a batch file's limit of {max_bytes}")
        if chunk and (len(chunk) >= max_requests or size + len(line) > max_bytes):
            flush()
        chunk.append(line)
        size += len(line)
    flush()
    return paths


def read_result_file(path: Path) -> tuple[dict[str, dict], list[str]]:
    """The lines of a batch output or error file by ``custom_id``, and a note per malformed line.

    A line is ``{"id", "custom_id", "response": {"status_code", "request_id", "body"} | null,
    "error": ... | null}`` (OpenAI's batch output, vLLM's ``BatchRequestOutput``).

    Returns:
        ``({custom_id: line}, ["FILE line N: what is wrong", ...])``.
    """
    out: dict[str, dict] = {}
    bad: list[str] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                bad.append(f"{path.name} line {n}: not JSON ({exc.msg})")
                continue
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                bad.append(f"{path.name} line {n}: no custom_id")
                continue
            out[line["custom_id"]] = line
    return out, bad


def _error_text(line: dict) -> str:
    """The error message of a result line that carries no completion."""
    resp = line.get("response") or {}
    body = resp.get("body") if isinstance(resp, dict) else None
    err = line.get("error")
    msg = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        msg = body["error"].get("message")
    if msg is None and isinstance(err, dict):
        msg = err.get("message") or err.get("code")
    if msg is None and err:
        msg = str(err)
    code = resp.get("status_code") if isinstance(resp, dict) else None
    return (f"HTTP {code}: " if code else "") + str(msg or "no response")[:300]


def completion_of(line: dict, where: str) -> Any:
    """The chat completion of a successful result line (an ``openai`` ``ChatCompletion``).

    Raises:
        BackendError: the line is an error (its status and message) or its body is not a chat
            completion with choices (``malformed result``); never transient (no retry: the
            result will not change).
    """
    from openai.types.chat import ChatCompletion
    from pydantic import ValidationError

    resp = line.get("response")
    if not isinstance(resp, dict) or resp.get("status_code") != 200 or line.get("error"):
        raise BackendError(f"{where}: {_error_text(line)}")
    try:
        comp = ChatCompletion.model_validate(resp.get("body"))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BackendError(f"{where}: malformed result: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    if not comp.choices or any(c.message is None and c.logprobs is None for c in comp.choices):
        raise BackendError(f"{where}: malformed result: no choices")
    return comp


@dataclass
class BatchOptions:
    """How to run the judge's requests as batches.

    Attributes:
        state_dir: the state folder (``<out>.batch``): ``state.json``, request and result files.
        wait: poll until the batches end and collect them (False: submit, record, return).
        resubmit: send again, in a new batch, every request without a successful result whose
            batch has ended (failed, expired, cancelled, per-request errors, malformed lines).
        request_file: only write the requests to this file (vLLM's ``run-batch`` input); no upload.
        result_files: only read results from these files (produced elsewhere, e.g. by vLLM); no upload.
        poll: seconds between two status requests. completion_window: the provider's window.
        max_requests, max_bytes: per input file (the provider's limits).
    """

    state_dir: Path | None = None
    wait: bool = True
    resubmit: bool = False
    request_file: Path | None = None
    result_files: list[Path] = field(default_factory=list)
    poll: float = 30.0
    completion_window: str = "24h"
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES

    @property
    def offline(self) -> bool:
        """True when nothing is uploaded (a request file is written, or result files are read)."""
        return self.request_file is not None or bool(self.result_files)


@dataclass
class BatchEntry:
    """One submitted (or half-submitted) batch as ``state.json`` records it."""

    n: int
    request_file: str
    custom_ids: list[str]
    input_file_id: str | None = None
    id: str | None = None
    status: str | None = None
    counts: dict = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)
    collected: bool = False
    created: float = 0.0

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


class BatchState:
    """The batches of one output, in ``<state_dir>/state.json`` (written atomically after every change)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / "state.json"
        self.entries: list[BatchEntry] = []
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.entries = [BatchEntry(**e) for e in data["batches"]]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InputError(f"{self.path}: not a batch state file ({exc}); it records submitted batches, "
                                 "so look at it before deleting it") from None

    def save(self) -> None:
        write_json(self.path, {"batches": [vars(e) for e in self.entries]})

    def where(self) -> dict[str, BatchEntry]:
        """Each custom id's latest batch."""
        return {cid: e for e in self.entries for cid in e.custom_ids}

    def summary(self) -> list[dict]:
        """Per batch: id, status, request counts (for provenance and the run report)."""
        return [{"id": e.id, "status": e.status, "requests": len(e.custom_ids), "counts": e.counts,
                 "request_file": e.request_file} for e in self.entries]


class BatchTransport:
    """Answers the provider's requests from batch results, or takes them for a batch (see the
    module docstring); installed as ``OpenAIBackend.transport`` for one [`BatchRun`][csem.judge.batch.BatchRun].

    Attributes:
        results: ``{custom_id: result line}`` of every collected output and error file.
        malformed: notes on result lines that could not be read.
        new: the requests taken in this pass that no live batch holds, ``{custom_id: body}``.
        waiting: ids of the unfinished batches that hold a request of this pass.
    """

    def __init__(self, run: "BatchRun"):
        self.run = run
        self.results: dict[str, dict] = {}
        self.malformed: list[str] = []
        self.new: dict[str, dict] = {}
        self.waiting: set[str] = set()
        self._bodies: dict[str, list[str]] = {}
        self._where: dict[str, BatchEntry] = {}

    def begin_pass(self) -> None:
        self.new, self.waiting, self._bodies = {}, set(), {}
        self._where = self.run.state.where() if self.run.state is not None else {}

    def _custom_id(self, body: dict) -> str:
        key = REQUEST_KEY.get()
        if key is None:  # not under the executor: named after the body itself
            import hashlib

            key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        text = json.dumps(body, sort_keys=True, ensure_ascii=False)
        seen = self._bodies.setdefault(key, [])
        if text not in seen:
            seen.append(text)
        return custom_id(key, seen.index(text))

    async def __call__(self, backend: Any, kwargs: dict) -> Any:
        body = request_body(backend.model, kwargs)
        cid = self._custom_id(body)
        opts = self.run.options
        line = self.results.get(cid)
        if opts.result_files:
            if line is None:
                files = ", ".join(str(p) for p in opts.result_files)
                raise BackendError(f"no result for request {cid[:12]} in {files}")
            return completion_of(line, f"batch result for request {cid[:12]}")
        if opts.request_file is not None:
            self.new[cid] = body
            raise Deferred(f"not sent: written to {opts.request_file}")
        entry = self._where.get(cid)
        if entry is not None and not entry.ended:
            self.waiting.add(entry.id or "")
            raise Deferred(f"pending in batch {entry.id or '(being created)'} ({entry.status or 'submitting'})")
        if line is not None and (_succeeded(line) or not opts.resubmit):
            return completion_of(line, f"batch {entry.id if entry else '?'} request {cid[:12]}")
        if entry is not None and not opts.resubmit:
            why = "; ".join(entry.errors) or f"batch {entry.status}"
            if entry.status == "completed":
                why = "no result line for it" + (f" ({'; '.join(self.malformed[:3])})" if self.malformed else "")
            raise BackendError(f"batch {entry.id}: request {cid[:12]}: {why}; re-run with --batch-resubmit "
                               "to send it again")
        self.new[cid] = body
        raise Deferred("not submitted yet")


def _succeeded(line: dict) -> bool:
    resp = line.get("response")
    return isinstance(resp, dict) and resp.get("status_code") == 200 and not line.get("error")


class BatchRun:
    """Runs a judging job's requests as batches (see the module docstring).

    Args:
        options: the [`BatchOptions`][csem.judge.batch.BatchOptions].
        progress: show a progress bar on stderr while waiting.

    Attributes:
        state: the [`BatchState`][csem.judge.batch.BatchState] (None with ``request_file`` or
            ``result_files``). written: the request files written (``request_file``).
        submitted: ids of the batches created by this run. pending: requests still in unfinished
            batches when the run returned.
    """

    def __init__(self, options: BatchOptions, *, progress: bool = False):
        self.options = options
        self.progress = progress
        self.state: BatchState | None = None
        self.written: list[Path] = []
        self.submitted: list[str] = []
        self.pending = 0
        self._redact = lambda text: text

    # ------------------------------------------------------------------ the passes
    async def execute(self, jobs: Sequence[Job], task: JudgingTask, model: Model, store: JudgmentCache, *,
                      mode: str) -> tuple[dict[Hashable, Judgment], Tally]:
        """`csem.judge.executor.execute` with the requests sent as batches: the same
        arguments and result. Returns after the batches end (``wait``) or once they are submitted.

        Raises:
            InputError: the judge is not an OpenAI-compatible one, or no state folder was given.
            BackendAuthError: the provider refused the key (Files or Batches API).
            BackendError: the Files or Batches API failed (the state keeps what was done).
        """
        from csem.llm.providers.openai import OpenAIBackend

        api = model.api
        if not isinstance(api, OpenAIBackend):
            raise InputError(f"batch jobs need an OpenAI-compatible judge (openai:MODEL, Azure OpenAI); {model.id} "
                             "is not one (judge it synchronously, or write a vLLM request file with an openai: judge)")
        opts = self.options
        self._redact = model.redact  # API keys out of every message
        transport = BatchTransport(self)
        if opts.result_files:
            for p in opts.result_files:
                if not Path(p).exists():
                    raise InputError(f"{p}: no such batch result file")
                got, bad = read_result_file(Path(p))
                transport.results.update(got)
                transport.malformed.extend(bad)
        elif opts.request_file is None:
            if opts.state_dir is None:
                raise InputError("a batch job needs a state folder (the output's <out>.batch)")
            self.state = BatchState(Path(opts.state_dir))
        api.transport = transport
        try:
            return await self._passes(jobs, task, model, store, mode, transport)
        finally:
            api.transport = None

    async def _passes(self, jobs, task, model, store, mode, transport) -> tuple[dict, Tally]:
        client = None
        checked = False
        for _ in range(12):  # submit, wait, collect; a probs -> parse fallback adds one round
            if self.state is not None:
                # the provider's client, with the SDK's own retries for the Files and Batches calls
                client = client or (await model.api._client()).with_options(max_retries=3)
                for e in self.state.entries:  # recorded by a run killed before it created the batch
                    if e.id is None:
                        await self._create(client, e, model)
                await self._collect(client, transport)
            transport.begin_pass()
            results, tally = await execute(jobs, task, model, store, mode=mode, progress=False)
            if transport.new and self.options.request_file is not None:
                self.written = self._write_request_file(transport.new, model)
                return results, tally
            if transport.new:
                await self._submit(client, transport.new, model)
                continue  # the next pass finds the new requests pending in their batches
            if not transport.waiting:
                return results, tally
            if not self.options.wait:  # one look at the batches: collect what has ended, leave the rest
                if checked or not await self._wait(client, sorted(transport.waiting), once=True):
                    self.pending = tally.deferred
                    return results, tally
                checked = True
                continue
            await self._wait(client, sorted(transport.waiting))
        self.pending = tally.deferred
        return results, tally

    # ------------------------------------------------------------------ files
    def _url(self, model: Model) -> str:
        return AZURE_CHAT_URL if getattr(model.api, "azure", False) and self.options.request_file is None else CHAT_URL

    def _write_request_file(self, requests: dict[str, dict], model: Model) -> list[Path]:
        """``request_file`` (and ``-002``... siblings past the per-file limits)."""
        target = Path(self.options.request_file)
        tmp_dir = target.parent / (target.name + ".parts")
        parts = write_request_files(requests, tmp_dir, url=CHAT_URL, max_requests=self.options.max_requests,
                                    max_bytes=self.options.max_bytes)
        out = []
        for i, p in enumerate(parts):
            dest = target if i == 0 else target.with_name(f"{target.stem}-{i + 1:03d}{target.suffix}")
            p.replace(dest)
            out.append(dest)
        tmp_dir.rmdir()
        return out

    # ------------------------------------------------------------------ the provider
    async def _call(self, what: str, coro_fn, *args, **kwargs) -> Any:
        """One Files/Batches API call; the SDK's errors become BackendError (auth: BackendAuthError)."""
        import openai

        from csem.llm import BackendAuthError

        try:
            return await coro_fn(*args, **kwargs)
        except openai.APIStatusError as exc:
            msg = self._redact(f"{what}: HTTP {exc.status_code}: {getattr(exc, 'message', exc)}")
            if exc.status_code in (401, 403):
                raise BackendAuthError(f"{msg}: authentication failed; check the API key") from None
            raise BackendError(msg, transient=exc.status_code in (408, 409, 429) or exc.status_code >= 500) from None
        except openai.OpenAIError as exc:
            raise BackendError(self._redact(f"{what}: {type(exc).__name__}: {exc}"), transient=True) from None

    async def _submit(self, client: Any, requests: dict[str, dict], model: Model) -> None:
        """Write, upload and create batches for ``requests``, recording every step in the state first."""
        state = self.state
        assert state is not None
        start = len(state.entries) + 1
        paths = write_request_files(requests, state.folder, url=self._url(model), start=start,
                                    max_requests=self.options.max_requests, max_bytes=self.options.max_bytes)
        for i, p in enumerate(paths):
            ids = [json.loads(t)["custom_id"] for t in p.read_text(encoding="utf-8").splitlines() if t.strip()]
            state.entries.append(BatchEntry(n=start + i, request_file=p.name, custom_ids=ids, created=time.time()))
        state.save()  # recorded before anything is sent
        for e in state.entries[start - 1:]:
            await self._create(client, e, model)

    async def _create(self, client: Any, e: BatchEntry, model: Model) -> None:
        """Upload ``e``'s file (once) and create its batch (once: a batch already made from the same
        uploaded file, by a run killed before it recorded the id, is adopted)."""
        state = self.state
        assert state is not None
        if e.input_file_id is None:
            path = state.folder / e.request_file
            f = await self._call(f"{model.id}: upload {e.request_file}", client.files.create,
                                 file=(path.name, path.read_bytes()), purpose="batch")
            e.input_file_id = f.id
            state.save()
        else:
            page = await self._call(f"{model.id}: list batches", client.batches.list, limit=100)
            for b in getattr(page, "data", []) or []:
                if b.input_file_id == e.input_file_id:
                    e.id, e.status = b.id, b.status
                    state.save()
                    return
        b = await self._call(f"{model.id}: create batch", client.batches.create, input_file_id=e.input_file_id,
                             endpoint=self._url(model), completion_window=self.options.completion_window,
                             metadata={"csem_request_file": e.request_file})
        e.id, e.status = b.id, b.status
        self.submitted.append(b.id)
        state.save()
        print(f"csem: submitted batch {b.id} ({len(e.custom_ids)} requests; recorded in {state.path})",
              file=sys.stderr)

    def _update(self, e: BatchEntry, b: Any) -> None:
        e.status = b.status
        rc = getattr(b, "request_counts", None)
        e.counts = {"total": getattr(rc, "total", 0) or 0, "completed": getattr(rc, "completed", 0) or 0,
                    "failed": getattr(rc, "failed", 0) or 0} if rc is not None else {}
        e.output_file_id = getattr(b, "output_file_id", None)
        e.error_file_id = getattr(b, "error_file_id", None)
        errs = getattr(getattr(b, "errors", None), "data", None) or []
        e.errors = [f"batch {e.id} {e.status}: {getattr(x, 'message', None) or getattr(x, 'code', '')}"
                    for x in errs][:5]

    async def _collect(self, client: Any, transport: BatchTransport) -> None:
        """Create what a killed run left uncreated, download the files of ended batches (once) and
        load every result into ``transport``."""
        state = self.state
        assert state is not None
        for e in state.entries:
            if e.id is None:
                continue  # created by the next submission pass
            if e.ended and not e.collected:
                for fid, suffix in ((e.output_file_id, "output"), (e.error_file_id, "errors")):
                    if fid:
                        content = await self._call(f"batch {e.id}: download {suffix} file", client.files.content, fid)
                        path = state.folder / f"batch-{e.n:03d}.{suffix}.jsonl"
                        tmp = path.with_name(path.name + ".tmp")
                        tmp.write_bytes(content.content)
                        tmp.replace(path)
                e.collected = True
                state.save()
        transport.results, transport.malformed = {}, []
        for e in state.entries:  # later batches override earlier ones (a resubmitted request)
            for suffix in ("errors", "output"):
                path = state.folder / f"batch-{e.n:03d}.{suffix}.jsonl"
                if e.collected and path.exists():
                    got, bad = read_result_file(path)
                    transport.results.update(got)
                    transport.malformed.extend(bad)

    async def _wait(self, client: Any, ids: Iterable[str], *, once: bool = False) -> bool:
        """Poll the batches ``ids`` until each has ended, with a progress bar (requests completed /
        failed / total, elapsed, the provider's status). Interrupted, the batches keep running.
        ``once``: look once, without a bar. Returns whether any of them has ended."""
        state = self.state
        assert state is not None
        entries = [e for e in state.entries if e.id in set(ids)]
        bar = _wait_bar(self.progress and not once)
        try:
            if bar is not None:
                bar.start()
            while True:
                for e in entries:
                    if not e.ended:
                        b = await self._call(f"batch {e.id}: status", client.batches.retrieve, e.id)
                        self._update(e, b)
                state.save()
                if bar is not None:
                    total = sum(e.counts.get("total", 0) or len(e.custom_ids) for e in entries)
                    done = sum(e.counts.get("completed", 0) for e in entries)
                    failed = sum(e.counts.get("failed", 0) for e in entries)
                    status = ", ".join(sorted({e.status or "?" for e in entries}))
                    bar.update(bar.task_ids[0], total=total, completed=done + failed,
                               note=f"{failed} failed; {status}")
                if all(e.ended for e in entries) or once:
                    return any(e.ended for e in entries)
                await asyncio.sleep(self.options.poll)
        except (asyncio.CancelledError, KeyboardInterrupt):
            print(f"\ncsem: the batches keep running at the provider ({', '.join(e.id or '' for e in entries)}; "
                  f"recorded in {state.path}); run the same command again to collect their results",
                  file=sys.stderr)
            raise
        finally:
            if bar is not None:
                bar.stop()


def _wait_bar(enabled: bool):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
                   TextColumn("{task.fields[note]}"), console=Console(stderr=True), transient=False)
    bar.add_task("batch", total=None, note="")
    return bar
