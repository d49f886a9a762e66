"""Baseline adapters: agree with the libraries they wrap, handle several references, fail clearly."""

from __future__ import annotations

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from csem.baselines import BASELINES, bertscore, bleu, chrf, compute_baselines, rouge

RECS = [
    {"id": "a", "candidate": "the cat sat on the mat", "reference": ["a cat sat on a mat", "the cat is on the mat"]},
    {"id": "b", "candidate": "dogs bark loudly at night", "reference": "the dog barks at night"},
    {"id": "c", "candidate": "completely unrelated words here", "reference": ["the dog barks at night"]},
]


def test_rouge_hand_computed():
    # "the cat sat on the mat" vs "the cat is on the mat": unigram matches the,cat,on,the,mat = 5 of 6 each side
    r = rouge([{"candidate": "the cat sat on the mat", "reference": "the cat is on the mat"}], "rouge1")
    assert r == [pytest.approx(5 / 6)]
    # bigrams: cand {the cat, cat sat, sat on, on the, the mat}; ref {the cat, cat is, is on, on the, the mat}
    r2 = rouge([{"candidate": "the cat sat on the mat", "reference": "the cat is on the mat"}], "rouge2")
    assert r2 == [pytest.approx(3 / 5)]


def test_rouge_multi_reference_max_and_mean():
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    per_ref = [scorer.score(ref, RECS[0]["candidate"])["rougeL"].fmeasure for ref in RECS[0]["reference"]]
    assert rouge(RECS[:1], "rougeL") == [pytest.approx(max(per_ref))]
    assert rouge(RECS[:1], "rougeL", reduce="mean") == [pytest.approx(sum(per_ref) / 2)]
    assert max(per_ref) != min(per_ref)  # the two reductions really differ here
    multi = scorer.score_multi(RECS[0]["reference"], RECS[0]["candidate"])["rougeL"].fmeasure
    assert rouge(RECS[:1], "rougeL") == [pytest.approx(multi)]
    recall = rouge(RECS, "rouge1", measure="r")
    assert recall[2] == 0.0 and 0 < recall[1] < 1


def test_bleu_chrf_match_sacrebleu():
    b = bleu(RECS)
    c = chrf(RECS)
    for rec, bv, cv in zip(RECS, b, c):
        refs = rec["reference"] if isinstance(rec["reference"], list) else [rec["reference"]]
        assert bv == pytest.approx(sacrebleu.sentence_bleu(rec["candidate"], refs).score, abs=1e-9)
        assert cv == pytest.approx(sacrebleu.sentence_chrf(rec["candidate"], refs).score)
    assert b[0] > b[2] and c[0] > c[2]


def test_missing_reference_names_record():
    with pytest.raises(ValueError, match="record 'x' has no 'reference'"):
        rouge([{"id": "x", "candidate": "a b", "reference": None}])
    with pytest.raises(ValueError, match="unknown ROUGE variant"):
        rouge(RECS, "rouge9")
    with pytest.raises(ValueError, match="unknown baseline"):
        compute_baselines([dict(r) for r in RECS], ["meteor"])


@pytest.mark.slow  # loads MiniLM
def test_bertscore_offline_minilm():
    scores = bertscore(RECS)
    assert len(scores) == 3
    # a near-paraphrase scores above an unrelated candidate against the same reference
    assert scores[1] > scores[2]
    assert all(0.0 < s <= 1.0 for s in scores)
    # several references: the score is the best single-reference F (bert-score's multi-ref rule)
    singles = [bertscore([{"candidate": RECS[0]["candidate"], "reference": ref}])[0] for ref in RECS[0]["reference"]]
    assert scores[0] == pytest.approx(max(singles), abs=1e-5)


def test_compute_baselines_writes_columns():
    recs = [dict(r) for r in RECS]
    cols = compute_baselines(recs, ["rouge1", "chrf"])
    assert cols == ["metric.rouge1", "metric.chrf"]
    assert all(isinstance(r["metric.rouge1"], float) for r in recs)
    assert set(BASELINES) == {"rouge1", "rouge2", "rougeL", "rougeLsum", "bleu", "chrf", "bertscore"}
    mean = [dict(r) for r in RECS]
    compute_baselines(mean, ["rougeL"], multi_ref="mean")
    assert mean[0]["metric.rougeL"] == pytest.approx(rouge(RECS[:1], "rougeL", reduce="mean")[0])
    assert mean[0]["metric.rougeL"] < rouge(RECS[:1], "rougeL")[0]  # mean of two unequal scores < max


def test_rougeLsum_splits_sentences():
    from csem.baselines.rouge import split_sentences

    assert split_sentences("One here. Two there! Three?") == "One here.\nTwo there!\nThree?"
    assert split_sentences("kept\nas is. really") == "kept\nas is. really"
    # union LCS over sentences: order of sentences does not matter for rougeLsum, it does for rougeL
    rec = [{"candidate": "the dog barks. the cat sleeps.", "reference": "the cat sleeps. the dog barks."}]
    assert rouge(rec, "rougeLsum") == [pytest.approx(1.0)]
    assert rouge(rec, "rougeL")[0] < 0.99
