"""Topical-Chat (USR) human judgments and Chiang & Lee's (2023) published ChatGPT ratings of it."""

from __future__ import annotations

from pathlib import Path

from csem.data.loaders._io import DatasetError, iter_jsonl, need, resolve, unique
from csem.errors import InputError

TOPICAL_CHAT_ASPECTS = ("understandability", "naturalness", "coherence", "engagingness", "groundedness", "overall")
CHIANG_ASPECTS = ("naturalness", "coherence", "engagingness", "groundedness")
CHIANG_MODES = ("geval", "geval_no_auto_cot", "rate_explain", "rate_explain_auto_cot", "analyze_rate",
                "analyze_rate_auto_cot", "llm_eval_no_cot")

_TC_HINT = ("USR Topical-Chat judgments (Mehri & Eskenazi, ACL 2020): http://shikib.com/tc_usr_data.json, "
            "or UniEval's reproduce/data/dialogue/topical_chat.json (https://github.com/maszhongming/UniEval)")
_CHIANG_HINT = ("Chiang & Lee 2023: https://github.com/d223302/A-Closer-Look-To-LLM-Evaluation "
                "results/topical_chat/*.json")


def load_topical_chat(path: str | Path | None = None) -> list[dict]:
    """Topical-Chat USR set: 60 dialogue contexts x 6 responses = 360 records, 3 annotators each.

    Official data: USR (Mehri & Eskenazi, ACL 2020) ``tc_usr_data.json`` from
    http://shikib.com/tc_usr_data.json; UniEval's mean-score copy
    ``reproduce/data/dialogue/topical_chat.json`` in https://github.com/maszhongming/UniEval.
    Default path: ``default_data_dir()/topical_chat/topical_chat.jsonl``.

    Returns:
        Records with ``id`` = ``"{context_id}/{system_id}"``, ``doc_id`` = the context id
        (the unit of G-Eval's "turn-level" grouping), ``system_id`` (6 response sources),
        ``source`` = dialogue history (turns separated by newlines), ``candidate`` = response,
        ``reference`` = None (the set is used reference-free), ``knowledge`` (the fact the
        response should use), ``human.<aspect>`` = mean of 3 annotators for understandability
        (0-1), naturalness, coherence, engagingness (1-3), groundedness (0-1), overall (1-5);
        ``scores_raw`` and ``annotators`` kept.

    Raises:
        FileNotFoundError, DatasetError: missing file or field (file and line named).
    """
    p = resolve(path, "topical_chat", "topical_chat.jsonl", _TC_HINT)
    out = []
    for line, row in iter_jsonl(p):
        need(row, ("context_id", "system_id", "dialogue_history", "response", "scores_mean"), p, line)
        rec = {"id": f"{row['context_id']}/{row['system_id']}", "doc_id": str(row["context_id"]),
               "system_id": row["system_id"], "source": row["dialogue_history"], "candidate": row["response"],
               "reference": None, "knowledge": row.get("knowledge"),
               "scores_raw": row.get("scores_raw"), "annotators": row.get("annotators")}
        for a, v in row["scores_mean"].items():
            rec[f"human.{a}"] = None if v is None else float(v)
        out.append(rec)
    return unique(out, p)


def load_topical_chat_llm_ratings(
    path: str | Path | None = None,
    *,
    mode: str = "geval",
    topical_chat_path: str | Path | None = None,
) -> list[dict]:
    """Chiang & Lee (Findings of EMNLP 2023) ChatGPT ratings of Topical-Chat joined onto the USR set.

    ChatGPT (gpt-3.5-turbo-0613) rated naturalness, coherence, engagingness (1-3) and
    groundedness (0-1) with 7 prompt ``mode`` s (`CHIANG_MODES`), 20 samples each; the
    score is the mean of the parsed samples. Source:
    https://github.com/d223302/A-Closer-Look-To-LLM-Evaluation ``results/topical_chat/``.

    Args:
        path: folder with ``topical_chat_llm_chiang2023_<aspect>.jsonl``; default
            ``default_data_dir()/topical_chat_llm_chiang2023``.
        mode: prompt variant.
        topical_chat_path: the human set; default the ``topical_chat`` folder beside ``path``.

    Returns:
        360 records of [`load_topical_chat`][csem.data.loaders.dialogue.load_topical_chat] plus ``judge.<aspect>`` (None where the authors'
        run skipped the item or no sample parsed), ``judge_responses`` ({aspect: 20 raw
        responses}) and ``judge_n_parsed`` ({aspect: int}).

    Raises:
        ValueError: unknown mode. FileNotFoundError / DatasetError: missing file, or a rating
        that does not join to the human set.
    """
    if mode not in CHIANG_MODES:
        raise InputError(f"unknown mode '{mode}'; choose from {CHIANG_MODES}")
    folder = resolve(path, "topical_chat_llm_chiang2023", "", _CHIANG_HINT)
    if folder.is_file():
        folder = folder.parent
    if topical_chat_path is None:
        sib = folder.parent / "topical_chat"
        topical_chat_path = sib if sib.is_dir() else None
    base = load_topical_chat(topical_chat_path)
    by_id = {r["id"]: dict(r, judge_name="gpt-3.5-turbo-0613", judge_method=mode, judge_responses={},
                           judge_n_parsed={}) for r in base}
    for rec in by_id.values():
        for a in CHIANG_ASPECTS:
            rec[f"judge.{a}"] = None
    for aspect in CHIANG_ASPECTS:
        f = folder / f"topical_chat_llm_chiang2023_{aspect}.jsonl"
        if not f.exists():
            raise FileNotFoundError(f"{f}: no such file. Get it from: {_CHIANG_HINT}")
        for line, row in iter_jsonl(f):
            if row.get("mode") != mode:
                continue
            need(row, ("context_id", "system_id", "aspect", "score", "responses"), f, line)
            key = f"{row['context_id']}/{row['system_id']}"
            if key not in by_id:
                raise DatasetError(f"{f}, line {line}: ({row['context_id']}, {row['system_id']}) "
                                   "is not a Topical-Chat row")
            rec = by_id[key]
            rec[f"judge.{aspect}"] = None if row["score"] is None else float(row["score"])
            rec["judge_responses"][aspect] = row["responses"]
            rec["judge_n_parsed"][aspect] = row.get("n_parsed")
    return list(by_id.values())
