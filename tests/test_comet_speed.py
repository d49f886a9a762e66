"""benchmarks/comet_speed.py: the parts that need no COMET venv (records file in and out, bad input).

The timing itself builds a venv from PyPI and is run by the benchmark, not here.
"""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "comet_speed.py"


def _load_script():
    """The benchmark script as a module, loaded from its file (benchmarks/ is not a package, and the
    test leaves sys.path as it is)."""
    spec = importlib.util.spec_from_file_location("comet_speed_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


comet_speed = _load_script()


def test_write_then_check_comet_jsonl(tmp_path):
    recs = [{"id": "d1/M8", "source": "An article.", "candidate": "A summary.", "reference": ["Ref one.", "Ref two."]},
            {"id": "d1/M9", "source": "An article.", "candidate": "Another.", "reference": "Single ref."}]
    p = comet_speed.write_comet_jsonl(recs, tmp_path / "free.jsonl")
    assert [json.loads(x) for x in p.read_text().splitlines()] == [
        {"src": "An article.", "mt": "A summary."}, {"src": "An article.", "mt": "Another."}]
    assert comet_speed.check_comet_jsonl(p, "ref-free") == 2
    q = comet_speed.write_comet_jsonl(recs, tmp_path / "ref.jsonl", mode="ref-based")
    assert [json.loads(x)["ref"] for x in q.read_text().splitlines()] == ["Ref one.", "Single ref."]
    assert comet_speed.check_comet_jsonl(q, "ref-based") == 2
    with pytest.raises(comet_speed.CometInputError, match=r"free.jsonl:1: field 'ref'"):
        comet_speed.check_comet_jsonl(p, "ref-based")
    with pytest.raises(comet_speed.CometInputError, match=r"record 0 \(x\): field 'candidate'"):
        comet_speed.write_comet_jsonl([{"id": "x", "source": "s"}], tmp_path / "bad.jsonl")


def test_bad_records_exit_2_before_any_venv_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CSEM_CACHE", str(tmp_path / "cache"))  # a venv build would land here
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"src": "s", "mt": "m"}\n\n{"src": "s"}\n', encoding="utf-8")
    assert comet_speed.main([str(bad)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {bad}:3: field 'mt' missing or not text"
    assert comet_speed.main([str(tmp_path / "missing.jsonl")]) == 2
    bad.write_text("not json\n", encoding="utf-8")
    assert comet_speed.main([str(bad)]) == 2
    assert f"{bad}:1: not JSON" in capsys.readouterr().err
    assert comet_speed.main([str(bad), "--threads", "0"]) == 2
    assert not (tmp_path / "cache" / "comet-venv").exists()
