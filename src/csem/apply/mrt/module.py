"""The Lightning module of MRT (one ``training_step`` = one batch of sources: sample, reward, Eq. 12)
and the callback that writes transformers checkpoints; built on first use (Lightning is imported then)."""

from __future__ import annotations

import csv
import math
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import torch

from csem.apply.mrt.config import MRTConfig
from csem.apply.mrt.generator import eos_ids, render_prompt, save_generator
from csem.apply.mrt.losses import (completion_mask, continuation_logprobs, fill_missing, mixed_loss, mrt_loss,
                                   prompt_cache, q_distribution, sequence_logprobs)
from csem.apply.mrt.rewards import RewardCache
from csem.apply.mrt.sampling import batch_for_step, sample_continuations, step_seed
from csem.errors import InputError

LOG_FIELDS = ("step", "epoch", "loss", "mrt_loss", "mle_loss", "reward_mean", "reward_max", "q_entropy",
              "sample_length", "seconds", "cpu_seconds")


def lightning_module_class():
    """Build the Lightning module class of MRT (Lightning is imported here, on first use).

    Returns:
        ``MRTModule``, a ``lightning.LightningModule`` subclass constructed as
        ``MRTModule(net, tokenizer, sources, reward, cfg, log_path)``: Eq. 12 fine-tuning of the causal LM
        ``net``; one ``training_step`` is one batch of ``sources`` (sample, reward, loss); one row per
        optimizer step is appended to the CSV ``log_path`` (fields `LOG_FIELDS`).
    """
    import lightning as L

    class MRTModule(L.LightningModule):
        """Eq. 12 fine-tuning of a causal LM; one ``training_step`` = one batch of sources."""

        def __init__(self, net: Any, tokenizer: Any, sources: list[dict], reward: RewardCache, cfg: MRTConfig,
                     log_path: Path):
            super().__init__()
            self.net, self.tok, self.sources, self.reward, self.cfg = net, tokenizer, sources, reward, cfg
            self.log_path = log_path
            self.eos = eos_ids(tokenizer, net)
            self.prompts = [render_prompt(tokenizer, cfg.task, s["source"], cfg.max_source_tokens) for s in sources]
            self._t0, self._c0 = time.perf_counter(), time.process_time()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.net.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)

        def on_train_start(self) -> None:
            truncate_log(self.log_path, self.global_step)  # a resumed run: steps to be redone leave the log
            self._t0, self._c0 = time.perf_counter(), time.process_time()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            cfg, tok = self.cfg, self.tok
            micro = self.global_step * cfg.accumulate + batch_idx % cfg.accumulate
            idx = batch_for_step(len(self.sources), cfg.batch_size, cfg.seed, micro)
            srcs = [self.sources[i] for i in idx]
            tok.padding_side = "left"
            enc = tok([self.prompts[i] for i in idx], return_tensors="pt", padding=True,
                      add_special_tokens=False).to(self.device)
            logprobs, cache = logprob_function(self.net, enc["input_ids"], enc["attention_mask"], cfg.share_prompt)
            if cfg.lam == 0:  # MLE only: Eq. 12's MRT term has weight 0, nothing to sample or score
                l_mle = reference_nll(tok, srcs, logprobs, cfg.max_target_tokens, self.device)
                if l_mle is None:
                    raise InputError("lambda = 0 (MLE only) needs sources with a 'reference'")
                row = {"step": self.global_step, "epoch": self.current_epoch, "loss": float(l_mle.detach()),
                       "mle_loss": float(l_mle.detach())}
                self._pending = row if batch_idx % cfg.accumulate == cfg.accumulate - 1 else None
                self.log("mle", row["mle_loss"], prog_bar=True)
                return l_mle
            loss, l_mle, row = self._mrt_step(srcs, enc, cache, logprobs, micro)
            self._pending = row if batch_idx % cfg.accumulate == cfg.accumulate - 1 else None
            self.log("reward", row["reward_mean"], prog_bar=True)
            if l_mle is not None:
                self.log("mle", row["mle_loss"], prog_bar=True)
            return loss

        def _mrt_step(self, srcs: list[dict], enc: Any, cache: Any, logprobs: Callable,
                      micro: int) -> tuple[torch.Tensor, torch.Tensor | None, dict]:
            """Eq. 12 with lambda > 0 on one batch: sample, reward, loss; returns the loss, the MLE term
            (None when lambda = 1) and the step's log row (without its timings)."""
            cfg, tok = self.cfg, self.tok
            # stage 1: sample without gradients
            gen = draw_samples(self.net, tok, enc, cfg, step_seed(cfg.seed, micro), cache)
            comp = gen[:, enc["input_ids"].shape[1]:]
            cmask = completion_mask(comp, self.eos)
            texts = tok.batch_decode(comp.masked_fill(~cmask, tok.pad_token_id), skip_special_tokens=True)
            r = reward_matrix(self.reward(sample_records(srcs, texts, cfg.num_samples)), len(srcs), cfg.reward_scale)
            # stage 2: sequence log-probabilities with gradients, one batched forward pass over the samples
            rows = torch.arange(len(srcs), device=self.device).repeat_interleave(cfg.num_samples)
            lp_sum, _ = logprobs(rows, comp, cmask)
            lp = lp_sum.view(len(srcs), cfg.num_samples)
            l_mrt = mrt_loss(lp, r.to(lp.device), cfg.alpha)
            l_mle = reference_nll(tok, srcs, logprobs, cfg.max_target_tokens, self.device) if cfg.lam < 1 else None
            loss = mixed_loss(l_mrt, l_mle, cfg.lam)
            q = q_distribution(lp.detach(), cfg.alpha)
            row = {"step": self.global_step, "epoch": self.current_epoch, "loss": float(loss.detach()),
                   "mrt_loss": float(l_mrt.detach()), "mle_loss": None if l_mle is None else float(l_mle.detach()),
                   "reward_mean": float(torch.nanmean(r)), "reward_max": float(r.max()),
                   "q_entropy": float(-(q * q.clamp_min(1e-30).log()).sum(-1).mean()),
                   "sample_length": float(cmask.sum(-1).float().mean())}
            return loss, l_mle, row

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            # after the backward pass(es) of the step (the times cover them), before any checkpoint of it
            row, self._pending = getattr(self, "_pending", None), None
            if row is not None:
                append_log_row(self.log_path, dict(row, seconds=round(time.perf_counter() - self._t0, 2),
                                                   cpu_seconds=round(time.process_time() - self._c0, 2)))

    return MRTModule


def logprob_function(net: Any, ids: torch.Tensor, pmask: torch.Tensor,
                     share_prompt: bool) -> tuple[Callable, tuple[Any, torch.Tensor] | None]:
    """The sequence log-probability function of one batch of prompts.

    Args:
        net: a transformers causal LM.
        ids: ``[B, P]`` prompt token ids, left-padded.
        pmask: ``[B, P]`` their attention mask (0 on padding).
        share_prompt: True: the prompts are encoded once, with gradients
            ([`csem.apply.mrt.losses.prompt_cache`][]), and their cache serves the samples and the
            references ([`csem.apply.mrt.losses.continuation_logprobs`][]); False: one pass over
            ``[prompt | target]`` per row ([`csem.apply.mrt.losses.sequence_logprobs`][]).

    Returns:
        ``(logprobs, cache)``: ``logprobs(rows, targets, target_mask) -> (lp_sum, n)`` where ``rows``
        (``[N]``) picks the prompt of each target row, ``targets`` and ``target_mask`` are ``[N, T]``,
        ``lp_sum`` the ``[N]`` summed log-probabilities (nats) and ``n`` the ``[N]`` target token counts;
        ``cache`` is the prompts' ``(key/value cache, last logits)`` when ``share_prompt``, else None.
    """
    if share_prompt:
        cache, last = prompt_cache(net, ids, pmask)

        def logprobs(rows, targets, tmask):
            return continuation_logprobs(net, cache, pmask, last, rows, targets, tmask)

        return logprobs, (cache, last)
    p_len = ids.shape[1]

    def logprobs(rows, targets, tmask):  # the prompt re-encoded for every row
        return sequence_logprobs(net, torch.cat([ids.index_select(0, rows), targets], 1),
                                 torch.cat([pmask.index_select(0, rows), tmask.to(pmask.dtype)], 1),
                                 p_len, tmask)

    return logprobs, None


def draw_samples(net: Any, tok: Any, enc: Any, cfg: MRTConfig, seed: int,
                 cache: tuple[Any, torch.Tensor] | None) -> torch.Tensor:
    """Stage 1 of MRT: ``cfg.num_samples`` sampled continuations per prompt, without gradients.

    The model is put in eval mode while sampling (no dropout) and back in its former mode after.

    Args:
        net: a transformers causal LM. tok: its tokenizer.
        enc: the tokenizer's output for ``B`` left-padded prompts (``input_ids``, ``attention_mask``).
        cfg: the run's settings (``num_samples``, ``top_k``, ``temperature``, ``max_new_tokens``).
        seed: the torch seed set before sampling (a pure function of the micro-step).
        cache: the prompts' cache from `logprob_function`
            (sampling starts from it), or None (``net.generate`` re-encodes the prompts).

    Returns:
        ``[B * num_samples, P + T]`` token ids (prompt then continuation); row ``b * num_samples + s``
        is sample ``s`` of prompt ``b``.
    """
    decoding = dict(do_sample=True, top_k=cfg.top_k, top_p=None, temperature=cfg.temperature,
                    max_new_tokens=cfg.max_new_tokens)
    was_training = net.training
    net.eval()
    torch.manual_seed(seed)
    if cache is not None:  # from the detached prompt cache
        gen = sample_continuations(net, tok, enc["input_ids"], enc["attention_mask"], cfg.num_samples,
                                   cache=cache[0], **decoding)
    else:
        with torch.no_grad():
            gen = net.generate(**enc, num_return_sequences=cfg.num_samples, pad_token_id=tok.pad_token_id,
                               **decoding)
    net.train(was_training)
    return gen


def sample_records(srcs: list[dict], texts: list[str], num_samples: int) -> list[dict]:
    """The records the reward scores: sample ``k`` (``texts[k]``) as the candidate of source
    ``srcs[k // num_samples]``, with its id ``<doc_id>/mrt/<k>``, ``doc_id``, ``source`` and ``reference``."""
    recs = []
    for k, text in enumerate(texts):
        s = srcs[k // num_samples]
        recs.append({"id": f"{s['doc_id']}/mrt/{k}", "doc_id": s["doc_id"], "source": s["source"],
                     "candidate": text.strip(), "reference": s.get("reference")})
    return recs


def reward_matrix(raw: list[float | None], n_sources: int, scale: float) -> torch.Tensor:
    """The rewards as a ``[n_sources, num_samples]`` float32 tensor times ``scale``; a missing reward
    (None) is filled by [`csem.apply.mrt.losses.fill_missing`][]."""
    r = torch.tensor([math.nan if v is None else v for v in raw], dtype=torch.float32).view(n_sources, -1)
    return fill_missing(r) * scale


def reference_nll(tok: Any, srcs: list[dict], logprobs: Callable, max_target_tokens: int,
                  device: Any) -> torch.Tensor | None:
    """Eq. 12's MLE term: the mean per-token negative log-likelihood (nats) of each source's first
    reference (followed by EOS, cut to ``max_target_tokens`` tokens) given its prompt.

    Args:
        tok: the tokenizer (its padding side is set to right while encoding, then back to left).
        srcs: the batch's sources; those without a reference are left out.
        logprobs: the batch's function from `logprob_function`.
        max_target_tokens: the reference's token limit.
        device: where the token tensors go.

    Returns:
        A scalar tensor with gradients, or None when no source of the batch has a reference.
    """
    from csem.data.records import references_of

    refs = [(b, references_of(s)) for b, s in enumerate(srcs)]
    refs = [(b, rr[0]) for b, rr in refs if rr]
    if not refs:
        return None
    tok.padding_side = "right"
    eos = tok.eos_token or ""
    tgt = tok([r + eos for _, r in refs], return_tensors="pt", padding=True, truncation=True,
              max_length=max_target_tokens, add_special_tokens=False).to(device)
    tok.padding_side = "left"
    rows = torch.tensor([b for b, _ in refs], device=device)
    lp_sum, n = logprobs(rows, tgt["input_ids"], tgt["attention_mask"].bool())
    return -(lp_sum.sum() / n.sum().clamp_min(1))


def truncate_log(log_path: Path, step: int) -> None:
    """Keep only the rows of steps before ``step`` in the CSV training log (a resumed run redoes the
    later ones); nothing when the log does not exist."""
    if log_path.exists():
        with log_path.open(encoding="utf-8") as fh:
            rows = [r for r in csv.DictReader(fh) if int(r["step"]) < step]
        with log_path.open("w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, LOG_FIELDS)
            w.writeheader()
            w.writerows(rows)


def append_log_row(log_path: Path, row: dict) -> None:
    """Append one step's row (fields `LOG_FIELDS`) to the CSV training log, with the header when the
    file is new."""
    new = not log_path.exists()
    with log_path.open("a", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, LOG_FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def hf_checkpoint_callback(out: Path, tokenizer: Any, every: int, keep: int):
    import lightning as L

    class SaveHF(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            step = trainer.global_step
            if step and step % every == 0 and (out / f"checkpoint-{step}").exists() is False:
                save_generator(pl_module.net, tokenizer, out / f"checkpoint-{step}")
                olds = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
                for p in olds[:-keep]:
                    shutil.rmtree(p, ignore_errors=True)

    return SaveHF()
