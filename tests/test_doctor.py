"""`csem doctor`: one table of what works here (real models, the real kernel probe)."""

import json

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app


@pytest.fixture()
def cli():
    _load_commands()
    return CliRunner()


@pytest.mark.slow
def test_doctor_reports_models_kernels_torch_and_extras(cli, smollm2_path, monkeypatch):
    monkeypatch.delenv("CSEM_LLAMA_EXTRA_BUFTS", raising=False)
    res = cli.invoke(app, ["doctor", "--json"])
    rows = json.loads(res.stdout[res.stdout.index("["):])
    by = {(r["area"], r["item"]): r for r in rows}
    smol = by[("model", "smollm2")]
    assert smol["status"] in ("ok", "fallback") and "extra buffer types" in smol["detail"]
    assert any(r["area"] == "torch" and "precision auto -> fp32" in r["detail"] for r in rows)
    assert {r["item"] for r in rows if r["area"] == "extra"} == {"server", "serve", "rl", "ray", "docs"}
    assert res.exit_code == (1 if any(r["status"] == "FAIL" and r["required"] for r in rows) else 0)


@pytest.mark.slow
def test_doctor_shows_the_fallback_when_extra_bufts_are_off(cli, smollm2_path, monkeypatch):
    monkeypatch.setenv("CSEM_LLAMA_EXTRA_BUFTS", "0")
    res = cli.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert "fallback" in res.stdout and "use_extra_bufts=False" in res.stdout


@pytest.mark.slow
def test_doctor_says_whether_a_probe_outcome_came_from_its_cache(cli, smollm2_path, monkeypatch, tmp_path):
    """The first run probes (``probed now``), the next reads the probe cache and says so, with the cache
    file to delete for a fresh probe; ``--no-probe`` on an empty cache says nothing was probed."""
    import csem.llm.providers.llama_cpp_kernels as kernels

    monkeypatch.delenv("CSEM_LLAMA_EXTRA_BUFTS", raising=False)
    cache = tmp_path / "llama-kernels.json"
    monkeypatch.setattr(kernels, "_cache_path", lambda: cache)

    def smol_detail(*args):
        res = cli.invoke(app, ["doctor", "--json", *args])
        rows = json.loads(res.stdout[res.stdout.index("["):])
        return next(r for r in rows if r["area"] == "model" and r["item"] == "smollm2")["detail"]

    assert "not probed yet" in smol_detail("--no-probe")
    first = smol_detail()
    assert "(probed now; cached for the next run)" in first and cache.exists()
    again = smol_detail()
    assert "(from the probe cache of " in again and str(cache) in again and "delete it to probe again" in again
    assert "(from the probe cache" in smol_detail("--no-probe")
