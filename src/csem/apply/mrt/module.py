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
            # a resumed run: drop log rows of steps that will be redone
            if self.log_path.exists():
                with self.log_path.open(encoding="utf-8") as fh:
                    rows = [r for r in csv.DictReader(fh) if int(r["step"]) < self.global_step]
                with self.log_path.open("w", encoding="utf-8", newline="") as fh:
                    w = csv.DictWriter(fh, LOG_FIELDS)
                    w.writeheader()
                    w.writerows(rows)
            self._t0, self._c0 = time.perf_counter(), time.process_time()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            cfg, tok, net = self.cfg, self.tok, self.net
            micro = self.global_step * cfg.accumulate + batch_idx % cfg.accumulate
            idx = batch_for_step(len(self.sources), cfg.batch_size, cfg.seed, micro)
            srcs = [self.sources[i] for i in idx]
            tok.padding_side = "left"
            enc = tok([self.prompts[i] for i in idx], return_tensors="pt", padding=True,
                      add_special_tokens=False).to(self.device)
            p_len = enc["input_ids"].shape[1]
            ids, pmask = enc["input_ids"], enc["attention_mask"]
            decoding = dict(do_sample=True, top_k=cfg.top_k, top_p=None, temperature=cfg.temperature,
                            max_new_tokens=cfg.max_new_tokens)
            if cfg.share_prompt:
                # the prompts once per source, with gradients: their cache serves the samples and the references
                cache, last = prompt_cache(net, ids, pmask)

                def logprobs(rows, targets, tmask):
                    return continuation_logprobs(net, cache, pmask, last, rows, targets, tmask)
            else:  # one pass over [prompt | target] per row (the prompt re-encoded for every sample)
                def logprobs(rows, targets, tmask):
                    return sequence_logprobs(net, torch.cat([ids.index_select(0, rows), targets], 1),
                                             torch.cat([pmask.index_select(0, rows), tmask.to(pmask.dtype)], 1),
                                             p_len, tmask)
            if cfg.lam == 0:  # MLE only: Eq. 12's MRT term has weight 0, nothing to sample or score
                l_mle = self._mle(srcs, logprobs)
                if l_mle is None:
                    raise InputError("lambda = 0 (MLE only) needs sources with a 'reference'")
                row = {"step": self.global_step, "epoch": self.current_epoch, "loss": float(l_mle.detach()),
                       "mle_loss": float(l_mle.detach())}
                self._pending = row if batch_idx % cfg.accumulate == cfg.accumulate - 1 else None
                self.log("mle", row["mle_loss"], prog_bar=True)
                return l_mle
            # stage 1: sample without gradients (eval mode: no dropout while sampling)
            was_training = net.training
            net.eval()
            torch.manual_seed(step_seed(cfg.seed, micro))
            if cfg.share_prompt:  # from the detached prompt cache
                gen = sample_continuations(net, tok, ids, pmask, cfg.num_samples, cache=cache, **decoding)
            else:
                with torch.no_grad():
                    gen = net.generate(**enc, num_return_sequences=cfg.num_samples, pad_token_id=tok.pad_token_id,
                                       **decoding)
            net.train(was_training)
            comp = gen[:, p_len:]
            cmask = completion_mask(comp, self.eos)
            texts = tok.batch_decode(comp.masked_fill(~cmask, tok.pad_token_id), skip_special_tokens=True)
            recs = []
            for k, text in enumerate(texts):
                s = srcs[k // cfg.num_samples]
                recs.append({"id": f"{s['doc_id']}/mrt/{k}", "doc_id": s["doc_id"], "source": s["source"],
                             "candidate": text.strip(), "reference": s.get("reference")})
            raw = self.reward(recs)
            r = torch.tensor([math.nan if v is None else v for v in raw], dtype=torch.float32).view(len(srcs), -1)
            r = fill_missing(r) * cfg.reward_scale
            # stage 2: sequence log-probabilities with gradients, one batched forward pass over the samples
            rows = torch.arange(len(srcs), device=self.device).repeat_interleave(cfg.num_samples)
            lp_sum, _ = logprobs(rows, comp, cmask)
            lp = lp_sum.view(len(srcs), cfg.num_samples)
            l_mrt = mrt_loss(lp, r.to(lp.device), cfg.alpha)
            l_mle = self._mle(srcs, logprobs) if cfg.lam < 1 else None
            loss = mixed_loss(l_mrt, l_mle, cfg.lam)
            q = q_distribution(lp.detach(), cfg.alpha)
            row = {"step": self.global_step, "epoch": self.current_epoch, "loss": float(loss.detach()),
                   "mrt_loss": float(l_mrt.detach()), "mle_loss": None if l_mle is None else float(l_mle.detach()),
                   "reward_mean": float(torch.nanmean(r)), "reward_max": float(r.max()),
                   "q_entropy": float(-(q * q.clamp_min(1e-30).log()).sum(-1).mean()),
                   "sample_length": float(cmask.sum(-1).float().mean())}
            self._pending = row if batch_idx % cfg.accumulate == cfg.accumulate - 1 else None
            self.log("reward", row["reward_mean"], prog_bar=True)
            if l_mle is not None:
                self.log("mle", row["mle_loss"], prog_bar=True)
            return loss

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            # after the backward pass(es) of the step (the times cover them), before any checkpoint of it
            row, self._pending = getattr(self, "_pending", None), None
            if row is not None:
                self._write(dict(row, seconds=round(time.perf_counter() - self._t0, 2),
                                 cpu_seconds=round(time.process_time() - self._c0, 2)))

        def _mle(self, srcs: list[dict], logprobs: Callable) -> torch.Tensor | None:
            from csem.data.records import references_of

            refs = [(b, references_of(s)) for b, s in enumerate(srcs)]
            refs = [(b, rr[0]) for b, rr in refs if rr]
            if not refs:
                return None
            tok = self.tok
            tok.padding_side = "right"
            eos = tok.eos_token or ""
            tgt = tok([r + eos for _, r in refs], return_tensors="pt", padding=True, truncation=True,
                      max_length=self.cfg.max_target_tokens, add_special_tokens=False).to(self.device)
            tok.padding_side = "left"
            rows = torch.tensor([b for b, _ in refs], device=self.device)
            lp_sum, n = logprobs(rows, tgt["input_ids"], tgt["attention_mask"].bool())
            return -(lp_sum.sum() / n.sum().clamp_min(1))

        def _write(self, row: dict) -> None:
            new = not self.log_path.exists()
            with self.log_path.open("a", encoding="utf-8", newline="") as fh:
                w = csv.DictWriter(fh, LOG_FIELDS)
                if new:
                    w.writeheader()
                w.writerow(row)

    return MRTModule


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
