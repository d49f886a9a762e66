"""Machine-translation human judgments: WMT21 TED MQM en-de and WMT23 DA+SQM en-de."""

from __future__ import annotations

from pathlib import Path

from csem.data.loaders._io import iter_jsonl, need, resolve, unique

_MQM_HINT = ("Freitag et al. 2021 MQM: https://github.com/google/wmt-mqm-human-evaluation ted/ende/; "
             "also in mt-metrics-eval's WMT21 package (https://github.com/google-research/mt-metrics-eval)")
_WMT23_HINT = ("WMT23 general task en-de human scores: mt-metrics-eval's WMT23 package "
               "(https://github.com/google-research/mt-metrics-eval), en-de.da-sqm.seg.score")


def _mt_record(row: dict, score_key: str, human_name: str) -> dict:
    v = row[score_key]
    return {"id": f"{row['system']}/{row['seg_id']}", "doc_id": str(row["seg_id"]), "system_id": row["system"],
            "source": row["source"], "candidate": row["hypothesis"], "reference": row["reference"],
            f"human.{human_name}": None if v is None else float(v),
            "lp": row.get("lp"), "seg_id": row["seg_id"]}


def load_wmt21_mqm(path: str | Path | None = None) -> list[dict]:
    """WMT21 TED talks en-de with expert MQM scores: 13 systems x 529 segments = 6877 records.

    Official data: https://github.com/google/wmt-mqm-human-evaluation (``ted/ende/``,
    Freitag et al. 2021). Default path ``default_data_dir()/wmt21_ted_mqm_ende/ted_mqm_ende.jsonl``.

    Returns:
        Records: ``id`` = ``"{system}/{seg_id}"``, ``doc_id`` = segment id (grouping by source
        segment = mt-metrics-eval's "group by item"; the talk is kept in ``talk``),
        ``system_id``, ``source`` (English), ``candidate`` (German hypothesis), ``reference``
        (``ref-A``), ``human.mqm`` (<= 0, minus the weighted error count; higher is better),
        ``errors`` and ``rater`` kept.
    """
    p = resolve(path, "wmt21_ted_mqm_ende", "ted_mqm_ende.jsonl", _MQM_HINT)
    out = []
    for line, row in iter_jsonl(p):
        need(row, ("seg_id", "system", "source", "hypothesis", "reference", "mqm_score"), p, line)
        rec = _mt_record(row, "mqm_score", "mqm")
        rec.update(talk=row.get("doc"), rater=row.get("rater"), errors=row.get("errors"))
        out.append(rec)
    return unique(out, p)


def load_wmt23_da(path: str | Path | None = None) -> list[dict]:
    """WMT23 general-task en-de with DA+SQM segment scores (0-100): 12 systems x 549 segments = 6588.

    Official data: mt-metrics-eval's WMT23 package (https://github.com/google-research/mt-metrics-eval,
    ``wmt23/human-scores/en-de.da-sqm.seg.score``). Default path
    ``default_data_dir()/wmt23_da_sqm_ende/wmt23_da_sqm_ende.jsonl``.

    Returns:
        Records like [`load_wmt21_mqm`][csem.data.loaders.mt.load_wmt21_mqm] with ``human.da`` in [0, 100] (higher is better).
    """
    p = resolve(path, "wmt23_da_sqm_ende", "wmt23_da_sqm_ende.jsonl", _WMT23_HINT)
    out = []
    for line, row in iter_jsonl(p):
        need(row, ("seg_id", "system", "source", "hypothesis", "reference", "score"), p, line)
        out.append(_mt_record(row, "score", "da"))
    return unique(out, p)
