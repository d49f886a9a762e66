"""Batch jobs (csem.judge.batch) through the real ``openai`` and ``AzureOpenAI`` clients against a
loopback FAKE of the Files and Batches endpoints (tests/fake_batches.py): every batch status, per-
request errors, malformed result lines, resume after kill -9, cached judgments never sent, the same
probabilities and request bodies as synchronous judging, the vLLM request-file format, and costs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.judge import judge_records
from csem.judge.batch import (MAX_CUSTOM_ID, BatchOptions, custom_id, read_result_file, request_body,
                              write_request_files)
from csem.judge.cost import Prices, completion_bound, estimate, prices_from

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_batches import FakeBatchServer, answer  # noqa: E402
from judge.vllm_batch_schema import BatchRequestInput, BatchRequestOutput  # noqa: E402

_load_commands()
RUBRIC = "csem/summ-coherence-ref-free"
MODEL = "fake-judge"
REPO = Path(__file__).resolve().parents[2]


def records(n: int = 6) -> list[dict]:
    return [{"id": f"r{i}", "source": f"Source document number {i} about topic {i % 3}.",
             "candidate": f"Candidate summary {i}" + (" POISON" if i == 2 else "")} for i in range(n)]


def opts(fake: FakeBatchServer, azure: bool = False) -> dict:
    if azure:
        return {"base_url": fake.azure_endpoint, "api_key": "sk-batch-secret", "azure": True,
                "api_version": "2024-10-21"}
    return {"base_url": fake.url, "api_key": "sk-batch-secret"}


def run_batch(recs, fake, tmp_path, *, azure=False, cache="cache.sqlite", **batch):
    options = BatchOptions(state_dir=tmp_path / "state", poll=0.0, **batch)
    return judge_records(recs, RUBRIC, f"openai:{MODEL}", cache=tmp_path / cache, progress=False,
                         backend_options=opts(fake, azure), batch=options)


def scores(rows):
    return [r.get("judge.coherence") for r in rows]


# ----------------------------------------------------------------------------- statuses and equality
@pytest.mark.parametrize("azure", [False, True], ids=["openai", "azure"])
def test_batch_equals_synchronous_judging(tmp_path, azure):
    recs = records()
    with FakeBatchServer() as fake:
        rows, s = run_batch(recs, fake, tmp_path, azure=azure)
        assert fake.served == ["in_progress", "finalizing", "completed"]  # validating came with the creation
        assert fake.creations == 1 and fake.uploads == 1 and not fake.chat_bodies
        assert (s.judged, s.cached, s.failed, s.pending) == (6, 0, 0, 0)
        sync_rows, sync = judge_records(recs, RUBRIC, f"openai:{MODEL}", cache=tmp_path / "sync.sqlite",
                                        progress=False, backend_options=opts(fake, azure))
        # the same request bodies (logprobs and top_logprobs in probs mode) and the same probabilities
        canon = lambda b: json.dumps(b, sort_keys=True)  # noqa: E731
        assert sorted(map(canon, fake.batch_bodies.values())) == sorted(map(canon, fake.chat_bodies))
        assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in fake.chat_bodies)
        assert scores(rows) == scores(sync_rows) and None not in scores(rows)
        assert [r["judge.coherence.mass"] for r in rows] == [r["judge.coherence.mass"] for r in sync_rows]
        assert (s.prompt_tokens, s.completion_tokens) == (sync.prompt_tokens, sync.completion_tokens) != (0, 0)
        # a second run is served by the cache: nothing uploaded, nothing created
        rows2, s2 = run_batch(recs, fake, tmp_path, azure=azure)
        assert (s2.cached, fake.uploads, fake.creations) == (6, 1, 1) and scores(rows2) == scores(rows)
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    (b,) = state["batches"]
    assert b["status"] == "completed" and b["counts"] == {"total": 6, "completed": 6, "failed": 0}
    lines = [json.loads(t) for t in (tmp_path / "state" / b["request_file"]).read_text().splitlines()]
    assert {x["url"] for x in lines} == {"/chat/completions" if azure else "/v1/chat/completions"}
    assert all(len(x["custom_id"]) <= MAX_CUSTOM_ID for x in lines)
    if azure:
        assert any(p.startswith("/openai/batches") and "api-version=2024-10-21" in p for p in fake.paths)
    assert "sk-batch-secret" not in (tmp_path / "state" / "state.json").read_text()


def test_cached_judgments_are_never_sent(tmp_path):
    recs = records()
    with FakeBatchServer() as fake:
        judge_records(recs[:4], RUBRIC, f"openai:{MODEL}", cache=tmp_path / "cache.sqlite", progress=False,
                      backend_options=opts(fake))
        assert len(fake.chat_bodies) == 4
        rows, s = run_batch(recs, fake, tmp_path)
        assert (s.cached, s.judged) == (4, 2)
        assert len(fake.batch_bodies) == 2  # only the two uncached requests went into the batch
        sent = {json.dumps(b["messages"]) for b in fake.batch_bodies.values()}
        assert sent.isdisjoint({json.dumps(b["messages"]) for b in fake.chat_bodies})
        assert None not in scores(rows)


@pytest.mark.parametrize("status", ["expired", "cancelled"])
def test_ended_batch_without_some_results_then_resubmit(tmp_path, status):
    recs = records()
    with FakeBatchServer(plan=("validating", "in_progress", status), partial=2) as fake:
        rows, s = run_batch(recs, fake, tmp_path)
        assert (s.judged, s.failed) == (2, 4)
        reasons = [r.get("judge.coherence.missing") for r in rows if r["judge.coherence"] is None]
        assert len(reasons) == 4 and all(f"batch {status}" in x and "--batch-resubmit" in x for x in reasons)
        # without the flag a re-run asks nothing new
        _, s_again = run_batch(recs, fake, tmp_path)
        assert fake.creations == 1 and s_again.failed == 4
        fake.plan = ["validating", "completed"]
        rows2, s2 = run_batch(recs, fake, tmp_path, resubmit=True)
        assert fake.creations == 2 and (s2.cached, s2.judged, s2.failed) == (2, 4, 0)
        state = json.loads((tmp_path / "state" / "state.json").read_text())
        assert [len(b["custom_ids"]) for b in state["batches"]] == [6, 4]
        assert None not in scores(rows2)


def test_failed_batch_error_file_and_malformed_line(tmp_path):
    recs = records()
    with FakeBatchServer(plan=("validating", "failed")) as fake:
        rows, s = run_batch(recs, fake, tmp_path / "a")
        assert (s.judged, s.failed) == (0, 6)
        assert all("the fake refused the file" in r["judge.coherence.missing"] for r in rows)

    def poison(body):
        return (400, "the prompt was refused") if "POISON" in json.dumps(body) else None

    with FakeBatchServer(errors=poison, malformed=True) as fake:
        rows, s = run_batch(recs, fake, tmp_path / "b")
        missing = {r["id"]: r.get("judge.coherence.missing") for r in rows if r["judge.coherence"] is None}
        assert len(missing) == 2 and s.failed == 2 and s.judged == 4
        assert "HTTP 400: the prompt was refused" in missing.pop("r2")
        (other,) = missing.values()
        assert "no result line" in other and "line 1: not JSON" in other


def test_request_files_respect_the_limits(tmp_path):
    reqs = {custom_id(f"{i:064x}"): {"model": "m", "messages": [{"role": "user", "content": "x" * 50}]}
            for i in range(7)}
    by_count = write_request_files(reqs, tmp_path / "n", max_requests=3)
    assert [len(p.read_text().splitlines()) for p in by_count] == [3, 3, 1]
    one = len(by_count[0].read_text().splitlines()[0].encode()) + 1
    by_size = write_request_files(reqs, tmp_path / "b", max_bytes=2 * one + 1)
    assert [len(p.read_text().splitlines()) for p in by_size] == [2, 2, 2, 1]
    assert all(p.stat().st_size <= 2 * one + 1 for p in by_size)
    assert custom_id("a" * 64, 3) == "a" * 62 + ".3" and len(custom_id("b" * 64, 12)) == 64
    # a job split over several batch files is still judged whole
    recs = records(5)
    with FakeBatchServer() as fake:
        rows, s = run_batch(recs, fake, tmp_path, max_requests=2)
        assert fake.creations == 3 and s.judged == 5 and None not in scores(rows)


# ----------------------------------------------------------------------------- the command line
class Result:
    def __init__(self, code: int, output: str):
        self.returncode, self.stdout, self.stderr = code, output, output


def cli(*args):
    """``csem ARGS`` in process (typer's runner; stdout and stderr together)."""
    res = CliRunner().invoke(app, [str(a) for a in args])
    return Result(res.exit_code, res.output)


def annotate_args(data, out, fake, *extra):
    return ["annotate", "--data", data, "--rubric", RUBRIC, "--out", out, "--judge", f"openai:{MODEL}",
            "--judge-opt", f"base_url={fake.url}", "--judge-opt", "api_key=sk-batch-secret", *extra]


@pytest.fixture()
def data_file(tmp_path):
    p = tmp_path / "cands.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records()))
    return p


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_kill_during_polling_then_resume_submits_once(tmp_path, data_file, sig):
    out = tmp_path / "labelled.jsonl"
    plan = ["validating"] + ["in_progress"] * 400 + ["finalizing", "completed"]
    with FakeBatchServer(plan=plan) as fake:
        args = annotate_args(data_file, out, fake, "--batch", "--batch-poll", "0.05")
        # Ctrl-C as a terminal delivers it: the child starts with SIGINT's default disposition. A
        # runner started in the background by a non-interactive shell ignores SIGINT, and a Python
        # child that inherits SIG_IGN installs no KeyboardInterrupt handler (it would poll on).
        proc = subprocess.Popen([sys.executable, "-m", "csem", *map(str, args)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_default_sigint)
        state = tmp_path / "labelled.jsonl.batch" / "state.json"
        deadline = time.time() + 120
        while time.time() < deadline and fake.retrieves < 3:
            time.sleep(0.1)
        assert fake.retrieves >= 3, proc.communicate(timeout=5)
        os.kill(proc.pid, sig)  # kill -9 (or Ctrl-C) while it polls
        _, err = proc.communicate(timeout=60)
        if sig == signal.SIGINT:
            assert proc.returncode != 0 and b"keep running at the provider" in err
        assert json.loads(state.read_text())["batches"][0]["id"] == "batch_0001" and not out.exists()
        fake.plan = ["validating", "in_progress", "completed"]  # the provider finishes meanwhile
        r = cli(*annotate_args(data_file, out, fake, "--batch", "--batch-poll", "0.05"))
        assert r.returncode == 0, r.stderr
        assert fake.creations == 1 and fake.uploads == 1  # picked up, never submitted twice
        rows = [json.loads(t) for t in out.read_text().splitlines()]
        assert len(rows) == 6 and all(r["judge.coherence"] is not None for r in rows)  # 0 lost
        prov = json.loads((tmp_path / "labelled.jsonl.judge.json").read_text())
        assert prov["batch"]["batches"][0]["id"] == "batch_0001" and prov["usage"]["judged"] == 6


def test_no_wait_then_collect_and_exit_codes(tmp_path, data_file):
    out = tmp_path / "labelled.jsonl"
    with FakeBatchServer(plan=("validating", "in_progress", "in_progress", "finalizing", "completed")) as fake:
        r = cli(*annotate_args(data_file, out, fake, "--batch", "--batch-no-wait"))
        assert r.returncode == 0 and "batch_0001" in r.stdout + r.stderr and not out.exists()
        r = cli(*annotate_args(data_file, out, fake, "--batch", "--batch-poll", "0", "--price-in", "2",
                               "--price-out", "8"))
        assert r.returncode == 0 and fake.creations == 1 and out.exists(), r.stderr
        assert "cost $" in r.stdout and "sk-batch-secret" not in r.stdout + r.stderr
    out2 = tmp_path / "failed.jsonl"
    with FakeBatchServer(plan=("validating", "failed")) as fake:
        r = cli(*annotate_args(data_file, out2, fake, "--batch", "--batch-poll", "0"))
        assert r.returncode == 1 and "the fake refused the file" in r.stderr
    out3 = tmp_path / "partial.jsonl"
    with FakeBatchServer(plan=("validating", "expired"), partial=4) as fake:
        r = cli(*annotate_args(data_file, out3, fake, "--batch", "--batch-poll", "0"))
        assert r.returncode == 3 and "2 of 6 judgments failed" in r.stderr
        r = cli(*annotate_args(data_file, out3, fake, "--batch", "--batch-poll", "0", "--batch-resubmit"))
        assert r.returncode == 0 and fake.creations == 2, r.stderr


def test_bad_flag_combinations_exit_2(tmp_path, data_file):
    runner = CliRunner()
    base = ["annotate", "--data", str(data_file), "--rubric", RUBRIC, "--out", str(tmp_path / "o.jsonl"),
            "--judge", f"openai:{MODEL}"]
    for extra, says in ((["--batch-no-wait"], "go with --batch"),
                        (["--batch", "--batch-file", str(tmp_path / "r.jsonl")], "choose one of"),
                        (["--batch-results", str(tmp_path / "none.jsonl")], "no such batch result file"),
                        (["--dry-run", "--price-in", "1"], "give both --price-in and --price-out")):
        res = runner.invoke(app, base + extra)
        assert res.exit_code == 2 and says in res.output, (extra, res.output)
    res = runner.invoke(app, ["annotate", "--data", str(data_file), "--rubric", RUBRIC, "--out",
                              str(tmp_path / "o.jsonl"), "--judge", "local", "--batch"])
    assert res.exit_code == 2 and "OpenAI-compatible judge" in res.output


def test_refused_key_and_csem_judge_batch(tmp_path, data_file):
    with FakeBatchServer(key="sk-batch-secret") as fake:
        def judge(key, *extra):
            return cli("judge", "--data", data_file, "--rubric", RUBRIC, "--judge", f"openai:{MODEL}", "--out",
                       tmp_path / "j.jsonl", "--cache", tmp_path / "c.sqlite", "--no-progress", "--judge-opt",
                       f"base_url={fake.url}", "--judge-opt", f"api_key={key}", "--batch", "--batch-poll", "0", *extra)

        r = judge("sk-wrong-secret-123")
        assert r.returncode == 1 and "authentication failed" in r.stdout and "sk-wrong-secret-123" not in r.stdout
        assert fake.creations == 0
        r = judge("sk-batch-secret", "--price-in", "1", "--price-out", "1")
        assert r.returncode == 0 and fake.creations == 1 and "cost $" in r.stdout, r.stdout
        rows = [json.loads(t) for t in (tmp_path / "j.jsonl").read_text().splitlines()]
        assert len(rows) == 6 and all(x["judge.coherence"] is not None for x in rows)


# ----------------------------------------------------------------------------- vLLM offline
def test_batch_file_has_vllms_format_and_results_come_back(tmp_path, data_file):
    out, req = tmp_path / "labelled.jsonl", tmp_path / "requests.jsonl"
    with FakeBatchServer() as fake:
        r = cli(*annotate_args(data_file, out, fake, "--batch-file", req, "--mode", "sample", "--n", "3"))
        assert r.returncode == 0 and "vllm run-batch" in r.stdout and not out.exists(), r.stderr
        assert not fake.chat_bodies and not fake.uploads  # nothing sent
        lines = [BatchRequestInput.model_validate_json(t) for t in req.read_text().splitlines()]
        assert len(lines) == 6 and len({x.custom_id for x in lines}) == 6
        assert all(x.method == "POST" and x.url == "/v1/chat/completions" and x.body.n == 3 for x in lines)
        # a stand-in for `vllm run-batch -o`: one BatchRequestOutput line per request, answered by the fake
        results = tmp_path / "results.jsonl"
        outputs = [BatchRequestOutput(id=f"vllm-{i}", custom_id=x.custom_id, error=None,
                                      response={"status_code": 200, "request_id": f"q{i}",
                                                "body": answer(json.loads(x.body.model_dump_json(exclude_unset=True)))})
                   for i, x in enumerate(lines) if i != 4]
        results.write_text("".join(o.model_dump_json() + "\n" for o in outputs))
        r = cli(*annotate_args(data_file, out, fake, "--batch-results", results, "--mode", "sample", "--n", "3"))
        assert r.returncode == 3 and "no result for request" in r.stderr  # the one line left out
        rows = [json.loads(t) for t in out.read_text().splitlines()]
        sync, _ = judge_records(records(), RUBRIC, f"openai:{MODEL}", cache=tmp_path / "sync.sqlite", mode="sample",
                                n=3, progress=False, backend_options=opts(fake))
        assert [x for i, x in enumerate(scores(rows)) if i != 4] == [x for i, x in enumerate(scores(sync)) if i != 4]
        got, bad = read_result_file(results)
        assert len(got) == 5 and not bad


def test_request_body_is_the_clients(tmp_path):
    body = request_body("m", {"messages": [], "max_tokens": 1, "extra_body": {"top_k": 5}})
    assert body == {"model": "m", "messages": [], "max_tokens": 1, "top_k": 5}


# ----------------------------------------------------------------------------- cost
def test_cost_arithmetic_and_dry_run_sends_nothing(tmp_path, data_file):
    p = Prices(input=2.5, output=10.0)
    assert p.cost(1_000_000, 0) == pytest.approx(2.5) and p.cost(0, 1_000_000) == pytest.approx(10.0)
    assert p.cost(400_000, 20_000, batch=True) == pytest.approx((1.0 + 0.2) / 2)
    assert prices_from(None, None) is None and prices_from(1, 2) == Prices(input=1, output=2)
    assert (completion_bound("probs", n=20, max_tokens=10), completion_bound("sample", n=20, max_tokens=10),
            completion_bound("parse", n=20, max_tokens=10)) == (1, 200, 10)

    class Counting:  # a provider whose tokenizer counts characters
        def prompt_tokens(self, messages):
            return list("".join(m["content"] for m in messages))

    chats = [[{"role": "user", "content": "abcd"}], [{"role": "user", "content": "ef"}]]
    e = estimate(chats, judgments=5, api=Counting(), mode="sample", n=4, max_tokens=10, prices=p)
    assert (e.cached, e.to_send, e.prompt_tokens, e.completion_tokens, e.exact) == (3, 2, 6, 80, True)
    assert e.cost == pytest.approx((6 * 2.5 + 80 * 10.0) / 1e6) and e.cost_batch == pytest.approx(e.cost / 2)
    out = tmp_path / "labelled.jsonl"
    with FakeBatchServer() as fake:
        r = cli(*annotate_args(data_file, out, fake, "--dry-run", "--price-in", "2.5", "--price-out", "10"))
        assert r.returncode == 0, r.stderr
        assert not fake.chat_bodies and not fake.uploads and not out.exists()
        assert "6 judgments, 0 cached, 6 to send" in r.stdout and "as a batch job" in r.stdout
        tokenizer_line = next(line for line in r.stdout.splitlines() if line.startswith("prompt tokens"))
        assert "tiktoken" in tokenizer_line or "ESTIMATE" in tokenizer_line


# ----------------------------------------------------------------------------- csem run
def test_pipeline_annotate_stage_batch_prices_and_dry_run(tmp_path, fake_llm):
    import yaml

    from csem.data.records import read_records, write_records
    from csem.pipeline.runner import Pipeline

    examples = REPO / "src" / "csem" / "pipeline" / "examples"
    write_records(read_records(examples / "news_sources.jsonl", required=("source",))[:3], tmp_path / "sources.jsonl")
    with FakeBatchServer() as fake:
        cfg = {"name": "batched", "sources": {"path": "sources.jsonl"},
               "collect": {"generators": [{"uri": fake_llm, "name": "fake", "num_samples": 2}],
                           "decoding": {"max_tokens": 20}},
               "annotate": {"judge": f"openai:{MODEL}", "rubrics": [RUBRIC], "options": opts(fake), "batch": True,
                            "prices": {"input": 2.5, "output": 10.0}}}
        (tmp_path / "pipe.yaml").write_text(yaml.safe_dump(cfg))
        p = Pipeline.from_file(tmp_path / "pipe.yaml", tmp_path / "run", progress=False)
        p.batch_poll = 0.0
        p.collect()
        n = len(read_records(tmp_path / "run" / "candidates.jsonl"))
        est = p.estimate_annotate()
        assert (est.judgments, est.to_send) == (n, n) and est.cost > 0
        assert est.cost_batch == pytest.approx(est.cost / 2)
        assert not fake.chat_bodies and not fake.uploads  # the dry run sent nothing
        s = p.annotate()
        assert (s["judged"], s["failed"], fake.creations) == (n, 0, 1)
        assert s["cost_usd"] == pytest.approx(Prices(input=2.5, output=10.0).cost(
            s["prompt_tokens"], s["completion_tokens"], batch=True))
        assert s["batches"][0]["id"] == "batch_0001"
        assert "batch" not in p.annotate_settings() and "prices" not in p.annotate_settings()
        assert (tmp_path / "run" / "labelled.jsonl.batch" / "state.json").exists()
        assert p.estimate_annotate().to_send == 0  # all cached now


# ----------------------------------------------------------------------------- slow: the local judge's own count
@pytest.mark.slow
def test_dry_run_counts_are_the_llama_judges_own(tmp_path):
    """--dry-run's prompt tokens equal what the llama.cpp judge (``local``) reports when it evaluates
    the same 20 prompts, prompt by prompt."""
    from csem.data.records import read_records
    from csem.judge import rating_cache_key
    from csem.judge.cache import JudgmentCache
    from csem.judge.cost import token_counter
    from csem.judge.runner import estimate_records
    from csem.llm import get_model
    from csem.rubrics import load_rubric

    src = read_records(REPO / "src" / "csem" / "pipeline" / "examples" / "news_sources.jsonl", required=("source",))
    recs = [{"id": r["id"], "source": r["source"], "candidate": r["source"].split(". ")[0] + "."} for r in src[:20]]
    judge = get_model("local")
    est = estimate_records(recs, RUBRIC, judge, cache=tmp_path / "cache.sqlite", prices=Prices(input=1, output=1))
    assert (est.to_send, est.exact) == (20, True) and "llama.cpp" in est.tokenizer
    rows, s = judge_records(recs, RUBRIC, judge, cache=tmp_path / "cache.sqlite", progress=False)
    assert s.judged == 20 and est.prompt_tokens == s.prompt_tokens
    rubric, count = load_rubric(RUBRIC), token_counter(judge.api).count
    with JudgmentCache(tmp_path / "cache.sqlite") as cache:
        for r in recs:  # prompt by prompt: the dry run's count is the count the judge stored
            row = cache.get(rating_cache_key(judge.id, rubric, r))
            assert row["prompt_tokens"] == count(rubric.render(r, "coherence")) > 100
    assert estimate_records(recs, RUBRIC, judge, cache=tmp_path / "cache.sqlite").to_send == 0
    assert est.cost == pytest.approx((est.prompt_tokens + 20) / 1e6)


def test_api_annotate_with_batch_and_prices(tmp_path):
    import csem

    # the provider has finished the batch at the first status request: ``batch=True`` polls every 30 s
    # (BatchOptions' default), and this test is about the API's arguments, not the waiting
    with FakeBatchServer(plan=("validating", "completed")) as fake:
        s = csem.annotate(records(4), RUBRIC, f"openai:{MODEL}", out=tmp_path / "l.jsonl", backend_options=opts(fake),
                          batch=True, prices={"input": 1.0, "output": 4.0})
        assert (s["judged"], fake.creations, fake.served) == (4, 1, ["completed"]) and s["cost_usd"] > 0
        assert (tmp_path / "l.jsonl.batch" / "state.json").exists() and (tmp_path / "l.jsonl").exists()
        prov = json.loads((tmp_path / "l.jsonl.judge.json").read_text())
        assert prov["cost_usd"] == s["cost_usd"] and prov["prices"]["input"] == 1.0


@pytest.mark.slow
def test_request_file_through_a_real_openai_server_equals_synchronous(tmp_path, data_file, llama_server):
    """The request file's bodies sent as they are to a real OpenAI-compatible server (llama.cpp's, SmolLM2,
    standing in for vLLM's batch runner), the replies written as vLLM's BatchRequestOutput lines and read
    back with --batch-results: the same scores and probability mass as synchronous judging."""
    import httpx

    out, req, res = tmp_path / "labelled.jsonl", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    base = ["annotate", "--data", data_file, "--rubric", RUBRIC, "--out", out, "--judge", "openai:smollm2",
            "--judge-opt", f"base_url={llama_server.url}"]
    r = cli(*base, "--batch-file", req)
    assert r.returncode == 0 and not out.exists(), r.stdout
    lines = [BatchRequestInput.model_validate_json(t) for t in req.read_text().splitlines()]
    with httpx.Client(timeout=300) as client, res.open("w") as fh:
        for i, x in enumerate(lines):
            body = json.loads(req.read_text().splitlines()[i])["body"]
            reply = client.post(llama_server.url + "/chat/completions", json=body)
            line = BatchRequestOutput(id=f"r{i}", custom_id=x.custom_id, error=None,
                                      response={"status_code": reply.status_code, "request_id": f"q{i}",
                                                "body": reply.json()})
            fh.write(line.model_dump_json() + "\n")
    r = cli(*base, "--batch-results", res)
    assert r.returncode == 0, r.stdout
    rows = [json.loads(t) for t in out.read_text().splitlines()]
    sync, s = judge_records(records(), RUBRIC, "openai:smollm2", cache=tmp_path / "sync.sqlite", progress=False,
                            backend_options={"base_url": llama_server.url})
    assert s.judged == 6 and s.fallback is None
    for a, b in zip(rows, sync):
        assert a["judge.coherence"] == pytest.approx(b["judge.coherence"], abs=1e-6)
        assert a["judge.coherence.mass"] == pytest.approx(b["judge.coherence.mass"], abs=1e-6)


def test_repeatability_pass_travels_as_a_batch_too(tmp_path):
    from csem.errors import InputError
    from csem.pipeline.annotate import annotate_file, read_repeatability

    with FakeBatchServer() as fake:
        s = annotate_file(records(), tmp_path / "l.jsonl", rubrics=[RUBRIC], judge=f"openai:{MODEL}",
                          backend_options=opts(fake), progress=False, repeatability=0.5,
                          batch=BatchOptions(poll=0.0))
        assert fake.creations == 2 and not fake.chat_bodies  # the second rendering in a second batch
        assert s["repeat"]["judged"] > 0 and s["failed"] == 0 and read_repeatability(tmp_path / "l.jsonl")
        rows = [json.loads(t) for t in (tmp_path / "l.jsonl").read_text().splitlines()]
        assert sum(r.get("judge.coherence.repeat") is not None for r in rows) == s["repeat"]["judged"]
        with pytest.raises(InputError, match="--repeatability goes with"):
            annotate_file(records(), tmp_path / "m.jsonl", rubrics=[RUBRIC], judge=f"openai:{MODEL}",
                          backend_options=opts(fake), repeatability=0.5,
                          batch=BatchOptions(request_file=tmp_path / "r.jsonl"))
