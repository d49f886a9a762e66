"""The run report in a real browser: headless Chromium (the Debian package ``chromium``; ``.ci/run`` installs it)
loads ``report.html`` from disk, a screenshot is taken, and the page's structure is checked as the browser
built it: the verdict opens the page, every section holds its own table, every figure is an image the
browser decoded at a non-trivial size, and the student-vs-judge scatter draws its data as points (one per
held-out candidate, read from the figure's own record of its artists), not a line.

Slow tier: a browser process. The report is that of a pipeline run made here with the FAKE backend and the
tiny random encoder (the report code path is the real one), or of the run folder named by
``CSEM_REPORT_RUN`` (e.g. the main job's, ``csem run package:summarization.yaml --run-dir DIR``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from csem.data.records import read_records, write_records

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "csem" / "pipeline" / "examples"
PROBE = ("<script>window.addEventListener('load', () => { for (const i of document.images) {"
         " i.setAttribute('data-w', i.naturalWidth); i.setAttribute('data-h', i.naturalHeight); }"
         " document.body.setAttribute('data-probed', '1'); });</script>")


class Sections(HTMLParser):
    """Each ``<section>``'s id, its tables, and its images with their decoded size and source."""

    def __init__(self):
        super().__init__()
        self.sections: list[dict] = []
        self.first_h2: str | None = None
        self.probed = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.probed = a.get("data-probed") == "1"
        if tag == "section":
            self.sections.append({"id": a.get("id"), "tables": 0, "images": []})
        elif tag == "table" and self.sections:
            self.sections[-1]["tables"] += 1
        elif tag == "img" and self.sections:
            self.sections[-1]["images"].append({"w": int(a.get("data-w") or 0), "h": int(a.get("data-h") or 0),
                                                "alt": a.get("alt", ""), "src": a.get("src", "")})


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        pytest.skip("no headless Chromium (apt-get install chromium; .ci/run installs it)")
    return exe


def _browser(exe: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, fake_llm, tiny_encoder) -> Path:
    if os.environ.get("CSEM_REPORT_RUN"):
        return Path(os.environ["CSEM_REPORT_RUN"])
    from csem.pipeline.runner import Pipeline

    tmp = tmp_path_factory.mktemp("browser")
    write_records(read_records(EXAMPLES / "news_sources.jsonl", required=("source",))[:12], tmp / "sources.jsonl")
    cfg = {"name": "browser", "sources": {"path": "sources.jsonl"}, "split": {"test_fraction": 0.34, "dev_fraction": 0},
           "collect": {"generators": [{"uri": fake_llm, "name": f"fake{k}", "num_samples": 2,
                                       "decoding": {"seed": k}} for k in range(2)],
                       "decoding": {"max_tokens": 20}},
           "annotate": {"judge": fake_llm, "rubrics": ["csem/summ-coherence-ref-free"], "repeatability": 0.5},
           "train": {"encoder": str(tiny_encoder), "model": {"hidden_sizes": [16], "max_length": 64},
                     "options": {"max_epochs": 1, "batch_size": 8, "num_threads": 1}},
           "curve": {"shares": [0.5, 1.0]}, "rerank": {"metrics": ["student"]}}
    (tmp / "pipe.yaml").write_text(yaml.safe_dump(cfg))
    p = Pipeline.from_file(tmp / "pipe.yaml", tmp / "run", progress=False)
    p.run()
    return p.run_dir


@pytest.mark.slow  # a browser process
def test_report_renders_in_a_browser_with_its_structure(run_dir, tmp_path):
    exe = _chromium()
    page = run_dir / "report.html"
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _browser(exe, "--virtual-time-budget=10000", "--dump-dom", probed.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp_path / "report.png"
    res = _browser(exe, f"--screenshot={shot}", "--window-size=1100,2400", page.as_uri())
    assert res.returncode == 0 and shot.stat().st_size > 20_000, res.stderr[-2000:]
    if os.environ.get("CSEM_REPORT_SCREENSHOT"):  # where the docs keep it
        shutil.copy(shot, os.environ["CSEM_REPORT_SCREENSHOT"])
    parsed = Sections()
    parsed.feed(dom.stdout)
    assert parsed.probed, "the page's load event never ran"
    ids = [s["id"] for s in parsed.sections]
    assert ids[0] == "verdict", ids
    for key in ("data", "judge", "agreement", "baselines", "curve", "gate"):
        assert key in ids, key
    for s in parsed.sections:  # each section holds its own table (a table per section, not all at the end)
        if s["id"] in ("verdict", "judge", "agreement", "baselines", "curve", "gate", "rerank"):
            assert s["tables"] >= 1, s["id"]
        for img in s["images"]:  # each figure decoded by the browser at a non-trivial size
            assert img["w"] >= 300 and img["h"] >= 200, (s["id"], img["alt"], img["w"], img["h"])
    by_id = {s["id"]: s for s in parsed.sections}
    for key in ("agreement", "baselines", "curve"):
        assert by_id[key]["images"], f"no figure in section {key}"
    scatter = by_id["agreement"]["images"][0]
    marks = _marks(scatter["src"])
    test = [r for r in read_records(run_dir / "scored.jsonl") if r.get("split") == "test"]
    assert marks["points"] >= len(test), marks  # every held-out candidate a point (and the per-source points)
    assert marks["longest_line"] <= 2, marks  # the diagonal; no line through the data


def _marks(src: str) -> dict:
    from PIL import Image

    data = base64.b64decode(src.split(",", 1)[1])
    return json.loads(Image.open(io.BytesIO(data)).text["Description"])
