"""The one JSON writer of csem: strict JSON (NaN and infinities become ``null``), written atomically.

Every JSON file csem writes (run state, metric cards, provenance sidecars, meta-evaluation and
benchmark results) goes through :func:`write_json`, so that a crash never leaves half a file and no
file holds the non-standard ``NaN`` token that strict JSON readers reject.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def json_safe(obj: Any) -> Any:
    """``obj`` with every float NaN/inf replaced by None (recursively through dicts, lists, tuples);
    numpy scalars become Python numbers. Other objects are returned unchanged."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    item = getattr(obj, "item", None)  # numpy scalar
    if callable(item) and type(obj).__module__ == "numpy" and getattr(obj, "ndim", None) == 0:
        return json_safe(item())
    return obj


def write_json(path: str | Path, obj: Any, *, indent: int | None = 2, default: Any = str) -> Path:
    """Write ``obj`` as strict JSON (UTF-8, NaN -> null) to ``path`` atomically; returns the path.

    The text goes to a temporary sibling (``<name>.tmp``) that is then renamed over ``path``
    (``os.replace``), so readers see the old file or the new one, never a partial one. The folder
    is created when missing.

    Args:
        default: called for objects JSON cannot encode (default ``str``; None raises TypeError).

    Raises:
        TypeError: an object cannot be encoded and ``default`` is None. OSError: the folder is
        not writable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(json_safe(obj), indent=indent, ensure_ascii=False, allow_nan=False, default=default)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
