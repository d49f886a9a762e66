"""SummEval (Fabbri et al., TACL 2021) and the published LLM ratings of SummEval (Shen et al. 2023).

Records follow [`csem.data.records`][]; see [`csem.data.datasets`][] for the registry of every
dataset and where each one comes from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from csem.data.loaders._io import DatasetError, iter_jsonl, need, resolve
from csem.errors import InputError

SUMMEVAL_ASPECTS = ("coherence", "consistency", "fluency", "relevance")
SUMMEVAL_SYSTEMS = ("M0", "M1", "M2", "M5", "M8", "M9", "M10", "M11", "M12", "M13", "M14", "M15",
                    "M17", "M20", "M22", "M23")


def _mean_annotations(annotations: list[dict] | None, aspect: str) -> float | None:
    if not annotations:
        return None
    vals = [a[aspect] for a in annotations if a.get(aspect) is not None]
    return sum(vals) / len(vals) if vals else None


# ----------------------------------------------------------------------------------------------
# SummEval
# ----------------------------------------------------------------------------------------------

_SUMMEVAL_HINT = ("SummEval (Fabbri et al., TACL 2021): get model_annotations.aligned.paired.jsonl from "
                  "https://github.com/Yale-LILY/SummEval (README, 'Human annotations'; pair it with the "
                  "CNN/DM stories using the repository's data_processing/pair_data.py)")


def load_summeval(
    path: str | Path | None = None,
    *,
    source_field: str = "source",
    target: str = "expert",
) -> list[dict]:
    """Load SummEval (100 CNN/DM test articles x 16 systems = 1600 summaries) as csem records.

    Two formats are accepted, detected from the first row:

    * the project's converted ``summeval.jsonl`` (``../shared/data/summeval``; rebuilt from
      BARTScore's ``SUM/SummEval/data.pkl``, MetricEval's raw expert scores and the SummEval
      paired records; see that folder's README);
    * SummEval's official release ``model_annotations.aligned.paired.jsonl`` (rows with ``id``,
      ``model_id``, ``text``, ``decoded``, ``references``, ``expert_annotations``,
      ``turker_annotations``), a single file or a folder of such ``*.jsonl`` files (e.g.
      ``summeval/original/llm_summeval/``, 12 systems x 100 rows). Official download:
      https://github.com/Yale-LILY/SummEval (``model_annotations.aligned.paired.jsonl``, from
      the Google Cloud bucket linked in its README).

    Args:
        path: file or folder; default ``default_data_dir()/summeval/summeval.jsonl``.
        source_field: which article goes to ``source``: ``source`` (untokenised, SummEval's
            ``text``) or ``source_tokenized`` (PTB-tokenised, G-Eval's ``source``; converted
            format only).
        target: which human mean goes to ``human.<aspect>``: ``expert`` (mean of 3 experts, the
            standard target, = G-Eval's ``scores``) or ``turker`` (mean of 5 MTurk workers; None
            for the extractive systems M0, M1, M2, M5, whose crowd scores are not in the
            converted file).

    Returns:
        One record per (document, system), in file order: ``id`` = ``"{doc_id}/{system_id}"``,
        ``doc_id``, ``system_id``, ``source``, ``candidate`` (converted format: the tokenised,
        sentence-cased ``summary`` = G-Eval's ``system_output``; official format: ``decoded``),
        ``reference`` (list of 11 untokenised references, ``[0]`` the CNN/DM highlight),
        ``human.coherence|consistency|fluency|relevance`` (1-5, float), and kept as is:
        ``expert_annotations`` (3 dicts), ``turker_annotations`` (5 dicts or None),
        ``source_tokenized``, ``references_tokenized``, ``summary_raw`` (SummEval's ``decoded``),
        ``filepath``; plus ``human_expert_mean`` / ``human_turker_mean`` dicts for both targets.

    Raises:
        FileNotFoundError: nothing at ``path`` (message says where to download SummEval).
        DatasetError: a row lacks a field, the format is not recognised, ``(doc, system)`` repeats.
        ValueError: unknown ``source_field`` or ``target``.
    """
    if source_field not in ("source", "source_tokenized"):
        raise InputError(f"source_field must be 'source' or 'source_tokenized', got {source_field!r}")
    if target not in ("expert", "turker"):
        raise InputError(f"target must be 'expert' or 'turker', got {target!r}")
    p = resolve(path, "summeval", "summeval.jsonl", _SUMMEVAL_HINT)
    files = sorted(p.glob("*.jsonl"), key=_system_sort_key) if p.is_dir() else [p]
    if not files:
        raise DatasetError(f"{p}: folder holds no *.jsonl file in SummEval format")
    out: list[dict] = []
    seen: dict[str, tuple[Path, int]] = {}
    for f in files:
        for line, row in iter_jsonl(f):
            if "decoded" in row and "text" in row:
                rec = _from_official(row, f, line, source_field)
            elif "expert_mean" in row:
                rec = _from_converted(row, f, line, source_field)
            else:
                raise DatasetError(f"{f}, line {line}: not a SummEval row (neither the converted format with "
                                   f"'expert_mean' nor the official one with 'text'/'decoded'); "
                                   f"fields present: {sorted(row)}")
            for aspect in SUMMEVAL_ASPECTS:
                expert = _mean_annotations(rec["expert_annotations"], aspect)
                if rec["human_expert_mean"].get(aspect) is None:
                    rec["human_expert_mean"][aspect] = expert
                rec["human_turker_mean"][aspect] = _mean_annotations(rec["turker_annotations"], aspect)
                src = rec["human_expert_mean"] if target == "expert" else rec["human_turker_mean"]
                rec[f"human.{aspect}"] = src.get(aspect)
            if rec["id"] in seen:
                pf, pl = seen[rec["id"]]
                raise DatasetError(f"{f}, line {line}: (doc, system) '{rec['id']}' repeats {pf}, line {pl}")
            seen[rec["id"]] = (f, line)
            out.append(rec)
    return out


def _system_sort_key(p: Path) -> tuple:
    head = p.name.split("_")[0]
    return (0, int(head[1:])) if head[:1] == "M" and head[1:].isdigit() else (1, p.name)


def _from_converted(row: dict, path: Path, line: int, source_field: str) -> dict:
    need(row, ("doc_id", "system_id", "source", "summary", "references", "expert_mean", "expert_annotations"),
          path, line)
    if source_field not in row:
        raise DatasetError(f"{path}, line {line}: field '{source_field}' missing")
    rec: dict[str, Any] = {
        "id": f"{row['doc_id']}/{row['system_id']}",
        "doc_id": str(row["doc_id"]),
        "system_id": str(row["system_id"]),
        "source": row[source_field],
        "candidate": row["summary"],
        "reference": list(row["references"]),
        "human_expert_mean": dict(row["expert_mean"]),
        "human_turker_mean": {},
    }
    for k, v in row.items():
        if k not in ("summary", "references", "expert_mean", "doc_id", "system_id") and k not in rec:
            rec[k] = v
    rec.setdefault("source_tokenized", row.get("source_tokenized"))
    rec.setdefault("turker_annotations", None)
    return rec


def _from_official(row: dict, path: Path, line: int, source_field: str) -> dict:
    need(row, ("id", "model_id", "text", "decoded", "references", "expert_annotations"), path, line)
    if source_field != "source":
        raise DatasetError(f"{path}: the official SummEval format has no tokenised article; "
                           f"use source_field='source'")
    rec: dict[str, Any] = {
        "id": f"{row['id']}/{row['model_id']}",
        "doc_id": str(row["id"]),
        "system_id": str(row["model_id"]),
        "source": row["text"],
        "candidate": row["decoded"],
        "reference": list(row["references"]),
        "human_expert_mean": {},
        "human_turker_mean": {},
        "expert_annotations": row["expert_annotations"],
        "turker_annotations": row.get("turker_annotations"),
        "summary_raw": row["decoded"],
        "filepath": row.get("filepath"),
    }
    for k, v in row.items():
        if k not in ("id", "model_id", "text", "decoded", "references") and k not in rec:
            rec[k] = v
    return rec


# ----------------------------------------------------------------------------------------------
# Published LLM ratings of SummEval (Shen et al. 2023)
# ----------------------------------------------------------------------------------------------

_SHEN_HINT = ("Shen et al. 2023 ratings: https://github.com/DAMO-NLP-SG/LLM_summeval "
              "(eval_model_generations/), converted by ../shared/data/summeval_llm_shen2023/convert_shen2023.py")


def load_summeval_llm_ratings(
    path: str | Path | None = None,
    *,
    judge: str = "gpt-4-0314",
    method: str = "rts",
    score_field: str = "score",
    summeval_path: str | Path | None = None,
) -> list[dict]:
    """Published LLM-judge ratings of SummEval (Shen et al., Findings of EMNLP 2023) joined onto SummEval.

    The ratings cover the 1200 abstractive summaries (100 documents x systems M8-M23); judges
    ``gpt-4-0314`` (method ``rts``), ``gpt-3.5-turbo-0301`` (``rts``, ``mcq``, ``stareval``,
    ``altrts``, ``altmcq``), ``llama-2-{7b,13b,70b}-chat-hf`` (``rts``). Source:
    https://github.com/DAMO-NLP-SG/LLM_summeval ``eval_model_generations/``; the project's
    converted file is ``summeval_llm_shen2023/summeval_llm_shen2023.jsonl``.

    Args:
        path: the converted JSONL or its folder; default ``default_data_dir()/summeval_llm_shen2023``.
        judge, method: which (judge, prompt) run to load.
        score_field: ``score`` (this project's parser, the folder README's table) or
            ``score_authors_rule`` (the authors' extraction rules re-implemented).
        summeval_path: SummEval file/folder for [`load_summeval`][csem.data.loaders.summeval.load_summeval]; default: the ``summeval``
            folder beside ``path``'s folder, else ``default_data_dir()/summeval``.

    Returns:
        1200 records (one per rated (doc, system), SummEval order) with every field of
        [`load_summeval`][csem.data.loaders.summeval.load_summeval] (human scores, references, annotations) plus
        ``judge.<aspect>`` (float 1-5, halves possible; **None** where the response states no
        score, never 0), ``judge_responses`` ({aspect: list of raw responses, last one scored}),
        ``judge_score_rule`` ({aspect: parser rule that fired, ``unparsed`` when None}),
        ``judge_name`` and ``judge_method``.

    Raises:
        FileNotFoundError: a file is missing. ValueError: no rows for (judge, method), listing
        the available pairs, or unknown ``score_field``. DatasetError: a rating does not join
        to SummEval or repeats.
    """
    if score_field not in ("score", "score_authors_rule"):
        raise InputError(f"score_field must be 'score' or 'score_authors_rule', got {score_field!r}")
    p = resolve(path, "summeval_llm_shen2023", "summeval_llm_shen2023.jsonl", _SHEN_HINT)
    if summeval_path is None:
        sibling = p.parent.parent / "summeval"
        summeval_path = sibling if (sibling / "summeval.jsonl").exists() else None
    base = {r["id"]: r for r in load_summeval(summeval_path)}
    rated: dict[str, dict] = {}
    available: set[tuple[str, str]] = set()
    for line, row in iter_jsonl(p):
        need(row, ("doc_id", "system_id", "aspect", "judge", "method", score_field, "responses"), p, line)
        available.add((row["judge"], row["method"]))
        if row["judge"] != judge or row["method"] != method:
            continue
        key = f"{row['doc_id']}/{row['system_id']}"
        if key not in base:
            raise DatasetError(f"{p}, line {line}: ({row['doc_id']}, {row['system_id']}) is not a SummEval row")
        rec = rated.get(key)
        if rec is None:
            rec = rated[key] = dict(base[key], judge_name=judge, judge_method=method,
                                    judge_responses={}, judge_score_rule={})
        aspect = row["aspect"]
        if f"judge.{aspect}" in rec:
            raise DatasetError(f"{p}, line {line}: second rating of {key} on {aspect} by {judge}/{method}")
        score = row[score_field]
        rec[f"judge.{aspect}"] = None if score is None else float(score)
        rec["judge_responses"][aspect] = list(row["responses"])
        rule = row.get("score_rule" if score_field == "score" else "authors_rule")
        rec["judge_score_rule"][aspect] = rule
    if not rated:
        raise InputError(f"{p}: no ratings for judge={judge!r}, method={method!r}; available: "
                         f"{sorted(available)}")
    order = {k: i for i, k in enumerate(base)}
    return sorted(rated.values(), key=lambda r: order[r["id"]])
