"""CSEM stage i: collect candidates by sampling from one or several generators.

Wang et al. (CSEM, Sec. IV-B) sample candidates with top-k sampling (k = 50) from several
generation-model checkpoints, add the reference, and either keep every candidate or pick one per
source at random. This module does that, deterministically under a seed, and writes each finished
(source, generator, sample) as it goes so an interrupted run resumes without repeating work.

Candidate records (see [`csem.data.records`][]): ``id = "<source id>/<system>/<k>"``,
``doc_id`` (the source id), ``system_id`` (the generator's name, or ``reference``), ``source``,
``candidate``, ``reference``, and provenance columns ``collect.generator`` (URI),
``collect.checkpoint`` (model identity), ``collect.decoding`` (dict), ``collect.seed``,
``collect.sample`` (k), ``collect.finish_reason`` (``stop``, or ``length`` when the sample hit
``max_tokens``; see ``truncated`` for what is done with those).
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from csem.collect.prompts import render_task_prompt
from csem.data.jsonio import JsonlLog
from csem.data.records import references_of
from csem.errors import InputError
from csem.llm import GenerateConfig, Model, gather_all, get_model, run_sync

#: stage i's decoding unless the run or a generator says otherwise: top-k sampling with k = 50
#: (CSEM Sec. IV-B), temperature 1, at most 64 new tokens
DEFAULT_DECODING = GenerateConfig(temperature=1.0, top_k=50, top_p=1.0, max_tokens=64)


class GeneratorSpec(BaseModel):
    """One generator checkpoint: a backend URI ([`csem.llm`][]: ``local``, ``llama-cpp:PATH``,
    ``openai:MODEL``, ``hf:MODEL``, plug-ins), how many candidates to sample per source, backend
    options (e.g. ``base_url``, ``concurrency``) and, optionally, its own decoding settings, merged
    over the run's (e.g. a higher temperature for a system meant to be weaker)."""

    model_config = ConfigDict(extra="forbid")
    uri: str
    num_samples: int = Field(4, ge=1, le=1000)
    name: str | None = None  # the system_id of its candidates; default: derived from the URI
    decoding: GenerateConfig | None = None
    options: dict[str, Any] = Field(default_factory=dict)

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
    truncated: int = 0  # samples that stopped at max_tokens
    trimmed: int = 0  # of those, cut back to their last complete sentence (truncated: trim)
    kept_cut: int = 0  # of those, kept as generated and flagged (truncated: keep, or no complete sentence)
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


#: a sentence is complete when it ends with a terminal mark, optionally followed by closing quotes or brackets
SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*$")


def trim_to_sentence(text: str) -> str | None:
    """``text`` cut back to the end of its last complete sentence (one that ends with ``. ! ? …``,
    optionally followed by closing quotes or brackets; sentences split by
    `csem.data.text.split_sentences`), or ``None`` when no sentence is complete. A text that
    already ends a sentence comes back unchanged.

    Used on samples a generator stopped at ``max_tokens`` (``finish_reason == "length"``): with the
    64-token default a summary is often cut mid-sentence, which a reader (and csem's acceptability
    gate, [`csem.model.acceptability`][]) rejects while an LLM judge may not.
    """
    from csem.data.text import split_sentences

    sentences = split_sentences(text)
    for i in range(len(sentences) - 1, -1, -1):
        if SENTENCE_END.search(sentences[i]):
            # the sentences are exact substrings, in order: find the end of sentence i in text
            pos = 0
            for sent in sentences[: i + 1]:
                pos = text.index(sent, pos) + len(sent)
            return text[:pos]
    return None


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def decoding_of(spec: GeneratorSpec, decoding: GenerateConfig | None) -> GenerateConfig:
    """The decoding a generator samples with: `DEFAULT_DECODING`, then the run's ``decoding``,
    then the generator's own (each overriding the fields it sets); ``n`` and ``seed`` are per sample."""
    return DEFAULT_DECODING.merge(decoding).merge(spec.decoding).model_copy(update={"n": None, "seed": None})


def _check_sources(sources: Iterable[dict]) -> list[tuple[str, dict]]:
    srcs = []
    seen_ids: set[str] = set()
    for i, s in enumerate(sources, start=1):
        sid = s.get("doc_id") or s.get("id")
        if sid is None:
            raise InputError(f"source {i} has no 'id' or 'doc_id'")
        sid = str(sid)
        if sid in seen_ids:
            raise InputError(f"source id '{sid}' repeats (source {i})")
        if not isinstance(s.get("source"), str) or not s["source"].strip():
            raise InputError(f"source '{sid}' (row {i}) has an empty or missing 'source' text")
        seen_ids.add(sid)
        srcs.append((sid, s))
    return srcs


def _read_partial(partial: Path | None) -> dict[str, dict]:
    # a line cut by a crash is skipped by the log: that sample is generated again
    return {rec["id"]: rec for rec in JsonlLog(partial).read() if "id" in rec}


async def _sample_generator(spec: GeneratorSpec, decoding: GenerateConfig, srcs: list[tuple[str, dict]], task: str,
                            seed: int, done: dict[str, dict], sink, advance, summary: "CollectSummary") -> list[dict]:
    """Every sample of one generator: resumed ones from ``done``, the rest generated concurrently
    (as many in flight as the backend wrapper allows), each appended to ``sink`` when it finishes."""
    decoding_dict = decoding.model_dump(exclude_none=True)
    # a sample resumes only if it was made with the same decoding settings
    fresh = {rid: rec for rid, rec in done.items() if rec.get("collect.decoding") == decoding_dict}
    out: list[dict] = []
    todo: list[tuple[str, dict, int]] = []
    for sid, s in srcs:
        for k in range(spec.num_samples):
            rid = f"{sid}/{spec.system_id}/{k}"
            if rid in fresh:
                out.append(fresh[rid])
                summary.resumed += 1
                advance()
            else:
                todo.append((sid, s, k))
    if not todo:
        return out
    model: Model = get_model(spec.uri, **spec.options)
    try:
        model.check(decoding)

        async def one(sid: str, s: dict, k: int) -> None:
            sd = sample_seed(seed, sid, spec.system_id, k)
            answers = await model.generate(render_task_prompt(task, s["source"]), decoding.merge(GenerateConfig(n=1, seed=sd)))
            rec = {
                "id": f"{sid}/{spec.system_id}/{k}", "doc_id": sid, "system_id": spec.system_id,
                "source": s["source"], "candidate": answers[0].text.strip(), "reference": s.get("reference"),
                "collect.generator": spec.uri, "collect.checkpoint": model.id,
                "collect.decoding": decoding_dict, "collect.seed": sd, "collect.sample": k,
                "collect.finish_reason": answers[0].finish_reason,
            }
            out.append(rec)
            summary.generated += 1
            if sink:
                sink.append(rec)
            advance()

        await gather_all([one(*t) for t in todo])
    finally:
        model.close()
    return out


def _pool(by_source: dict[str, list[dict]], srcs, *, seed: int, keep: str, duplicates: str, empty: str,
          truncated: str, summary: "CollectSummary") -> list[dict]:
    """Trim, flag or drop samples cut at ``max_tokens``; flag empty and duplicate candidates (after
    whitespace and case folding), drop or keep them; keep all or one random candidate per source."""
    out: list[dict] = []
    for sid, _ in srcs:
        pool = []
        seen_text: set[str] = set()
        for rec in sorted(by_source[sid], key=lambda r: r["id"]):
            if rec.get("collect.finish_reason") == "length":
                summary.truncated += 1
                if truncated == "drop":
                    summary.dropped += 1
                    continue
                cut = trim_to_sentence(rec["candidate"] or "") if truncated == "trim" else None
                if cut is not None and cut != rec["candidate"]:
                    rec["collect.untrimmed"] = rec["candidate"]
                    rec["candidate"] = cut
                    summary.trimmed += 1
                elif cut is None:  # kept as generated (no complete sentence to cut back to, or truncated: keep)
                    rec["collect.flag"] = "truncated"
                    summary.kept_cut += 1
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
    return out


async def acollect_candidates(
    sources: Iterable[dict],
    generators: list[GeneratorSpec],
    *,
    task: str = "summarize",
    decoding: GenerateConfig | None = None,
    seed: int = 0,
    include_reference: bool = True,
    keep: Literal["all", "one"] = "all",
    duplicates: Literal["drop", "keep"] = "drop",
    empty: Literal["drop", "keep"] = "drop",
    truncated: Literal["keep", "trim", "drop"] = "keep",
    partial_path: str | Path | None = None,
    progress: bool = True,
) -> tuple[list[dict], "CollectSummary"]:
    """Async core of [`collect_candidates`][csem.collect.sampler.collect_candidates] (same arguments and result)."""
    for name, value, allowed in (("keep", keep, ("all", "one")), ("duplicates", duplicates, ("drop", "keep")),
                                 ("empty", empty, ("drop", "keep")),
                                 ("truncated", truncated, ("keep", "trim", "drop"))):
        if value not in allowed:
            raise InputError(f"{name} must be one of {', '.join(allowed)}, got '{value}'")
    if not generators:
        raise InputError("collect needs at least one generator")
    names = [g.system_id for g in generators]
    if len(set(names)) != len(names):
        raise InputError(f"generator names must differ (got {names}); set 'name' for each")
    srcs = _check_sources(sources)
    summary = CollectSummary(sources=len(srcs))
    start = time.perf_counter()
    partial = Path(partial_path) if partial_path else None
    done = _read_partial(partial)
    sink = JsonlLog(partial) if partial else None

    raw: list[dict] = []
    try:
        from rich.progress import Progress

        total = len(srcs) * sum(g.num_samples for g in generators)
        with Progress(disable=not progress, transient=False) as bar:
            task_id = bar.add_task("collect", total=total)
            for spec in generators:  # one generator at a time: an in-process model is loaded, used, closed
                raw += await _sample_generator(spec, decoding_of(spec, decoding), srcs, task, seed, done, sink,
                                               lambda: bar.advance(task_id), summary)
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
    out = _pool(by_source, srcs, seed=seed, keep=keep, duplicates=duplicates, empty=empty, truncated=truncated,
                summary=summary)
    summary.kept = len(out)
    for rec in out:
        summary.per_system[rec["system_id"]] = summary.per_system.get(rec["system_id"], 0) + 1
    summary.seconds = time.perf_counter() - start
    return out, summary


def collect_candidates(
    sources: Iterable[dict],
    generators: list[GeneratorSpec],
    *,
    task: str = "summarize",
    decoding: GenerateConfig | None = None,
    seed: int = 0,
    include_reference: bool = True,
    keep: Literal["all", "one"] = "all",
    duplicates: Literal["drop", "keep"] = "drop",
    empty: Literal["drop", "keep"] = "drop",
    truncated: Literal["keep", "trim", "drop"] = "keep",
    partial_path: str | Path | None = None,
    progress: bool = True,
) -> tuple[list[dict], "CollectSummary"]:
    """Sample candidates for every source from every generator (CSEM stage i).

    Each generator's samples are requested concurrently through its [`csem.llm.Model`][], so as
    many are in flight as the backend's ``concurrency`` option allows (default 8 for ``openai:``,
    1 for in-process models); results are keyed by sample, so neither concurrency nor completion
    order changes a text.

    Args:
        sources: records with ``id`` (or ``doc_id``), ``source`` and optionally ``reference``.
        generators: the checkpoints to sample from, each with its ``num_samples`` (J) and options.
        task: a task prompt name (`csem.collect.prompts.TASK_PROMPTS`) or template.
        decoding: sampling settings over `DEFAULT_DECODING` (top-k with k = 50, the paper's
            choice); a generator's own ``decoding`` is merged over it.
        seed: the run seed; each sample's seed is derived from (seed, source, system, k).
        include_reference: add each source's reference(s) as candidates (system ``reference``).
        keep: ``all`` candidates, or ``one`` picked at random per source (CSEM Sec. IV-B).
        duplicates / empty: ``drop`` or ``keep`` candidates that repeat another candidate of the
            same source (after whitespace and case folding) or are empty; counted either way.
        truncated: what to do with a sample the generator stopped at ``max_tokens``
            (``finish_reason == "length"``, counted in ``CollectSummary.truncated``): ``keep`` it as
            generated (flagged ``collect.flag = "truncated"``), ``trim`` it back to its last complete
            sentence ([`trim_to_sentence`][csem.collect.sampler.trim_to_sentence]; the generated text kept in ``collect.untrimmed``,
            counted in ``trimmed``; one with no complete sentence is kept as generated, flagged and
            counted in ``kept_cut``, so ``trim`` can leave a text cut mid-sentence), or ``drop`` it.
            Applied when the pool is made, so a resumed run can change it without sampling again.
        partial_path: a JSONL file where each finished sample is appended; on a re-run its samples
            are reused (when made with the same decoding settings) and only the missing ones are
            generated.

    Returns:
        (candidate records, [`CollectSummary`][csem.collect.sampler.CollectSummary]).

    Raises:
        ValueError: a source has no id or an empty text; no generators; ids repeat; a decoding the
            backend cannot do (beam search on a sampling backend).
        csem.llm.BackendError: a generator failed (finished samples stay in ``partial_path``).
    """
    return run_sync(acollect_candidates(sources, generators, task=task, decoding=decoding, seed=seed,
                                        include_reference=include_reference, keep=keep, duplicates=duplicates,
                                        empty=empty, truncated=truncated, partial_path=partial_path,
                                        progress=progress))
