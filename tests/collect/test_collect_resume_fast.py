"""Collect resumes from its append-only partial log (csem.data.jsonio.JsonlLog) after a crash cut
its last line: the finished samples are reused, the cut one is generated again, and the result is
the same as an uninterrupted run (fast tier: the FAKE backend generates)."""

from __future__ import annotations

from csem.collect.sampler import GeneratorSpec, collect_candidates
from csem.llm import GenerateConfig

SOURCES = [{"id": "a", "source": "The river flooded the old mill on Monday."},
           {"id": "b", "source": "A new bakery opened on Main Street."}]


def _collect(fake_llm, partial):
    spec = GeneratorSpec(uri=fake_llm, name="fake", num_samples=3, decoding=GenerateConfig(max_tokens=12))
    return collect_candidates(SOURCES, [spec], seed=0, include_reference=False, duplicates="keep",
                              partial_path=partial, progress=False)


def test_a_crash_cut_partial_line_is_generated_again(fake_llm, tmp_path):
    full, first = _collect(fake_llm, tmp_path / "first.partial.jsonl")
    assert first.generated == 6
    partial = tmp_path / "p.partial.jsonl"
    lines = (tmp_path / "first.partial.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    partial.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2], encoding="utf-8")  # torn 5th line
    again, summary = _collect(fake_llm, partial)
    assert summary.resumed == 4 and summary.generated == 2
    assert [(r["id"], r["candidate"]) for r in again] == [(r["id"], r["candidate"]) for r in full]
    assert len(partial.read_text(encoding="utf-8").splitlines()) == 6  # the fragment is gone, no glued line
