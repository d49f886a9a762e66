"""The acceptability gate: a learned check that a candidate is a text a reader would accept at all.

A student learns to rank *real* candidates from its teacher's labels; it never sees a degenerate one,
so nothing stops it from scoring ``"the the the ..."``, half a sentence or a word salad above a real
summary, and a generator optimised against it (MRT, a TRL reward) finds such texts. The
field's remedy for missing negatives is to make them by rule and learn from them (UniEval, Zhong et
al. 2022: a boolean "is this a coherent summary?" classifier trained on rule-made negatives). The gate
does that beside the regressor, so it cannot disturb what the regressor learned from the teacher:

* **examples** ([`gate_examples`][csem.model.acceptability.gate_examples], no LLM call): *accepted* = the training records' candidates and
  each source's first reference; *rejected* = degenerate texts made from them by
  [`csem.data.contrasts`][] (the first 1-3 words, the most frequent word x 100, the text cut
  mid-sentence, its words shuffled, a candidate written for another source; for a ``relevance``
  aspect also the whole source copied, which is fluent and consistent but no summary);
* **classifier** ([`AcceptabilityGate`][csem.model.acceptability.AcceptabilityGate]): per aspect, a one-hidden-layer MLP (32 tanh units) over
  the pair's standardised lexical features (`csem.model.features.lexical_features`: extractive
  fragments and surface form; no encoder pass) except `EXCLUDED_FEATURES` (where and in which
  order the candidate's material sits in the source, a pronoun first: coherence, which the heads judge,
  not acceptability), giving ``p_a = P(accepted)``; fitted
  full batch by L-BFGS on class-balanced binary cross-entropy with an L2 penalty ([`fit_gate`][csem.model.acceptability.fit_gate]);
* **gate**: ``g_a = min(1, p_a / theta_a)``, where ``theta_a`` is the lower of the ``quantile``
  (default 1 %) of ``p_a`` over the accepted training texts and the ``rejected_quantile`` (default 99 %)
  of ``p_a`` over the rejected ones: a real text is lowered only where it looks less acceptable than
  99 % of the rule-made degenerate texts (on SummEval's 1,600 summaries this keeps the real summaries the
  experts rate above their median off the floor: 0.5 % of the held-out ones for coherence, where the
  5 % quantile of the accepted texts alone floored 1.4 %; ``research/acceptability_gate``); the normalised head output ``s`` (0 = the scale's minimum,
  1 = its maximum) becomes ``min(s, g * s + (1 - g) * REJECT)`` with ``REJECT = -4`` (four scale widths
  below the minimum, still told apart after `csem.model.module.bounded` maps it into the scale).
  A text the gate accepts (``g = 1``) keeps its score exactly; a rejected one falls below the real
  candidates the regressor put at the bottom of the scale.

The gate is off for models trained with the ``pairwise`` loss alone (their scores have no scale
minimum) or the ``ce`` loss (several outputs per aspect). Measured on SummEval in
``research/student_contrast/student_contrast.md`` (sanity suite with and without the gate).
"""

from __future__ import annotations

import random
import time
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor, nn

from csem.errors import InputError
from csem.model.features import CANDIDATE_FEATURES, CONTEXT_FEATURES, NEEDS_REFERENCE, NEEDS_SOURCE, overlap_size, \
    pair_features

#: hidden units of each aspect's classifier
HIDDEN = 32
#: lexical features the gate does not read: where a candidate's material sits in the source and in which
#: order, and a pronoun first, describe a real summary's coherence or lead bias (the heads' business), not
#: whether it is a text at all; SummEval's M9 writes its extracted sentences out of source order, starting
#: with "She"/"He", and a gate reading these rejected them as broken (research/student_contrast/student_contrast.md)
EXCLUDED_FEATURES = ("mean_position", "first_position", "order_inversions", "lead_coverage", "pronoun_first")
#: where a fully rejected text's normalised output goes (scale widths below the minimum)
REJECT = -4.0


class AcceptabilityGate(nn.Module):
    """Per-aspect acceptability classifiers over a pair's lexical features (see the module docstring).

    Args:
        n_features: width of the lexical feature vector (`csem.model.features.overlap_size` of the
            mode with ``feature_set="lexical"``).
        aspects: the model's aspect names, in head order.

    Buffers (saved with the model): ``mean``/``std`` ``[F]`` (standardisation, from the accepted
    training texts), ``threshold`` ``[A]`` (``theta_a``), ``fitted`` (0 until [`fit_gate`][csem.model.acceptability.fit_gate] ran: an
    unfitted gate passes every score through).
    """

    def __init__(self, n_features: int, aspects: Sequence[str]):
        super().__init__()
        self.aspects = list(aspects)
        self.nets = nn.ModuleDict({a: nn.Sequential(nn.Linear(n_features, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))
                                   for a in self.aspects})
        self.register_buffer("mean", torch.zeros(n_features))
        self.register_buffer("std", torch.ones(n_features))
        self.register_buffer("threshold", torch.full((len(self.aspects),), 0.5))
        self.register_buffer("fitted", torch.zeros(()))
        # 1 for the features the gate reads, 0 for EXCLUDED_FEATURES (a model saved before the mask reads all)
        self.register_buffer("mask", gate_mask(n_features))
        # fitted by fit_gate alone, never by the student's optimiser (and no gradient while the student trains,
        # which DDP would report as unused parameters)
        self.requires_grad_(False)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # models saved before the mask existed read every feature (their classifiers were fitted so)
        state_dict.setdefault(prefix + "mask", torch.ones_like(self.mask))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def is_fitted(self) -> bool:
        return bool(self.fitted.item() > 0)

    def probabilities(self, features: Tensor) -> Tensor:
        """``P(accepted)`` per pair and aspect ``[P, A]`` from raw lexical features ``[P, F]``."""
        x = (features.float() - self.mean) / self.std * self.mask
        return torch.sigmoid(torch.cat([self.nets[a](x) for a in self.aspects], dim=1))

    def factor(self, features: Tensor) -> Tensor:
        """The gate ``g = min(1, p / theta)`` per pair and aspect ``[P, A]``, in (0, 1]."""
        return (self.probabilities(features) / self.threshold).clamp(max=1.0)

    def gate_scores(self, out: Tensor, features: Tensor) -> Tensor:
        """Gate normalised head outputs ``out`` ``[P, A, 1]``: ``min(s, g * s + (1 - g) * REJECT)``.
        Identity until fitted."""
        if not self.is_fitted:
            return out
        g = self.factor(features).to(out.dtype).unsqueeze(-1)
        return torch.minimum(out, g * out + (1.0 - g) * REJECT)


#: a student score within this share of the scale's width of its minimum counts as floored
FLOOR_TOLERANCE = 0.02


def gate_factors(members: Sequence[Any], records: Sequence[Mapping[str, Any]], mode: str) -> dict[str, list]:
    """The gate ``g`` of each record and aspect: ``{aspect: [g or None]}``, the smallest over an ensemble's
    ``members`` (modules with a ``gate``); None where a record lacks a context the mode reads. A model
    without a fitted gate gives ``{}``."""
    gates = [m.gate for m in members if getattr(m, "gate", None) is not None and m.gate.is_fitted]
    if not gates:
        return {}
    width = int(NEEDS_SOURCE[mode]) + int(NEEDS_REFERENCE[mode])
    ok = [i for i, r in enumerate(records) if isinstance(r.get("candidate"), str) and len(contexts_of(r, mode)) == width]
    out: dict[str, list] = {a: [None] * len(records) for a in gates[0].aspects}
    if not ok:
        return out
    x = torch.tensor([pair_features("lexical", records[i]["candidate"], contexts_of(records[i], mode)) for i in ok],
                     dtype=torch.float32)
    with torch.no_grad():
        g = torch.stack([gate.factor(x) for gate in gates]).min(dim=0).values  # [P, A]
    for k, a in enumerate(gates[0].aspects):
        for j, i in enumerate(ok):
            out[a][i] = float(g[j, k])
    return out


def gate_audit(members: Sequence[Any], records: Sequence[Mapping[str, Any]], mode: str,
               columns: Mapping[str, tuple[str, str, tuple[float, float]]]) -> dict:
    """What the gate does to real candidates: per aspect, how many it lowers and how many end at the scale
    minimum, and how the judge rated those.

    Args:
        members: the student's modules (one, or an ensemble's). records: real candidates with the judge's
            and the student's scores (``split`` groups them: ``test`` = held-out, the rest training).
        mode: the student's mode. columns: ``{aspect: (judge column, student column, (min, max))}``.

    Returns:
        ``{aspect: {split: {"candidates", "gated", "floored", "floored_judge_mean", "floored_above_median",
        "floored_above_median_share", "judge_median"}}}`` for ``held-out``, ``training`` and ``all``:
        ``gated`` = candidates with ``g < 1`` for some member (their score lowered), ``floored`` = gated ones
        whose student score lies within `FLOOR_TOLERANCE` of the
        scale's width of its minimum, ``floored_above_median`` = floored candidates the judge rates above
        its median over all the records, ``floored_above_median_share`` = that count over ``candidates``.
    """
    import statistics

    g = gate_factors(members, records, mode)
    out: dict = {}
    for aspect, (jcol, scol, (lo, hi)) in columns.items():
        judged = [r.get(jcol) for r in records if r.get(jcol) is not None]
        median = statistics.median(judged) if judged else None
        factors = g.get(aspect, [None] * len(records))
        rows = {}
        for split, keep in (("held-out", lambda s: s == "test"), ("training", lambda s: s != "test"),
                            ("all", lambda s: True)):
            idx = [i for i, r in enumerate(records) if keep(r.get("split"))]
            floored = [i for i in idx if factors[i] is not None and factors[i] < 1 and records[i].get(scol) is not None
                       and records[i][scol] <= lo + FLOOR_TOLERANCE * (hi - lo)]
            fj = [records[i][jcol] for i in floored if records[i].get(jcol) is not None]
            above = sum(1 for v in fj if median is not None and v > median)
            rows[split] = {"candidates": len(idx), "gated": sum(1 for i in idx if factors[i] is not None and factors[i] < 1),
                           "floored": len(floored), "floored_judge_mean": statistics.fmean(fj) if fj else None,
                           "floored_above_median": above, "floored_above_median_share": above / len(idx) if idx else None,
                           "judge_median": median, "floored_ids": [str(records[i].get("id")) for i in floored][:20]}
        out[aspect] = rows
    return out


def gate_size(mode: str) -> int:
    """Width of the gate's feature vector for ``mode`` (the ``lexical`` set)."""
    return overlap_size(mode, "lexical")


def gate_mask(n_features: int) -> Tensor:
    """``[n_features]``: 0 at the `EXCLUDED_FEATURES` of the ``lexical`` set (0-2 context blocks of
    ``CONTEXT_FEATURES``, then ``CANDIDATE_FEATURES``), 1 elsewhere.

    Raises:
        ValueError: ``n_features`` is no width of the lexical set.
    """
    n_ctx, rest = divmod(n_features - len(CANDIDATE_FEATURES), len(CONTEXT_FEATURES))
    if rest or n_ctx not in (0, 1, 2):
        raise InputError(f"{n_features} is not a width of the lexical feature set")
    names = list(CONTEXT_FEATURES) * n_ctx + list(CANDIDATE_FEATURES)
    return torch.tensor([0.0 if n in EXCLUDED_FEATURES else 1.0 for n in names])


def contexts_of(record: Mapping[str, Any], mode: str) -> list[str]:
    """The context texts the gate's features compare a candidate with: the source (when the mode reads
    one) and the first reference (when it reads one)."""
    from csem.data.records import references_of

    ctx = [record["source"]] if NEEDS_SOURCE[mode] and isinstance(record.get("source"), str) else []
    if NEEDS_REFERENCE[mode]:
        refs = references_of(record)
        ctx += refs[:1]
    return ctx


def gate_examples(records: Sequence[Mapping[str, Any]], aspects: Sequence[str], seed: int = 0
                  ) -> tuple[list[dict], dict[str, list[dict]]]:
    """Accepted and rejected texts for the gate (see the module docstring), made from ``records``.

    Args:
        records: training records (``candidate``; ``source``, ``reference``, ``doc_id`` where present).
        aspects: the model's aspects; an aspect named ``relevance`` also rejects the source copied whole.
        seed: seeds every draw (the same records and seed give the same texts).

    Returns:
        ``(accepted, rejected)``: records (the input's fields, ``candidate`` replaced) and, per aspect, the
        rejected records, each with ``degenerate`` naming its kind.
    """
    from csem.data.contrasts import (Context, few_tokens, reference_records, repeated_token, rng_for, source_copy,
                                     truncate_mid, word_shuffle)

    accepted = [dict(r) for r in records if isinstance(r.get("candidate"), str) and r["candidate"].strip()]
    if any(r.get("reference") for r in accepted):
        accepted += [r for r in reference_records(accepted) if str(r.get("id", "")).endswith("~ref0")]
    by_source: dict[str, list[str]] = {}
    for r in accepted:
        by_source.setdefault(str(r.get("source") or ""), []).append(r["candidate"])
    sources = sorted(by_source)
    shared: list[dict] = []
    copies: list[dict] = []
    for k, r in enumerate(accepted):
        key = str(r.get("id", k))
        ctx = Context(source=str(r.get("source") or ""))
        for name, fn in (("few_tokens", few_tokens), ("repeated_token", repeated_token),
                         ("truncated", truncate_mid), ("words_shuffled", word_shuffle)):
            res = fn(r["candidate"], rng_for(seed, key, "gate", name), ctx)
            if res is not None and res.text.strip():
                shared.append(dict(r, candidate=res.text, degenerate=name))
        others = [s for s in sources if s != str(r.get("source") or "")]
        if others:
            rng = rng_for(seed, key, "gate", "other")
            pool = by_source[others[rng.randrange(len(others))]]
            shared.append(dict(r, candidate=pool[rng.randrange(len(pool))], degenerate="other_source"))
        res = source_copy(r["candidate"], random.Random(0), ctx)
        if res is not None:
            copies.append(dict(r, candidate=res.text, degenerate="source_copy"))
    rejected = {a: shared + (copies if a == "relevance" else []) for a in aspects}
    return accepted, rejected


def fit_gate(gate: AcceptabilityGate, records: Sequence[Mapping[str, Any]], mode: str, *, seed: int = 0,
             quantile: float = 0.01, rejected_quantile: float = 0.99, l2: float = 1e-3, max_iter: int = 500) -> dict:
    """Fit ``gate`` on texts made from ``records`` ([`gate_examples`][csem.model.acceptability.gate_examples]); returns what the metric card
    records: texts per class, ``threshold`` and training accuracy per aspect, the features it does not read
    (``excluded_features``), seconds.

    Args:
        gate: the model's gate (fitted in place; ``fitted`` set to 1).
        records: the training records.
        mode: the model's mode (which contexts the features read).
        seed: seeds the examples and the classifiers' initialisation.
        quantile, rejected_quantile: ``theta_a`` is the lower of the ``quantile`` of ``p_a`` over the accepted
            texts and the ``rejected_quantile`` of ``p_a`` over the rejected ones, each in (0, 1).
        l2: L2 penalty on the classifiers' weights.
        max_iter: L-BFGS iterations per aspect.

    Raises:
        ValueError: ``quantile`` outside (0, 1), or no accepted or no rejected text.
    """
    if not (0.0 < quantile < 1.0 and 0.0 < rejected_quantile < 1.0):
        raise InputError(f"quantile and rejected_quantile must be in (0, 1), got {quantile}, {rejected_quantile}")
    t0 = time.perf_counter()
    accepted, rejected = gate_examples(records, gate.aspects, seed)
    # every row needs the contexts the mode reads: a reference turned candidate whose source has no
    # other reference has none, and scoring refuses such a row in a ref-based mode anyway
    width = int(NEEDS_SOURCE[mode]) + int(NEEDS_REFERENCE[mode])
    accepted = [r for r in accepted if len(contexts_of(r, mode)) == width]
    rejected = {a: [r for r in rows if len(contexts_of(r, mode)) == width] for a, rows in rejected.items()}
    if not accepted or not any(rejected.values()):
        raise InputError("the acceptability gate needs real candidates with at least 4 words to learn from")
    cache: dict[tuple[str, ...], list[float]] = {}

    def feats(rows: Sequence[Mapping[str, Any]]) -> Tensor:
        out = []
        for r in rows:
            ctx = contexts_of(r, mode)
            key = (r["candidate"], *ctx)
            if key not in cache:
                cache[key] = pair_features("lexical", r["candidate"], ctx)
            out.append(cache[key])
        return torch.tensor(out, dtype=torch.float32)

    x_pos = feats(accepted)
    with torch.no_grad():
        gate.mean.copy_(x_pos.mean(0))
        gate.std.copy_(x_pos.std(0, unbiased=False).clamp_min(1e-4))
    report: dict[str, Any] = {"accepted": len(accepted), "rejected": {}, "threshold": {}, "train_accuracy": {},
                              "quantile": quantile, "rejected_quantile": rejected_quantile,
                              "excluded_features": list(EXCLUDED_FEATURES) if bool((gate.mask == 0).any()) else []}
    thresholds = []
    for a in gate.aspects:
        x_neg = feats(rejected[a])
        x = (torch.cat([x_pos, x_neg]) - gate.mean) / gate.std * gate.mask
        y = torch.cat([torch.ones(len(x_pos)), torch.zeros(len(x_neg))])
        w = torch.cat([torch.full((len(x_pos),), len(x_neg) / len(x_pos)), torch.ones(len(x_neg))])
        w = w / w.mean()
        net = gate.nets[a]
        torch.manual_seed(seed)
        for layer in net:
            if isinstance(layer, nn.Linear):
                layer.reset_parameters()
        opt = torch.optim.LBFGS(net.parameters(), max_iter=max_iter, line_search_fn="strong_wolfe")
        weights = [p for n, p in net.named_parameters() if n.endswith("weight")]

        def closure() -> Tensor:
            opt.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(net(x)[:, 0], y, weight=w)
            loss = loss + l2 * sum(p.pow(2).sum() for p in weights)
            loss.backward()
            return loss

        net.requires_grad_(True)
        with torch.enable_grad():
            opt.step(closure)
        net.requires_grad_(False)
        with torch.no_grad():
            p = torch.sigmoid(net(x)[:, 0])
        theta = float(torch.minimum(torch.quantile(p[: len(x_pos)], quantile),
                                    torch.quantile(p[len(x_pos):], rejected_quantile)).clamp(min=1e-6))
        thresholds.append(theta)
        report["rejected"][a] = len(x_neg)
        report["threshold"][a] = round(theta, 4)
        report["train_accuracy"][a] = round(float(((p > 0.5) == (y > 0.5)).float().mean()), 4)
    with torch.no_grad():
        gate.threshold.copy_(torch.tensor(thresholds))
        gate.fitted.fill_(1.0)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report
