"""The one LightningModule of csem's learned metric: encoder + feature combination + one head per aspect.

Forward pass (CSEM paper Sec. IV-B, COMET estimator): embed each distinct text of the batch once
(`csem.model.batching.Batch`), gather ``h_y``/``h_x``/``h_ref`` by index, combine them
(Eq. 9 / Eq. 10, `csem.model.features`), run every aspect's feed-forward head, and aggregate
the per-reference predictions of a record (``max`` or ``mean``). The configured loss lives here too;
the training steps (optimiser, frozen warm-up, dev validation) and a run's state live in
`csem.model.train.StageTask`, the LightningModule that Lightning's Trainer fits around this one.
"""

from __future__ import annotations

import math

import lightning as L
import torch
from torch import Tensor, nn

from csem.errors import InputError
from csem.model.batching import Batch
from csem.model.config import ModelConfig, TrainConfig
from csem.model.encoder import build_encoder
from csem.model.features import combine, feature_size, overlap_size
from csem.model.heads import FeedForward
from csem.model.losses import expected_value, mse_loss, pairwise_ranking_loss, star_ce_loss


def bounded(x: Tensor, margin: float = 0.05) -> Tensor:
    """Keep normalised scores in (0, 1) without ties: the identity on ``[m, 1 - m]`` (``m = margin``) and
    a rational saturation beyond, ``1 - m^2 / (x - 1 + 2m)`` above and ``m^2 / (2m - x)`` below. The map
    is continuous with a continuous slope, strictly increasing (rankings unchanged; in float32 up to about
    5 normalised units out of range), lies inside [0, 1], and its tails approach the bounds slowly enough (``~m^2 / x``) that float32 still tells far
    out-of-range outputs apart. A regression head has a linear output, so a text unlike any training
    text (an empty or repeated-token candidate) could otherwise score outside the rubric's scale (7.46 on
    a 1-5 scale was seen)."""
    m = margin
    hi = 1.0 - m * m / (x - 1.0 + 2.0 * m).clamp_min(m)
    lo = m * m / (2.0 * m - x).clamp_min(m)
    return torch.where(x > 1.0 - m, hi, torch.where(x < m, lo, x))


class EvaluationModule(L.LightningModule):
    """Encoder, heads and the loss of the learned metric (trained through `csem.model.train.StageTask`).

    Args:
        config: the architecture (`ModelConfig`, with its ``labels``).
        train_config: optimisation settings (only needed to train).
        encoder_path: where to load the encoder from (default ``config.encoder``; a saved model
            passes its own ``encoder/`` folder).
        load_encoder_weights: False builds the encoder from its config (weights loaded afterwards).
    """

    def __init__(self, config: ModelConfig, train_config: TrainConfig | None = None,
                 encoder_path: str | None = None, load_encoder_weights: bool = True):
        super().__init__()
        if not config.labels:
            raise InputError("ModelConfig.labels is empty: at least one aspect is needed")
        self.config = config
        self.train_config = train_config or TrainConfig()
        self.encoder = build_encoder(config.encoder_kind, encoder_path or config.encoder, config.pooling,
                                     load_weights=load_encoder_weights)
        # the unified cross-encoder's pooled joint embedding is the feature vector itself
        fdim = self.encoder.dim if config.architecture == "unified" else feature_size(config.mode, self.encoder.dim)
        n_lex = overlap_size(config.mode, config.feature_set) if config.overlap_features else 0
        self.lexical = config.overlap_features and config.feature_set == "lexical"
        fdim += n_lex
        k = config.n_classes
        self.heads = nn.ModuleDict({
            spec.aspect: FeedForward(fdim, config.hidden_sizes, k, config.activation, config.dropout)
            for spec in config.labels})
        # lexical features also reach each head's output through a term of their own (wide & deep,
        # Cheng et al. 2016), so that a few scalars are not drowned among thousands of embedding
        # features: linear for the ``overlap`` set, a small MLP for the ``lexical`` set
        if not config.overlap_features:
            self.overlap_heads = None
        elif self.lexical:
            self.overlap_heads = nn.ModuleDict({
                spec.aspect: FeedForward(n_lex, [config.feature_hidden], k, config.activation, config.dropout)
                for spec in config.labels})
            # training rows' feature means and deviations (set by init_overlap_heads, saved with the model)
            self.register_buffer("lex_mean", torch.zeros(n_lex))
            self.register_buffer("lex_std", torch.ones(n_lex))
            for head in self.heads.values():  # the deep part starts at 0: the model starts at the wide fit
                nn.init.zeros_(head.ff[-1].weight)
                nn.init.zeros_(head.ff[-1].bias)
        else:
            self.overlap_heads = nn.ModuleDict({spec.aspect: nn.Linear(n_lex, k) for spec in config.labels})
        # the acceptability gate (csem.model.acceptability): fitted after training, identity until then
        self.gate = None
        if config.acceptability_gate and config.loss in ("mse", "mse+pairwise"):
            from csem.model.acceptability import AcceptabilityGate, gate_size

            self.gate = AcceptabilityGate(gate_size(config.mode), config.aspects)
        self._frozen = False
        self._cache: dict[str, Tensor] = {}
        self.split_layer = 0  # > 0 while training only the layers above it (see freeze_lower)

    def init_overlap_heads(self, batch: Batch, ridge: float = 1e-3) -> None:
        """Start the lexical features' output term where a model of the features alone ends; the
        rest of the model then learns the residual.

        ``overlap`` set: each aspect's linear term starts at the ridge least-squares fit of the
        normalised training labels on the features. ``lexical`` set: the features' training means
        and deviations are stored (``lex_mean``/``lex_std``, used to standardise them from then on),
        and each aspect's feature MLP is fitted alone, full batch, with the model's loss (MSE, the
        ranking loss of Eq. 3 or both; ``TrainConfig.feature_prefit_steps`` AdamW steps at
        ``feature_prefit_lr``, weight decay 1e-3).

        Args:
            batch: all training records as one `Batch` (with ``overlap``, ``labels``, ``mask``);
                each record's first (candidate, reference) pair is used.
            ridge: L2 penalty on the weights (not the bias) of the linear fit.

        Does nothing without overlap features; with the ``ce`` loss (several outputs per aspect) only
        the ``lexical`` set's means and deviations are stored.
        """
        if self.overlap_heads is None or batch.overlap is None:
            return
        first = torch.tensor([sum(batch.pair_counts[:i]) for i in range(len(batch.pair_counts))], dtype=torch.long)
        if self.lexical:
            self._prefit_lexical(batch.overlap[first], batch)
            return
        if self.config.n_classes != 1:
            return
        with torch.no_grad():
            x = torch.cat([batch.overlap[first].double(), torch.ones(len(first), 1, dtype=torch.float64)], dim=1)
            penalty = torch.eye(x.shape[1], dtype=torch.float64) * ridge
            penalty[-1, -1] = 0.0
            for k, aspect in enumerate(self.heads):
                m = batch.mask[:, k]
                if int(m.sum()) < x.shape[1]:
                    continue
                xm, y = x[m], batch.labels[m, k].double()
                w = torch.linalg.solve(xm.T @ xm + penalty, xm.T @ y)
                lin = self.overlap_heads[aspect]
                lin.weight.copy_(w[:-1].to(lin.weight.dtype).unsqueeze(0))
                lin.bias.fill_(float(w[-1]))

    def _prefit_lexical(self, lex: Tensor, batch: Batch) -> None:
        with torch.no_grad():
            self.lex_mean.copy_(lex.mean(0))
            self.lex_std.copy_(lex.std(0, unbiased=False).clamp_min(1e-6))
        tc = self.train_config
        if not tc.feature_prefit_steps or self.config.n_classes != 1 or not bool(batch.mask.any()):
            return
        x = (lex - self.lex_mean) / self.lex_std
        params = list(self.overlap_heads.parameters())
        opt = torch.optim.AdamW(params, lr=tc.feature_prefit_lr, weight_decay=1e-3)
        was = self.training
        self.overlap_heads.train()
        for _ in range(tc.feature_prefit_steps):
            score = torch.cat([self.overlap_heads[a](x) for a in self.heads], dim=1)
            loss = self._rating_loss(score, None, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
        self.overlap_heads.train(was)

    def warm_start(self, other: "EvaluationModule") -> dict[str, str]:
        """Start from a trained student's weights: fine-tuning a pretrained metric (COMET's
        ``load_from_checkpoint``; BLEURT and UniEval fine-tune their pretrained checkpoints alike).

        Copied from ``other``: the whole encoder (every layer, the layer mix), the lexical set's
        feature means and deviations, and for each aspect of this model the head and the feature
        output term of ``other``'s aspect of the same name, or of ``other``'s only aspect when it
        has one (a one-aspect metric is the start of every aspect). Aspects without a counterpart
        keep their fresh heads. The acceptability gate is not copied (``train`` fits it after
        training, on the new rows).

        Args:
            other: a trained module whose config has the same architecture
                (`csem.model.config.ModelConfig.architecture_differences` is empty).

        Returns:
            ``{aspect of this model: aspect of other it starts from}`` (fresh aspects absent).

        Raises:
            ValueError: the architectures differ, or a ``lexical``-feature model would mix copied and
                fresh feature terms (they are standardised with different training rows).
        """
        diff = self.config.architecture_differences(other.config)
        if diff:
            raise InputError("the initial model's architecture differs: " + "; ".join(diff))
        theirs = list(other.heads)
        mapping = {a: (a if a in other.heads else theirs[0]) for a in self.heads
                   if a in other.heads or len(theirs) == 1}
        if self.lexical and len(mapping) < len(self.heads):
            fresh = [a for a in self.heads if a not in mapping]
            raise InputError(f"aspects {fresh} have no head in the initial model, whose lexical features are "
                             f"standardised on its own training rows (its aspects: {theirs})")
        with torch.no_grad():
            self.encoder.load_state_dict(other.encoder.state_dict())
            if self.lexical:
                self.lex_mean.copy_(other.lex_mean)
                self.lex_std.copy_(other.lex_std)
            for mine, src in mapping.items():
                self.heads[mine].load_state_dict(other.heads[src].state_dict())
                if self.overlap_heads is not None:
                    self.overlap_heads[mine].load_state_dict(other.overlap_heads[src].state_dict())
        return mapping

    # ---- encoding ---------------------------------------------------------------------------
    def freeze_encoder(self) -> None:
        """Freeze the encoder (no gradients, dropout off); embeddings are cached while frozen."""
        self._frozen = True
        self.encoder.requires_grad_(False)
        self.encoder.eval()

    def unfreeze_encoder(self) -> None:
        self._frozen = False
        self._cache.clear()
        self.encoder.requires_grad_(True)
        self.encoder.train(self.training)
        if self.split_layer:
            self.freeze_lower(self.split_layer)

    def freeze_lower(self, k: int) -> None:
        """Train only the encoder layers above layer ``k``: the embedding layer and layers ``0..k-1``
        get no gradient, and each distinct text's token states after them are computed without dropout
        (cached by the caller: the ``lower`` argument of `forward`; ``TrainConfig.train_layers``)."""
        self.split_layer = k
        for p in self.encoder.lower_parameters(k):
            p.requires_grad_(False)

    def release_lower(self) -> None:
        """End partial fine-tuning: run the whole encoder again."""
        self.split_layer = 0

    def _embed_split(self, texts: list[str], chunk: dict[str, Tensor], lower: dict[str, Tensor]) -> Tensor:
        k = self.split_layer
        mask = chunk["attention_mask"]
        todo = [i for i, t in enumerate(texts) if t not in lower]
        if todo:
            was = self.encoder.training
            self.encoder.eval()
            with torch.no_grad():
                h = self.encoder.lower(chunk["input_ids"][todo], mask[todo], k)
            self.encoder.train(was)
            for row, i in enumerate(todo):
                lower[texts[i]] = h[row, : int(mask[i].sum())].clone()
        states = [lower[t] for t in texts]
        hidden = states[0].new_zeros((len(texts), mask.shape[1], states[0].shape[-1]))
        for i, st in enumerate(states):
            hidden[i, : st.shape[0]] = st
        return self.encoder.upper(hidden, mask, k)

    def embed(self, batch: Batch, lower: dict[str, Tensor] | None = None) -> Tensor:
        """Pooled embeddings ``[n_texts, d]`` of the batch's distinct texts, in pool order.

        Args:
            batch: the batch. lower: with the lower layers frozen (`freeze_lower`), the cache of
                their token states by text, filled as texts come (None: a cache for this call only).
        """
        outs = []
        for (lo, hi), chunk in zip(batch.bounds, batch.chunks):
            texts = batch.texts[lo:hi]
            if self.split_layer and not self._frozen:
                outs.append(self._embed_split(texts, chunk, {} if lower is None else lower).float())
                continue
            if self._frozen and all(t in self._cache for t in texts):
                outs.append(torch.stack([self._cache[t] for t in texts]))
                continue
            if self._frozen:
                with torch.no_grad():
                    e = self.encoder(chunk["input_ids"], chunk["attention_mask"]).float()
                for t, v in zip(texts, e):
                    self._cache[t] = v
            else:
                e = self.encoder(chunk["input_ids"], chunk["attention_mask"]).float()
            outs.append(e)
        return torch.cat(outs, dim=0)

    def head_outputs(self, emb: Tensor, batch: Batch) -> Tensor:
        """Head outputs per pair ``[P, A, K]`` from pool embeddings ``[n_texts, d]``; gated by the
        acceptability gate when the batch carries its features (``Batch.gate``)."""
        h_y = emb[batch.cand_idx]
        if self.config.architecture == "unified":
            feats = h_y  # the joint input's pooled embedding
        else:
            h_x = emb[batch.src_idx] if batch.src_idx is not None else None
            h_r = emb[batch.ref_idx] if batch.ref_idx is not None else None
            feats = combine(self.config.mode, h_y, h_x, h_r)
        if not self.config.overlap_features:
            out = torch.stack([head(feats) for head in self.heads.values()], dim=1)
        else:
            if batch.overlap is None:
                raise InputError("this model uses overlap features, but the batch has none (BatchBuilder(overlap=True))")
            lex = batch.overlap.to(feats.dtype)
            if self.lexical:
                lex = (lex - self.lex_mean.to(lex.dtype)) / self.lex_std.to(lex.dtype)
            feats = torch.cat([feats, lex], dim=-1)
            out = torch.stack([head(feats) + self.overlap_heads[a](lex) for a, head in self.heads.items()], dim=1)
        if self.gate is not None and batch.gate is not None:  # scoring (csem.model.inference) passes the gate's features
            out = self.gate.gate_scores(out, batch.gate)
        return out

    def aggregate(self, out: Tensor, counts: list[int]) -> tuple[Tensor, Tensor | None]:
        """Per-record normalised scores ``[B, A]`` (and log-probabilities ``[B, A, K]`` for ``ce``).

        Several references: ``max`` takes the best per-reference prediction, ``mean`` averages them
        (for ``ce``: the distribution with the highest expected value, or the mean distribution).
        """
        ce = self.config.loss == "ce"
        logp = torch.log_softmax(out, dim=-1) if ce else None
        pair_score = expected_value(logp.exp()) if ce else out[..., 0]
        if all(c == 1 for c in counts):
            return pair_score, logp
        scores, logps = [], []
        for i, (s, lp) in enumerate(zip(torch.split(pair_score, counts),
                                        torch.split(logp, counts) if ce else [None] * len(counts))):
            if self.config.ref_aggregation == "max":
                best = s.argmax(dim=0)  # [A]
                scores.append(s.gather(0, best.unsqueeze(0))[0])
                if ce:
                    logps.append(lp[best, torch.arange(lp.shape[1])])
            else:
                if ce:
                    lpm = torch.logsumexp(lp, dim=0) - math.log(lp.shape[0])
                    logps.append(lpm)
                    scores.append(expected_value(lpm.exp()))
                else:
                    scores.append(s.mean(0))
        return torch.stack(scores), (torch.stack(logps) if ce else None)

    def forward(self, batch: Batch, lower: dict[str, Tensor] | None = None) -> tuple[Tensor, Tensor | None]:
        """Normalised scores ``[B, A]`` in (about) [0, 1], and ``ce`` log-probabilities or None
        (``lower``: see `embed`)."""
        return self.aggregate(self.head_outputs(self.embed(batch, lower), batch), batch.pair_counts)

    def denormalise(self, norm: Tensor) -> Tensor:
        """Map normalised scores ``[..., A]`` back to each aspect's scale: ``min + b(s) * (max - min)``,
        where ``b`` (`bounded`) keeps the score inside the scale without changing any ranking. A
        model trained with the ``pairwise`` loss alone has relative scores (no scale): ``b`` is the
        identity there."""
        lo = torch.tensor([s.min for s in self.config.labels], dtype=norm.dtype, device=norm.device)
        hi = torch.tensor([s.max for s in self.config.labels], dtype=norm.dtype, device=norm.device)
        if self.config.loss != "pairwise":
            norm = bounded(norm)
        return lo + norm * (hi - lo)

    # ---- training (the steps: csem.model.train.StageTask) ------------------------------------
    def _rating_loss(self, score: Tensor, logp: Tensor | None, batch: Batch) -> Tensor:
        """The configured loss of scores ``[B, A]`` (or ``ce`` log-probabilities) against the batch's labels."""
        if self.config.loss == "ce":
            return star_ce_loss(logp, batch.labels, batch.mask)
        if self.config.loss == "pairwise":
            return pairwise_ranking_loss(score, batch.labels, batch.mask, batch.group)
        loss = mse_loss(score, batch.labels, batch.mask)
        if self.config.loss == "mse+pairwise":
            loss = loss + self.config.pairwise_weight * pairwise_ranking_loss(score, batch.labels, batch.mask,
                                                                              batch.group)
        return loss
