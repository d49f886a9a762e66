"""CSEM stage i: collect candidates by sampling from one or several generators.

Wang et al. (CSEM, Sec. IV-B) sample candidates with top-k sampling (k = 50) from several
generation-model checkpoints, add the reference, and either keep every candidate or pick one per
source at random. This module does that, deterministically under a seed, and writes each finished
(source, generator, sample) as it goes so an interrupted run resumes without repeating work.

Candidate records (see :mod:`csem.data.records`): ``id = "<source id>/<system>/<k>"``,
``doc_id`` (the source id), ``system_id`` (the generator's name, or ``reference``), ``source``,
``candidate``, ``reference``, and provenance columns ``collect.generator`` (URI),
``collect.checkpoint`` (model identity), ``collect.decoding`` (dict), ``collect.seed``,
``collect.sample`` (k).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from csem.collect.prompts import render_task_prompt
from csem.data.records import references_of


class Generator(Protocol):
    """Anything that turns chat messages into ``n`` candidate texts."""

    identity: str

    def generate(self, messages: list[dict[str, str]], *, n: int, seed: int, **decoding: Any) -> list[str]: ...


class DecodingConfig(BaseModel):
    """Decoding settings of stage i (the paper: top-k sampling, k = 50)."""

    model_config = ConfigDict(extra="forbid")
    strategy: Literal["top_k", "top_p", "beam", "diverse_beam"] = "top_k"
    top_k: int = Field(50, ge=1)
    top_p: float = Field(0.95, gt=0, le=1)
    temperature: float = Field(1.0, gt=0)
    max_tokens: int = Field(64, ge=1, le=4096)
    num_beams: int = Field(4, ge=1)
    num_beam_groups: int = Field(2, ge=1)
    diversity_penalty: float = 0.5


class GeneratorSpec(BaseModel):
    """One generator checkpoint: a backend URI, how many candidates to sample per source and,
    optionally, its own decoding settings (default: the run's), e.g. a higher temperature for a
    system meant to be weaker."""

    model_config = ConfigDict(extra="forbid")
    uri: str
    num_samples: int = Field(4, ge=1, le=1000)
    name: str | None = None  # the system_id of its candidates; default: derived from the URI
    decoding: DecodingConfig | None = None

    @property
    def system_id(self) -> str:
        return self.name or re.sub(r"[^A-Za-z0-9_.-]+", "-", self.uri.split("/")[-1]).strip("-")


@dataclass
class CollectSummary:
    """What stage i did: counts per outcome and the time spent (seconds)."""

    sources: int = 0
    generated: int = 0
    resumed: int = 0
    references: int = 0
    empty: int = 0
    duplicates: int = 0
    dropped: int = 0
    kept: int = 0
    seconds: float = 0.0
    per_system: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def sample_seed(seed: int, source_id: str, system: str, k: int) -> int:
    """A 31-bit seed for one sample, a pure function of its key (so order never changes a text)."""
    h = hashlib.sha256(f"{seed}|{source_id}|{system}|{k}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def open_generator(uri: str) -> Generator:
    """A generator for a URI: ``hf:MODEL`` (transformers) or any judge backend URI with ``generate``
    (``local``, ``llama-cpp:PATH``, ``openai:MODEL``; see :mod:`csem.judge.backends`)."""
    if uri.startswith("hf:"):
        from csem.collect.hf_generator import HFGenerator

        return HFGenerator(uri[3:])
    from csem.collect.backend_generator import BackendGenerator

    return BackendGenerator(uri)


def collect_candidates(
    sources: Iterable[dict],
    generators: list[GeneratorSpec],
    *,
    task: str = "summarize",
    decoding: DecodingConfig | None = None,
    seed: int = 0,
    include_reference: bool = True,
    keep: Literal["all", "one"] = "all",
    duplicates: Literal["drop", "keep"] = "drop",
    empty: Literal["drop", "keep"] = "drop",
    partial_path: str | Path | None = None,
    progress: bool = True,
    open_fn=open_generator,
) -> tuple[list[dict], CollectSummary]:
    """Sample candidates for every source from every generator (CSEM stage i).

    Args:
        sources: records with ``id`` (or ``doc_id``), ``source`` and optionally ``reference``.
        generators: the checkpoints to sample from, each with its ``num_samples`` (J).
        task: a task prompt name (:data:`csem.collect.prompts.TASK_PROMPTS`) or template.
        decoding: sampling settings; default top-k with k = 50 (the paper's choice).
        seed: the run seed; each sample's seed is derived from (seed, source, system, k).
        include_reference: add each source's reference(s) as candidates (system ``reference``).
        keep: ``all`` candidates, or ``one`` picked at random per source (CSEM Sec. IV-B).
        duplicates / empty: ``drop`` or ``keep`` candidates that repeat another candidate of the
            same source (after whitespace and case folding) or are empty; counted either way.
        partial_path: a JSONL file where each finished sample is appended; on a re-run its samples
            are reused (when made with the same decoding settings) and only the missing ones are
            generated.

    Returns:
        (candidate records, :class:`CollectSummary`).

    Raises:
        ValueError: a source has no id or an empty text; no generators; ids repeat.
    """
    decoding = decoding or DecodingConfig()
    for name, value, allowed in (("keep", keep, ("all", "one")), ("duplicates", duplicates, ("drop", "keep")),
                                 ("empty", empty, ("drop", "keep"))):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, got '{value}'")
    if not generators:
        raise ValueError("collect needs at least one generator")
    names = [g.system_id for g in generators]
    if len(set(names)) != len(names):
        raise ValueError(f"generator names must differ (got {names}); set 'name' for each")
    srcs = []
    seen_ids: set[str] = set()
    for i, s in enumerate(sources, start=1):
        sid = s.get("doc_id") or s.get("id")
        if sid is None:
            raise ValueError(f"source {i} has no 'id' or 'doc_id'")
        sid = str(sid)
        if sid in seen_ids:
            raise ValueError(f"source id '{sid}' repeats (source {i})")
        if not isinstance(s.get("source"), str) or not s["source"].strip():
            raise ValueError(f"source '{sid}' (row {i}) has an empty or missing 'source' text")
        seen_ids.add(sid)
        srcs.append((sid, s))
    summary = CollectSummary(sources=len(srcs))
    start = time.perf_counter()

    done: dict[str, dict] = {}
    partial = Path(partial_path) if partial_path else None
    if partial and partial.exists():
        for line in partial.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash: regenerate that sample
                done[rec["id"]] = rec
    sink = partial.open("a", encoding="utf-8") if partial else None

    raw: list[dict] = []
    try:
        from rich.progress import Progress

        total = len(srcs) * sum(g.num_samples for g in generators)
        with Progress(disable=not progress, transient=False) as bar:
            task_id = bar.add_task("collect", total=total)
            for spec in generators:
                decoding_dict = (spec.decoding or decoding).model_dump()
                # a sample resumes only if it was made with the same decoding settings
                fresh = {rid: rec for rid, rec in done.items() if rec.get("collect.decoding") == decoding_dict}
                gen = None
                for sid, s in srcs:
                    todo = [k for k in range(spec.num_samples) if f"{sid}/{spec.system_id}/{k}" not in fresh]
                    if todo and gen is None:
                        gen = open_fn(spec.uri)
                    messages = render_task_prompt(task, s["source"])
                    for k in range(spec.num_samples):
                        rid = f"{sid}/{spec.system_id}/{k}"
                        if rid in fresh:
                            raw.append(fresh[rid])
                            summary.resumed += 1
                            bar.advance(task_id)
                            continue
                        sd = sample_seed(seed, sid, spec.system_id, k)
                        text = gen.generate(messages, n=1, seed=sd, **decoding_dict)[0]
                        rec = {
                            "id": rid, "doc_id": sid, "system_id": spec.system_id,
                            "source": s["source"], "candidate": text, "reference": s.get("reference"),
                            "collect.generator": spec.uri, "collect.checkpoint": getattr(gen, "identity", spec.uri),
                            "collect.decoding": decoding_dict, "collect.seed": sd, "collect.sample": k,
                        }
                        raw.append(rec)
                        summary.generated += 1
                        if sink:
                            sink.write(json.dumps(rec, ensure_ascii=False) + "\n")
                            sink.flush()
                        bar.advance(task_id)
                if gen is not None and hasattr(gen, "close"):
                    gen.close()
    finally:
        if sink:
            sink.close()

    by_source: dict[str, list[dict]] = {sid: [] for sid, _ in srcs}
    for rec in raw:
        by_source[rec["doc_id"]].append(rec)
    if include_reference:
        for sid, s in srcs:
            for j, ref in enumerate(references_of(s)):
                by_source[sid].append({
                    "id": f"{sid}/reference/{j}", "doc_id": sid, "system_id": "reference", "source": s["source"],
                    "candidate": ref, "reference": s.get("reference"), "collect.generator": "reference",
                    "collect.checkpoint": "reference", "collect.decoding": None, "collect.seed": None,
                    "collect.sample": j,
                })
                summary.references += 1

    out: list[dict] = []
    for sid, _ in srcs:
        pool = []
        seen_text: set[str] = set()
        for rec in sorted(by_source[sid], key=lambda r: r["id"]):
            norm = _norm(rec["candidate"] or "")
            if not norm:
                summary.empty += 1
                rec["collect.flag"] = "empty"
                if empty == "drop":
                    summary.dropped += 1
                    continue
            elif norm in seen_text:
                summary.duplicates += 1
                rec["collect.flag"] = "duplicate"
                if duplicates == "drop":
                    summary.dropped += 1
                    continue
            seen_text.add(norm)
            pool.append(rec)
        if keep == "one" and pool:
            rng = random.Random(sample_seed(seed, sid, "keep-one", 0))
            pool = [rng.choice(pool)]
        out.extend(pool)
    summary.kept = len(out)
    for rec in out:
        summary.per_system[rec["system_id"]] = summary.per_system.get(rec["system_id"], 0) + 1
    summary.seconds = time.perf_counter() - start
    return out, summary
