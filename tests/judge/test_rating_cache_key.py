"""csem.judge.rating_cache_key: the key under which judge_records stores a rating (FAKE backend: tests/fake_llm.py)."""

from csem.judge import JudgmentCache, judge_records, rating_cache_key
from csem.llm import get_model


def test_rating_cache_key_finds_what_judge_records_stored(tmp_path, fake_llm):
    model = get_model(fake_llm)
    recs = [{"id": "a", "source": "An article about rain.", "candidate": "Rain fell."},
            {"id": "b", "source": "An article about rain.", "candidate": "It was sunny."}]
    cache = tmp_path / "judge.sqlite"
    for mode, n in (("probs", 20), ("sample", 3)):
        out, _ = judge_records(recs, "geval/summeval-coherence", model, mode=mode, n=n, cache=cache, progress=False)
        with JudgmentCache(cache) as store:
            rows = [store.get(rating_cache_key(model.id, "geval/summeval-coherence", r, mode=mode, n=n)) for r in recs]
        assert all(row is not None for row in rows)
        if mode == "probs":
            assert [round(row["score"], 6) for row in rows] == [round(o["judge.coherence"], 6) for o in out]
    with JudgmentCache(cache) as store:  # another sampling setting is another key; in probs mode n plays no part
        assert store.get(rating_cache_key(model.id, "geval/summeval-coherence", recs[0], mode="sample", n=4)) is None
        assert store.get(rating_cache_key(model.id, "geval/summeval-coherence", recs[0], mode="probs", n=4)) is not None
