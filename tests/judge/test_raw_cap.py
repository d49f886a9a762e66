"""What is kept of a judge's answer (``judge.<aspect>.raw`` and the judgment cache) is capped: a runaway
2 MB answer is parsed whole but stored as its first and last 2,000 characters around a marker. The
answer comes from a scripted OpenAI-compatible server on loopback (``fake_openai``: a FAKE server, since
a real judge does not write 2 MB on demand) through the real ``openai`` client."""

from __future__ import annotations

import sqlite3

from csem.judge import judge_records
from csem.judge.parse import RAW_MAX_CHARS, kept_raw

from fake_openai import ScriptedServer, completion


def test_kept_raw_keeps_short_answers_whole_and_both_ends_of_long_ones():
    assert kept_raw("Score: 4") == "Score: 4" and kept_raw(None) is None
    long = "a" * 10_000 + "Score: 4"
    kept = kept_raw(long)
    assert len(kept) < RAW_MAX_CHARS + 60 and kept.endswith("Score: 4") and kept.startswith("a" * 100)
    assert f"[... {10_008 - RAW_MAX_CHARS:,} characters not kept ...]" in kept


def test_a_2mb_answer_is_parsed_whole_and_stored_capped(tmp_path):
    answer = "The summary rambles. " * 100_000 + "Score: 2"  # about 2 MB, the score at the very end
    cache = tmp_path / "cache.sqlite"
    with ScriptedServer([(200, completion(answer))]) as srv:
        rows, _ = judge_records([{"id": "r0", "source": "The mill flooded.", "candidate": "Mill flooded."}],
                                "csem/summ-coherence-ref-free", "openai:m", mode="parse", cache=cache,
                                progress=False, backend_options={"base_url": srv.url})
    row = rows[0]
    assert row["judge.coherence"] == 2.0  # read from the end of the whole answer
    assert len(row["judge.coherence.raw"]) < RAW_MAX_CHARS + 60  # the output row keeps the capped answer
    with sqlite3.connect(cache) as db:
        (raw,) = db.execute("SELECT raw FROM judgments").fetchone()
    assert len(raw) < RAW_MAX_CHARS + 60 and raw.endswith("Score: 2") and "characters not kept" in raw
    assert cache.stat().st_size < 200_000  # not the 2 MB
