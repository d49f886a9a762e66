"""Summarisation sets besides SummEval: Newsroom, REALSumm, QAGS; and MetricEval's G-Eval runs on SummEval."""

from __future__ import annotations

from pathlib import Path

from csem.data.loaders._io import DatasetError, iter_jsonl, need, resolve, unique
from csem.data.loaders.summeval import load_summeval
from csem.errors import InputError

NEWSROOM_ASPECTS = ("coherence", "fluency", "informativeness", "relevance")

_NEWSROOM_HINT = ("Newsroom human evaluation (Grusky et al., NAACL 2018): https://github.com/lil-lab/newsroom "
                  "humaneval/newsroom-human-eval.csv; BARTScore's SUM/Newsroom/data.pkl (https://github.com/neulab/BARTScore)")
_REALSUMM_HINT = ("REALSumm (Bhandari et al., EMNLP 2020): https://github.com/neulab/REALSumm; "
                  "BARTScore's SUM/REALSumm/data.pkl")
_QAGS_HINT = "QAGS (Wang et al., ACL 2020): https://github.com/W4ngatang/qags data/mturk_{cnndm,xsum}.jsonl"
_METRICEVAL_HINT = ("MetricEval (Xiao et al., EMNLP 2023): https://github.com/isle-dev/MetricEval "
                    "metric_eval/data/metric_scores_long*.csv")


def load_newsroom(path: str | Path | None = None, *, tokenized: bool = False) -> list[dict]:
    """Newsroom human evaluation: 60 articles x 7 systems = 420 summaries, 3 crowd workers, 1-5.

    Official data: https://github.com/lil-lab/newsroom (``humaneval/newsroom-human-eval.csv``);
    texts as in BARTScore's ``SUM/Newsroom/data.pkl`` (https://github.com/neulab/BARTScore).
    Default path ``default_data_dir()/newsroom/newsroom.jsonl``.

    Args:
        tokenized: use BARTScore's tokenised article/summary instead of the released text.

    Returns:
        Records: ``id`` = ``"{doc_id}/{system_id}"``, ``source``, ``candidate``, ``reference`` (one
        tokenised reference summary), ``human.coherence|fluency|informativeness|relevance``
        (worker mean, 1-5); ``scores_raw`` kept. Newsroom's "relevance" means consistency with
        the article (see the folder README).
    """
    p = resolve(path, "newsroom", "newsroom.jsonl", _NEWSROOM_HINT)
    out = []
    for line, row in iter_jsonl(p):
        need(row, ("doc_id", "system_id", "source", "summary", "reference", "scores_mean"), p, line)
        rec = {"id": f"{row['doc_id']}/{row['system_id']}", "doc_id": str(row["doc_id"]),
               "system_id": row["system_id"],
               "source": row["source_tokenized"] if tokenized else row["source"],
               "candidate": row["summary_tokenized"] if tokenized else row["summary"],
               "reference": row["reference"], "scores_raw": row.get("scores_raw"),
               "source_tokenized": row.get("source_tokenized"), "summary_tokenized": row.get("summary_tokenized")}
        for a, v in row["scores_mean"].items():
            rec[f"human.{a}"] = None if v is None else float(v)
        out.append(rec)
    return unique(out, p)


def load_realsumm(path: str | Path | None = None) -> list[dict]:
    """REALSumm: 100 CNN/DM documents x 24 systems = 2400 summaries with LitePyramid recall (0-1).

    Official data: https://github.com/neulab/REALSumm (scores), texts from BARTScore's
    ``SUM/REALSumm/data.pkl``. Default path ``default_data_dir()/realsumm/realsumm.jsonl``.

    Returns:
        Records with ``source`` (tokenised article), ``candidate``, ``reference`` (CNN/DM
        highlights), ``human.litepyramid_recall`` in [0, 1].
    """
    p = resolve(path, "realsumm", "realsumm.jsonl", _REALSUMM_HINT)
    out = []
    for line, row in iter_jsonl(p):
        need(row, ("doc_id", "system_id", "source", "summary", "reference", "litepyramid_recall"), p, line)
        v = row["litepyramid_recall"]
        out.append({"id": f"{row['doc_id']}/{row['system_id']}", "doc_id": str(row["doc_id"]),
                    "system_id": row["system_id"], "source": row["source"], "candidate": row["summary"],
                    "reference": row["reference"], "human.litepyramid_recall": None if v is None else float(v)})
    return unique(out, p)


def load_qags(path: str | Path | None = None, *, subset: str | None = None, tokenized: bool = False) -> list[dict]:
    """QAGS factual-consistency judgments: 235 CNN/DM (QAGS-C) + 239 XSum (QAGS-X) summaries.

    Official data: https://github.com/W4ngatang/qags ``data/mturk_{cnndm,xsum}.jsonl``.
    Default path ``default_data_dir()/qags/qags.jsonl``. One summary per article, so only
    dataset-level correlation is meaningful (the convention of UniEval/BARTScore).

    Args:
        subset: ``cnndm`` | ``xsum`` | None (both).
        tokenized: use UniEval's tokenised texts.

    Returns:
        Records ``id`` = ``"{dataset}/{item_id}"``, ``doc_id`` = ``id``, ``system_id`` = dataset
        (``qags-cnndm`` Bottom-Up, ``qags-xsum`` BART), ``reference`` = None (reference-free set),
        ``human.consistency`` in [0, 1] (mean of per-sentence majority labels), ``sentences`` kept.
    """
    if subset not in (None, "cnndm", "xsum"):
        raise InputError(f"subset must be 'cnndm', 'xsum' or None, got {subset!r}")
    p = resolve(path, "qags", "qags.jsonl", _QAGS_HINT)
    out = []
    for line, row in iter_jsonl(p):
        need(row, ("dataset", "item_id", "source", "summary", "consistency"), p, line)
        if subset and row["dataset"] != f"qags-{subset}":
            continue
        rid = f"{row['dataset']}/{row['item_id']}"
        v = row["consistency"]
        out.append({"id": rid, "doc_id": rid, "system_id": row["dataset"],
                    "source": row["source_tokenized"] if tokenized else row["source"],
                    "candidate": row["summary_tokenized"] if tokenized else row["summary"],
                    "reference": None, "human.consistency": None if v is None else float(v),
                    "sentences": row.get("sentences")})
    return unique(out, p)


def load_summeval_geval_metriceval(
    path: str | Path | None = None,
    *,
    judge: str = "G-EVAL-4",
    run: int = 1,
    value: str = "score_normalized",
    summeval_path: str | Path | None = None,
) -> list[dict]:
    """MetricEval's (Xiao et al., EMNLP 2023) G-Eval-style GPT ratings of all 1600 SummEval summaries.

    Rank-normalised only (``normalize2`` = scale(qnorm(.001 + .998 ecdf))): rank correlations
    equal those of the raw scores, the 1-5 scale is lost. Source:
    https://github.com/isle-dev/MetricEval ``metric_eval/data/metric_scores_long*.csv``.

    Args:
        judge: ``G-EVAL-4`` or ``G-EVAL-3.5``; run: 1 or 2; value: ``score_normalized`` or ``ecdf``.
        summeval_path: SummEval for the join; default the ``summeval`` folder beside ``path``.

    Returns:
        1600 records of [`csem.data.loaders.summeval.load_summeval`][] plus ``judge.<aspect>``.
    """
    if value not in ("score_normalized", "ecdf"):
        raise InputError(f"value must be 'score_normalized' or 'ecdf', got {value!r}")
    p = resolve(path, "summeval_geval_metriceval", "summeval_geval_metriceval.jsonl", _METRICEVAL_HINT)
    if summeval_path is None:
        sib = p.parent.parent / "summeval"
        summeval_path = sib if (sib / "summeval.jsonl").exists() else None
    by_id = {r["id"]: dict(r, judge_name=judge, judge_run=run) for r in load_summeval(summeval_path)}
    found: set[tuple[str, int]] = set()
    for line, row in iter_jsonl(p):
        need(row, ("doc_id", "system_id", "aspect", "judge", "run", value), p, line)
        found.add((row["judge"], row["run"]))
        if row["judge"] != judge or row["run"] != run:
            continue
        key = f"{row['doc_id']}/{row['system_id']}"
        if key not in by_id:
            raise DatasetError(f"{p}, line {line}: ({row['doc_id']}, {row['system_id']}) is not a SummEval row")
        by_id[key][f"judge.{row['aspect']}"] = None if row[value] is None else float(row[value])
    if (judge, run) not in found:
        raise InputError(f"{p}: no ratings for judge={judge!r}, run={run}; available: {sorted(found)}")
    return list(by_id.values())
