"""Synthetic contrasts on SummEval's training documents: how often each perturbation applies, how many
pairs ``make_pairs`` writes, their severities, and how long it takes (no LLM, no model).

Text: SummEval documents 0-49 (sorted ``doc_id``, the student benchmarks' training documents), their 16
system summaries and their references (``references=True``, as ``csem contrasts --references``); never
the test documents 50-99.

For every perturbation: the share of the candidates (system summaries, references) for which it finds
something to change (``applies``), and, in the pairs of ``make_pairs(per_record=--per-record)``, its
count and mean severity. Timing: ``time.process_time`` of ``make_pairs`` (CPU seconds of this process,
caches of sentence splits and entities cleared first), on the machine stated in the results.

Run:  nice -n 10 python benchmarks/bench_contrasts.py [--per-record 3] [--seed 0]
Out:  benchmarks/results/contrasts_summeval.json and .md
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from harness import RESULTS, machine, markdown_table, now, parser, setup, summeval, write_results


def main() -> int:
    ap = parser(__doc__, out="contrasts_summeval")
    ap.add_argument("--per-record", type=int, default=3, help="pairs per record and aspect (default 3)")
    ap.add_argument("--docs", default="0:50", help="SummEval documents (sorted doc_id), default 0:50")
    args = ap.parse_args()
    setup(args)
    from csem.data import contrasts as C

    records = summeval(args.data_dir, docs=args.docs)
    records = [{k: r.get(k) for k in ("id", "doc_id", "system_id", "source", "candidate", "reference")}
               for r in records]
    refs = C.reference_records(records)
    for fn in (C._split, C._entities, C._entity_types, C._importance):
        fn.cache_clear()
    t0, w0 = time.process_time(), time.perf_counter()
    pairs = C.make_pairs(records, per_record=args.per_record, seed=args.seed, references=True)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0

    sources = sorted({r["source"] for r in records}, key=C._source_key)
    names = {n: f for fam in C.FAMILIES.values() for n, f in fam.items()}
    names.update(C.DEGENERATE)
    for only in C.DEGENERATE_ONLY.values():
        names.update(only)
    applies: dict[str, dict[str, float]] = {}
    for kind, group in (("summaries", records), ("references", refs)):
        for name, fn in names.items():
            hits = 0
            for r in group:
                others = [s for s in sources if s != r["source"]]
                key = C.record_key(r)
                other = others[C.rng_for(args.seed, key, "other").randrange(len(others))]
                res = fn(r["candidate"], C.rng_for(args.seed, key, name), C.Context(r["source"], other))
                hits += res is not None
            applies.setdefault(name, {})[kind] = round(hits / len(group), 3)

    counts = C.summarize(pairs)
    sev: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        sev[p["perturbation"]].append(p["severity"])
    aspect_of = {n: a for a, fam in C.FAMILIES.items() for n in fam}
    rows = []
    for name in sorted(names, key=lambda n: (C.ASPECTS.index(aspect_of[n]) if n in aspect_of else 9, n)):
        rows.append({"perturbation": name, "aspect": aspect_of.get(name, "degenerate"),
                     "applies_summaries": applies[name]["summaries"], "applies_references": applies[name]["references"],
                     "pairs": sum(c.get(name, 0) for c in counts.values()),
                     "mean_severity": round(statistics.mean(sev[name]), 3) if sev[name] else None})
    data = {"created": now(), "machine": machine(), "documents": args.docs, "summaries": len(records),
            "references": len(refs), "per_record": args.per_record, "seed": args.seed, "pairs": len(pairs),
            "pairs_per_aspect": {a: sum(c.values()) for a, c in counts.items()}, "counts": counts,
            "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2), "perturbations": rows}
    md = [f"# Synthetic contrasts on SummEval (documents {args.docs})", "",
          f"{len(records)} system summaries and {len(refs)} references of the training documents; "
          f"`make_pairs(per_record={args.per_record}, seed={args.seed}, references=True)` wrote {len(pairs)} pairs "
          f"({', '.join(f'{a} {n}' for a, n in data['pairs_per_aspect'].items())}) in {cpu:.1f} s of CPU "
          f"({wall:.1f} s wall) on {machine()}.", "",
          "`applies`: share of the candidates for which the perturbation finds something to change.", "",
          markdown_table(rows, ["perturbation", "aspect", "applies_summaries", "applies_references", "pairs",
                                "mean_severity"],
                         headers=["perturbation", "aspect", "applies (summaries)", "applies (references)", "pairs",
                                  "mean severity"], digits=2)]
    js, mdp = write_results(args.out, data, md)
    print(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
