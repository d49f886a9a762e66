"""Batches that encode each distinct text once, for training and scoring alike.

A `Batch` holds the *distinct* texts (sources, candidates, references) of a list of records,
tokenised, sorted by token length (then by text, so the order of the records never matters) and
cut into length-bucketed chunks; every (candidate, source, reference) pair points into that pool
by index. A source shared by twelve candidates is therefore embedded once, and short candidates
are never padded to the length of a 512-token article.

`GroupedBatchSampler` builds training batches from whole source groups (all candidates of
one source together, up to ``batch_size`` samples) so that the sharing pays off in training too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from csem.data.records import references_of
from csem.errors import InputError
from csem.model.features import NEEDS_REFERENCE, NEEDS_SOURCE, pair_features

JOINT_SEP = "\x1e"  # separates the segments of a cross-encoder input in the text pool (ASCII record separator)


@dataclass
class Batch:
    """Encoder inputs and index maps of ``B`` records scored as ``P`` (candidate, reference) pairs.

    Attributes:
        texts: keys of the distinct texts, in pool order (length-sorted): the text itself, or for a
            source / a joint cross-encoder input the text prefixed by its kind.
        chunks: padded ``input_ids``/``attention_mask`` ``[n_i, T_i]`` per chunk, covering the pool.
        bounds: ``(start, end)`` pool positions of each chunk.
        cand_idx, src_idx, ref_idx: ``[P]`` pool index of each pair's candidate / source / reference
            (``src_idx``/``ref_idx`` are None when the mode does not use them).
        pair_counts: pairs per record (the number of references; 1 without references).
        labels: ``[B, A]`` normalised labels (0 where missing); mask: ``[B, A]`` labelled entries.
        group: ``[B]`` source-group id (for the pairwise loss); ids: record ids.
        overlap: ``[P, F]`` lexical overlap features per pair (``ModelConfig.overlap_features``)
            or None.
        gate: ``[P, G]`` the ``lexical`` features of each pair for the acceptability gate
            ([`csem.model.acceptability`][]), or None.
    """

    texts: list[str]
    chunks: list[dict[str, Tensor]]
    bounds: list[tuple[int, int]]
    cand_idx: Tensor
    src_idx: Tensor | None
    ref_idx: Tensor | None
    pair_counts: list[int]
    labels: Tensor
    mask: Tensor
    group: Tensor
    ids: list[str] = field(default_factory=list)
    overlap: Tensor | None = None
    gate: Tensor | None = None

    def to(self, device: torch.device | str) -> "Batch":
        mv = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Batch(self.texts, [{k: v.to(device) for k, v in c.items()} for c in self.chunks], self.bounds,
                     mv(self.cand_idx), mv(self.src_idx), mv(self.ref_idx), self.pair_counts, mv(self.labels),
                     mv(self.mask), mv(self.group), self.ids, mv(self.overlap), mv(self.gate))


class BatchBuilder:
    """Turn a list of records into a `Batch` (a ``collate_fn`` for ``DataLoader``).

    Args:
        encoder: a `csem.model.encoder.Encoder` (for ``tokenize``/``pad``).
        mode: feature mode (decides which texts are needed).
        max_length: tokens kept per text.
        label_specs: the aspects (``column``, ``min``, ``max``); None when only scoring.
        share: True (default) encodes each distinct text once; False re-encodes every record's
            texts (the naive scorer, kept for benchmarks and tests).
        chunk_size: most sequences per encoder call; max_chunk_tokens: most padded tokens per call.
        overlap: also compute the lexical features of each pair: a feature-set name
            (``overlap`` | ``lexical``, `csem.model.features.pair_features`; True means
            ``overlap``), or False for none. Features are computed once per distinct pair.
        gate: also compute each pair's ``lexical`` features for the acceptability gate
            (``Batch.gate``).
    """

    def __init__(self, encoder: Any, mode: str, max_length: int, label_specs: Sequence[Any] | None = None,
                 share: bool = True, chunk_size: int = 32, max_chunk_tokens: int = 16384,
                 architecture: str = "bi-encoder", source_max_length: int | None = None,
                 overlap: bool | str = False, gate: bool = False):
        self.encoder = encoder
        self.mode = mode
        self.max_length = max_length
        self.source_max_length = source_max_length or max_length
        self.architecture = architecture
        self.label_specs = list(label_specs or [])
        self.share = share
        self.chunk_size = max(1, chunk_size)
        self.max_chunk_tokens = max_chunk_tokens
        self.overlap = "overlap" if overlap is True else (overlap or None)
        self.gate = gate
        self._lex_cache: dict[tuple[str, ...], list[float]] = {}
        self._tok_cache: dict[tuple[str, str], list[int]] = {}

    def _tokens(self, entries: list[tuple[str, str]]) -> list[list[int]]:
        """Token ids of pool entries ``(kind, text)``: ``t`` a text, ``s`` a source (own length
        limit), ``j`` a joint cross-encoder input (segments separated by ``JOINT_SEP``)."""
        todo = [e for e in dict.fromkeys(entries) if e not in self._tok_cache]
        for kind in ("t", "s", "j"):
            part = [e for e in todo if e[0] == kind]
            if not part:
                continue
            if kind == "j":
                ids = self.encoder.tokenize_joint([e[1].split(JOINT_SEP) for e in part], self.max_length)
            else:
                ids = self.encoder.tokenize([e[1] for e in part],
                                            self.source_max_length if kind == "s" else self.max_length)
            for e, t in zip(part, ids):
                self._tok_cache[e] = t
        out = [self._tok_cache[e] for e in entries]
        if len(self._tok_cache) > 200_000:  # bound memory on very large scoring jobs
            self._tok_cache.clear()
        return out

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> Batch:
        need_src, need_ref = NEEDS_SOURCE[self.mode], NEEDS_REFERENCE[self.mode]
        unified = self.architecture == "unified"
        # pool entries: (kind, text, owner); with share=False the owner makes every record's texts distinct
        entries: list[tuple[str, str, int]] = []
        slots: dict[tuple[str, str, int], int] = {}

        def slot(text: str, owner: int, kind: str = "t") -> int:
            key = (kind, text, 0 if self.share else owner)
            if key not in slots:
                slots[key] = len(entries)
                entries.append(key)
            return slots[key]

        cand, src, ref, counts, groups, lex, gate = [], [], [], [], [], [], []
        group_of: dict[str, int] = {}
        for i, r in enumerate(records):
            refs = references_of(r) if need_ref else [None]
            if need_ref and not refs:
                raise InputError(f"record '{r.get('id')}' has no reference, but mode '{self.mode}' needs one")
            for ref_text in refs if self.overlap or self.gate else ():
                ctx = ([r["source"]] if need_src else []) + ([ref_text] if need_ref else [])
                for kind, out in ((self.overlap, lex), ("lexical" if self.gate else None, gate)):
                    if kind:
                        key = (kind, r["candidate"], *ctx)
                        if key not in self._lex_cache:
                            self._lex_cache[key] = pair_features(kind, r["candidate"], ctx)
                        out.append(self._lex_cache[key])
            if unified:  # one joint input per (candidate, reference): candidate [SEP] reference [SEP] source
                for ref_text in refs:
                    segs = [r["candidate"]] + ([ref_text] if need_ref else []) + ([r["source"]] if need_src else [])
                    cand.append(slot(JOINT_SEP.join(segs), i, "j"))
                    src.append(None)
                    ref.append(None)
            else:
                c = slot(r["candidate"], i)
                s = slot(r["source"], i, "s") if need_src else None
                for ref_text in refs:
                    cand.append(c)
                    src.append(s)
                    ref.append(slot(ref_text, i) if need_ref else None)
            counts.append(len(refs))
            gkey = r.get("source") or (refs[0] if need_ref else "")
            groups.append(group_of.setdefault(gkey, len(group_of)))
        need_src, need_ref = need_src and not unified, need_ref and not unified
        # sort the pool by token length (then text, then owner): record order never matters
        toks = self._tokens([(k, t) for k, t, _ in entries])
        order = sorted(range(len(entries)), key=lambda j: (len(toks[j]), entries[j]))
        new_pos = [0] * len(entries)
        for pos, j in enumerate(order):
            new_pos[j] = pos
        # pool keys (the embedding caches' keys): the text, prefixed by its kind unless a plain text
        texts = [entries[j][1] if entries[j][0] == "t" else f"{entries[j][0]}{JOINT_SEP}{entries[j][1]}" for j in order]
        sorted_toks = [toks[j] for j in order]
        chunks, bounds = [], []
        start = 0
        while start < len(sorted_toks):
            end, real = start, 0
            while end < len(sorted_toks) and end - start < self.chunk_size:
                # sorted ascending: the next row is the longest so far; close the chunk before it would
                # exceed the token budget or make padding outweigh the real tokens (length bucketing)
                padded = (end - start + 1) * len(sorted_toks[end])
                if end > start and (padded > self.max_chunk_tokens or padded > 2 * (real + len(sorted_toks[end]))):
                    break
                real += len(sorted_toks[end])
                end += 1
            chunks.append(self.encoder.pad(sorted_toks[start:end]))
            bounds.append((start, end))
            start = end
        remap = lambda xs: torch.tensor([new_pos[x] for x in xs], dtype=torch.long)  # noqa: E731
        n, a = len(records), len(self.label_specs)
        raw = torch.full((n, a), float("nan"))
        for i, r in enumerate(records):
            for k, spec in enumerate(self.label_specs):
                v = r.get(spec.column)
                if v is not None:
                    raw[i, k] = float(v)
        mask = ~torch.isnan(raw)
        if a:
            lo = torch.tensor([s.min for s in self.label_specs])
            hi = torch.tensor([s.max for s in self.label_specs])
            norm = torch.where(mask, (raw - lo) / (hi - lo), torch.zeros_like(raw))
        else:
            norm = torch.zeros((n, 0))
        return Batch(
            texts=texts, chunks=chunks, bounds=bounds, cand_idx=remap(cand),
            src_idx=remap(src) if need_src else None, ref_idx=remap(ref) if need_ref else None,
            pair_counts=counts, labels=norm, mask=mask,
            group=torch.tensor(groups, dtype=torch.long), ids=[str(r.get("id")) for r in records],
            overlap=torch.tensor(lex, dtype=torch.float32) if self.overlap else None,
            gate=torch.tensor(gate, dtype=torch.float32) if self.gate else None)


def group_key(record: Mapping[str, Any], mode: str) -> str:
    """The text whose encoding a record shares with others: its source (or first reference)."""
    if NEEDS_SOURCE[mode]:
        return record["source"]
    refs = references_of(record)
    return refs[0] if (NEEDS_REFERENCE[mode] and refs) else str(record.get("id"))


class GroupedBatchSampler:
    """Yield batches of record indices made of whole source groups (split only if a group > batch_size).

    Groups are shuffled with ``seed`` and an internal epoch counter (deterministic: the k-th pass is
    the same in every run). Under DDP every rank takes every ``world_size``-th batch (equal counts).

    Args:
        records: the training records. batch_size: target samples per batch.
        mode: feature mode (decides the grouping text). shuffle: shuffle groups each pass.
        seed: shuffling seed. shard: split batches over DDP ranks (False: every rank sees all).
    """

    def __init__(self, records: Sequence[Mapping[str, Any]], batch_size: int, mode: str, shuffle: bool = True,
                 seed: int = 0, shard: bool = True):
        self.batch_size, self.shuffle, self.seed, self.shard = batch_size, shuffle, seed, shard
        by: dict[str, list[int]] = {}
        for i, r in enumerate(records):
            by.setdefault(group_key(r, mode), []).append(i)
        self.groups = list(by.values())
        self.epoch = 0

    def _batches(self, epoch: int) -> list[list[int]]:
        groups = [list(g) for g in self.groups]
        if self.shuffle:
            rng = random.Random(self.seed * 1_000_003 + epoch)
            rng.shuffle(groups)
            for g in groups:
                rng.shuffle(g)
        batches: list[list[int]] = []
        cur: list[int] = []
        for g in groups:
            while len(g) > self.batch_size:  # an oversized group fills batches of its own
                batches.append(g[: self.batch_size])
                g = g[self.batch_size:]
            if len(cur) + len(g) > self.batch_size and cur:
                batches.append(cur)
                cur = []
            cur.extend(g)
        if cur:
            batches.append(cur)
        return batches

    def _rank(self) -> tuple[int, int]:
        if self.shard and torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._batches(self.epoch)
        self.epoch += 1
        rank, world = self._rank()
        if world > 1:
            n = len(batches) // world * world or world
            batches = (batches * world)[:n]
            batches = batches[rank::world]
        return iter(batches)

    def __len__(self) -> int:
        rank, world = self._rank()
        n = len(self._batches(0))
        return max(1, n // world) if world > 1 else n
