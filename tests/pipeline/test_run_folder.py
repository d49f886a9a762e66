"""The run folder object (csem.pipeline.folder.RunFolder): each file parsed once while unchanged,
parsed again after it is rewritten; the label scales read from the annotate provenance."""

from __future__ import annotations

import json
import os

from csem.data.records import write_records
from csem.pipeline.folder import RunFolder


def test_a_file_is_parsed_once_while_unchanged_and_again_after_a_rewrite(tmp_path):
    rows = [{"id": "a", "source": "s", "candidate": "c1", "judge.coherence": 3.0},
            {"id": "b", "source": "s", "candidate": "c2", "judge.coherence": 4.0}]
    write_records(rows, tmp_path / "labelled.jsonl")
    folder = RunFolder(tmp_path)
    first = folder.records("labelled.jsonl")
    first[0]["split"] = "train"  # a stage's copy: the cached rows stay as read
    assert folder.records("labelled.jsonl")[0].get("split") is None
    assert folder.rows("labelled.jsonl") is folder.rows("labelled.jsonl")
    assert folder.parses == {"labelled.jsonl": 1}
    write_records(rows[:1], tmp_path / "labelled.jsonl")
    st = os.stat(tmp_path / "labelled.jsonl")
    os.utime(tmp_path / "labelled.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert [r["id"] for r in folder.records("labelled.jsonl")] == ["a"]
    assert folder.parses == {"labelled.jsonl": 2}


def test_scales_come_from_the_annotate_provenance(tmp_path):
    write_records([{"id": "a", "source": "s", "candidate": "c"}], tmp_path / "labelled.jsonl")
    folder = RunFolder(tmp_path)
    assert folder.scales() == {} and folder.provenance() is None
    (tmp_path / "labelled.jsonl.judge.json").write_text(json.dumps({
        "judge": "fake:test", "mode": "probs", "rubrics": ["csem-100/summ-coherence-ref-free"],
        "columns": {"judge.coherence": {"rubric": "csem-100/summ-coherence-ref-free", "aspect": "coherence",
                                        "scale": [0, 100]}}}))
    assert folder.scales() == {"judge.coherence": (0.0, 100.0)}
