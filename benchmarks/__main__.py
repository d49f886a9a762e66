"""``python -m benchmarks``: list, run and report the suite, and generate the figures in the docs.

    python -m benchmarks list                       # name and what it measures
    python -m benchmarks run NAME [--quick]         # -> benchmarks/results/NAME.{json,md}
    python -m benchmarks run --all --quick          # every benchmark on a small slice (CI)
    python -m benchmarks report NAME                # NAME.md again from NAME.json
    python -m benchmarks figures [--check]          # the generated tables in README.md and docs/

``--results-dir DIR`` writes elsewhere (a quick run in CI writes to a temporary folder). The figures are
the benchmarks' reports (and one headline table), written between ``<!-- figures:NAME:start -->`` and
``<!-- figures:NAME:end -->`` in README.md, docs/benchmarks/*.md and docs/research/*.md; ``--check``
writes nothing and exits 1 when a committed page differs from what it would write.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

from benchmarks import suite
from csem.cli import error_message, exit_code

ROOT = suite.HERE.parent
PAGES = ("README.md", "docs/benchmarks/*.md", "docs/research/*.md")
MARKER = re.compile(r"(<!-- figures:([\w-]+):start -->\n)(.*?)(<!-- figures:\2:end -->)", re.S)


def _results(name: str, results_dir: Path) -> dict | None:
    path = results_dir / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def run_one(name: str, quick: bool, results_dir: Path) -> None:
    """Run benchmark ``name`` and write its results through [`benchmarks.suite.write_results`][]."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    module = suite.load(name)
    t0 = time.perf_counter()
    suite.log(f"{name}: run{' --quick' if quick else ''}")
    results = module.run(quick=quick)
    js, md = suite.write_results(name, results, module.report(results), results_dir)
    suite.log(f"{name}: {time.perf_counter() - t0:.1f} s -> {js.name}, {md.name}")


def _shift(markdown: str) -> str:
    """A report as a page's figure: headings one level down (the page has its own title)."""
    return re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", markdown.strip(), flags=re.M)


def _join(d: dict, digits: int = 3) -> str:
    return ", ".join(f"{k} {suite.fmt(v, digits)}" for k, v in d.items())


def headline(results_dir: Path, pages: str = "docs/benchmarks/") -> str:
    """The README's table: the student vs its teacher beside the trivial baselines, and its speed; links to
    the benchmark pages start with ``pages`` (their folder relative to the page the table is written in)."""
    rows = []
    mj = _results("main_job", results_dir)
    if mj:
        ag = mj["agreement"]
        aspects = " / ".join(ag)
        base = {k: " / ".join(suite.fmt(d.get("baselines", {}).get(k), 2) for d in ag.values())
                for k in ("length", "extractiveness", "system prior", "overlap fit")}
        seeds = " / ".join(f"{suite.fmt(d.get('mean'), 2)} ± {suite.fmt(d.get('sd'), 2)}" for d in ag.values())
        rep = mj.get("repeatability") or {}
        judge = [f"the judge against itself {' / '.join(suite.fmt(rep[a]['r'], 2) for a in ag if a in rep)}"] \
            if rep else []
        rows.append([f"[main job]({pages}main_job.md): student vs its judge, {aspects} (summary-level "
                     "Spearman, 6 held-out articles; the seed ensemble, then one student per seed: mean ± sd)",
                     " / ".join(suite.fmt(d.get("model"), 2) for d in ag.values()) + f" (per seed {seeds})",
                     "; ".join(judge + [f"{k} {v}" for k, v in base.items()])])
    for name, what in (("teacher_pool", "student vs its judge at {labels:,} labels (test pool)"),
                       ("student_summeval", "student vs GPT-4 on SummEval, average of 4 aspects")):
        r = _results(name, results_dir)
        if r and r.get("headline"):
            h = r["headline"]
            rows.append([f"[{name.replace('_', ' ')}]({pages}{name}.md): " + what.format(**h),
                         f"{suite.fmt(h['mean'])} ± {suite.fmt(h['sd'])}", _join(h["baselines"])])
    ca = _results("cascade", results_dir)
    if ca and ca.get("headline"):
        h = ca["headline"]
        share = h.get("value")
        rows.append([f"[cascade]({pages}cascade.md): {h.get('what', '')}",
                     "not reached" if share is None else f"{share * 100:.0f}%",
                     str(h.get("compare", ""))])
    sp = _results("scoring_speed", results_dir)
    if sp and sp.get("headline"):
        h = sp["headline"]
        beside = dict(h["others"])
        js = _results("judge_summeval", results_dir)
        if js and js.get("sample", {}).get("probs"):
            beside["the 1.5B judge"] = 1 / js["sample"]["probs"]["s_per_judgment"]
        rows.append([f"[scoring speed]({pages}scoring_speed.md): rows/s, {h['setting']}",
                     suite.fmt(h["student"], 1), _join(beside, 1)])
    return suite.markdown_table(rows, ["figure", "csem's student", "beside it"])


def figure(name: str, results_dir: Path, page: Path | None = None) -> str:
    """The generated text of figure ``name`` for ``page``: ``headline``, or benchmark ``name``'s report."""
    if name == "headline":
        rel = os.path.relpath(ROOT / "docs" / "benchmarks", (page or ROOT / "README.md").parent)
        return headline(results_dir, "" if rel == "." else rel + "/")
    results = _results(name, results_dir)
    if results is None:
        return f"*No results yet: `python -m benchmarks run {name}`.*"
    return _shift(suite.load(name).report(results))


def figures(check: bool, results_dir: Path = suite.RESULTS) -> int:
    """Rewrite (or, with ``check``, compare) every page's generated blocks; the exit status."""
    stale = []
    for pattern in PAGES:
        for page in sorted(ROOT.glob(pattern)):
            text = page.read_text(encoding="utf-8")
            new = MARKER.sub(lambda m: m.group(1) + figure(m.group(2), results_dir, page).rstrip("\n") + "\n" + m.group(4),
                             text)
            if new != text:
                stale.append(page.relative_to(ROOT))
                if not check:
                    page.write_text(new, encoding="utf-8")
    for page in stale:
        print(f"{page}: {'differs from the generated figures' if check else 'figures rewritten'}")
    if check and stale:
        print("run `python -m benchmarks figures` and commit the pages", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the registered benchmarks")
    r = sub.add_parser("run", help="run benchmarks and write their results")
    r.add_argument("names", nargs="*", metavar="NAME")
    r.add_argument("--all", action="store_true", help="every registered benchmark")
    r.add_argument("--quick", action="store_true", help="a small slice (seconds to a minute each)")
    r.add_argument("--results-dir", type=Path, default=suite.RESULTS)
    p = sub.add_parser("report", help="NAME.md again from NAME.json")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--results-dir", type=Path, default=suite.RESULTS)
    f = sub.add_parser("figures", help="generate the tables of figures in README.md and docs/")
    f.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs")
    args = ap.parse_args(argv)

    if args.command == "list":
        names = suite.available()
        width = max(map(len, names))
        for n in names:
            print(f"{n:<{width}}  {suite.BENCHMARKS[n]}")
        return 0
    if args.command == "figures":
        return figures(args.check)
    names = suite.available() if getattr(args, "all", False) else args.names
    unknown = [n for n in names if n not in suite.available()]
    if unknown or not names:
        print(f"unknown benchmark(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(suite.available())}",
              file=sys.stderr)
        return 2
    if args.command == "report":
        for n in names:
            results = _results(n, args.results_dir)
            if results is None:
                print(f"{args.results_dir / (n + '.json')}: no results; run the benchmark first", file=sys.stderr)
                return 2
            suite.write_results(n, results, suite.load(n).report(results), args.results_dir)
        return 0
    failed, bad_input = [], []
    for n in names:
        try:
            run_one(n, args.quick, args.results_dir)
        except Exception as exc:  # one broken benchmark must not hide the others' results; reported below
            if exit_code(exc) == 2:  # bad input (a data set that is not there): one line, as the CLI does
                print(f"error: {n}: {error_message(exc)}", file=sys.stderr)
                bad_input.append(n)
            else:
                traceback.print_exc()
            failed.append(n)
    if failed:
        if len(failed) < len(names):
            print(f"failed: {', '.join(failed)}", file=sys.stderr)
            return 3
        return 2 if len(bad_input) == len(names) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
