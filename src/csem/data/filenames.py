"""The one safe-file-name function: every writer that builds a file name from data (a column, an
aspect, a system, a dataset name) goes through [`safe_filename`][csem.data.filenames.safe_filename]
or [`path_in`][csem.data.filenames.path_in], so no name from data can leave its folder.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

#: the longest name kept (a file system allows 255 bytes; room is left for a prefix and a suffix)
MAX_NAME = 100
#: names Windows reserves for devices, whatever their extension
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


def safe_filename(name: object, *, max_len: int = MAX_NAME) -> str:
    """A file name made from ``name`` that stays in the folder it is joined to.

    Letters, digits, ``.``, ``_`` and ``-`` are kept (other characters, path separators, NUL and
    control characters included, become ``_``; runs of dots become ``_``; a leading ``.`` or ``-`` is
    dropped); a Windows device name gets a leading ``_``. When anything was changed or cut, 8 hex
    digits of the sha256 of the original are appended, so two different names never give one file.

    Args:
        name: any value (``str()`` of it is used).
        max_len: the longest result, at least 16 characters.

    Returns:
        A non-empty name of at most ``max_len`` characters matching ``[A-Za-z0-9_][A-Za-z0-9._-]*``.
    """
    original = str(name)
    text = unicodedata.normalize("NFKD", original).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^A-Za-z0-9._-]", "_", text)
    text = re.sub(r"\.{2,}", "_", text)
    text = re.sub(r"_{2,}", "_", text).lstrip(".-") or "_"
    if text.split(".")[0].upper() in _RESERVED:
        text = "_" + text
    max_len = max(16, int(max_len))
    if text != original or len(text) > max_len:
        tag = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        text = f"{text[: max_len - 9].rstrip('.')}-{tag}"
    return text


def path_in(folder: str | Path, *parts: object, suffix: str = "") -> Path:
    """``folder / (safe parts joined by "_") + suffix``: a file path built from data, always inside ``folder``.

    Args:
        folder: the folder the file belongs in.
        parts: the pieces of the name (a prefix such as ``"scatter"``, then data: a column, an aspect).
        suffix: the extension, e.g. ``".png"`` (must itself be a plain ``.name``).

    Returns:
        The path; its parent is ``folder``.

    Raises:
        ValueError: ``suffix`` is not a plain extension (a programming error, not bad input).
    """
    if suffix and not re.fullmatch(r"\.[A-Za-z0-9]+", suffix):
        raise ValueError(f"suffix {suffix!r} is not a plain extension")
    stem = "_".join(safe_filename(p) for p in parts) or "_"
    if len(stem) > MAX_NAME + 40:  # several long parts: one safe name of the whole
        stem = safe_filename(stem, max_len=MAX_NAME + 40)
    path = Path(folder) / f"{stem}{suffix}"
    assert path.parent == Path(folder)
    return path
