"""issue 22: scoring and judging through Ray Data on a local Ray cluster that the tests start
(``ray.init(num_cpus=2)``, no dashboard): ``csem score --engine ray`` gives the scores of
``csem score`` on the same file, whatever the row order; a worker process killed mid-run loses and
duplicates no row (Ray's actor restarts and task retries); a bad record is named; the Ray judge
shares ``csem annotate``'s cache keys (a re-run resumes), against a real llama.cpp OpenAI server.

The student is a tiny RANDOM encoder with trained heads (``tests/tiny_encoder.py``): what is tested
is plumbing and exactness. Starting Ray takes seconds, so the tests that use it are ``slow``; the
checks made before Ray starts are fast.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from csem.data.records import write_records

pytest.importorskip("ray.data", reason="pip install 'csem[ray]'")

HERE = Path(__file__).resolve().parent
SCORE = "metric.tiny.quality"


@pytest.fixture(scope="module")
def cli():
    from csem.cli import _load_commands, app

    _load_commands()
    return app


def _cli(cli, *args):
    res = CliRunner().invoke(cli, [*map(str, args)])
    return res.exit_code, res.output + (repr(res.exception) if res.exit_code not in (0, 2) else "")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 logical CPUs for this module; the workers can import this test module
    (PYTHONPATH), so a subclass of the scorer defined here runs in them."""
    import ray

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *([old] if old else [])])
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def _records(shared_data, n_docs, offset, seed):
    from synthetic_records import summeval_candidates

    return summeval_candidates(shared_data, n_docs, {"own": {"judge.quality": 5.0}, "shuffled": {"judge.quality": 3.0},
                                                     "other": {"judge.quality": 1.0}}, offset=offset, seed=seed)


@pytest.fixture(scope="module")
def ray_student(shared_data, tiny_encoder, tmp_path_factory):
    """A ref-free student on the tiny random encoder (heads trained 2 epochs), its folder, and 36
    records to score (12 SummEval articles x 3 candidates) in a JSONL file."""
    import torch

    from csem.model import ModelConfig, TrainConfig, fit

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("ray_student")
    fit(_records(shared_data, 16, 0, 0), "judge.quality", "ref-free", out_dir=tmp / "student",
        config=ModelConfig(name="tiny", encoder=str(tiny_encoder), max_length=40, hidden_sizes=[16], dropout=0.0),
        train_config=TrainConfig(max_epochs=2, frozen_epochs=2, head_lr=3e-3, batch_size=16, seed=3),
        label_range=(1, 5))
    recs = _records(shared_data, 12, 40, 1)
    return tmp / "student", recs, write_records(recs, tmp / "records.jsonl")


def _read_parts(folder: Path) -> list[dict]:
    """Rows of a folder of JSONL or Parquet part files, in part-file order."""
    import pyarrow.parquet as pq

    rows = []
    for p in sorted(folder.iterdir()):
        if p.suffix == ".jsonl":
            rows += [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        elif p.suffix == ".parquet":
            rows += pq.read_table(p).to_pylist()
    return rows


def _scores(rows) -> dict[str, float]:
    return {r["id"]: r[SCORE] for r in rows}


@pytest.fixture(scope="module")
def local_scores(cli, ray_student, tmp_path_factory):
    """``csem score`` (one process) on the records file: {id: score}."""
    folder, _, data = ray_student
    out = tmp_path_factory.mktemp("local") / "scored.jsonl"
    code, output = _cli(cli, "score", "--model", folder, "--data", data, "--out", out, "--threads", "1")
    assert code == 0, output
    return _scores(json.loads(line) for line in out.read_text().splitlines())


# ------------------------------------------------------------------------------ fast: before Ray starts

def test_output_must_be_a_format_folder(cli, tmp_path):
    """--out is checked before any work: it must be named .parquet/.jsonl and be new or empty."""
    data = write_records([{"id": "a", "source": "s", "candidate": "c"}], tmp_path / "in.jsonl")
    code, out = _cli(cli, "score", "--engine", "ray", "--model", tmp_path / "no-model", "--data", data,
                     "--out", tmp_path / "scored")
    assert code == 2 and "give --out a .parquet or .jsonl name" in out, out
    (tmp_path / "full.parquet").mkdir()
    (tmp_path / "full.parquet" / "part-0.parquet").write_bytes(b"x")
    code, out = _cli(cli, "score", "--engine", "ray", "--model", tmp_path / "no-model", "--data", data,
                     "--out", tmp_path / "full.parquet")
    assert code == 2 and "exists and is not empty" in out, out


def test_csv_input_and_unknown_engine(cli, ray_student, tmp_path):
    folder, recs, _ = ray_student
    csv = write_records(recs[:2], tmp_path / "in.csv")
    code, out = _cli(cli, "score", "--engine", "ray", "--model", folder, "--data", csv, "--out", tmp_path / "o.jsonl")
    assert code == 2 and "reads and writes Parquet or JSONL" in out and "in.csv" in out, out
    code, out = _cli(cli, "score", "--engine", "spark", "--model", folder, "--data", csv, "--out", tmp_path / "o.jsonl")
    assert code == 2 and "unknown --engine 'spark'" in out, out


# ------------------------------------------------------------------------------ slow: a local Ray cluster

@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_ray_scores_equal_csem_score(cli, ray_cluster, ray_student, local_scores, tmp_path, fmt):
    """Two workers, batches of 5 records (8 batches): every row once, in input order, with the score
    `csem score` gives it (to float rounding: the scorer pools each batch's texts)."""
    folder, recs, data = ray_student
    if fmt == "parquet":
        data = write_records(recs, tmp_path / "records.parquet")
    out = tmp_path / f"scored.{fmt}"
    code, output = _cli(cli, "score", "--engine", "ray", "--workers", "2", "--cpus-per-worker", "0.5",
                        "--records-per-batch", "5", "--model", folder, "--data", data, "--out", out)
    assert code == 0, output
    assert f"wrote {out}: 36 records scored (metric.tiny.quality) by 2 Ray worker(s), {fmt} part files" in \
        " ".join(output.split())
    rows = _read_parts(out)
    assert [r["id"] for r in rows] == [r["id"] for r in recs]  # preserve_order: input order
    got = _scores(rows)
    assert set(got) == set(local_scores)
    assert max(abs(got[k] - local_scores[k]) for k in got) < 1e-4
    assert rows[0]["reference"] == recs[0]["reference"] and rows[0]["judge.quality"] == recs[0]["judge.quality"]


@pytest.mark.slow
def test_row_order_does_not_change_a_score(ray_cluster, ray_student, local_scores):
    """The records shuffled and re-batched: every id keeps its score."""
    import random

    from csem.engines.ray import score_dataset

    folder, recs, _ = ray_student
    shuffled = list(recs)
    random.Random(7).shuffle(shuffled)
    ds = ray_cluster.data.from_items(shuffled)
    rows = score_dataset(ds, folder, workers=1, cpus_per_worker=0.5, records_per_batch=7).take_all()
    got = _scores(rows)
    assert len(rows) == len(recs) and set(got) == set(local_scores)
    assert max(abs(got[k] - local_scores[k]) for k in got) < 1e-4


try:  # the scorer subclass below is defined only where Ray is installed (the module is skipped otherwise)
    from csem.engines.ray import RayScorer
except ImportError:  # pragma: no cover
    RayScorer = object


class DiesOnce(RayScorer):
    """A RayScorer whose worker process kills itself (SIGKILL) in the middle of its second batch,
    once per run (``marker`` file): a real worker death, for Ray's restart and retry."""

    def __init__(self, *args, marker: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.marker, self.calls = Path(marker), 0

    def __call__(self, batch):
        self.calls += 1
        if self.calls == 2 and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(batch)


@pytest.mark.slow
def test_worker_killed_mid_run_loses_and_duplicates_nothing(ray_cluster, ray_student, local_scores, tmp_path):
    from csem.engines.ray import read_dataset, score_dataset, write_dataset

    folder, recs, data = ray_student
    marker = tmp_path / "killed.pid"
    ds = score_dataset(read_dataset(data), folder, workers=2, cpus_per_worker=0.5, records_per_batch=4,
                       scorer_class=DiesOnce, marker=str(marker))
    out = tmp_path / "scored.jsonl"
    write_dataset(ds, out, "jsonl")
    assert marker.exists(), "no worker was killed"
    rows = _read_parts(out)
    ids = [r["id"] for r in rows]
    assert sorted(ids) == sorted(r["id"] for r in recs)  # every row exactly once
    got = _scores(rows)
    assert max(abs(got[k] - local_scores[k]) for k in got) < 1e-4


@pytest.mark.slow
def test_bad_record_is_named(cli, ray_cluster, ray_student, tmp_path):
    """A record without the source its (ref-free) model needs: one line naming input, record, field; exit 2."""
    folder, recs, _ = ray_student
    rows = [dict(r) for r in recs[:9]]
    del rows[6]["source"]
    data = write_records(rows, tmp_path / "bad.jsonl")
    code, output = _cli(cli, "score", "--engine", "ray", "--workers", "1", "--cpus-per-worker", "0.5",
                        "--records-per-batch", "3", "--model", folder, "--data", data, "--out", tmp_path / "o.jsonl")
    assert code == 2, output
    line = " ".join(output.split())
    assert f"csem: error: {data}, record id '{rows[6]['id']}', field 'source': required field 'source' is missing" \
        in line, output
    assert "Traceback" not in output


# ------------------------------------------------------------------------------ judging (real llama.cpp server)

@pytest.mark.slow
def test_ray_judge_shares_the_annotate_cache(ray_cluster, llama_server, tiny_rubric, tiny_records, tmp_path):
    """Half the records judged through Ray (a run cut short), then csem's own judging of all of
    them with the same cache judges only the other half; a Ray re-run over all judges nothing
    and gives the same scores."""
    from csem.engines.ray import judge_dataset
    from csem.judge import judge_records
    from csem.judge.cache import JudgmentCache

    db = tmp_path / "judge_cache.sqlite"
    opts = {"base_url": llama_server.url, "concurrency": 2}
    first = judge_dataset(ray_cluster.data.from_items(tiny_records[:2]), tiny_rubric, "openai:smollm2",
                          cache=db, backend_options=opts, records_per_batch=1).take_all()
    assert len(first) == 2 and all(isinstance(r["judge.coherence"], float) for r in first), first
    rows, summary = judge_records(tiny_records, tiny_rubric, "openai:smollm2", cache=db, backend_options=opts,
                                  progress=False)
    assert (summary.cached, summary.judged, summary.failed) == (2, 2, 0)
    again = judge_dataset(ray_cluster.data.from_items(tiny_records), tiny_rubric, "openai:smollm2", cache=db,
                          backend_options=opts, workers=2, records_per_batch=2).take_all()
    with JudgmentCache(db) as cache:
        assert len(cache) == 4  # nothing judged again
    assert {r["id"]: r["judge.coherence"] for r in again} == {r["id"]: r["judge.coherence"] for r in rows}


def test_record_error_survives_pickling():
    """A bad record's error crosses process boundaries (Ray workers) with its file, field and message."""
    import pickle

    from csem.data.records import RecordError

    err = pickle.loads(pickle.dumps(RecordError("in.jsonl, record id 'a'", None, "source", "required field 'source' is missing")))
    assert (err.path, err.line, err.field) == ("in.jsonl, record id 'a'", None, "source")
    assert str(err) == "in.jsonl, record id 'a', field 'source': required field 'source' is missing"
