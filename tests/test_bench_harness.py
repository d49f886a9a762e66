"""benchmarks/harness.py (results files, resume, shared options) and the student benchmark's stage
modules: what other benchmark scripts import from them. No benchmark is run here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def harness(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # as when a script in benchmarks/ runs; undone after the test
    import harness

    return harness


def test_results_save_and_resume(harness, tmp_path):
    out = tmp_path / "res" / "demo"
    r = harness.Results(out, {"meta": {"run": 1}, "rows": {}}, lambda d: [f"# demo {len(d['rows'])}"])
    assert r.previous == {}
    r.data["rows"]["a"] = {"spearman": float("nan")}
    js, md = r.save()
    assert json.loads(js.read_text()) == {"meta": {"run": 1}, "rows": {"a": {"spearman": None}}}  # strict JSON
    assert md.read_text() == "# demo 1\n"
    # a resumed run keeps what the earlier one wrote (top-level entries replace the fresh skeleton's)
    again = harness.Results(out, {"meta": {"run": 2}, "rows": {}, "extra": 0}, lambda d: "x", resume=True)
    assert again.data == {"meta": {"run": 1}, "rows": {"a": {"spearman": None}}, "extra": 0}
    # a fresh run ignores it; a merge rule decides otherwise
    assert harness.Results(out, {"rows": {}}, lambda d: "x").data == {"rows": {}}
    merged = harness.Results(out, {"meta": {"run": 3}, "rows": {"b": 1}}, lambda d: "x", resume=True,
                             merge=lambda d, p: d["rows"].update(p["rows"]))
    assert merged.data == {"meta": {"run": 3}, "rows": {"b": 1, "a": {"spearman": None}}}


def test_previous_results_broken_file_is_an_error(harness, tmp_path):
    assert harness.previous_results(tmp_path / "none") == {}
    (tmp_path / "bad.json").write_text('{"a": 1,\n oops}')
    with pytest.raises(ValueError, match=r"bad.json: line 2: not JSON"):
        harness.previous_results(tmp_path / "bad")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        harness.Results(tmp_path / "list", {}, lambda d: "", resume=True)


def test_parser_options_and_quick_goes_to_a_temporary_folder(harness):
    ap = harness.parser("demo", out="demo", seed=None, quick=True)
    ap.add_argument("--seeds", default="1")
    args = ap.parse_args(["--quick", "--seeds", "4,5"])
    assert not hasattr(args, "seed") and args.seeds == "4,5"
    harness.setup(args)
    assert args.out.name == "demo" and harness.RESULTS not in args.out.parents  # never over the figures
    assert harness.parser("demo", out="demo").parse_args([]).seed == 0


def test_student_benchmark_keeps_what_other_scripts_import(harness):
    import bench_student_summeval as S  # bench_student_contrast.py does this

    for name in ("split_docs", "system_prior", "lexical_baselines", "row_of", "TEACHER", "PRIOR", "CACHE",
                 "write_results", "render"):
        assert hasattr(S, name), name
    assert S.STAGES == ("speed", "cv", "syscv", "baselines", "students", "disjoint", "curve", "limits", "throughput")
    train = [{"doc_id": "d1", "system_id": s, "judge.coherence": v, "judge.consistency": v, "judge.fluency": v,
              "judge.relevance": v} for s, v in (("A", 1), ("A", 3), ("B", 5))]
    test = [{"doc_id": "d2", "system_id": "B"}, {"doc_id": "d2", "system_id": "A"}, {"doc_id": "d2", "system_id": "C"}]
    S.system_prior(train, test)
    assert [r["metric.prior.coherence"] for r in test] == [5.0, 2.0, None]
    assert S.split_docs(train + test, 1, 2) == test
    lines = S.render({"meta": {}, "correlations": {}})
    assert lines[0].startswith("# Student vs teacher on SummEval")
