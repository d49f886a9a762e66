"""Every pipeline that ships with csem runs end to end (``csem run package:NAME.yaml``), so a shipped
example can never fail unseen: each of ``summarization.yaml``, ``translation.yaml`` and
``instruction-following.yaml`` with every stage and setting as shipped (include_reference, ref-based
mode, the acceptability gate, repeatability, curve, seeds, rerank where they are on), on a small slice:
the first sources, one generator with short answers, the plumbing judge (SmolLM2-135M) in place of
the real one, at most two seeds or ensemble members. Slow tier: real generation, judging and MiniLM
training (a few minutes per pipeline on two cores)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from csem.data.records import read_records
from csem.pipeline.runner import Pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "csem" / "pipeline" / "examples"
SHIPPED = ["summarization.yaml", "translation.yaml", "instruction-following.yaml"]


def small_slice(name: str, tmp: Path, n_sources: int = 8) -> Path:
    """The shipped pipeline ``name`` with sizes cut (not stages): ``n_sources`` sources, the first
    generator with two samples of at most 24 tokens, SmolLM2 as judge, at most two seeds/members."""
    cfg = yaml.safe_load((EXAMPLES / name).read_text())
    src = cfg["sources"]["path"]
    cfg["sources"]["path"] = str(EXAMPLES / src.removeprefix("package:"))
    cfg["sources"]["limit"] = n_sources
    gen = dict(cfg["collect"]["generators"][0], num_samples=2)
    gen.pop("decoding", None)
    cfg["collect"]["generators"] = [gen]
    cfg["collect"]["decoding"] = {**cfg["collect"].get("decoding", {}), "max_tokens": 24}
    cfg["annotate"]["judge"] = "llama-cpp:smollm2"
    cfg["annotate"]["rubrics"] = [str(EXAMPLES / r) if (EXAMPLES / r).exists() else r
                                  for r in cfg["annotate"]["rubrics"]]
    train = cfg["train"]
    if "members" in train.get("model", {}):
        train["model"]["members"] = min(2, train["model"]["members"])
    if train.get("seeds"):
        train["seeds"] = train["seeds"][:2]
    train["options"] = {**train.get("options", {}), "num_threads": 2}
    if cfg.get("curve"):
        cfg["curve"] = {**cfg["curve"], "shares": [0.5, 1.0], "seeds": cfg["curve"].get("seeds", [12])[:1]}
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_pipeline_runs_end_to_end(name, tmp_path):
    shipped = yaml.safe_load((EXAMPLES / name).read_text())
    p = Pipeline.from_file(small_slice(name, tmp_path), tmp_path / "run", progress=False)
    p.run()
    run = tmp_path / "run"
    for f in ("candidates.jsonl", "labelled.jsonl", "scored.jsonl", "report.md", "state.json", "model/metric_card.json"):
        assert (run / f).exists(), f
    labelled = read_records(run / "labelled.jsonl", required=())
    cols = [c for c in labelled[0] if c.startswith("judge.") and c.count(".") == 1]
    assert cols and any(r[c] is not None for r in labelled for c in cols)
    if shipped["collect"].get("include_reference"):
        assert any(r.get("system_id") == "reference" for r in labelled)
    scored = [r for r in read_records(run / "scored.jsonl", required=()) if r.get("split") == "test"]
    student = [c for c in scored[0] if c.startswith("metric.")]
    assert scored and student and all(r[student[0]] is not None for r in scored)
    assert "Traceback" not in (run / "report.md").read_text()
