"""Pair assembly: the registry of perturbations per aspect (`FAMILIES`, `DEGENERATE`) and
the within-source preference pairs (`make_pairs`) in the preference-file layout."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from csem.data.contrasts.base import ASPECTS, Context, PREFERENCE, PerturbFn, Perturbed, rng_for
from csem.data.contrasts.coherence import connective_drop, connective_insert, connective_swap, sentence_move, sentence_shuffle
from csem.data.contrasts.consistency import date_swap, entity_swap, foreign_sentence, negation, number_swap, subject_swap
from csem.data.contrasts.degenerate import empty, few_tokens, repeated_token, source_copy, whitespace, word_shuffle
from csem.data.contrasts.fluency import char_noise, sentence_cut, word_double, word_drop, word_swap
from csem.data.contrasts.relevance import off_topic, peripheral_swap, redundancy, truncation
from csem.data.text import same_words
from csem.errors import InputError


#: aspect -> perturbation name -> function (the names are unique across aspects)
FAMILIES: dict[str, dict[str, PerturbFn]] = {
    "coherence": {"sentence_shuffle": sentence_shuffle, "sentence_move": sentence_move,
                  "connective_swap": connective_swap, "connective_drop": connective_drop,
                  "connective_insert": connective_insert},
    "consistency": {"entity_swap": entity_swap, "number_swap": number_swap, "date_swap": date_swap,
                    "negation": negation, "foreign_sentence": foreign_sentence, "subject_swap": subject_swap},
    "fluency": {"word_drop": word_drop, "word_double": word_double, "word_swap": word_swap,
                "char_noise": char_noise, "sentence_cut": sentence_cut},
    "relevance": {"peripheral_swap": peripheral_swap, "redundancy": redundancy, "off_topic": off_topic,
                  "truncation": truncation},
}
#: degenerate texts, for every aspect
DEGENERATE: dict[str, PerturbFn] = {"empty": empty, "whitespace": whitespace, "few_tokens": few_tokens,
                                    "repeated_token": repeated_token}
#: degenerate texts for one aspect only
DEGENERATE_ONLY: dict[str, dict[str, PerturbFn]] = {"relevance": {"source_copy": source_copy},
                                                     "coherence": {"word_shuffle": word_shuffle},
                                                     "fluency": {"word_shuffle": word_shuffle}}
EMPTY_KINDS = ("empty", "whitespace")


def perturbations(aspect: str, include_empty: bool = False) -> dict[str, tuple[PerturbFn, bool]]:
    """The perturbations of one aspect: name -> (function, is degenerate).

    Raises:
        ValueError: unknown aspect.
    """
    if aspect not in FAMILIES:
        raise InputError(f"unknown aspect '{aspect}'; contrasts exist for {', '.join(ASPECTS)}")
    out = {k: (f, False) for k, f in FAMILIES[aspect].items()}
    for k, f in {**DEGENERATE, **DEGENERATE_ONLY.get(aspect, {})}.items():
        if include_empty or k not in EMPTY_KINDS:
            out[k] = (f, True)
    return out


def record_key(record: Mapping[str, Any]) -> str:
    """The key a record's random draws are seeded with: its ``id``, else a hash of source and candidate."""
    if record.get("id") is not None:
        return str(record["id"])
    text = f"{record.get('source') or ''}\x1e{record.get('candidate') or ''}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _source_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_pairs(
    records: Iterable[Mapping[str, Any]],
    *,
    aspects: Sequence[str] = ASPECTS,
    per_record: int = 3,
    seed: int = 0,
    include_empty: bool = False,
    degenerate_weight: float = 0.5,
    max_degenerate: int = 1,
    references: bool = False,
    soft: bool = False,
) -> list[dict]:
    """Within-source contrast pairs ``(better = the candidate, worse = a perturbed copy)``.

    For every record and aspect, ``per_record`` perturbations of that aspect are drawn without
    replacement (each family member with weight 1, the degenerate texts together with weight
    ``degenerate_weight``, at most ``max_degenerate`` of them) and applied in the drawn order until
    ``per_record`` of them change the text; a perturbation that finds nothing to change is skipped,
    so a record may give fewer pairs.
    A perturbed text is the same for every aspect that draws it (it is seeded by record and name), so
    its id ``<record id>~<name>`` names one text.

    Args:
        records: csem records with ``source`` and ``candidate`` (records with an empty candidate are
            skipped; without a source, the source-based perturbations find nothing); optional ``id``,
            ``doc_id``, ``system_id``, ``reference`` (copied into the pairs).
        aspects: subset of `ASPECTS`.
        per_record: pairs per record and aspect (>= 1).
        seed: the seed of every draw.
        include_empty: also the empty and whitespace texts (``csem train --pairs`` rejects them).
        degenerate_weight: the draw weight of the degenerate texts together (0: never).
        max_degenerate: at most this many degenerate pairs per record and aspect (they are easy;
            the family's perturbations should make most of the pairs).
        references: also perturb each source's references, as further candidates (one set per
            distinct source, from its first record): id ``<doc_id>~ref<k>``, system ``reference``,
            reference = the source's other references.
        soft: write ``judge.<aspect>`` = ``0.5 + 0.5 * severity`` (a mild perturbation is a weaker
            preference) instead of 1.0.

    Returns:
        One dict per (pair, aspect), in record order: ``id`` (``<id_a>|<id_b>|<aspect>``), ``doc_id``,
        ``source``, ``reference``, ``id_a``, ``id_b``, ``candidate_a`` (better), ``candidate_b``
        (worse), ``system_a``, ``system_b`` (``<system>~<name>``), ``aspect``, ``perturbation``,
        ``degenerate`` (bool), ``severity`` (0-1), ``edit`` (what changed) and ``judge.<aspect>`` = 1.0
        (p(a better than b); ``0.5 + 0.5 * severity`` with ``soft``).

    Raises:
        ValueError: unknown aspect, ``per_record`` < 1, ``degenerate_weight`` < 0.
    """
    aspects = list(aspects)
    tables = {a: perturbations(a, include_empty) for a in aspects}
    if per_record < 1:
        raise InputError(f"per_record must be >= 1, got {per_record}")
    if degenerate_weight < 0 or max_degenerate < 0:
        raise InputError(f"degenerate_weight and max_degenerate must be >= 0, got {degenerate_weight}, "
                         f"{max_degenerate}")
    records = [r for r in records if isinstance(r.get("candidate"), str) and r["candidate"].strip()]
    if references:
        records = records + reference_records(records)
    sources = sorted({r.get("source") or "" for r in records} - {""}, key=_source_key)
    out: list[dict] = []
    for rec in records:
        key = record_key(rec)
        text = rec["candidate"]
        source = rec.get("source") or ""
        others = [s for s in sources if s != source]
        other = others[rng_for(seed, key, "other").randrange(len(others))] if others else ""
        ctx = Context(source=source, other=other)
        rid = str(rec["id"]) if rec.get("id") is not None else key
        system = rec.get("system_id")
        done: dict[str, Perturbed | None] = {}
        for aspect in aspects:
            for name, res, degenerate in _draw(text, tables[aspect], done, ctx, seed, key, aspect, per_record,
                                               degenerate_weight, max_degenerate):
                id_b = f"{rid}~{name}"
                out.append({
                    "id": f"{rid}|{id_b}|{aspect}", "doc_id": rec.get("doc_id"), "source": rec.get("source"),
                    "reference": rec.get("reference"), "id_a": rid, "id_b": id_b, "candidate_a": text,
                    "candidate_b": res.text, "system_a": system,
                    "system_b": f"{system}~{name}" if system is not None else name,
                    "aspect": aspect, "perturbation": name, "degenerate": degenerate,
                    "severity": res.severity, "edit": res.edit,
                    f"judge.{aspect}": round(0.5 + 0.5 * res.severity, 4) if soft else PREFERENCE,
                })
    return out


def _draw(text: str, table: dict[str, tuple[PerturbFn, bool]], done: dict[str, Perturbed | None], ctx: Context,
          seed: int, key: str, aspect: str, per_record: int, degenerate_weight: float,
          max_degenerate: int) -> list[tuple[str, Perturbed, bool]]:
    """One record's perturbations of one aspect: ``(name, result, is degenerate)`` for up to
    ``per_record`` names drawn without replacement (Efraimidis-Spirakis weighted draw: each family
    member weight 1, the degenerate texts together ``degenerate_weight``), skipping those that change
    nothing; ``done`` caches each name's result across the record's aspects."""
    n_deg = sum(1 for _, d in table.values() if d)
    pick = rng_for(seed, key, aspect, "draw")
    keys = []
    for name in sorted(table):
        w = (degenerate_weight / n_deg) if table[name][1] else 1.0
        if w > 0:
            keys.append((pick.random() ** (1.0 / w), name))
    keys.sort(reverse=True)
    out: list[tuple[str, Perturbed, bool]] = []
    degenerate = 0
    for _, name in keys:
        if len(out) >= per_record:
            break
        if table[name][1] and degenerate >= max_degenerate:
            continue
        if name not in done:
            res = table[name][0](text, rng_for(seed, key, name), ctx)
            done[name] = None if res is None or same_words(res.text, text) else res
        res = done[name]
        if res is None:
            continue
        out.append((name, res, table[name][1]))
        degenerate += table[name][1]
    return out


def reference_records(records: Iterable[Mapping[str, Any]]) -> list[dict]:
    """The references of each distinct source as candidate records (the first record of a source gives
    them): ``id`` ``<doc_id>~ref<k>`` (``doc_id`` falls back to a hash of the source), ``system_id``
    ``reference``, ``reference`` = the other references (None when there is only one)."""
    from csem.data.records import references_of

    out, seen = [], set()
    for r in records:
        source = r.get("source") or ""
        if not source or source in seen:
            continue
        seen.add(source)
        refs = [x for x in references_of(r) if isinstance(x, str) and x.strip()]
        doc = r.get("doc_id") if r.get("doc_id") is not None else _source_key(source)[:16]
        for k, ref in enumerate(refs):
            rest = refs[:k] + refs[k + 1:]
            out.append({"id": f"{doc}~ref{k}", "doc_id": r.get("doc_id"), "system_id": "reference", "source": source,
                        "candidate": ref, "reference": rest or None})
    return out


def pairs_by_aspect(records: Iterable[Mapping[str, Any]], **kwargs: Any) -> dict[str, list[dict]]:
    """`make_pairs` split by aspect: ``{aspect: [pair, ...]}`` for every requested aspect (an
    aspect without pairs maps to an empty list). Keyword arguments are those of `make_pairs`."""
    aspects = list(kwargs.get("aspects", ASPECTS))
    out: dict[str, list[dict]] = {a: [] for a in aspects}
    for p in make_pairs(records, **kwargs):
        out[p["aspect"]].append(p)
    return out


def summarize(pairs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Pair counts: ``{aspect: {perturbation: count}}`` (aspects and names sorted)."""
    counts: dict[str, Counter] = {}
    for p in pairs:
        counts.setdefault(p["aspect"], Counter())[p["perturbation"]] += 1
    return {a: dict(sorted(c.items())) for a, c in sorted(counts.items())}
