"""The project rule "no function in src/ longer than 100 lines" (decorators excluded, nested functions
and methods counted on their own and inside their enclosing function)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LIMIT = 100


def long_functions(root: Path = SRC, limit: int = LIMIT) -> list[str]:
    """``path:line name (N lines)`` for each function or method under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_function_in_src_is_longer_than_100_lines():
    assert any(SRC.rglob("*.py")), f"no Python files under {SRC}"
    too_long = long_functions()
    assert not too_long, f"functions over {LIMIT} lines:\n" + "\n".join(too_long)


def test_the_check_finds_a_long_function(tmp_path):
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))  # def line + 100 body lines = 101
    (pkg / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n", encoding="utf-8")
    assert long_functions(tmp_path / "src") == [f"src/pkg/m.py:5 long ({LIMIT + 1} lines)"]
