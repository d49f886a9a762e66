"""`csem annotate` end to end on a real judge (SmolLM2 via llama.cpp): labelled file, cache, re-run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from csem.data.records import read_records, write_records


@pytest.mark.slow  # SmolLM2 in a subprocess
def test_annotate_writes_labels_and_reuses_cache(tmp_path):
    cands = [
        {"id": f"c{i}", "doc_id": "d1", "source": "The council voted to close the bridge for 18 months.",
         "candidate": text, "keep_me": i}
        for i, text in enumerate(["The bridge closes for 18 months.", "Bananas are yellow.", "Council closes bridge."])
    ]
    src = tmp_path / "cands.csv"
    write_records(cands, src)
    out = tmp_path / "labelled.parquet"
    cmd = [sys.executable, "-m", "csem", "annotate", "--data", str(src), "--rubric",
           "csem/summ-coherence-ref-free,csem/summ-fluency-ref-free", "--judge", "llama-cpp:smollm2", "--out", str(out)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    # the console wraps long lines (a long temporary path moves the break): compare with spaces collapsed
    assert "6 judgments (6 judged, 0 cached, 0 failed)" in " ".join(first.stdout.split())
    recs = read_records(out)
    assert [r["id"] for r in recs] == ["c0", "c1", "c2"]
    assert [r["keep_me"] for r in recs] == ["0", "1", "2"], "unknown columns are kept (as read from CSV)"
    for r in recs:
        for a in ("coherence", "fluency"):
            assert r[f"judge.{a}"] is None or 1 <= r[f"judge.{a}"] <= 5
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "6 judgments (0 judged, 6 cached, 0 failed)" in " ".join(second.stdout.split())
    assert read_records(out) == recs
    # provenance beside the labelled file: the label scale comes from the rubric, not from the data
    from csem.pipeline.annotate import read_provenance

    prov = read_provenance(out)
    assert prov["judge"] == "llama-cpp:smollm2" and prov["mode"] == "probs"
    assert prov["columns"]["judge.coherence"] == {"rubric": "csem/summ-coherence-ref-free", "aspect": "coherence",
                                                  "scale": [1, 5]}


def test_annotate_names_the_bad_row(tmp_path):
    src = tmp_path / "cands.jsonl"
    src.write_text('{"id": "a", "source": "x", "candidate": "y"}\n{"id": "b", "source": "x"}\n')
    res = subprocess.run([sys.executable, "-m", "csem", "annotate", "--data", str(src), "--rubric",
                          "csem/summ-coherence-ref-free", "--judge", "llama-cpp:smollm2", "--out",
                          str(tmp_path / "o.jsonl")], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    assert "line 2" in res.stderr and "candidate" in res.stderr
    assert "Traceback" not in res.stderr, "a bad input file is a clear one-line error, not a crash"
    assert not (tmp_path / "o.jsonl").exists()


def test_annotate_unreachable_judge_exits_1_and_keeps_rows(tmp_path):
    """Failed judgments (connection refused, no retries) are written as missing; with nothing judged
    the exit code is 1 (the backend never answered; partial failures exit 3, tests/judge/test_run_outcome.py)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    src = tmp_path / "cands.jsonl"
    write_records([{"id": "a", "doc_id": "d", "source": "x y z", "candidate": "x"}], src)
    out = tmp_path / "o.jsonl"
    res = subprocess.run([sys.executable, "-m", "csem", "annotate", "--data", str(src), "--rubric",
                          "csem/summ-coherence-ref-free", "--judge", "openai:m", "--judge-opt",
                          f"base_url=http://127.0.0.1:{port}/v1", "--judge-opt", "max_retries=0", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, env={**__import__("os").environ, "OPENAI_API_KEY": "k"})
    assert res.returncode == 1, res.stderr  # nothing judged: the backend never answered (issue 11)
    assert "csem: error: no judgment made: the backend answered none of the 1 requests" in res.stderr
    rows = read_records(out)
    assert [r["id"] for r in rows] == ["a"] and rows[0]["judge.coherence"] is None


def test_broken_provenance_sidecar_is_named(tmp_path):
    import pytest

    from csem.pipeline.annotate import provenance_path, read_provenance

    lab = tmp_path / "labelled.jsonl"
    provenance_path(lab).write_text("{not json")
    with pytest.raises(ValueError, match="labelled.jsonl.judge.json: broken judge provenance file"):
        read_provenance(lab)
