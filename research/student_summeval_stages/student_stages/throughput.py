"""Stage ``throughput``: scoring speed on test summaries (bi-encoder, unified cross-encoder,
unbabel-comet 2.2.7 on the same MiniLM in its own venv through ``comet_speed.py``)."""

from __future__ import annotations

import math
import time

from harness import ASPECTS, CACHE, log

from .common import Bench


BI_512 = "csem bi-encoder, sources up to 512 tokens as COMET (each article encoded once)"


def stage_throughput(b: Bench, train, test) -> None:
    """Scoring speed: csem bi-encoder vs unified cross-encoder vs COMET (same encoder, threads, batch)."""
    from csem.model import EvaluationModel, LabelSpec, ModelConfig
    from csem.model.module import EvaluationModule

    args = b.args
    sub = test[: args.speed_records]
    labels = [LabelSpec(aspect=a, column=f"judge.{a}", min=1, max=5) for a in ASPECTS]
    t = {"records": len(sub), "documents": len({r["doc_id"] for r in sub}), "threads": args.threads,
         "batch_size": 32, "precision": "fp32"}
    # like for like with COMET: whole sources up to 512 tokens; then csem's default 256-token source cut
    for name, arch, ml, sml in ((BI_512, "bi-encoder", 512, None),
                                ("csem bi-encoder, default 256-token sources", "bi-encoder", 512, 256),
                                ("csem unified cross-encoder (article re-read per summary)", "unified", 512, None)):
        cfg = ModelConfig(name="s", encoder=args.encoder, architecture=arch, max_length=ml, source_max_length=sml,
                          labels=labels)
        model = EvaluationModel(EvaluationModule(cfg).eval())
        model.predict(sub[:4], precision="fp32")
        best = math.inf
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            model.predict(sub, batch_size=32, precision="fp32")
            best = min(best, time.perf_counter() - t0)
        t[name] = {"seconds": best, "samples_per_s": len(sub) / best}
        log(f"throughput {name}: {len(sub) / best:.2f}/s")
    if not args.no_comet:
        from comet_speed import time_comet, write_comet_jsonl

        path = CACHE / "comet_speed_test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_comet_jsonl(sub, path, "ref-free")
        try:
            res = time_comet(path, threads=args.threads, batch_size=32, repeats=args.repeats, mode="ref-free",
                             log=log)
            t["COMET 2.2.7 ReferencelessRegression (same MiniLM)"] = {
                "seconds": res["seconds"], "samples_per_s": res["samples_per_s"],
                "comet_version": res.get("comet_version"), "torch_version": res.get("torch_version")}
        except Exception as exc:  # recorded, never hidden
            t["COMET error"] = f"{type(exc).__name__}: {exc}"
    bi = t[BI_512]["samples_per_s"]
    t["unified_cost"] = bi / t["csem unified cross-encoder (article re-read per summary)"]["samples_per_s"]
    comet = t.get("COMET 2.2.7 ReferencelessRegression (same MiniLM)")
    if comet:
        t["csem_over_comet"] = bi / comet["samples_per_s"]
    b.data["throughput"] = t
    b.save()
