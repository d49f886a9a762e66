"""Stage ``baselines``: the teacher, the system prior, ROUGE-1, BERTScore and the lexical baselines
on the standard split (train documents 0-49, test 50-99)."""

from __future__ import annotations

from harness import log

from .common import PRIOR, TEACHER, Bench, lexical_baselines, row_of, system_prior


def stage_baselines(b: Bench, train, test) -> None:
    """The baselines' rows of ``b.data["correlations"]``."""
    from csem.baselines import bertscore, rouge

    corr = b.data["correlations"]
    corr[TEACHER] = row_of(test, "judge")
    test_p = [dict(r) for r in test]
    system_prior(train, test_p)
    corr[PRIOR] = row_of(test_p, "metric.prior")
    for r, v in zip(test, rouge(test, "rouge1")):
        r["metric.rouge1"] = v
    corr["ROUGE-1 F (11 refs, max)"] = row_of(test, lambda a: "metric.rouge1")
    b.save()
    for r, v in zip(test, bertscore(test)):
        r["metric.bertscore"] = v
    corr["BERTScore F (MiniLM-L6, 11 refs)"] = row_of(test, lambda a: "metric.bertscore")
    corr.update(lexical_baselines(train, test))
    log(f"baselines: teacher {corr[TEACHER]['average']}, prior {corr[PRIOR]['average']}")
    b.save()
