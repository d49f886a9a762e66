"""The fault sweep: csem used as a new user would use it, against every fault a user meets, each case
with what csem should do, what it did, and a verdict, so the count of defects is a number the project
tracks (``python -m benchmarks run fault_sweep [--quick]``).

The judge's backend is a FAKE OpenAI-compatible server on loopback (this module's ``_Fake``: a real HTTP
server whose replies are scripted, for faults a healthy server cannot give on demand): 401, 403, 429 with
``Retry-After``, 500, a malformed HTML page, a hanging reply, a 2 MB answer, a body that is not UTF-8, a
content-filtered reply with logprobs, a password in ``base_url``. Every command runs as a user runs it,
``python -m csem ...`` in a child process (exit code, stderr, output files, the judgment cache), plus bad
input files, file names built from data, ``None`` content in the readers, and a kill -9 in the middle of
a judging run. ``quick=True`` runs the cases that need no trained student (about a minute).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from benchmarks import suite

PASSWORD = "pw-SECRET-sweep-0123"
SOURCES = ["The river flooded the old mill on Monday. Nobody was hurt, but the bridge is closed until Friday.",
           "A new bakery opened on Main Street. It sells bread, cakes and coffee from seven in the morning.",
           "The council approved the budget after a long debate. Property taxes will rise by two percent."]
RUBRIC = "csem/summ-coherence-ref-free"


# ------------------------------------------------------------------------------------------ the FAKE server

def _reply(content: str | None = "4", *, logprobs: bool = True, finish: str = "stop") -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish,
              "logprobs": None}
    if logprobs:
        top = [("4", -0.1), ("3", -2.6), ("5", -3.2)]
        choice["logprobs"] = {"content": [{"token": top[0][0], "logprob": top[0][1], "bytes": None,
                                           "top_logprobs": [{"token": t, "logprob": lp, "bytes": None}
                                                            for t, lp in top]}]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "fake", "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}


class _Fake:
    """A FAKE chat-completions server on loopback: ``answer(body, n) -> (status, body, headers, delay)``
    decides each reply (``n``: the request's number, from 0); ``bodies`` keeps what was asked."""

    def __init__(self, answer: Callable[[dict, int], tuple]):
        self.bodies: list[dict] = []
        self.times: list[float] = []  # each request's arrival (time.monotonic())
        lock, outer = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with lock:
                    n = len(outer.bodies)
                    outer.bodies.append(body)
                    outer.times.append(time.monotonic())
                status, payload, headers, delay = answer(body, n)
                if delay:
                    time.sleep(delay)
                data = payload if isinstance(payload, bytes) else (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                    for k, v in headers.items():
                        self.send_header(k, str(v))
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True  # a hanging reply's thread does not hold up close()
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _always(status: int, payload: Any, headers: dict | None = None, delay: float = 0.0):
    return lambda body, n: (status, payload, dict(headers or {}), delay)


def _error(status: int, message: str):
    return _always(status, {"error": {"message": message, "type": "error", "param": None, "code": None}})


# ------------------------------------------------------------------------------------------ running csem

def _csem(*args: Any, timeout: float = 300, env: dict | None = None) -> dict:
    """``python -m csem ARGS`` as a user runs it: exit code, stdout, stderr, seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "csem", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    return {"code": proc.returncode, "out": proc.stdout, "err": proc.stderr,
            "seconds": round(time.perf_counter() - t0, 2)}


def _records(tmp: Path, n: int = 3, name: str = "cands.jsonl", marker: str = "") -> Path:
    rows = [{"id": f"r{i}", "doc_id": f"d{i % len(SOURCES)}", "source": SOURCES[i % len(SOURCES)],
             "candidate": f"{marker}{i} " + SOURCES[i % len(SOURCES)].split(".")[0] + "."} for i in range(n)]
    path = tmp / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _judge(tmp: Path, fake: _Fake, *extra: Any, data: Path | None = None, url: str | None = None,
           mode: str = "probs", cache: bool = False) -> tuple[dict, Path]:
    out = tmp / f"out-{time.perf_counter_ns()}.jsonl"
    args = ["judge", "--data", data or _records(tmp), "--rubric", RUBRIC, "--judge", "openai:m", "--mode", mode,
            "--judge-opt", f"base_url={url or fake.url}", "--judge-opt", "backoff=0.05", "--out", out]
    args += ["--cache", tmp / "cache.sqlite"] if cache else ["--no-cache"]
    return _csem(*args, *extra), out


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] if path.exists() else []


def _one_line(res: dict) -> bool:
    lines = [x for x in res["err"].splitlines() if x.startswith("csem: error:")]
    return len(lines) == 1 and "Traceback" not in res["err"] + res["out"]


def _case(cases: list, name: str, expected: str, check: Callable[[], tuple[bool, str]]) -> None:
    t0 = time.perf_counter()
    try:
        ok, observed = check()
    except Exception as exc:  # noqa: BLE001 - a case that crashes the sweep is a defect, recorded as such
        ok, observed = False, f"the case itself failed: {type(exc).__name__}: {exc}"
    cases.append({"case": name, "expected": expected, "observed": observed, "verdict": "pass" if ok else "DEFECT",
                  "seconds": round(time.perf_counter() - t0, 2)})
    suite.log(f"fault_sweep: {'pass  ' if ok else 'DEFECT'} {name}")


# ------------------------------------------------------------------------------------------ the cases

def _backend_cases(cases: list, tmp: Path) -> None:
    def auth(status):
        def check():
            fake = _Fake(_error(status, "Incorrect API key provided"))
            res, out = _judge(tmp, fake, "--judge-opt", "concurrency=2", data=_records(tmp, 10))
            fake.close()
            return (res["code"] == 1 and _one_line(res) and "authentication failed" in res["err"]
                    and len(fake.bodies) <= 2), f"exit {res['code']}, {len(fake.bodies)} request(s) of 10: " \
                                               f"{res['err'].strip()[-130:]}"
        return check

    _case(cases, "HTTP 401 (wrong key)", "exit 1, one line naming the key; the run stops at once (10 records, 2 in "
          "flight: at most 2 requests, none retried)", auth(401))
    _case(cases, "HTTP 403 (forbidden)", "exit 1, one line naming the key; the run stops at once (at most 2 requests "
          "of 10)", auth(403))

    def retry_after():
        fake = _Fake(lambda body, n: (429, {"error": {"message": "slow down"}}, {"Retry-After": "2"}, 0) if n == 0
                     else (200, _reply(), {}, 0))
        res, out = _judge(tmp, fake, data=_records(tmp, 1))
        fake.close()
        rows = _rows(out)
        gap = fake.times[1] - fake.times[0] if len(fake.times) > 1 else 0.0
        ok = res["code"] == 0 and rows and rows[0].get("judge.coherence") is not None and 2.0 <= gap < 4.0
        return ok, f"exit {res['code']}, scored: {bool(rows and rows[0].get('judge.coherence'))}; the retry came " \
                   f"{gap:.2f} s after the 429"

    _case(cases, "HTTP 429 with Retry-After: 2", "the request waits 2 s, then succeeds; exit 0", retry_after)

    def server_error():
        fake = _Fake(_error(500, "upstream down"))
        res, out = _judge(tmp, fake, "--judge-opt", "max_retries=2", data=_records(tmp, 4))
        fake.close()
        rows = _rows(out)
        reasons = [r.get("judge.coherence.missing") or "" for r in rows]
        ok = (res["code"] == 1 and _one_line(res) and rows and all(r["judge.coherence"] is None for r in rows)
              and all("failed after" in m or m.startswith("not attempted: backend unavailable (given up")
                      for m in reasons))
        return ok, f"exit {res['code']}; {len(fake.bodies)} requests; reasons: {sorted(set(m[:90] for m in reasons))}"

    _case(cases, "HTTP 500 on every call", "exit 1; every row missing with what happened to it (failed after N "
          "attempts / not attempted and why), nothing lost", server_error)

    _reply_cases(cases, tmp)


def _reply_cases(cases: list, tmp: Path) -> None:
    """Replies a server should not send: malformed, hanging, huge, not UTF-8, filtered; a password in the URL."""

    def malformed():
        fake = _Fake(lambda body, n: (200, "<!DOCTYPE html><html>proxy error</html>", {"Content-Type": "text/html"}, 0)
                     if "BAD" in json.dumps(body) else (200, _reply(), {}, 0))
        res, out = _judge(tmp, fake, "--judge-opt", "max_retries=1", data=_mixed(tmp, "BAD"))
        fake.close()
        rows = {r["id"]: r for r in _rows(out)}
        ok = (res["code"] == 3 and "Traceback" not in res["err"] and rows["r1"]["judge.coherence"] is None
              and "malformed reply" in rows["r1"]["judge.coherence.missing"]
              and rows["r0"]["judge.coherence"] is not None)
        return ok, f"exit {res['code']}; bad row: {rows.get('r1', {}).get('judge.coherence.missing', '')[:110]}"

    _case(cases, "a malformed 200 reply (an HTML page) among good ones", "exit 3; that row missing "
          "'malformed reply'; the good rows scored", malformed)

    def hanging():
        fake = _Fake(_always(200, _reply(), delay=30))
        t0 = time.perf_counter()
        res, out = _judge(tmp, fake, "--judge-opt", "timeout=1", "--judge-opt", "max_retries=0", data=_records(tmp, 2))
        fake.close()
        took = time.perf_counter() - t0
        return res["code"] == 1 and _one_line(res) and took < 25, f"exit {res['code']} after {took:.1f} s"

    _case(cases, "a server that never answers (timeout=1)", "exit 1 in seconds, one line", hanging)

    def huge():
        answer = "The summary rambles on. " * 90_000 + "Score: 2"
        fake = _Fake(_always(200, _reply(answer, logprobs=False)))
        res, out = _judge(tmp, fake, data=_records(tmp, 1), mode="parse", cache=True)
        fake.close()
        rows = _rows(out)
        raw = rows[0].get("judge.coherence.raw", "") if rows else ""
        with sqlite3.connect(tmp / "cache.sqlite") as db:
            cached = max((len(r or "") for (r,) in db.execute("SELECT raw FROM judgments")), default=0)
        ok = res["code"] == 0 and rows and rows[0]["judge.coherence"] == 2.0 and len(raw) < 4200 and cached < 4200
        return ok, (f"exit {res['code']}, score {rows[0]['judge.coherence'] if rows else None}; kept {len(raw):,} "
                    f"characters in the row, {cached:,} in the cache, of {len(answer):,}")

    _case(cases, "a 2 MB answer (parse mode)", "parsed whole (score 2 at its end); at most ~4,000 characters kept "
          "in the row and the cache", huge)

    def not_utf8():
        fake = _Fake(lambda body, n: (200, b'{"id": "x", "choices": [\xff\xfe\xfa]}', {}, 0) if "BAD" in json.dumps(body)
                     else (200, _reply(), {}, 0))
        res, out = _judge(tmp, fake, "--judge-opt", "max_retries=0", data=_mixed(tmp, "BAD"))
        fake.close()
        rows = {r["id"]: r for r in _rows(out)}
        ok = res["code"] == 3 and "Traceback" not in res["err"] and rows["r1"]["judge.coherence"] is None
        return ok, f"exit {res['code']}; bad row: {rows.get('r1', {}).get('judge.coherence.missing', '')[:110]}"

    _case(cases, "a reply body that is not UTF-8", "exit 3; that row missing with its reason, no traceback", not_utf8)

    def filtered(mode):
        def check():
            fake = _Fake(lambda body, n: (200, _reply(None, finish="content_filter"), {}, 0)
                         if "BAD" in json.dumps(body) else (200, _reply(), {}, 0))
            res, out = _judge(tmp, fake, data=_mixed(tmp, "BAD"), mode=mode)
            fake.close()
            rows = {r["id"]: r for r in _rows(out)}
            bad = rows.get("r1", {})
            ok = (res["code"] == 3 and bad.get("judge.coherence") is None
                  and "content filter" in (bad.get("judge.coherence.missing") or ""))
            return ok, f"exit {res['code']}; filtered row: score {bad.get('judge.coherence')}, " \
                       f"{(bad.get('judge.coherence.missing') or '')[:100]}"
        return check

    for mode in ("probs", "parse"):
        _case(cases, f"a content-filtered reply with logprobs ({mode} mode)", "missing with the filter named, no "
              "probability read; exit 3", filtered(mode))

    def password(answering: bool):
        def check():
            fake = _Fake(_always(200, _reply()) if answering else _error(500, "upstream down"))
            url = fake.url.replace("http://", f"http://user:{PASSWORD}@")
            res, out = _judge(tmp, fake, "--judge-opt", "max_retries=1", url=url, cache=True)
            fake.close()
            files = "".join(p.read_bytes().decode("utf-8", "replace") for p in tmp.iterdir() if p.is_file())
            leaked = [where for where, text in (("stderr", res["err"]), ("stdout", res["out"]), ("files", files))
                      if PASSWORD in text]
            named = "127.0.0.1" in (res["err"] + files)
            ok = not leaked and named and res["code"] == (0 if answering else 1)
            return ok, f"exit {res['code']}; secret found in: {leaked or 'nothing'}; backend still named: {named}"
        return check

    _case(cases, "a password in base_url, server answering 500", "the error, the rows and the log name the "
          "backend without the password; exit 1", password(False))
    _case(cases, "a password in base_url, server answering", "the cache (key, backend column) and the rows hold no "
          "password; exit 0", password(True))


def _mixed(tmp: Path, marker: str) -> Path:
    """Three records, the second one's candidate carrying ``marker`` (the FAKE server fails it)."""
    path = _records(tmp, 3, name=f"mixed-{marker}.jsonl")
    rows = _rows(path)
    rows[1]["candidate"] = f"{marker} {rows[1]['candidate']}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _file_cases(cases: list, tmp: Path) -> None:
    empty = tmp / "empty.jsonl"
    empty.write_text("")

    def empty_file(*args):
        def check():
            res = _csem(*args)
            return (res["code"] == 2 and _one_line(res) and str(empty) in res["err"]), \
                f"exit {res['code']}: {res['err'].strip()[-150:]}"
        return check

    _case(cases, "csem train on an empty file", "exit 2, one line naming the file",
          empty_file("train", "--data", empty, "--label-col", "judge.coherence", "--out", tmp / "m"))
    _case(cases, "csem judge on an empty file", "exit 2, one line naming the file",
          empty_file("judge", "--data", empty, "--rubric", RUBRIC, "--judge", "openai:m", "--out", tmp / "o.jsonl"))

    def bad_file(name: str, content: bytes, expect: str):
        def check():
            path = tmp / name
            path.write_bytes(content)
            res = _csem("judge", "--data", path, "--rubric", RUBRIC, "--judge", "openai:m", "--out", tmp / "o.jsonl")
            ok = res["code"] == 2 and _one_line(res) and str(path) in res["err"] and expect in res["err"]
            return ok, f"exit {res['code']}: {res['err'].strip()[-160:]}"
        return check

    _case(cases, "an input file that is not UTF-8", "exit 2, one line naming the file",
          bad_file("latin1.jsonl", '{"source": "caf\u00e9", "candidate": "x"}\n'.encode("latin-1"), ""))
    _case(cases, "a JSONL file with a broken line", "exit 2, one line naming file and line",
          bad_file("broken.jsonl", b'{"source": "a", "candidate": "b"}\n{"source": "a", "cand\n', "line 2"))
    _case(cases, "a directory given as --data", "exit 2, one line", lambda: (
        lambda res: (res["code"] == 2 and _one_line(res), f"exit {res['code']}: {res['err'].strip()[-120:]}"))(
        _csem("judge", "--data", tmp, "--rubric", RUBRIC, "--judge", "openai:m", "--out", tmp / "o.jsonl")))

    def escape():
        data = tmp / "humans" / "h.jsonl"
        data.parent.mkdir(exist_ok=True)
        col = "x/../../escaped"
        data.write_text("".join(json.dumps({"id": str(i), "doc_id": str(i // 3), "system_id": f"s{i % 3}",
                                            "candidate": f"c{i}", f"human.{col}": float(i % 4),
                                            f"metric.m.{col}": float((i * 7) % 5)}) + "\n" for i in range(12)))
        plots = tmp / "deep" / "er" / "plots"
        res = _csem("meta-eval", "--data", data, "--bootstrap", "0", "--plot", plots)
        pngs = [p for p in tmp.rglob("*.png")]
        outside = [str(p.relative_to(tmp)) for p in pngs if p.parent != plots]
        return res["code"] == 0 and pngs and not outside, f"exit {res['code']}; {len(pngs)} plots, outside --plot: " \
                                                          f"{outside or 'none'}"

    _case(cases, "meta-eval --plot with a column named x/../../escaped", "every plot inside the --plot folder", escape)


def _labelled() -> list[dict]:
    """The shipped quick-start candidates with a SYNTHETIC plumbing label (a cycle over 1-5, not a
    judgment): the reader cases need a trained student, not a good one."""
    import csem

    rows = _rows(Path(csem.__file__).parent / "pipeline" / "examples" / "quickstart" / "train.jsonl")
    return [dict(r, **{"judge.quality": float(1 + i % 5)}) for i, r in enumerate(rows)]


def _student_cases(cases: list, tmp: Path) -> None:
    """Cases that need a trained student: a MiniLM student trained on the shipped quick-start file."""
    import csem
    from csem.apply.reward import trl_reward

    def ref_based_gate():
        rows = [dict(r, reference=r["source"].split(".")[0] + ".") for r in _labelled()]  # one reference each
        csem.train(rows, "judge.quality", out_dir=tmp / "ref-student", mode="ref-based", max_epochs=1)
        return (tmp / "ref-student" / "config.json").exists(), "trained and saved with the gate on (default)"

    _case(cases, "a ref-based student with the acceptability gate on (one reference per source)",
          "trains (the gate fitted on rows of one feature width)", ref_based_gate)

    student = tmp / "student"

    def train_student():
        rows = _labelled()
        csem.train(rows, "judge.quality", out_dir=student, max_epochs=1)
        return student.exists(), f"trained on {len(rows)} rows"

    _case(cases, "a student for the reader cases", "trains", train_student)

    def reward_none():
        reward = trl_reward(student)
        prompt = [{"role": "user", "content": SOURCES[0]}]
        none, empty = reward(prompts=[prompt] * 2, completions=[[{"role": "assistant", "content": None}],
                                                               [{"role": "assistant", "content": ""}]])
        return abs(none - empty) < 1e-6 and abs(none - reward.floor) < 1e-6, \
            f"None content {none:.4f}, empty {empty:.4f}, floor {reward.floor:.4f}"

    _case(cases, "TRL reward, a chat message with content None", "scored as empty text (the floor), not as 'None'",
          reward_none)

    def rerank_none():
        nbest = Path(csem.__file__).parent / "pipeline" / "examples" / "quickstart" / "nbest.jsonl"
        rows = _rows(nbest)
        rows[0]["candidate"] = None
        data = tmp / "nbest-none.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        res = _csem("rerank", "--data", data, "--metric", student, "--out", tmp / "chosen.jsonl")
        chosen = {r["id"] for r in _rows(tmp / "chosen.jsonl")}
        ok = res["code"] == 0 and rows[0]["id"] not in chosen
        return ok, f"exit {res['code']}; the null candidate chosen: {rows[0]['id'] in chosen}"

    _case(cases, "csem rerank, an N-best list with a null candidate", "scored as empty text, never chosen; exit 0",
          rerank_none)


def _kill_case(cases: list, tmp: Path) -> None:
    def kill9():
        data = _records(tmp, 24, name="kill.jsonl")
        fake = _Fake(lambda body, n: (200, _reply(), {}, 0.15))
        args = ["judge", "--data", data, "--rubric", RUBRIC, "--judge", "openai:m", "--judge-opt",
                f"base_url={fake.url}", "--judge-opt", "concurrency=1", "--cache", tmp / "kill.sqlite",
                "--out", tmp / "kill-out.jsonl"]
        proc = subprocess.Popen([sys.executable, "-m", "csem", *map(str, args)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
        deadline = time.time() + 120
        while len(fake.bodies) < 8 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with sqlite3.connect(tmp / "kill.sqlite") as db:
            kept = db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
        before = len(fake.bodies)
        res = _csem(*args)
        fake.close()
        rows = _rows(tmp / "kill-out.jsonl")
        asked_again = len(fake.bodies) - before
        ids = [r["id"] for r in rows]
        ok = (res["code"] == 0 and len(rows) == 24 and len(set(ids)) == 24
              and all(r["judge.coherence"] is not None for r in rows) and asked_again == 24 - kept)
        return ok, (f"{kept} judgments kept after kill -9; the re-run asked {asked_again} more; {len(rows)} rows, "
                    f"{len(ids) - len(set(ids))} duplicated, exit {res['code']}")

    _case(cases, "kill -9 in the middle of csem judge, then the same command again", "nothing finished is lost or "
          "duplicated; the re-run asks only for the rest", kill9)


def run(quick: bool = False) -> dict:
    """Run the sweep. ``quick``: the backend and file cases only (no student is trained, no kill -9)."""
    t0 = time.perf_counter()
    cases: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="csem-sweep-") as d:
        tmp = Path(d)
        groups = [("backend", _backend_cases), ("files", _file_cases)]
        if not quick:
            groups += [("kill", _kill_case), ("students", _student_cases)]
        for name, fn in groups:
            sub = tmp / name
            sub.mkdir()
            fn(cases, sub)
    defects = [c["case"] for c in cases if c["verdict"] != "pass"]
    return {"benchmark": "fault_sweep", "quick": quick, "date": suite.now(), "machine": suite.machine(),
            "seconds": round(time.perf_counter() - t0, 1), "cases": cases,
            "summary": {"cases": len(cases), "passed": len(cases) - len(defects), "defects": len(defects),
                        "defect_cases": defects}}


def report(results: dict) -> str:
    s = results["summary"]
    lines = [f"# Fault sweep{' (quick)' if results.get('quick') else ''}", "",
             f"{s['cases']} cases, **{s['defects']} defect(s)**, {s['passed']} passed; {results['seconds']} s on "
             f"{results['machine']}, {results['date']}. Each case runs csem as a user does (`python -m csem ...` "
             "in a child process) against a FAKE OpenAI-compatible server on loopback with scripted replies, or "
             "against bad files; `python -m benchmarks run fault_sweep` repeats it.", ""]
    if s["defect_cases"]:
        lines += ["Defects: " + "; ".join(s["defect_cases"]), ""]
    rows = [{"case": c["case"], "expected": c["expected"], "verdict": c["verdict"],
             "observed": c["observed"].replace("|", "/").replace("\n", " ")} for c in results["cases"]]
    lines.append(suite.markdown_table(rows, ["case", "expected", "observed", "verdict"]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the suite's runner is python -m benchmarks run fault_sweep
    print(report(run(quick="--quick" in sys.argv)))
