"""Where a warm start's initial student is found (``TrainConfig.init``, ``csem train --init``).

A reference is a model folder written by ``csem train`` (or [`EvaluationModel.save`][csem.model.EvaluationModel.save]), or
``package:NAME`` for a student shipped inside csem (``csem/model/students/NAME``).
"""

from __future__ import annotations

from pathlib import Path

#: students shipped with csem (``package:NAME``)
PACKAGED = Path(__file__).resolve().parent / "students"


def resolve(ref: str) -> Path:
    """The folder of an initial student.

    Args:
        ref: a model folder path (``~`` expanded) or ``package:NAME``.

    Returns:
        The folder (its contents are checked when it is loaded).

    Raises:
        FileNotFoundError: no such folder, or no shipped student of that name (the message lists
            the shipped ones).
    """
    if ref.startswith("package:"):
        name = ref.split(":", 1)[1]
        folder = PACKAGED / name
        if not name or "/" in name or ".." in name or not folder.is_dir():
            shipped = sorted(p.name for p in PACKAGED.iterdir() if p.is_dir()) if PACKAGED.is_dir() else []
            raise FileNotFoundError(f"no shipped student '{name}' (shipped: {', '.join(shipped) or 'none'})")
        return folder
    folder = Path(ref).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such model folder (the initial student of a warm start)")
    return folder
