"""The README's relative links point at files that exist (the docs site itself is checked by
``mkdocs build --strict`` in .ci/run), and CI runs the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_relative_links_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link and not link.startswith("mailto:")]
    assert local, "the README links its documentation pages"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[test]" && python -m pytest' in readme
    assert 'pip install -q -e ".[test]"' in ci and "python3 -m pytest\n" in ci
    assert "mkdocs build --strict" in ci
