"""The benchmark suite (benchmarks/): its runner, its modules' interface and imports, the committed results
and figures, and every registered benchmark's quick run (real models: the slow tier, except FAST ones)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the suite is the package `benchmarks` at the repository root
from benchmarks import suite  # noqa: E402

PUBLIC = ("csem", "benchmarks")  # what a suite module may import from the project (benchmarks: the suite helpers)


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSEM_BENCH_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_list_names_every_registered_module_with_its_line():
    res = _cli("list", timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == suite.available()
    assert {"main_job", "teacher_pool", "scoring_speed"} <= set(suite.available())


def test_unknown_benchmark_is_bad_usage_exit_2():
    res = _cli("run", "no_such_benchmark", "--quick", timeout=60)
    assert res.returncode == 2 and "no_such_benchmark" in res.stderr


def test_a_missing_data_set_is_one_line_exit_2(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSEM_DATA": str(tmp_path / "nowhere")}
    res = subprocess.run([sys.executable, "-m", "benchmarks", "run", "baselines_summeval", "--quick", "--results-dir",
                          str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.strip().splitlines()[-1].startswith(
        f"error: baselines_summeval: {tmp_path / 'nowhere' / 'summeval'}: no such file or folder"), res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", suite.available())
def test_module_has_the_interface_and_imports_only_the_public_api(name):
    path = suite.HERE / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "run" in funcs and "report" in funcs
    assert [a.arg for a in funcs["run"].args.args] == ["quick"]
    for node in ast.walk(tree):
        mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        for mod in mods:
            top = mod.split(".")[0]
            assert top not in ("research", "harness", "tests"), f"{name} imports {mod}"
            if top in ("csem", "benchmarks"):
                assert mod.startswith(PUBLIC) and not any(p.startswith("_") for p in mod.split(".")), mod


def test_nothing_in_src_or_benchmarks_imports_research():
    for folder in (ROOT / "src", ROOT / "benchmarks"):
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "import research" not in text and "from research" not in text, path


def test_committed_results_are_what_the_suite_writes():
    """benchmarks/results holds NAME.json and NAME.md of registered benchmarks only, each .md the module's report."""
    for path in sorted(suite.RESULTS.iterdir()):
        if path.name.startswith("."):
            continue
        assert path.suffix in (".json", ".md") and path.stem in suite.available(), f"{path.name}: no suite script writes it"
        if path.suffix == ".json":
            results = json.loads(path.read_text(encoding="utf-8"))
            expected = suite.load(path.stem).report(results).rstrip("\n") + "\n"
            assert path.with_suffix(".md").read_text(encoding="utf-8") == expected, f"{path.stem}.md is stale"


def test_figures_in_the_docs_match_the_results():
    res = _cli("figures", "--check", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_writer_writes_strict_json_and_the_report(tmp_path):
    js, md = suite.write_results("x", {"a": float("nan"), "b": [1.5]}, "# X\n\ntext", tmp_path / "out")
    assert json.loads(js.read_text()) == {"a": None, "b": [1.5]}
    assert md.read_text() == "# X\n\ntext\n"


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in suite.FAST else pytest.mark.slow)
                                  for n in suite.available()])
def test_quick_run_writes_its_results(name, tmp_path):
    res = _cli("run", name, "--quick", "--results-dir", str(tmp_path), timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    results = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    assert results and (tmp_path / f"{name}.md").read_text(encoding="utf-8").startswith("# ")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.json", f"{name}.md"]  # nothing else written
