"""How many real candidates does the acceptability gate lower or floor, and does it still catch degenerate texts?

SummEval's 1,600 system summaries (100 articles x 16 systems, CSEM_DATA=/work/shared/data): the gate is fitted
on the summaries of 50 articles (``fit_gate``, ref-free, aspects coherence and relevance) and applied to the
other 50 articles' summaries (held-out) and to its own training summaries. For each threshold rule
(``quantile`` of the accepted texts' P(accepted), ``rejected_quantile`` of the rejected ones'; the lower wins):

* ``gated``: real summaries with g < 1 (their score lowered); ``floored``: g < 0.8, where even a top score
  (s = 1) ends below the scale's minimum (g s + (1 - g) REJECT < 0);
* of those, how many the experts rate above their median (human.<aspect>, the judge here);
* ``degenerate caught``: the rule-made degenerate texts of the held-out articles (few words, one word x 100,
  cut mid-sentence, words shuffled, another article's summary; relevance also the source copied) with g < 0.8.

Run: CSEM_DATA=/work/shared/data python research/acceptability_gate/measure.py [--rules 0.05:0.999999,0.01:0.99]
Out: research/acceptability_gate/results.json (printed as a table too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import torch

from csem.data.datasets import load_summeval
from csem.model.acceptability import AcceptabilityGate, contexts_of, fit_gate, gate_examples, gate_size
from csem.model.features import pair_features

ASPECTS = ["coherence", "relevance"]
FLOOR = 0.8


def records() -> tuple[list[dict], list[dict]]:
    by_doc: dict[str, list[dict]] = {}
    for r in load_summeval(Path(os.environ.get("CSEM_DATA", "/work/shared/data")) / "summeval"):
        by_doc.setdefault(r["doc_id"], []).append(r)
    docs = list(by_doc)
    rows = [{"id": f"{d}-{r['system_id']}", "doc_id": d, "system_id": r["system_id"], "source": r["source"],
             "candidate": r["candidate"], **{k: v for k, v in r.items() if k.startswith("human.")}}
            for d in docs for r in by_doc[d]]
    train_docs = set(docs[:50])
    return [r for r in rows if r["doc_id"] in train_docs], [r for r in rows if r["doc_id"] not in train_docs]


def factors(gate: AcceptabilityGate, rows: list[dict]) -> torch.Tensor:
    x = torch.tensor([pair_features("lexical", r["candidate"], contexts_of(r, "ref-free")) for r in rows])
    with torch.no_grad():
        return gate.factor(x)


def count(g: torch.Tensor, rows: list[dict], k: int, aspect: str, median: float) -> dict:
    col = f"human.{aspect}"
    gated = [i for i in range(len(rows)) if g[i, k] < 1]
    floored = [i for i in range(len(rows)) if g[i, k] < FLOOR]
    above = lambda idx: sum(1 for i in idx if rows[i].get(col) is not None and rows[i][col] > median)  # noqa: E731
    return {"candidates": len(rows), "gated": len(gated), "floored": len(floored), "gated_above_median": above(gated),
            "floored_above_median": above(floored),
            "floored_above_median_share": above(floored) / len(rows),
            "floored_mean_expert": statistics.fmean(rows[i][col] for i in floored) if floored else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", default="0.05:none,0.01:none,0.01:0.99,0.05:0.95",
                    help="accepted-quantile:rejected-quantile pairs (none: the accepted texts' quantile alone, the "
                         "rule before the rejected texts' quantile capped it)")
    args = ap.parse_args()
    train, test = records()
    _, rejected = gate_examples(test, ASPECTS, seed=0)
    out = {}
    for rule in args.rules.split(","):
        q, qr_text = rule.split(":")
        q, qr = float(q), None if qr_text == "none" else float(qr_text)
        gate = AcceptabilityGate(gate_size("ref-free"), ASPECTS)
        rep = fit_gate(gate, train, "ref-free", seed=0, quantile=q, rejected_quantile=qr or 0.5)
        if qr is None:  # the accepted texts' quantile alone
            accepted, _ = gate_examples(train, ASPECTS, seed=0)
            x = torch.tensor([pair_features("lexical", r["candidate"], contexts_of(r, "ref-free")) for r in accepted])
            with torch.no_grad():
                gate.threshold.copy_(torch.quantile(gate.probabilities(x), q, dim=0).clamp(min=1e-6))
            rep["threshold"] = {a: round(float(t), 4) for a, t in zip(ASPECTS, gate.threshold)}
        g_tr, g_te = factors(gate, train), factors(gate, test)
        res = {"threshold": rep["threshold"], "quantile": q, "rejected_quantile": qr}
        for k, a in enumerate(ASPECTS):
            median = statistics.median(r[f"human.{a}"] for r in train + test if r.get(f"human.{a}") is not None)
            g_rej = factors(gate, rejected[a])
            res[a] = {"held-out": count(g_te, test, k, a, median), "training": count(g_tr, train, k, a, median),
                      "degenerate": {"texts": len(rejected[a]), "caught": int((g_rej[:, k] < FLOOR).sum()),
                                     "lowered": int((g_rej[:, k] < 1).sum())}}
        out[rule] = res
        print(rule, json.dumps(res, indent=None)[:1500])
    Path(__file__).with_name("results.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
