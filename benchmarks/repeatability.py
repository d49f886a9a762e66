"""How well does a judge agree with itself? Its repeatability under a second rendering, and sqrt(r).

A student distilled from a judge cannot follow it better than the judge follows itself: if ``r`` is the
agreement of the judge's scores under two independent renderings of the same rubric, a student that
learnt everything the renderings share agrees with one of them at about ``sqrt(r)`` (the attenuation
bound; [`csem.meta.repeatability`][]). This benchmark measures ``r`` (summary-level Spearman within each
source, averaged, with its 95% interval over resampled sources; and dataset level, pooled) wherever two
renderings of one judge exist:

* **the shipped teacher pool** (``benchmarks/data/teacher_pool``, Qwen2.5-Coder-0.5B, probs): its
  relevance scores under ``csem/summ-relevance-ref-free`` against the second form ``forms/geval-relevance``
  (G-Eval's relevance wording, ``geval/summeval-relevance``) on the held-out test candidates (a second
  wording, what ``csem annotate --repeatability`` measures with a rubric's paraphrase), overall and per
  dataset; and against ``forms/hf-bf16`` (the same rubric through transformers in bf16 on a GPU: the same
  wording, other numerics);
* **SummEval's published GPT runs**: MetricEval's G-EVAL-4 and G-EVAL-3.5 ratings of all 1,600
  summaries, each run twice (test-retest: the same prompt, a second set of samples; rank-normalised,
  which leaves every rank correlation as it was), per aspect; Shen et al.'s gpt-3.5-turbo-0301 ratings of
  the 1,200 abstractive summaries under a prompt and its reworded twin (``rts`` / ``altrts``,
  ``mcq`` / ``altmcq``: a second wording), per aspect.

``quick``: the first 10 sources of each set, 200 resamples.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from benchmarks.suite import ASPECTS, POOL, fmt, log, machine, markdown_table, now
from csem.data.datasets import default_data_dir
from csem.meta.repeatability import repeatability

COL = "judge.relevance"


def _gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _first_sources(keys: list, n: int | None) -> set:
    return set(sorted(set(keys))[:n]) if n else set(keys)


def _figure(first: list, second: list, groups: list, n: int) -> dict:
    """[`repeatability`][csem.meta.repeatability.repeatability] with ``n`` resamples, rounded for the page."""
    return repeatability(first, second, groups, bootstrap=n, seed=0)


def pool(limit: int | None, n: int) -> dict:
    """The teacher pool's test candidates under the pool's rubric against each second form."""
    cands = [c for c in _gz(POOL / "candidates.jsonl.gz") if c["split"] == "test"]
    judged = {j["id"]: j["score"] for p in sorted((POOL / "judged").glob("chunk-*.jsonl.gz")) for j in _gz(p)}
    forms = {"geval-relevance": {j["id"]: j["score"] for p in sorted((POOL / "forms" / "geval-relevance")
                                                                     .glob("chunk-*.jsonl.gz")) for j in _gz(p)},
             "hf-bf16": {j["id"]: j["score"] for j in _gz(POOL / "forms" / "hf-bf16" / "judged.jsonl.gz")}}
    keep = _first_sources([c["source_id"] for c in cands], limit)
    cands = [c for c in cands if c["source_id"] in keep]
    out = {}
    for form, scores in forms.items():
        rows = [c for c in cands if judged.get(c["id"]) is not None and scores.get(c["id"]) is not None]
        res = {"all": _figure([judged[c["id"]] for c in rows], [scores[c["id"]] for c in rows],
                              [c["source_id"] for c in rows], n)}
        for ds in sorted({c["dataset"] for c in rows}):
            sub = [c for c in rows if c["dataset"] == ds]
            res[ds] = _figure([judged[c["id"]] for c in sub], [scores[c["id"]] for c in sub],
                              [c["source_id"] for c in sub], n)
        out[form] = res
    return out


def metriceval(limit: int | None, n: int) -> dict:
    """G-EVAL-4 and G-EVAL-3.5 (MetricEval), run 1 against run 2, per aspect, all 1,600 summaries."""
    rows = _jsonl(Path(default_data_dir()) / "summeval_geval_metriceval" / "summeval_geval_metriceval.jsonl")
    keep = _first_sources([r["doc_id"] for r in rows], limit)
    by = {}
    for r in rows:
        if r["doc_id"] in keep:
            by.setdefault((r["judge"], r["aspect"]), {}).setdefault((r["doc_id"], r["system_id"]), {})[r["run"]] = \
                r["score_normalized"]
    out: dict = {}
    for (judge, aspect), pairs in sorted(by.items()):
        keys = [k for k, v in pairs.items() if 1 in v and 2 in v]
        out.setdefault(judge, {})[aspect] = _figure([pairs[k][1] for k in keys], [pairs[k][2] for k in keys],
                                                    [k[0] for k in keys], n)
    return out


def shen(limit: int | None, n: int) -> dict:
    """gpt-3.5-turbo-0301 (Shen et al.) under a prompt and its reworded twin, per aspect (1,200 summaries)."""
    rows = [r for r in _jsonl(Path(default_data_dir()) / "summeval_llm_shen2023" / "summeval_llm_shen2023.jsonl")
            if r["judge"] == "gpt-3.5-turbo-0301"]
    keep = _first_sources([r["doc_id"] for r in rows], limit)
    by: dict = {}
    for r in rows:
        if r["doc_id"] in keep:
            by.setdefault((r["aspect"], r["method"]), {})[(r["doc_id"], r["system_id"])] = r["score"]
    out: dict = {}
    for a, b in (("rts", "altrts"), ("mcq", "altmcq")):
        for aspect in ASPECTS:
            x, y = by.get((aspect, a), {}), by.get((aspect, b), {})
            keys = sorted(set(x) & set(y))
            out.setdefault(f"{a} vs {b}", {})[aspect] = _figure([x[k] for k in keys], [y[k] for k in keys],
                                                                [k[0] for k in keys], n)
    return out


def run(quick: bool = False) -> dict:
    """Every repeatability figure of the module docstring."""
    limit, n = (10, 200) if quick else (None, 1000)
    log("teacher pool ...")
    res = {"pool": pool(limit, n)}
    log("SummEval: MetricEval's two runs ...")
    res["metriceval"] = metriceval(limit, n)
    log("SummEval: Shen et al.'s reworded prompts ...")
    res["shen"] = shen(limit, n)
    res.update(quick=quick, resamples=n, machine=machine(), date=now())
    return res


def _rows(name: str, figures: dict) -> list[dict]:
    out = []
    for key, f in figures.items():
        s, d = f["summary"], f["dataset"]
        out.append({"set": name, "slice": key, "r": s["r"], "95% CI": "" if not s["ci"] else
                    f"{s['ci'][0]:.2f} to {s['ci'][1]:.2f}", "sqrt(r)": s["sqrt_r"], "sources": s["n_sources"],
                    "dataset-level r": d["r"], "candidates": f["n_candidates"]})
    return out


def report(results: dict) -> str:
    """The results as Markdown: one table per data set."""
    cols = ["set", "slice", "r", "95% CI", "sqrt(r)", "sources", "dataset-level r", "candidates"]
    pool_rows = [row for form, figs in results["pool"].items()
                 for row in _rows({"geval-relevance": "pool: csem vs G-Eval relevance wording",
                                   "hf-bf16": "pool: llama.cpp vs transformers bf16"}[form], figs)]
    me = [row for judge, figs in results["metriceval"].items() for row in _rows(f"{judge}: run 1 vs run 2", figs)]
    sh = [row for pair, figs in results["shen"].items() for row in _rows(f"gpt-3.5-turbo: {pair}", figs)]
    def _rnd(rows: list[dict]) -> list[dict]:
        return [{k: (fmt(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in rows]

    return "\n".join([
        "# The judge's repeatability", "",
        f"{'Quick run (10 sources per set). ' if results.get('quick') else ''}r: summary-level Spearman of a judge's "
        "two scores of the same candidates (within each source, averaged over sources), 95% interval over "
        f"{results['resamples']:,} resampled sources; sqrt(r): the attenuation bound, about the most a student "
        f"distilled from one rendering can agree with it. {results['machine']}, {results['date']}.", "",
        "## The shipped teacher pool (Qwen2.5-Coder-0.5B, relevance, held-out test candidates)", "",
        markdown_table(_rnd(pool_rows), cols), "",
        "## SummEval, MetricEval's G-Eval runs (the same prompt run twice; 1,600 summaries)", "",
        markdown_table(_rnd(me), cols), "",
        "## SummEval, Shen et al.'s gpt-3.5-turbo-0301 (a prompt and its reworded twin; 1,200 summaries)", "",
        markdown_table(_rnd(sh), cols), ""])
