"""Loading a script of ``benchmarks/`` in its tests (benchmarks/ is no package; the scripts import
``harness`` and each other)."""

from __future__ import annotations

from pathlib import Path


def load_benchmark(name: str):
    """A script of ``benchmarks/`` (``name``, no ``.py``) loaded as a module for its tests, with
    ``benchmarks/`` on ``sys.path`` while it loads and runs (the scripts import ``harness`` and each
    other); a generator for a module-scoped fixture: ``yield from load_benchmark("bench_x")``."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(root))
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_under_test", root / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(root))

