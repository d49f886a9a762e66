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


# --- the product's pages: a newcomer's README, guides in the present tense ----------------------

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
)
# what dates the README and the guides as a log: a day and month, a month and year, a recent year
# (citations such as "Liu et al., 2023" and API versions such as 2024-06-01 stay allowed), a UTC
# time, an issue number, a session
_HISTORY = re.compile(
    rf"\b\d{{1,2}}(?:-\d{{1,2}})? (?:{_MONTHS})\b|\b(?:{_MONTHS}) \d{{1,2}}\b"
    rf"|\b(?:{_MONTHS}),? 20\d\d\b|\b202[5-9]\b|\bUTC\b|\bissues? #?\d+|\bsessions?\b",
    re.IGNORECASE,
)
_MAX_CODE_WIDTH = 88


def _product_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]


def _history_hits(text: str) -> list[str]:
    return [
        f"{n}: {m.group(0)!r}"
        for n, line in enumerate(text.splitlines(), 1)
        for m in _HISTORY.finditer(line)
    ]


def test_history_pattern_catches_dates_issues_and_sessions():
    log = "run of 3 December 2026 22:11 UTC, issue 24's targets, this session, until December 7"
    assert len(_history_hits(log)) >= 5
    product = "G-Eval (Liu et al., 2023); api_version 2024-06-01; the outcome; top-k 50; Eq. 12"
    assert _history_hits(product) == []


def test_readme_and_guides_carry_no_dates_issues_or_sessions():
    found = {
        str(page.relative_to(ROOT)): hits
        for page in _product_pages()
        if (hits := _history_hits(page.read_text(encoding="utf-8")))
    }
    assert found == {}, "history belongs in docs/research/, not in the product's pages"


def test_readme_is_a_newcomers_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    for part in ("## Set-up", "## Quick start: the command line", "## Quick start: Python",
                 "## Commands", "## Errors and exit codes", "<!-- figures:headline:start -->"):
        assert part in text


def test_snippets_the_docs_include_from_the_readme_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    included = {
        name
        for page in (ROOT / "docs").rglob("*.md")
        for name in re.findall(r'--8<-- "README\.md:([\w-]+)"', page.read_text(encoding="utf-8"))
    }
    assert included, "docs/index.md includes the README's set-up"
    for name in included:
        start, end = f"<!-- --8<-- [start:{name}] -->", f"<!-- --8<-- [end:{name}] -->"
        assert start in readme and end in readme
        snippet = readme.split(start, 1)[1].split(end, 1)[0]
        # a README-relative link breaks where docs/index.md includes the snippet
        assert re.findall(r"\]\((?!https?://)[^)]+\)", snippet) == [], name


def _code_lines(text: str):
    """(line number, line) of every line inside a fenced code block."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        elif fence is not None:
            yield n, line


def test_code_blocks_fit_88_columns():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    wide = [
        f"{page.relative_to(ROOT)}:{n} ({len(line)} columns)"
        for page in pages
        for n, line in _code_lines(page.read_text(encoding="utf-8"))
        if len(line) > _MAX_CODE_WIDTH
    ]
    assert wide == [], "a code block scrolls sideways; wrap it (a shell line with ' \\')"


# --- docstrings: one cross-reference style ------------------------------------------------------

_SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|any):`")
_DOCTEST_FLAG = re.compile(r"#\s*doctest:")


def test_src_docstrings_use_mkdocstrings_references_not_sphinx_roles():
    """The API reference renders `[`csem.x`][]` cross-references and plain backticks; a raw Sphinx
    role (:func:`x`) or a doctest flag would show as such on the page."""
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _SPHINX_ROLE.search(line) or _DOCTEST_FLAG.search(line)
    ]
    assert found == [], "write [`csem.module.name`][] or `name` instead"


def test_the_sphinx_role_pattern_catches_roles_only():
    assert _SPHINX_ROLE.search("see :func:`csem.train` and :class:`~csem.model.EvaluationModel`")
    assert _SPHINX_ROLE.search(":py:meth:`x.y`")
    assert not _SPHINX_ROLE.search("see [`csem.train`][] and `csem.model`; a dict {'a': 1}")
