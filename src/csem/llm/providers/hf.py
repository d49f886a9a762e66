"""Generation with transformers models (``hf:MODEL``; seq2seq or causal; local folder or hub id).

Offers what llama.cpp cannot: beam search and diverse beam search (Vijayakumar et al. 2016,
``num_beam_groups`` + ``diversity_penalty`` in ``transformers.GenerationConfig``), besides top-k and
top-p sampling, behind the same [`csem.llm.api.ModelAPI`][] as every other backend. Loading a hub
id needs network access; a local folder (or a GGUF file read by transformers with the ``gguf``
package) works offline.

**Scoring on a GPU** (G-Eval's probability-weighted score, ``probs`` mode): `HFBackend.score_distribution`
reads the next-token log-probabilities after the prompt (the chain rule over each score's tokens is
`csem.llm.providers.score_tokens`, shared with llama.cpp). With ``batch_size`` B > 1 the requests
in flight are gathered into one forward pass of up to B prompts (left-padded, position ids from the
attention mask, logits of the last position only): the judge runner keeps B requests in flight
(``max_concurrency = B``), so ``csem annotate --judge hf:MODEL --judge-opt device=cuda --judge-opt
batch_size=64 --judge-opt dtype=bfloat16`` judges a pool at GPU speed. Padding changes a score only
by the rounding of the chosen dtype (tested on CPU in fp32: batched and one-at-a-time scores agree to
1e-4).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from csem.errors import InputError
from csem.llm.api import BackendError, GenerationResult, Messages, ScoreDistribution
from csem.llm.config import GenerateConfig
from csem.llm.providers.score_tokens import digit_mask, log_softmax, score_probs, score_variants

#: torch dtypes by name (the ``dtype`` option)
DTYPES = ("float32", "bfloat16", "float16")


class _Needs(Exception):
    """Raised inside `score_probs` when a prefix's next-token distribution is not computed yet."""

    def __init__(self, path: tuple[int, ...]):
        super().__init__(path)
        self.path = path


class HFBackend:
    """A transformers model in this process: generation requests are served one at a time, scoring
    requests in batches of up to ``batch_size``.

    Args:
        model: a local folder, a hub id, a ``.gguf`` file, or ``FOLDER::FILE.gguf`` to read a GGUF
            through transformers (dequantised to fp32 at load, converted once into the csem cache).
        device: ``cpu`` (default), ``cuda`` or ``auto``.
        trust_remote_code: allow code fetched from the Hugging Face hub to run (default False).
            Loading never runs a model folder's own code (``trust_remote_code=False`` is passed to
            every ``from_pretrained``). Diverse beam search (``num_beam_groups > 1``) needs it: since
            transformers 4.56 group beam search is a hub-hosted ``custom_generate`` recipe
            (``transformers-community/group-beam-search``), so it runs only with this option set
            (``--judge-opt trust_remote_code=true`` or the generator's options), with a warning, and
            only with network access.
        dtype: ``float32`` (default), ``bfloat16`` or ``float16``: the weights' and activations' dtype
            (a GGUF is dequantised to fp32 first). Part of `id` when not fp32, so cached
            judgments of two dtypes are kept apart.
        batch_size: most scoring requests per forward pass (default 1); also the backend's
            ``max_concurrency`` and ``default_concurrency``, so the runner keeps that many in flight.
            A batch waits at most ``batch_wait`` seconds (default 0.02) for more requests.

    Raises:
        ValueError: no model, an unknown dtype, ``batch_size`` < 1.
        BackendError: (scoring) a prompt longer than the model's context.
    """

    features = frozenset({"beam_search"})

    def __init__(self, model: str, *, device: str = "cpu", trust_remote_code: bool = False, dtype: str = "float32",
                 batch_size: int = 1, batch_wait: float = 0.02):
        if not model:
            raise InputError("hf backend needs a model: hf:FOLDER_OR_HUB_ID or hf:FILE.gguf")
        if dtype not in DTYPES:
            raise InputError(f"hf backend: unknown dtype '{dtype}' (use one of: {', '.join(DTYPES)})")
        if int(batch_size) < 1:
            raise InputError(f"hf backend: batch_size must be at least 1, got {batch_size}")
        self.model, self.device, self.trust_remote_code = model, device, bool(trust_remote_code)
        self.dtype, self.batch_size, self.batch_wait = dtype, int(batch_size), float(batch_wait)
        self.max_concurrency = self.default_concurrency = self.batch_size
        self.id = f"hf:{model}" + ("" if dtype == "float32" else f"/{dtype}")
        self._lock = threading.Lock()
        self._digit_mask: np.ndarray | None = None
        self._queue: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        #: requests scored, forward passes, prompt tokens, tokens computed with the padding
        self.stats = {"requests": 0, "batches": 0, "prompt_tokens": 0, "padded_tokens": 0}
        self._load()

    def _load(self) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        kwargs: dict[str, Any] = {}
        path = self.model
        if "::" in path:
            path, gguf = path.split("::", 1)
            kwargs["gguf_file"] = gguf
        elif path.endswith(".gguf"):
            p = Path(path)
            path, kwargs["gguf_file"] = str(p.parent), p.name
        converted = None
        if "gguf_file" in kwargs:
            # transformers dequantises a GGUF at every load (slow): convert once into the cache
            from csem.assets import cache_dir, sha256_file

            gguf_path = Path(path) / kwargs["gguf_file"]
            converted = cache_dir() / "hf-from-gguf" / sha256_file(gguf_path)[:16]
            if (converted / ".complete").exists():
                path, kwargs = str(converted), {}
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, **kwargs)
        config = AutoConfig.from_pretrained(path, trust_remote_code=False, **kwargs)
        self.is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        cls = AutoModelForSeq2SeqLM if self.is_seq2seq else AutoModelForCausalLM
        self.net = cls.from_pretrained(path, dtype=torch.float32, trust_remote_code=False, **kwargs).eval()
        if converted is not None and kwargs:
            tmp = converted.with_name(converted.name + ".partial")
            # the weights are already dequantised to fp32: drop the GGUF marker so they can be saved
            self.net.hf_quantizer = None
            if hasattr(self.net.config, "quantization_config"):
                del self.net.config.quantization_config
            self.net.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            (tmp / ".complete").write_text("ok")
            import shutil

            shutil.rmtree(converted, ignore_errors=True)
            tmp.replace(converted)
        if self.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.net.to(device=self.device, dtype=getattr(torch, self.dtype))
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def _encode(self, messages: Messages):
        text = prompt_text(self.tokenizer, messages, seq2seq=self.is_seq2seq)
        return self.tokenizer(text, return_tensors="pt", truncation=True).to(self.device)

    def _generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        """``config.n`` answers: sampling (top-k / top-p / temperature), or the ``n`` best beams when
        ``num_beams > 1`` (diverse when ``num_beam_groups > 1``; beam search ignores the seed)."""
        import torch
        from transformers import GenerationConfig

        inputs = self._encode(messages)
        common = dict(max_new_tokens=config.max_tokens, num_return_sequences=config.n,
                      pad_token_id=self.tokenizer.pad_token_id)
        extra: dict[str, Any] = {}
        if not config.beam_search:
            if config.temperature == 0:
                cfg = GenerationConfig(do_sample=False, **common)
            else:
                cfg = GenerationConfig(do_sample=True, temperature=config.temperature, top_k=config.top_k,
                                       top_p=config.top_p, **common)
        elif (config.num_beam_groups or 1) <= 1:
            cfg = GenerationConfig(do_sample=False, num_beams=max(config.num_beams, config.n), **common)
        else:
            # transformers >= 4.56 moved group (diverse) beam search to a hub-hosted
            # ``custom_generate`` recipe: it needs network access and trust_remote_code, so it is opt-in.
            if not self.trust_remote_code:
                raise InputError(
                    f"{self.id}: diverse beam search (num_beam_groups > 1) runs code fetched from the hub "
                    "('transformers-community/group-beam-search', transformers >= 4.56); allow it explicitly with "
                    "the backend option trust_remote_code=true, or use plain beam search (num_beam_groups 1)")
            import warnings

            warnings.warn(f"{self.id}: running hub code 'transformers-community/group-beam-search' for diverse "
                          "beam search (trust_remote_code=True was set)", UserWarning, stacklevel=2)
            groups = config.num_beam_groups
            beams = max(config.num_beams, config.n, groups)
            beams += (-beams) % groups
            cfg = GenerationConfig(do_sample=False, num_beams=beams, num_beam_groups=groups,
                                   diversity_penalty=config.diversity_penalty or 0.0, **common)
            extra = {"custom_generate": "transformers-community/group-beam-search", "trust_remote_code": True}
        seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little")
        torch.manual_seed(seed)
        with torch.inference_mode():
            try:
                out = self.net.generate(**inputs, generation_config=cfg, **extra)
            except OSError as exc:
                raise RuntimeError("diverse beam search in transformers >= 4.56 is fetched from the hub "
                                   "('transformers-community/group-beam-search'); it is unavailable offline: "
                                   f"{exc}") from exc
        prompt_len = int(inputs["input_ids"].shape[1])
        if not self.is_seq2seq:
            out = out[:, prompt_len:]
        results = []
        for seq, text in zip(out, self.tokenizer.batch_decode(out, skip_special_tokens=True)):
            finish = "length"
            if config.stop and any(s in text for s in config.stop):
                text, finish = text[: min(text.index(s) for s in config.stop if s in text)], "stop"
            elif self.tokenizer.eos_token_id is not None and bool((seq == self.tokenizer.eos_token_id).any()):
                finish = "stop"
            n_tok = int((seq != self.tokenizer.pad_token_id).sum()) if self.tokenizer.pad_token_id is not None else len(seq)
            results.append(GenerationResult(text=text, tokens=n_tok, prompt_tokens=prompt_len, finish_reason=finish))
        return results

    def _locked(self, fn, *args):
        with self._lock:
            return fn(*args)

    async def generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        return await asyncio.to_thread(self._locked, self._generate, messages, config)

    # ------------------------------------------------------------------ scoring
    def prompt_ids(self, messages: Messages) -> list[int]:
        """Token ids of the chat-formatted prompt (`prompt_text`), ending with the assistant turn
        header; no truncation."""
        text = prompt_text(self.tokenizer, messages, seq2seq=self.is_seq2seq)
        return list(self.tokenizer(text, add_special_tokens=not getattr(self.tokenizer, "chat_template", None))["input_ids"])

    @lru_cache(maxsize=64)
    def _score_variants(self, scores: tuple[int, ...]) -> dict[int, list[tuple[int, ...]]]:
        return score_variants(lambda text: self.tokenizer(text, add_special_tokens=False)["input_ids"], scores)

    def _digits(self) -> np.ndarray:
        if self._digit_mask is None:
            self._digit_mask = digit_mask(self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer)))))
        return self._digit_mask

    def _forward_last(self, batch: list[list[int]]) -> np.ndarray:
        """Next-token logits after each prompt, shape ``(len(batch), vocab)``, float64: one forward pass
        over the left-padded batch (positions counted from each prompt's first token).

        Raises:
            BackendError: the longest prompt exceeds the model's ``max_position_embeddings``."""
        import torch

        length = max(len(ids) for ids in batch)
        limit = getattr(self.net.config, "max_position_embeddings", None)
        if limit and length > limit:
            raise BackendError(f"{self.id}: prompt has {length} tokens, more than the model's {limit}")
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(batch), length), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for i, row in enumerate(batch):
            ids[i, length - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[i, length - len(row):] = 1
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = self.net(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                           position_ids=position_ids.to(self.device), logits_to_keep=1)
        self.stats["batches"] += 1
        self.stats["padded_tokens"] += len(batch) * length
        return out.logits[:, -1, :].float().cpu().numpy().astype(np.float64)

    def _score_batch(self, items: list[tuple[list[int], tuple[int, ...]]]) -> list[ScoreDistribution]:
        """Score distributions of ``(prompt ids, scale)`` items. The first pass scores every prompt in one
        batch; a score written in several tokens (``" 4"`` is ``" "`` + ``"4"`` for Qwen2.5) needs the
        next-token distribution after ``prompt + prefix``: each further round gathers the one prefix each
        unfinished item needs next into one more batched pass (two passes per batch for a 1-5 scale
        whenever a prefix is not pruned; see `csem.llm.providers.score_tokens`)."""
        prompts = [list(ids) for ids, _ in items]
        nodes: list[dict[tuple[int, ...], np.ndarray]] = [{(): log_softmax(row)} for row in self._forward_last(prompts)]
        tops = [int(np.argmax(node[()])) for node in nodes]
        evaluated = [len(ids) for ids in prompts]
        probs: list[dict[int, float] | None] = [None] * len(items)
        todo = list(range(len(items)))
        while todo:
            needs: dict[int, tuple[int, ...]] = {}
            for i in todo:
                def logp(path: tuple[int, ...], node=nodes[i]) -> np.ndarray:
                    if path not in node:
                        raise _Needs(path)
                    return node[path]
                try:
                    probs[i] = score_probs(self._score_variants(items[i][1]), logp, self._digits)
                except _Needs as need:
                    needs[i] = need.path
            if not needs:
                break
            todo = list(needs)
            rows = self._forward_last([prompts[i] + list(needs[i]) for i in todo])
            for i, row in zip(todo, rows):
                nodes[i][needs[i]] = log_softmax(row)
                evaluated[i] += len(prompts[i]) + len(needs[i])
        out = []
        for i, p in enumerate(probs):
            self.stats["requests"] += 1
            self.stats["prompt_tokens"] += len(prompts[i])
            out.append(ScoreDistribution(probs=p, mass=float(sum(p.values())), prompt_tokens=len(prompts[i]),
                                         evaluated_tokens=evaluated[i], top=self.tokenizer.decode([tops[i]])))
        return out

    def _serve_scores(self) -> None:
        """Worker thread: gather up to ``batch_size`` queued requests (waiting at most ``batch_wait``
        seconds after the first), score them in one pass, hand each result to its event loop."""
        import time

        q = self._queue
        while True:
            first = q.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.batch_wait
            while len(batch) < self.batch_size:
                try:
                    item = q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    q.put(None)
                    break
                batch.append(item)
            try:
                results = self._locked(self._score_batch, [(ids, scores) for ids, scores, _, _ in batch])
                answers = [(fut.set_result, res) for (_, _, _, fut), res in zip(batch, results)]
            except Exception as exc:  # noqa: BLE001 - every waiting request gets the error
                err = exc if isinstance(exc, BackendError) else BackendError(f"{self.id}: {type(exc).__name__}: {exc}")
                answers = [(fut.set_exception, err) for _, _, _, fut in batch]
            for (_, _, loop, fut), (give, value) in zip(batch, answers):
                try:
                    loop.call_soon_threadsafe(lambda f=fut, g=give, v=value: f.done() or g(v))
                except RuntimeError:  # the caller's event loop is gone: nobody waits for this answer
                    pass

    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        """p(score) for each of ``scores`` as the assistant's first words (see the module docstring);
        ``mass`` is the probability that fell on valid scores, ``top`` the most probable next token."""
        if self.is_seq2seq:
            from csem.llm.api import LogprobsUnsupported

            raise LogprobsUnsupported(f"{self.id}: scoring needs a causal model (this one is seq2seq)")
        ids = self.prompt_ids(messages)
        with self._lock:
            if self.net is None:
                raise BackendError(f"{self.id}: the backend is closed")
            if self._worker is None:
                self._queue = queue.Queue()
                self._worker = threading.Thread(target=self._serve_scores, name="csem-hf-scoring", daemon=True)
                self._worker.start()
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.put((ids, tuple(int(s) for s in scores), loop, fut))
        return await fut

    def close(self) -> None:
        with self._lock:
            self.net = None
            if self._worker is not None:
                self._queue.put(None)
                self._worker = None


def prompt_text(tokenizer: Any, messages: Messages, *, seq2seq: bool = False) -> str:
    """The text a transformers generator reads for chat ``messages``: the tokenizer's chat template
    with the generation prompt (causal models that have one), else the non-system contents joined by
    blank lines. One home for `HFBackend` and MRT's prompts ([`csem.apply.mrt.render_prompt`][])."""
    if not seq2seq and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages if m["role"] != "system")


def hf_backend(target: str, **options: Any) -> HFBackend:
    """``hf:MODEL`` -> `HFBackend` (options: ``device``, ``dtype``, ``batch_size``,
    ``batch_wait``, ``trust_remote_code``; the registry converts strings by their annotations)."""
    return HFBackend(target, **options)
