"""The teacher pool of the teacher-scale benchmark (issue 23): the summaries that already exist in
../shared/data, judged by one local LLM judge through ``csem annotate``, kept compact under
``benchmarks/data/teacher_pool/`` so later runs and other benchmarks reuse the judgments.

Sub-commands (run from the checkout root or anywhere; paths are relative to this file)::

    python benchmarks/teacher_pool.py build            # pool files + judging order (deterministic)
    python benchmarks/teacher_pool.py chunk K          # write chunk K's candidate file (csem records)
    python benchmarks/teacher_pool.py compact K        # keep chunk K's judgments as judged/chunk-K.jsonl.gz
    python benchmarks/teacher_pool.py status           # how far the pool is judged
    python benchmarks/teacher_pool.py provenance       # write provenance.json
    python benchmarks/teacher_pool.py extend           # rule-made training candidates (extension/)
    python benchmarks/teacher_pool.py export --form F --extended   # one csem record file of a whole form
    python benchmarks/teacher_pool.py chunk K --extension  # chunk K of the extension left by the GPU run

``benchmarks/teacher_pool_judge.sh`` loops over the chunks with ``csem annotate`` (probs mode, the
SQLite cache at ``benchmarks/data/teacher_pool/cache.sqlite``, git-ignored), so an interrupted run
resumes where it stopped.

Layout of ``benchmarks/data/teacher_pool/``:

* ``sources.jsonl.gz``: one row per distinct source text: ``source_id`` (``s-`` + sha1 of the text,
  12 hex), ``article`` (``a-`` + sha1 of the first 400 lower-cased alphanumerics: the same news
  article in two datasets, tokenised differently, gets one ``article``; the train/test split is by
  article), ``text``.
* ``candidates.jsonl.gz``: one row per candidate, **in judging order**: ``id``
  (``<dataset>/<doc_id>/<system_id>``), ``source_id``, ``dataset`` (summeval | realsumm | newsroom |
  qags), ``doc_id`` (the dataset's own), ``system_id``, ``split`` (test | train), ``candidate``,
  ``human`` (the dataset's human scores: SummEval expert means of 4 aspects, REALSumm LitePyramid
  recall, Newsroom worker means of 4 aspects, QAGS consistency).
* ``judged/chunk-NNNN.jsonl.gz``: ``id``, ``score`` (the judge's probability-weighted score, 1-5, or
  null), ``mass`` (valid-score probability mass), ``missing`` (reason or null);
  ``judged/chunks.jsonl``: per chunk, candidates, seconds of the ``csem annotate`` call, dates.
* ``provenance.json``: judge URI, model file sha256, backend id, rubric id and version, mode, csem
  version and commit, date, the judging order's rules.
* ``extension/candidates.jsonl.gz``: more **training** candidates made by rule for the training
  sources (:func:`extend`; no test article is touched): extractive summaries (the lead 1-3 sentences and
  random 2-4-sentence extracts in source order, like REALSumm's extractive systems) and rule-made
  variants of the existing training candidates (:mod:`csem.data.contrasts`: relevance, consistency and
  coherence perturbations), in the same row layout (``dataset`` = the source's dataset, ``system_id`` =
  ``extract:<kind>`` or ``perturbed:<perturbation>``, ``origin`` = the perturbed candidate's id,
  ``human`` = {}). ``--extended`` forms judge them after the pool's own candidates. The pool's own judge
  (llama.cpp on a CPU) judges those the GPU run (``forms/hf-bf16``) left, in chunks of their own
  (``chunk K --extension``; :func:`extension_todo`), kept as ``judged/ext-NNNN.jsonl.gz``.
* ``forms/<NAME>/``: the same candidates judged again under another *form* (another rubric wording or
  judge; ``--form NAME`` on ``chunk``, ``compact``, ``status``, ``provenance``): ``chunk-NNNN.jsonl.gz``,
  ``chunks.jsonl`` and ``provenance.json`` as above. A form judges the test candidates first (its
  chunks 0-10 hold the 1,018 test candidates and the first 82 training ones), then the training ones,
  each split in the pool's judging order. Two forms of one aspect by one judge give the teacher's
  parallel-form reliability (``benchmarks/bench_teacher_reliability.py``).

Texts as the csem loaders return them (:mod:`csem.data.loaders`): SummEval's untokenised article and
tokenised summary, REALSumm's tokenised texts, Newsroom's released texts with the ``</p><p>``
paragraph markup turned into blank lines, QAGS's untokenised texts.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
POOL = HERE.parents[1] / "benchmarks" / "data" / "teacher_pool"  # the pool stays with the suite
WORK = HERE.parents[1] / "benchmarks" / ".cache" / "teacher_pool"  # chunk inputs and annotate outputs (git-ignored)
CHUNK = 100  # ~30 min per chunk on the shared 2-core machine (1 llama.cpp thread)
TEST_TARGET = 1000  # held-out test candidates (>= 1000), split by article
#: datasets whose articles are drawn for the test pool: QAGS has one summary per article, which
#: summary-level correlation (within a source) cannot use, and its prompts cost ~3x (no shared prefix)
TEST_DATASETS = ("summeval", "realsumm", "newsroom")
SEED = 23
DATASETS = ("summeval", "realsumm", "newsroom", "qags")


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def article_key(text: str) -> str:
    """``a-`` + sha1 of the first 400 lower-cased ASCII alphanumerics of an article: identical for the
    same article tokenised differently (SummEval vs REALSumm vs QAGS copies of one CNN/DM story)."""
    return "a-" + _sha(re.sub(r"[^a-z0-9]", "", text.lower())[:400])


def write_jsonl_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    with tmp.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as f:
        f.write(text.encode("utf-8"))  # no time stamp or name in the header: a rebuild gives the same bytes
    tmp.replace(path)


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ----------------------------------------------------------------------------------------------
# build
# ----------------------------------------------------------------------------------------------

def _load_all(data_dir: Path | None) -> list[dict]:
    """Every candidate of the four sets as ``{dataset, doc_id, system_id, source, candidate, human}``."""
    from csem.data.loaders import load_newsroom, load_qags, load_realsumm, load_summeval

    d = data_dir
    out = []
    for name, recs in (("summeval", load_summeval(d / "summeval" if d else None)),
                       ("realsumm", load_realsumm(d / "realsumm" if d else None)),
                       ("newsroom", load_newsroom(d / "newsroom" if d else None)),
                       ("qags", load_qags(d / "qags" if d else None))):
        for r in recs:
            src = r["source"].replace("</p><p>", "\n\n") if name == "newsroom" else r["source"]
            human = {k.split(".", 1)[1]: r[k] for k in r if k.startswith("human.")}
            out.append({"dataset": name, "doc_id": r["doc_id"], "system_id": r["system_id"], "source": src,
                        "candidate": r["candidate"], "human": human})
    return out


def build(data_dir: Path | None = None) -> dict:
    """Write ``sources.jsonl.gz`` and ``candidates.jsonl.gz`` (judging order) under :data:`POOL`.

    Test pool: articles drawn at random (seed :data:`SEED`) from each of :data:`TEST_DATASETS` in
    proportion to its size until :data:`TEST_TARGET` candidates (a QAGS summary of a drawn article
    goes with it). Within each split, sources follow one another so that the next source always
    comes from the dataset with the smallest share of its candidates placed so far (every prefix
    mixes the datasets in proportion). The two splits alternate source by source (the one with
    fewer candidates placed next) until the test pool is placed, then the training candidates follow.
    """
    rows = _load_all(data_dir)
    sources: dict[str, dict] = {}
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        sid = "s-" + _sha(r["source"])
        sources.setdefault(sid, {"source_id": sid, "article": article_key(r["source"]), "text": r["source"]})
        r["source_id"] = sid
        r["id"] = f"{r['dataset']}/{r['doc_id']}/{r['system_id']}"
        by_source[sid].append(r)
    total = defaultdict(int)
    for r in rows:
        total[r["dataset"]] += 1
    rng = random.Random(SEED)
    # articles -> sources; a source belongs to one dataset
    art_sources: dict[str, list[str]] = defaultdict(list)
    for sid, s in sources.items():
        art_sources[s["article"]].append(sid)
    ds_articles: dict[str, list[str]] = {d: sorted({sources[r["source_id"]]["article"] for r in rows if r["dataset"] == d})
                                         for d in DATASETS}
    for d in DATASETS:
        rng.shuffle(ds_articles[d])
    test_articles: set[str] = set()

    def n_test(d: str) -> int:
        return sum(1 for r in rows if r["dataset"] == d and sources[r["source_id"]]["article"] in test_articles)

    n_test_pool = sum(total[d] for d in TEST_DATASETS)
    for d in TEST_DATASETS:
        quota = round(TEST_TARGET * total[d] / n_test_pool)
        it = iter(ds_articles[d])
        while n_test(d) < quota:
            test_articles.add(next(it))
    order: list[dict] = []

    def interleave(split_rows: list[dict]) -> list[dict]:
        srcs: dict[str, list[str]] = defaultdict(list)
        seen = set()
        for r in split_rows:
            if r["source_id"] not in seen:
                seen.add(r["source_id"])
                srcs[r["dataset"]].append(r["source_id"])
        for d in srcs:
            srcs[d].sort()
            rng.shuffle(srcs[d])
        size = {d: sum(len(by_source[s]) for s in srcs[d]) for d in srcs}
        placed = defaultdict(int)
        out = []
        while any(srcs[d] for d in srcs):
            d = min((d for d in srcs if srcs[d]), key=lambda d: (placed[d] / size[d], d))
            sid = srcs[d].pop(0)
            group = sorted(by_source[sid], key=lambda r: r["system_id"])
            out.extend(group)
            placed[d] += len(group)
        return out

    test_rows = [r for r in rows if sources[r["source_id"]]["article"] in test_articles]
    train_rows = [r for r in rows if sources[r["source_id"]]["article"] not in test_articles]
    # test and training sources alternate (the split with fewer candidates placed goes next) until
    # the test pool is placed: a run that judges only part of the pool has both a test pool and
    # training labels; the training order (the nested pools) is the same either way
    queues = {split: [[r for r in part_rows if r["source_id"] == sid]
                      for sid in dict.fromkeys(r["source_id"] for r in part_rows)]
              for split, part_rows in (("test", interleave(test_rows)), ("train", interleave(train_rows)))}
    placed = {"test": 0, "train": 0}
    while queues["test"] or queues["train"]:
        split = min((s for s in ("test", "train") if queues[s]), key=lambda s: (placed[s], s))
        group = queues[split].pop(0)
        placed[split] += len(group)
        for r in group:
            order.append({"id": r["id"], "source_id": r["source_id"], "dataset": r["dataset"], "doc_id": r["doc_id"],
                          "system_id": r["system_id"], "split": split, "candidate": r["candidate"],
                          "human": r["human"]})
    ids = [r["id"] for r in order]
    assert len(ids) == len(set(ids)) == len(rows), "candidate ids repeat"
    used = {r["source_id"] for r in order}
    write_jsonl_gz(POOL / "sources.jsonl.gz", [sources[s] for s in sorted(used)])
    write_jsonl_gz(POOL / "candidates.jsonl.gz", order)
    summary = {"candidates": len(order), "sources": len(used), "articles": len({sources[s]["article"] for s in used}),
               "test_candidates": len(test_rows), "train_candidates": len(train_rows),
               "by_dataset": {d: {"test": sum(1 for r in test_rows if r["dataset"] == d),
                                  "train": sum(1 for r in train_rows if r["dataset"] == d)} for d in DATASETS}}
    print(json.dumps(summary, indent=1))
    return summary


# ----------------------------------------------------------------------------------------------
# chunks
# ----------------------------------------------------------------------------------------------

# ----------------------------------------------------------------------------------------------
# extension: rule-made training candidates
# ----------------------------------------------------------------------------------------------

EXT = POOL / "extension"
#: extracts per training source: the lead 1, 2, 3 sentences and this many random 2-4-sentence extracts
EXTRACTS = 5
#: rule-made variants per existing training candidate, each from another family (csem.data.contrasts)
VARIANTS = 2
VARIANT_FAMILIES = ("relevance", "consistency", "coherence")


def extend(seed: int = SEED) -> dict:
    """Write ``extension/candidates.jsonl.gz``: rule-made training candidates for every training source
    (see the module docstring), deterministic given ``seed``. Extracts are cut from the source with
    csem's sentence splitter (``syntok``); variants come from :mod:`csem.data.contrasts` (a text equal
    to an existing candidate of its source is skipped). No LLM call."""
    from csem.data import contrasts as C

    sources, cands = load_pool()
    train = [r for r in cands if r["split"] == "train"]
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in train:
        by_source[r["source_id"]].append(r)
    others = sorted(by_source)
    rows: list[dict] = []
    for sid in by_source:  # pool order (first seen in judging order)
        src = sources[sid]["text"]
        group = by_source[sid]
        seen = {" ".join(r["candidate"].split()).lower() for r in group}

        def add(system_id: str, text: str, origin: str | None = None) -> None:
            key = " ".join(text.split()).lower()
            if not key or key in seen:
                return
            seen.add(key)
            rows.append({"id": f"ext/{sid}/{system_id}", "source_id": sid, "dataset": group[0]["dataset"],
                         "doc_id": group[0]["doc_id"], "system_id": system_id, "split": "train",
                         "candidate": text, "human": {}, "origin": origin})

        sents = [x.strip() for x in C.split_sentences(src) if len(x.split()) >= 4][:40]
        for k in (1, 2, 3):
            if len(sents) >= k:
                add(f"extract:lead-{k}", " ".join(sents[:k]))
        rng = C.rng_for(seed, sid, "extracts")
        for i in range(EXTRACTS):
            if len(sents) < 4:
                break
            k = rng.randint(2, min(4, len(sents) - 1))
            pick = sorted(rng.sample(range(len(sents)), k))
            add(f"extract:random-{i}", " ".join(sents[j] for j in pick))
        other = sources[others[(others.index(sid) + 1) % len(others)]]["text"]
        ctx = C.Context(source=src, other=other)
        for r in group:
            fams = list(VARIANT_FAMILIES)
            C.rng_for(seed, r["id"], "families").shuffle(fams)
            made = 0
            for fam in fams:
                if made == VARIANTS:
                    break
                names = sorted(C.FAMILIES[fam])
                C.rng_for(seed, r["id"], fam).shuffle(names)
                for name in names:
                    out = C.FAMILIES[fam][name](r["candidate"], C.rng_for(seed, r["id"], name), ctx)
                    if out is not None:
                        before = len(rows)
                        add(f"perturbed:{name}:{r['system_id']}", out.text, origin=r["id"])
                        made += len(rows) > before
                        break
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "extension ids repeat"
    write_jsonl_gz(EXT / "candidates.jsonl.gz", rows)
    kinds: dict[str, int] = defaultdict(int)
    for r in rows:
        kinds[r["system_id"].split(":")[0] if r["system_id"].startswith("extract") else
              "perturbed:" + r["system_id"].split(":")[1]] += 1
    summary = {"candidates": len(rows), "sources": len({r["source_id"] for r in rows}), "kinds": dict(sorted(kinds.items()))}
    print(json.dumps(summary, indent=1))
    return summary


def form_dir(form: str = "") -> Path:
    """Where a form's compact judgments live: ``judged/`` for the pool's own judge and rubric (``""``),
    ``forms/<form>/`` for another form."""
    if form and not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", form):
        raise SystemExit(f"form name {form!r}: use lower-case letters, digits, '.', '_' or '-'")
    return POOL / "forms" / form if form else POOL / "judged"


def work_dir(form: str = "") -> Path:
    return WORK / "forms" / form if form else WORK


def load_pool(form: str = "", extended: bool = False) -> tuple[dict[str, dict], list[dict]]:
    """``(sources by source_id, candidates in judging order)`` from :data:`POOL`; for another ``form``
    the test candidates come first (see the module docstring); ``extended``: the extension's training
    candidates follow the pool's own."""
    sources = {s["source_id"]: s for s in read_jsonl_gz(POOL / "sources.jsonl.gz")}
    cands = read_jsonl_gz(POOL / "candidates.jsonl.gz")
    if form:
        cands = [r for r in cands if r["split"] == "test"] + [r for r in cands if r["split"] != "test"]
    if extended:
        cands += read_jsonl_gz(EXT / "candidates.jsonl.gz")
    return sources, cands


def articles_of(dataset: str, sources: dict[str, dict], cands: list[dict]) -> set[str]:
    """The article keys (``sources.jsonl.gz``'s ``article``, which joins the same article across datasets)
    of every candidate of ``dataset``, in any split: what a start kept clean for that dataset must not read."""
    return {sources[c["source_id"]]["article"] for c in cands if c["dataset"] == dataset}


def n_chunks(form: str = "", extension: bool = False) -> int:
    cands = extension_todo() if extension else load_pool(form)[1]
    return (len(cands) + CHUNK - 1) // CHUNK


#: the form whose judgments of extension candidates the pool's own judge does not repeat (the GPU run)
EXTENSION_SKIP_FORM = "hf-bf16"


def extension_todo() -> list[dict]:
    """The extension candidates left for the pool's own judge (llama.cpp on a CPU): those that
    :data:`EXTENSION_SKIP_FORM` has not judged, in the extension's order (a source's candidates stay
    together, so the judge reuses the source's prompt prefix). Chunk ``K`` of them (``chunk K
    --extension``) is kept as ``judged/ext-K.jsonl.gz`` beside the pool's own chunks."""
    skip = judged(EXTENSION_SKIP_FORM)
    return [r for r in read_jsonl_gz(EXT / "candidates.jsonl.gz") if r["id"] not in skip]


def chunk_name(k: int, extension: bool = False) -> str:
    """``chunk-K`` (the pool's order) or ``ext-K`` (:func:`extension_todo`'s order)."""
    return f"{'ext' if extension else 'chunk'}-{k:04d}"


def _record(r: dict, sources: dict[str, dict]) -> dict:
    """A pool candidate as the csem record ``csem annotate`` reads (``doc_id`` = source id)."""
    return {"id": r["id"], "doc_id": r["source_id"], "system_id": r["system_id"], "dataset": r["dataset"],
            "source": sources[r["source_id"]]["text"], "candidate": r["candidate"]}


def export(form: str, extended: bool = False) -> Path:
    """All of a form's candidates (``extended``: with the extension's) as one csem record file under
    :data:`WORK`, in the form's judging order: for a run that judges everything in one call (a GPU)."""
    sources, cands = load_pool(form, extended)
    path = work_dir(form) / ("all-extended.input.jsonl" if extended else "all.input.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in cands:
            f.write(json.dumps(_record(r, sources), ensure_ascii=False) + "\n")
    return path


def write_chunk(k: int, form: str = "", extension: bool = False) -> Path:
    """Chunk ``k``'s csem record file (``id``, ``doc_id`` = source id, ``system_id``, ``dataset``,
    ``source``, ``candidate``) under :data:`WORK` (a form's: ``WORK/forms/<form>``); returns its path.
    ``extension``: chunk ``k`` of :func:`extension_todo` (the pool's own form only)."""
    if extension and form:
        raise SystemExit("--extension judges with the pool's own judge and rubric: no --form")
    sources, cands = load_pool(form)
    if extension:
        cands = extension_todo()
    part = cands[k * CHUNK:(k + 1) * CHUNK]
    if not part:
        raise SystemExit(f"chunk {k}: past the end ({len(cands)} candidates, {n_chunks(form, extension)} chunks)")
    path = work_dir(form) / f"{chunk_name(k, extension)}.input.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in part:
            f.write(json.dumps(_record(r, sources), ensure_ascii=False) + "\n")
    return path


def compact(k: int, seconds: float | None = None, started: str | None = None, finished: str | None = None,
            new: int | None = None, form: str = "", extension: bool = False) -> Path:
    """Keep chunk ``k``'s judgments (``id``, ``score``, ``mass``, ``missing``) as
    ``judged/chunk-K.jsonl.gz`` (a form's: ``forms/<form>/``; ``extension``: ``judged/ext-K.jsonl.gz``) and
    append its timing to ``chunks.jsonl`` there (``new``: the judgments the chunk's ``csem annotate``
    made, as it reported them; the rest were cache hits)."""
    name = chunk_name(k, extension)
    timing = {"chunk": k, **({"extension": True} if extension else {}), "new_judgments": new,
              "seconds": seconds, "started": started, "finished": finished}
    return keep_judgments(work_dir(form) / f"{name}.judged.jsonl", form_dir(form) / f"{name}.jsonl.gz", timing)


def keep_judgments(out: Path, dest: Path, timing: dict) -> Path:
    """``csem annotate``'s output ``out`` (and its ``.judge.json``) kept compact as ``dest``
    (``id``, ``score``, ``mass``, ``missing``); ``timing`` plus counts appended to ``chunks.jsonl`` beside it."""
    prov = json.loads((out.with_name(out.name + ".judge.json")).read_text())
    (col,) = [c for c in prov["columns"]]
    rows = [json.loads(line) for line in out.open(encoding="utf-8") if line.strip()]
    keep = [{"id": r["id"], "score": r.get(col), "mass": r.get(f"{col}.mass"), "missing": r.get(f"{col}.missing")}
            for r in rows]
    write_jsonl_gz(dest, keep)
    with (dest.parent / "chunks.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({**timing, "candidates": len(keep), "missing": sum(r["score"] is None for r in keep),
                            "column": col}) + "\n")
    return dest


def judged(form: str = "") -> dict[str, dict]:
    """Every compacted judgment of ``form`` so far: ``id -> {score, mass, missing}``."""
    out = {}
    for p in sorted(form_dir(form).glob("*.jsonl.gz")):
        for r in read_jsonl_gz(p):
            out[r["id"]] = r
    return out


def provenance(judge: str, rubric: str, threads: int, form: str = "", *, model_path: Path | None = None,
               cache: Path | None = None, backend_options: dict | None = None, command: str | None = None,
               extra: dict | None = None, dest: Path | None = None) -> Path:
    """Write ``provenance.json``: judge URI, model file and its sha256, the backend id found in the
    cache, rubric id/version/fingerprint, mode, csem version and commit, date, the pool's rules.
    A run elsewhere (the GPU run) names its ``model_path``, ``cache``, ``backend_options``, ``command``,
    ``extra`` fields and ``dest``."""
    import subprocess
    import sqlite3
    import time

    import csem
    from csem.assets import resolve_gguf, sha256_file
    from csem.rubrics import load_rubrics

    target = judge.split(":", 1)[1] if judge.startswith("llama-cpp:") else judge
    model = Path(model_path) if model_path else Path(resolve_gguf(target))
    rub = load_rubrics([rubric])[0]
    backends = []
    cache = Path(cache) if cache else POOL / "cache.sqlite"
    if cache.exists():
        with sqlite3.connect(cache) as db:
            backends = [b for (b,) in db.execute("SELECT DISTINCT backend FROM judgments")]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    data = {"judge": judge, "model_file": model.name, "model_sha256": sha256_file(model), "backend_ids": backends,
            "backend_options": backend_options or {"n_threads": threads, "n_ctx": 8192},
            "rubric": {"id": rub.id, "version": rub.version, "aspect": rub.aspect,
                       "scale": [rub.scale.min, rub.scale.max], "fingerprint": rub.fingerprint},
            "mode": "probs (G-Eval probability-weighted score, Liu et al. 2023 Eq. 1)",
            "csem_version": csem.__version__, "csem_commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "command": command or "bash benchmarks/teacher_pool_judge.sh (csem annotate per chunk of "
                       f"{CHUNK} candidates, cache benchmarks/data/teacher_pool/cache.sqlite)",
            "pool": {"datasets": list(DATASETS), "test_datasets": list(TEST_DATASETS), "test_target": TEST_TARGET,
                     "seed": SEED, "chunk": CHUNK,
                     "order": "test candidates first, then training candidates source by source, the next "
                              "source from the dataset with the smallest share of its candidates placed",
                     "split": "by article (first 400 lower-cased alphanumerics of the source)"}}
    if form:
        data["form"] = form
        data["pool"]["order"] = "the test candidates first, then the training candidates, each in the pool's judging order"
    data.update(extra or {})
    dest = dest or (form_dir(form) / "provenance.json" if form else POOL / "provenance.json")
    dest.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return dest


def status(form: str = "") -> dict:
    _, cands = load_pool(form)
    got = judged(form)
    s = {"candidates": len(cands), "judged": sum(1 for r in cands if r["id"] in got),
         "judged_test": sum(1 for r in cands if r["split"] == "test" and r["id"] in got),
         "judged_train": sum(1 for r in cands if r["split"] == "train" and r["id"] in got),
         "chunks_done": len(list(form_dir(form).glob("chunk-*.jsonl.gz"))), "chunks": n_chunks(form)}
    if not form:
        todo = extension_todo()
        s["extension"] = {"left_by_" + EXTENSION_SKIP_FORM: len(todo), "judged": sum(1 for r in todo if r["id"] in got),
                          "chunks_done": len(list(form_dir().glob("ext-*.jsonl.gz"))), "chunks": n_chunks(extension=True)}
    print(json.dumps(s))
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--data-dir", type=Path, default=None)
    c = sub.add_parser("chunk")
    c.add_argument("k", type=int)
    m = sub.add_parser("compact")
    m.add_argument("k", type=int)
    m.add_argument("--seconds", type=float, default=None)
    m.add_argument("--started", default=None)
    m.add_argument("--finished", default=None)
    m.add_argument("--new", type=int, default=None)
    t = sub.add_parser("status")
    n = sub.add_parser("n-chunks")
    v = sub.add_parser("provenance")
    sub.add_parser("extend")
    x = sub.add_parser("export")
    x.add_argument("--extended", action="store_true", help="with the extension's training candidates")
    for q in (c, m, t, n, v, x):
        q.add_argument("--form", default="", help="another form's judgments (forms/<NAME>/; default: the pool's)")
    for q in (c, m, n):
        q.add_argument("--extension", action="store_true",
                       help=f"the extension candidates {EXTENSION_SKIP_FORM} left, judged by the pool's own judge")
    v.add_argument("--judge", default="llama-cpp:qwen-0.5b")
    v.add_argument("--rubric", default="csem/summ-relevance-ref-free")
    v.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        build(a.data_dir)
    elif a.cmd == "chunk":
        print(write_chunk(a.k, a.form, a.extension))
    elif a.cmd == "compact":
        print(compact(a.k, a.seconds, a.started, a.finished, a.new, a.form, a.extension))
    elif a.cmd == "status":
        status(a.form)
    elif a.cmd == "n-chunks":
        print(n_chunks(a.form, a.extension))
    elif a.cmd == "extend":
        extend()
    elif a.cmd == "export":
        print(export(a.form, a.extended))
    elif a.cmd == "provenance":
        print(provenance(a.judge, a.rubric, a.threads, a.form))
    return 0


if __name__ == "__main__":
    sys.exit(main())
