"""benchmarks/teacher_pool.py and the committed teacher pool (benchmarks/data/teacher_pool/): the pool's
integrity (every candidate's source stored, the split disjoint by article, the test pool's size, the
judged chunks inside the pool) and a rebuild from ../shared/data giving the committed files byte for byte."""

import gzip
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "teacher_pool.py"


def _load_script():
    """The script as a module, loaded from its file (benchmarks/ is not a package; sys.path untouched)."""
    spec = importlib.util.spec_from_file_location("teacher_pool_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tp = _load_script()


def test_article_key_ignores_tokenisation_and_case():
    untok = "(CNN) Two CNN Heroes are among the survivors -- in Kathmandu, Nepal."
    tok = "( cnn ) two cnn heroes are among the survivors -- in kathmandu , nepal ."
    assert tp.article_key(untok) == tp.article_key(tok)
    assert tp.article_key(untok) != tp.article_key("A different article about Nepal.")


def test_committed_pool_is_consistent():
    sources, cands = tp.load_pool()
    ids = [c["id"] for c in cands]
    assert len(ids) == len(set(ids)) == 4894
    by_ds = {}
    for c in cands:
        by_ds[c["dataset"]] = by_ds.get(c["dataset"], 0) + 1
        assert c["source_id"] in sources
    assert by_ds == {"summeval": 1600, "realsumm": 2400, "newsroom": 420, "qags": 474}
    split_articles = {"test": set(), "train": set()}
    for c in cands:
        split_articles[c["split"]].add(sources[c["source_id"]]["article"])
    assert not split_articles["test"] & split_articles["train"]
    assert sum(c["split"] == "test" for c in cands) >= 1000
    # every source's candidates are contiguous in the judging order (the judge reuses the source's prefix)
    seen, prev = set(), None
    for c in cands:
        if c["source_id"] != prev:
            assert c["source_id"] not in seen, f"source {c['source_id']} split in the judging order"
            seen.add(c["source_id"])
            prev = c["source_id"]
    # judged chunks hold pool ids only, in their chunk's slice of the order
    for path in sorted((tp.POOL / "judged").glob("chunk-*.jsonl.gz")):
        k = int(path.name.split("-")[1].split(".")[0])
        rows = tp.read_jsonl_gz(path)
        assert [r["id"] for r in rows] == ids[k * tp.CHUNK:(k + 1) * tp.CHUNK]
        assert all(r["score"] is None or 1.0 <= r["score"] <= 5.0 for r in rows)


@pytest.mark.slow
def test_rebuild_gives_the_committed_files(tmp_path, monkeypatch):
    data = ROOT.parent / "shared" / "data"
    if not (data / "summeval" / "summeval.jsonl").exists():
        pytest.skip("../shared/data is not here")
    committed = {n: gzip.decompress((tp.POOL / n).read_bytes()) for n in ("sources.jsonl.gz", "candidates.jsonl.gz")}
    monkeypatch.setattr(tp, "POOL", tmp_path)
    summary = tp.build(data)
    assert summary["test_candidates"] == 1018
    for name, raw in committed.items():
        assert gzip.decompress((tmp_path / name).read_bytes()) == raw, name


def test_committed_forms_hold_the_test_candidates_first():
    """A form (the pool judged again under another rubric) judges the test candidates first, in the pool's
    order: its committed chunks hold exactly their slice of that order, with a provenance naming its rubric;
    a form name that is no plain folder name is refused."""
    _, cands = tp.load_pool("geval-relevance")
    n_test = sum(c["split"] == "test" for c in cands)
    assert all(c["split"] == "test" for c in cands[:n_test])
    assert [c["id"] for c in cands[:n_test]] == [c["id"] for c in tp.load_pool()[1] if c["split"] == "test"]
    folder = tp.form_dir("geval-relevance")
    assert folder == tp.POOL / "forms" / "geval-relevance"
    chunks = sorted(folder.glob("chunk-*.jsonl.gz"))
    assert len(chunks) * tp.CHUNK >= n_test  # the whole test pool is judged under this form
    ids = [c["id"] for c in cands]
    for path in chunks:
        k = int(path.name.split("-")[1].split(".")[0])
        rows = tp.read_jsonl_gz(path)
        assert [r["id"] for r in rows] == ids[k * tp.CHUNK:(k + 1) * tp.CHUNK]
        assert all(r["score"] is None or 1.0 <= r["score"] <= 5.0 for r in rows)
    import json

    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["form"] == "geval-relevance" and prov["rubric"]["id"] == "geval/summeval-relevance"
    with pytest.raises(SystemExit, match="form name"):
        tp.form_dir("../judged")


def test_committed_extension_is_rule_made_training_candidates_only():
    """The extension (teacher_pool.py extend) holds training sources only (no test article is touched),
    unique ids, texts that differ from the source's own candidates, and the same bytes when rebuilt."""
    sources, cands = tp.load_pool()
    ext = tp.read_jsonl_gz(tp.EXT / "candidates.jsonl.gz")
    test_articles = {sources[c["source_id"]]["article"] for c in cands if c["split"] == "test"}
    own = {}
    for c in cands:
        own.setdefault(c["source_id"], set()).add(" ".join(c["candidate"].split()).lower())
    assert len(ext) == len({r["id"] for r in ext}) == 13084
    for r in ext:
        assert r["split"] == "train" and sources[r["source_id"]]["article"] not in test_articles
        assert r["system_id"].split(":")[0] in ("extract", "perturbed")
        assert " ".join(r["candidate"].split()).lower() not in own[r["source_id"]]
        assert (r["origin"] is None) == r["system_id"].startswith("extract")
    _, extended = tp.load_pool(extended=True)
    assert [c["id"] for c in extended] == [c["id"] for c in cands] + [r["id"] for r in ext]


@pytest.mark.slow
def test_extend_rebuilds_the_committed_extension(tmp_path, monkeypatch):
    committed = gzip.decompress((tp.EXT / "candidates.jsonl.gz").read_bytes())
    monkeypatch.setattr(tp, "EXT", tmp_path)
    tp.extend()
    assert gzip.decompress((tmp_path / "candidates.jsonl.gz").read_bytes()) == committed


def test_committed_gpu_form_is_a_judged_part_of_the_extended_pool():
    """forms/hf-bf16 (the GPU run): every judged id is in the extended pool, scores on the 1-5 scale,
    the whole test pool judged, a provenance naming the same model file as the CPU judgments."""
    import json

    _, extended = tp.load_pool("hf-bf16", extended=True)
    got = tp.judged("hf-bf16")
    ids = {c["id"] for c in extended}
    assert got and set(got) <= ids
    assert all(r["score"] is None or 1.0 <= r["score"] <= 5.0 for r in got.values())
    assert all(c["id"] in got for c in extended if c["split"] == "test")
    prov = json.loads((tp.form_dir("hf-bf16") / "provenance.json").read_text())
    cpu = json.loads((tp.POOL / "provenance.json").read_text())
    assert prov["model_sha256"] == cpu["model_sha256"] and prov["backend_options"]["dtype"] == "bfloat16"


def test_extension_chunks_hold_what_the_gpu_run_left_in_order():
    """The pool's own judge takes the extension candidates the GPU form left (teacher_pool.py chunk K
    --extension): every committed judged/ext-K holds exactly chunk K of that order, scores on 1-5; a form
    cannot take extension chunks."""
    todo = tp.extension_todo()
    gpu = tp.judged(tp.EXTENSION_SKIP_FORM)
    ext_ids = [r["id"] for r in tp.read_jsonl_gz(tp.EXT / "candidates.jsonl.gz")]
    assert [r["id"] for r in todo] == [i for i in ext_ids if i not in gpu]
    assert tp.n_chunks(extension=True) == (len(todo) + tp.CHUNK - 1) // tp.CHUNK
    ids = [r["id"] for r in todo]
    for path in sorted((tp.POOL / "judged").glob("ext-*.jsonl.gz")):
        k = int(path.name.split("-")[1].split(".")[0])
        rows = tp.read_jsonl_gz(path)
        assert [r["id"] for r in rows] == ids[k * tp.CHUNK:(k + 1) * tp.CHUNK]
        assert all(r["score"] is None or 1.0 <= r["score"] <= 5.0 for r in rows)
    with pytest.raises(SystemExit, match="no --form"):
        tp.write_chunk(0, "geval-relevance", extension=True)
