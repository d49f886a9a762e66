"""Minimum risk training (MRT) of a transformers generator with a metric as the reward, mixed with MLE.

CSEM (Wang et al., Sec. III-D, Eq. 5, 6, 12), after Shen et al. (2016, "Minimum Risk Training for
Neural Machine Translation"):

* Eq. 6: for ``S`` samples ``y_1..y_S`` of source ``x``,
  ``Q(y_s | x; theta, alpha) = P(y_s | x; theta)^alpha / sum_s' P(y_s' | x; theta)^alpha``,
  i.e. a softmax of ``alpha * log P`` over the samples (:func:`q_distribution`; Shen et al. use
  ``alpha = 5e-3``).
* Eq. 5: ``L_MRT = sum_s Q(y_s | x) * Delta(y_s)`` with the cost ``Delta = -reward`` (the metric's
  score of the sample); averaged over the sources of a batch (:func:`mrt_loss`).
* Eq. 12: ``L = lambda * L_MRT + (1 - lambda) * L_MLE`` (:func:`mixed_loss`), ``L_MLE`` the
  token-level negative log-likelihood of the references (default ``lambda = 0.7``).

Two-stage sampling (as in the paper): ``S`` top-k samples per source are generated without
gradients, then their sequence log-probabilities are computed with gradients in one batched
forward pass over the samples (:func:`continuation_logprobs`). Each source's prompt is encoded
once per step, with gradients (:func:`prompt_cache`); its key/value cache, detached, starts the
sampling and, with gradients, serves the samples' and the reference's forward passes, so the prompt
(the long part of a summarization input) costs one pass instead of ``S + 2``; the result equals a
pass over ``[left-padded prompt | sample]`` (:func:`sequence_logprobs`). Rewards are
cached per (source id, candidate text), in memory and in ``rewards.jsonl`` (a resumed run does not
re-score). Training runs in Lightning (devices, precision, gradient accumulation), seeded: the
sources and the sampling seed of step ``t`` are pure functions of ``(seed, t)``, so a run resumed
from ``lightning/last.ckpt`` after a kill continues exactly. Checkpoints are loadable transformers
folders (``checkpoint-<step>/``, and ``final/`` at the end); ``train_log.csv`` has one row per
step (reward, MRT and MLE loss, mean sample length in tokens, wall and CPU seconds since the start).
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

LOG_FIELDS = ("step", "epoch", "loss", "mrt_loss", "mle_loss", "reward_mean", "reward_max", "q_entropy",
              "sample_length", "seconds", "cpu_seconds")


# ----------------------------------------------------------------------------------------------
# the losses (pure tensor functions)
# ----------------------------------------------------------------------------------------------

def q_distribution(seq_logprobs: torch.Tensor, alpha: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 6: ``Q = P^alpha`` renormalised over the samples of each source.

    Args:
        seq_logprobs: ``[B, S]`` sequence log-probabilities ``log P(y_s | x_b)`` (natural log).
        alpha: the sharpness (> 0).
        mask: optional ``[B, S]`` bool, False for padding samples (they get Q = 0).

    Returns:
        ``[B, S]``, each row sums to 1.
    """
    z = alpha * seq_logprobs
    if mask is not None:
        z = z.masked_fill(~mask, float("-inf"))
    return torch.softmax(z, dim=-1)


def mrt_loss(seq_logprobs: torch.Tensor, rewards: torch.Tensor, alpha: float,
             mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 5 with the cost ``Delta = -reward``: ``mean_b sum_s Q(y_s|x_b) * (-reward_bs)``.

    Args:
        seq_logprobs: ``[B, S]`` (with gradients). rewards: ``[B, S]`` (no gradient needed).
        alpha: Eq. 6's alpha. mask: optional ``[B, S]`` valid samples.

    Returns:
        A scalar: the expected cost under Q (lower is better).
    """
    q = q_distribution(seq_logprobs, alpha, mask)
    r = rewards.to(q.dtype).detach()
    if mask is not None:
        r = r.masked_fill(~mask, 0.0)
    return -(q * r).sum(-1).mean()


def mixed_loss(l_mrt: torch.Tensor, l_mle: torch.Tensor | None, lam: float) -> torch.Tensor:
    """Eq. 12: ``lambda * L_MRT + (1 - lambda) * L_MLE`` (just ``L_MRT`` when there is no MLE term;
    ``lambda = 0`` gives MLE-only fine-tuning)."""
    if l_mle is None:
        return l_mrt
    return lam * l_mrt + (1.0 - lam) * l_mle


def sequence_logprobs(net: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int,
                      target_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Token log-probabilities of the targets after a left-padded prompt, in one forward pass.

    Args:
        net: a transformers causal LM.
        input_ids: ``[N, P + T]``: prompts left-padded to length ``P``, then targets right-padded.
        attention_mask: ``[N, P + T]`` (0 on padding).
        prompt_len: ``P``.
        target_mask: ``[N, T]`` bool, True on the target tokens that count.

    Returns:
        ``(sum, count)``: ``[N]`` summed log-probabilities of the counted target tokens, and
        ``[N]`` their number. Only the last ``T + 1`` positions' logits are computed.
    """
    t = input_ids.shape[1] - prompt_len
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = net(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
              logits_to_keep=t + 1, use_cache=False)
    logits = out.logits[:, :-1].float()  # positions P-1 .. P+T-2 predict target tokens 0 .. T-1
    targets = input_ids[:, prompt_len:]
    lp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    m = target_mask.to(lp.dtype)
    return (lp * m).sum(-1), m.sum(-1)


def prompt_cache(net: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """One forward pass over left-padded prompts: their key/value cache and the last position's logits.

    The cache is shared by every continuation of a prompt (its S samples, its reference), so the
    prompt, by far the longest part of a summarization input, is encoded once per source instead of
    once per sample; with gradients enabled, they flow back through the cache into the prompt.

    Args:
        net: a transformers causal LM. input_ids, attention_mask: ``[B, P]``, left-padded.

    Returns:
        ``(cache, last_logits)``: a transformers cache over the ``P`` positions, and ``[B, V]`` logits
        at position ``P - 1`` (they predict the first continuation token).
    """
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = net(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True,
              logits_to_keep=1)
    return getattr(out, "cache", None) or out.past_key_values, out.logits[:, -1]


def _cache_arg(net: Any) -> str:
    """The keyword of the key/value cache: ``cache`` (transformers >= 5.2x) or ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(net.forward).parameters else "past_key_values"


def _cache_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))  # pragma: no cover - older transformers


def select_cache(cache: Any, rows: torch.Tensor, *, length: int | None = None, detach: bool = False) -> Any:
    """A new cache holding rows ``rows`` (a ``[M]`` index, repeats allowed) of ``cache``, optionally only
    its first ``length`` positions and detached from the graph; ``cache`` itself is left unchanged."""
    from transformers import DynamicCache

    data = []
    for k, v in _cache_tensors(cache):
        if length is not None:
            k, v = k[:, :, :length], v[:, :, :length]
        k, v = k.index_select(0, rows), v.index_select(0, rows)
        data.append((k.detach(), v.detach()) if detach else (k, v))
    try:
        return DynamicCache(ddp_cache_data=data)
    except TypeError:  # pragma: no cover - older transformers
        return DynamicCache.from_legacy_cache(tuple(data))


def continuation_logprobs(net: Any, cache: Any, prompt_mask: torch.Tensor, last_logits: torch.Tensor,
                          rows: torch.Tensor, targets: torch.Tensor,
                          target_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequence log-probabilities of continuations of cached prompts, in one batched forward pass.

    Equal to :func:`sequence_logprobs` over ``[prompt | target]`` rows, but the prompt positions come
    from ``cache`` (:func:`prompt_cache`), so only the ``T`` target positions are computed.

    Args:
        net: the causal LM that made ``cache``. cache: over ``[B, P]`` prompts.
        prompt_mask: ``[B, P]`` their attention mask (left padding). last_logits: ``[B, V]`` from
            :func:`prompt_cache`. rows: ``[M]`` the prompt of each target row.
        targets: ``[M, T]`` token ids (right-padded). target_mask: ``[M, T]`` bool, True on the tokens
            that count (also the attention mask of the targets).

    Returns:
        ``(sum, count)``: ``[M]`` summed natural-log probabilities of the counted target tokens, and
        ``[M]`` their number.
    """
    p, t = prompt_mask.shape[1], targets.shape[1]
    kv = select_cache(cache, rows)
    attn = torch.cat([prompt_mask.index_select(0, rows), target_mask.to(prompt_mask.dtype)], dim=1)
    position_ids = (attn.long().cumsum(-1) - 1).clamp(min=0)[:, p:]
    cache_position = torch.arange(p, p + t, device=targets.device)
    logits = net(input_ids=targets, attention_mask=attn, position_ids=position_ids, cache_position=cache_position,
                 use_cache=True, **{_cache_arg(net): kv}).logits
    # position P-1 (the prompt's last) predicts target 0; target position j predicts target j + 1
    logits = torch.cat([last_logits.index_select(0, rows).unsqueeze(1), logits[:, :-1]], dim=1).float()
    lp = -torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    m = target_mask.to(lp.dtype)
    return (lp * m).sum(-1), m.sum(-1)


def sample_continuations(net: Any, tokenizer: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         num_samples: int, *, cache: Any = None, **decoding: Any) -> torch.Tensor:
    """``num_samples`` generations per left-padded prompt, the prompt encoded once (not once per sample).

    The prompts' cache (``cache`` from :func:`prompt_cache`, else computed here without gradients) is
    cut to ``P - 1`` positions and repeated ``num_samples`` times; ``generate`` then starts from the
    last prompt token. Row ``b * num_samples + s`` is sample ``s`` of prompt ``b``, as with
    ``num_return_sequences``.

    Returns:
        ``[B * num_samples, P + new]`` token ids (prompt then generation), like ``generate``.
    """
    p = input_ids.shape[1]
    rows = torch.arange(input_ids.shape[0], device=input_ids.device).repeat_interleave(num_samples)
    with torch.no_grad():
        if cache is None:
            cache, _ = prompt_cache(net, input_ids, attention_mask)
        kv = select_cache(cache, rows, length=p - 1, detach=True)
        return net.generate(input_ids=input_ids.index_select(0, rows), attention_mask=attention_mask.index_select(0, rows),
                            num_return_sequences=1, pad_token_id=tokenizer.pad_token_id, **{_cache_arg(net): kv},
                            **decoding)


def completion_mask(tokens: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """``[N, T]`` bool: True up to and including the first end-of-sequence token of each row."""
    is_eos = torch.zeros_like(tokens, dtype=torch.bool)
    for e in eos_ids:
        is_eos |= tokens == e
    before = torch.cumsum(is_eos.long(), dim=-1) - is_eos.long()  # eos tokens strictly before
    return before == 0


# ----------------------------------------------------------------------------------------------
# configuration and the reward cache
# ----------------------------------------------------------------------------------------------

class MRTConfig(BaseModel):
    """Settings of :func:`train_mrt` (defaults: the paper and Shen et al. 2016 where they say).

    Attributes:
        lam: Eq. 12's lambda (0.7; 0 = MLE only: no samples are drawn or scored; 1 = MRT only).
            alpha: Eq. 6 (5e-3).
        num_samples: S samples per source (5). top_k: sampling (50). temperature: sampling.
        max_new_tokens: sample length cap. max_source_tokens: the source is cut to this many tokens
            before the task prompt is rendered. max_target_tokens: reference tokens in the MLE term.
        task: the task prompt (:data:`csem.collect.prompts.TASK_PROMPTS` or a template).
        batch_size: sources per step; accumulate: gradient accumulation (Lightning).
        lr, weight_decay, gradient_clip: AdamW. max_steps: optimiser steps.
        reward_scale: the reward is multiplied by this. weights: per metric column (default: mean).
        checkpoint_every: steps between checkpoints (transformers folder + Lightning state);
        keep_checkpoints: transformers folders kept. seed. precision/accelerator/devices: Lightning.
        threads: torch CPU threads (None: leave as is).
        share_prompt: encode each prompt once per step and share its key/value cache between the
            sampling, the samples' and the reference's log-probabilities (True, the same values); False
            re-encodes it for every sample (the plain two-stage pass; kept to measure the difference).
    """

    model_config = ConfigDict(extra="forbid")
    lam: float = Field(0.7, ge=0, le=1)
    alpha: float = Field(5e-3, gt=0)
    num_samples: int = Field(5, ge=1)
    top_k: int = Field(50, ge=1)
    temperature: float = Field(1.0, gt=0)
    max_new_tokens: int = Field(64, ge=1)
    max_source_tokens: int = Field(384, ge=8)
    max_target_tokens: int = Field(96, ge=1)
    task: str = "summarize"
    batch_size: int = Field(2, ge=1)
    accumulate: int = Field(1, ge=1)
    lr: float = Field(1e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    gradient_clip: float = Field(1.0, ge=0)
    max_steps: int = Field(20, ge=1)
    reward_scale: float = 1.0
    weights: dict[str, float] | None = None
    checkpoint_every: int = Field(10, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    seed: int = 0
    precision: str = "32-true"
    accelerator: str = "cpu"
    devices: int | str = 1
    threads: int | None = Field(None, ge=1)
    share_prompt: bool = True


class RewardCache:
    """Rewards per (source id, candidate text), in memory and appended to a JSONL file.

    ``fn(records) -> list[float | None]`` scores records that miss from the cache; None (a metric
    that gave no score) is cached as None and used as the mean of the other samples' rewards.
    """

    def __init__(self, fn: Callable[[list[dict]], list[float | None]], path: str | Path | None = None,
                 namespace: str = ""):
        self.fn, self.path, self.namespace = fn, Path(path) if path else None, namespace
        self.memo: dict[str, float | None] = {}
        self.hits = self.misses = 0
        if self.path and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.memo[row["key"]] = row["reward"]
                except (json.JSONDecodeError, KeyError):
                    continue  # a line cut by a kill

    def key(self, source_id: str, candidate: str) -> str:
        """The cache key: sha256 of (namespace = the metric and its weights, source id, candidate)."""
        return hashlib.sha256(f"{self.namespace}\x00{source_id}\x00{candidate}".encode()).hexdigest()

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> list[float | None]:
        keys = [self.key(str(r["doc_id"]), r["candidate"]) for r in records]
        todo = {}
        for k, r in zip(keys, records):
            if k in self.memo:
                self.hits += 1
            elif k not in todo:
                todo[k] = dict(r)
        if todo:
            self.misses += len(todo)
            values = self.fn(list(todo.values()))
            with (self.path.open("a", encoding="utf-8") if self.path else _Null()) as sink:
                for k, v in zip(todo, values):
                    v = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                    self.memo[k] = v
                    sink.write(json.dumps({"key": k, "reward": v}) + "\n")
        return [self.memo[k] for k in keys]


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def write(self, s: str) -> None:
        pass


def reward_identity(reward: Any) -> str:
    """What the reward cache is keyed by: a metric's content, never its name or path.

    A student (:class:`csem.apply.metrics.StudentMetric`): ``student:<sha256 of its config and
    weights>`` plus its columns (:func:`csem.model.scoring.model_fingerprint`), so a retrained student
    in the same folder never reuses an earlier one's rewards. A judge: its backend URI, the sha256 of
    its rubrics' JSON and its options. A baseline: its name (its code is the package's). A plain
    function: its ``csem_identity`` attribute when it has one, else its qualified name (pass a
    metric for content keying).
    """
    import hashlib

    if getattr(reward, "fingerprint", None):
        return json.dumps(["student", reward.fingerprint, list(getattr(reward, "columns", []))])
    rubrics = getattr(reward, "rubrics", None)
    if rubrics is not None:
        body = json.dumps([r.model_dump(mode="json") if hasattr(r, "model_dump") else repr(r) for r in rubrics],
                          sort_keys=True, default=str)
        return json.dumps(["judge", getattr(reward, "judge", None), hashlib.sha256(body.encode()).hexdigest(),
                           getattr(reward, "options", None)], sort_keys=True, default=str)
    if hasattr(reward, "columns"):
        return json.dumps(["metric", getattr(reward, "name", None), list(reward.columns)])
    return str(getattr(reward, "csem_identity", None) or getattr(reward, "__qualname__", None)
               or getattr(reward, "__name__", None) or type(reward).__qualname__)


def metric_reward(metric: Any, weights: Mapping[str, float] | None = None) -> Callable[[list[dict]], list[float | None]]:
    """A reward function over records from a loaded :class:`csem.apply.metrics.Metric`: the weighted
    sum of its columns (default: their mean); None when a weighted column is missing.

    Raises:
        ValueError: a weight names a column the metric does not write.
    """
    cols = list(metric.columns)
    if weights:
        unknown = [c for c in weights if c not in cols]
        if unknown:
            raise ValueError(f"reward weights name {unknown}; the metric writes {cols}")
        w = {c: float(weights.get(c, 0.0)) for c in cols}
        from csem.apply.reranking import check_finite

        check_finite(list(w.values()), list(w), "reward weights")
    else:
        w = {c: 1.0 / len(cols) for c in cols}

    def fn(records: list[dict]) -> list[float | None]:
        scores = metric.score(records)
        out = []
        for i in range(len(records)):
            vals = [(scores[c][i], wc) for c, wc in w.items() if wc != 0]
            out.append(None if any(v is None for v, _ in vals) else float(sum(v * wc for v, wc in vals)))
        return out

    return fn


# ----------------------------------------------------------------------------------------------
# generator loading and prompts
# ----------------------------------------------------------------------------------------------

def resolve_generator(uri: str) -> str:
    """The model path of a generator URI: ``hf:PATH`` (folder or ``.gguf``), ``smollm2`` (the packaged
    SmolLM2-135M-Instruct GGUF, converted once to fp32 under ``~/.cache/csem``) or a plain folder."""
    spec = uri[3:] if uri.startswith("hf:") else uri
    if spec in ("smollm2", "smollm2-135m"):
        from csem.assets import smollm2_gguf

        return str(smollm2_gguf())
    return spec


def load_generator(uri: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a causal transformers generator in fp32 (see :func:`resolve_generator`).

    Raises:
        ValueError: a seq2seq model (MRT here supports causal generators only).
    """
    try:  # the transformers backend of csem.llm (loads a GGUF once into an fp32 cache folder)
        from csem.llm.providers.hf import HFBackend as _Loader
    except ImportError:  # pragma: no cover - older layout
        from csem.collect.hf_generator import HFGenerator as _Loader

    gen = _Loader(resolve_generator(uri))
    if gen.is_seq2seq:
        raise ValueError(f"{uri}: a seq2seq model; csem mrt trains causal generators")
    return gen.net, gen.tokenizer


def render_prompt(tokenizer: Any, task: str, source: str, max_source_tokens: int) -> str:
    """The chat prompt text for ``source`` (cut to ``max_source_tokens`` tokens) under ``task``."""
    from csem.collect.prompts import render_task_prompt

    ids = tokenizer(source, add_special_tokens=False)["input_ids"]
    if len(ids) > max_source_tokens:
        source = tokenizer.decode(ids[:max_source_tokens], skip_special_tokens=True)
    messages = render_task_prompt(task, source)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages if m["role"] != "system")


def eos_ids(tokenizer: Any, net: Any) -> list[int]:
    ids = {tokenizer.eos_token_id}
    gen_eos = getattr(getattr(net, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, (list, tuple)):
        ids.update(gen_eos)
    return sorted(i for i in ids if i is not None)


def generate_texts(net: Any, tokenizer: Any, sources: Sequence[str], *, task: str = "summarize",
                   max_source_tokens: int = 384, max_new_tokens: int = 64, sample: bool = False,
                   num_samples: int = 1, top_k: int = 50, temperature: float = 1.0, seed: int = 0,
                   batch_size: int = 4) -> list[list[str]]:
    """Generate ``num_samples`` texts per source (greedy when ``sample`` is False): one list per source."""
    tokenizer.padding_side = "left"
    out: list[list[str]] = []
    net.eval()
    for start in range(0, len(sources), batch_size):
        chunk = sources[start:start + batch_size]
        prompts = [render_prompt(tokenizer, task, s, max_source_tokens) for s in chunk]
        enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(net.device)
        torch.manual_seed(seed + start)
        decoding = dict(do_sample=sample, top_k=top_k if sample else None, temperature=temperature if sample else None,
                        top_p=None, max_new_tokens=max_new_tokens)
        with torch.inference_mode():
            if num_samples > 1:  # the prompt encoded once, its cache repeated for the samples
                gen = sample_continuations(net, tokenizer, enc["input_ids"], enc["attention_mask"], num_samples,
                                           **decoding)
            else:
                gen = net.generate(**enc, **decoding, pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        for b in range(len(chunk)):
            out.append([t.strip() for t in texts[b * num_samples:(b + 1) * num_samples]])
    return out


# ----------------------------------------------------------------------------------------------
# the Lightning module
# ----------------------------------------------------------------------------------------------

def _step_rng(seed: int, step: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}|{step}".encode()).digest()[:4], "little") & 0x7FFFFFFF


def batch_for_step(n_sources: int, batch_size: int, seed: int, step: int) -> list[int]:
    """Source positions of optimiser step ``step`` (epoch-wise seeded permutations; a pure function,
    so a resumed run sees the same batches)."""
    per_epoch = max(1, math.ceil(n_sources / batch_size))
    epoch, j = divmod(step, per_epoch)
    g = torch.Generator().manual_seed(_step_rng(seed, -1 - epoch))
    perm = torch.randperm(n_sources, generator=g).tolist()
    return perm[j * batch_size:(j + 1) * batch_size]


def _lightning_module_class():
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
                    raise ValueError("lambda = 0 (MLE only) needs sources with a 'reference'")
                row = {"step": self.global_step, "epoch": self.current_epoch, "loss": float(l_mle.detach()),
                       "mle_loss": float(l_mle.detach())}
                self._pending = row if batch_idx % cfg.accumulate == cfg.accumulate - 1 else None
                self.log("mle", row["mle_loss"], prog_bar=True)
                return l_mle
            # stage 1: sample without gradients (eval mode: no dropout while sampling)
            was_training = net.training
            net.eval()
            torch.manual_seed(_step_rng(cfg.seed, micro))
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
            r = _fill_missing(r) * cfg.reward_scale
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


def _fill_missing(r: torch.Tensor) -> torch.Tensor:
    """Missing rewards (NaN) take their source's mean reward (no push either way); all missing -> 0."""
    mean = torch.nanmean(r, dim=1, keepdim=True).nan_to_num(0.0)
    return torch.where(torch.isnan(r), mean.expand_as(r), r)


def _hf_checkpoint_callback(out: Path, tokenizer: Any, every: int, keep: int):
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


def save_generator(net: Any, tokenizer: Any, folder: Path) -> Path:
    """Write a loadable transformers folder atomically (``folder.partial`` then rename)."""
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    net.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.replace(folder)
    return folder


@dataclass
class MRTResult:
    """``final``: the transformers folder of the trained generator; ``log``: the per-step CSV;
    ``steps``: optimiser steps done; ``reward_hits``/``reward_misses``: reward cache use;
    ``seconds``: wall time of this call; ``resumed_from``: the Lightning checkpoint or None."""

    final: Path
    log: Path
    steps: int
    reward_hits: int
    reward_misses: int
    seconds: float
    resumed_from: str | None


def log_summary(log: str | Path) -> dict:
    """What a ``train_log.csv`` of :func:`train_mrt` says, as the first and last quarter of its steps.

    Returns:
        ``{"steps": rows, "quarter": steps per quarter (at least 1), "reward_first", "reward_last",
        "mle_first", "mle_last", "length_first", "length_last"}``: means of ``reward_mean``,
        ``mle_loss`` and ``sample_length`` over the first and the last quarter of the logged steps;
        None where no step in the quarter logged that value (no reward with ``lam = 0``, no MLE loss
        with ``lam = 1`` or without references) or the log has no rows.
    """
    with Path(log).open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    q = max(1, len(rows) // 4)
    out: dict[str, Any] = {"steps": len(rows), "quarter": q}
    for key, col in (("reward", "reward_mean"), ("mle", "mle_loss"), ("length", "sample_length")):
        for part, chunk in (("first", rows[:q]), ("last", rows[-q:] if rows else [])):
            vals = [float(r[col]) for r in chunk if r.get(col) not in (None, "")]
            out[f"{key}_{part}"] = sum(vals) / len(vals) if vals else None
    return out


def train_mrt(generator: str | tuple[Any, Any], sources: Sequence[Mapping[str, Any]], reward: Callable | Any,
              out_dir: str | Path, config: MRTConfig | None = None, *, resume: bool = True,
              progress: bool = False) -> MRTResult:
    """Fine-tune a causal generator with Eq. 12 (MRT + MLE) under a metric's reward.

    Args:
        generator: a URI (``hf:PATH``, ``smollm2``) or a loaded ``(model, tokenizer)``.
        sources: records with ``source``, an id (``doc_id`` or ``id``) and, for the MLE term,
            ``reference``.
        reward: a loaded :class:`csem.apply.metrics.Metric` (its columns mixed by ``config.weights``)
            or a function ``records -> list[float | None]``.
        out_dir: run folder: ``final/``, ``checkpoint-<step>/``, ``lightning/last.ckpt``,
            ``train_log.csv``, ``rewards.jsonl``, ``mrt_config.json``.
        config: :class:`MRTConfig`.
        resume: continue from ``lightning/last.ckpt`` when it exists (False: start over).

    Returns:
        :class:`MRTResult`.

    Raises:
        ValueError: no sources, a source without text or id, ``lam < 1`` and no source has a
            reference... (the MLE term is then skipped, not an error), bad reward weights.
    """
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    cfg = config or MRTConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    srcs = []
    for i, s in enumerate(sources):
        sid = s.get("doc_id") if s.get("doc_id") is not None else s.get("id")
        if sid is None or not isinstance(s.get("source"), str) or not s["source"].strip():
            raise ValueError(f"source {i + 1}: needs an id ('doc_id' or 'id') and a non-empty 'source'")
        srcs.append(dict(s, doc_id=str(sid)))
    if not srcs:
        raise ValueError("MRT needs at least one source")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    fn = reward if not hasattr(reward, "columns") else metric_reward(reward, cfg.weights)
    last = out / "lightning" / "last.ckpt"
    resume_from = str(last) if resume and last.exists() else None
    if resume_from is None:  # a fresh run: no log rows or checkpoints of an earlier one
        for p in (out / "train_log.csv", out / "rewards.jsonl" if not resume else out / "_none"):
            p.unlink(missing_ok=True)
        shutil.rmtree(out / "lightning", ignore_errors=True)
    namespace = json.dumps([reward_identity(reward), cfg.weights, cfg.reward_scale], sort_keys=True)
    cache = RewardCache(fn, out / "rewards.jsonl", namespace)
    net, tok = load_generator(generator) if isinstance(generator, str) else generator
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    (out / "mrt_config.json").write_text(json.dumps({"generator": generator if isinstance(generator, str) else
                                                     getattr(net.config, "_name_or_path", "model"),
                                                     **cfg.model_dump()}, indent=2), encoding="utf-8")
    L.seed_everything(cfg.seed, verbose=False)
    module = _lightning_module_class()(net, tok, srcs, cache, cfg, out / "train_log.csv")
    net.train()
    ckpt_dir = out / "lightning"
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    trainer = L.Trainer(
        accelerator=cfg.accelerator, devices=cfg.devices, precision=cfg.precision, max_steps=cfg.max_steps,
        max_epochs=-1, accumulate_grad_batches=cfg.accumulate, gradient_clip_val=cfg.gradient_clip or None,
        logger=False, enable_progress_bar=progress, enable_model_summary=False, num_sanity_val_steps=0,
        callbacks=[ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=0,
                                   every_n_train_steps=cfg.checkpoint_every),
                   _hf_checkpoint_callback(out, tok, cfg.checkpoint_every, cfg.keep_checkpoints)],
    )
    # the data loader only counts micro-batches: step t's sources come from batch_for_step(t)
    loader = torch.utils.data.DataLoader(list(range(max(1, math.ceil(len(srcs) / cfg.batch_size)) * cfg.accumulate)),
                                         batch_size=1, collate_fn=lambda b: b[0])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
        trainer.fit(module, train_dataloaders=loader, ckpt_path=resume_from)
    final = save_generator(net, tok, out / "final")
    return MRTResult(final, out / "train_log.csv", trainer.global_step, cache.hits, cache.misses,
                     time.perf_counter() - t0, resume_from)
