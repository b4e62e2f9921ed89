"""The hf backend's generation core: an HF causal LM served with transformers, shared by trtsweep's stand-ins for
the PyTorch flow's two servers (Triton's `llmapi` model, triton/templates/tensorrt_llm_llmapi_hf, and
trtllm-serve, serve/hf_openai.py).

Settings come from LLM API arguments (`from_llm_args`: model.yaml, or trtllm-serve's command line merged with its
`--extra_llm_api_options` file), so both servers read a point's options as TensorRT-LLM does:

    model            HF checkpoint directory (required)
    tokenizer        tokenizer directory (default: model)
    dtype            auto | float32 | bfloat16 | float16, and int8 (hf only: torch dynamic int8 weight
                     quantization, CPU); auto: float32 on the CPU, the checkpoint's dtype on CUDA
    max_batch_size   requests generating at once (default 2048, the LLM API's); later ones wait for a slot
    max_seq_len      prompt + max_tokens limit of a request (default: the checkpoint's max_position_embeddings)
    enable_iter_perf_stats, iter_stats_max_iterations
                     keep per-iteration stats (IterationStats below) in a queue of that many (default 1000)
    speculative_config  decoding_type NGram (n-gram drafts) or DraftTarget (a draft model's greedy drafts, the model
                     loaded from speculative_model / speculative_model_dir), verified against the decoded tokens,
                     reported as each iteration's specDecodingStats (trtsweep.serve.drafting; decoding stays one
                     token a pass)
    trtsweep_hf:     trtsweep's own keys, not LLM API ones: device (auto | cpu | cuda | cuda:N, default auto),
                     torch_threads (torch's intra-op threads, 0 = torch's default)

Any other argument is returned as ignored (the servers log them once): KV cache, CUDA graphs, parallelism, ...
act on TensorRT-LLM only.

Decoding follows TensorRT-LLM's LLM API: greedy when temperature is 0, top_k 1, or top_k and top_p both 0 (unset:
temperature 1, top_k 0, top_p 0, the runtime's defaults, so a request that sets none is greedy), else sampling with
the seed's generator (top-k, then top-p, of the distribution at that temperature); presence and frequency
penalties act on the output tokens so far; the seed defaults to 0; a stop string stops generation when the output
tokens end with its tokens (token-level, as TensorRT-LLM matches stop words; the stop tokens are left out of the
output); the tokenizer's and generation config's EOS tokens stop it unless `ignore_eos` (they are never output).
Text is decoded without special tokens. Every request generates on its own thread with its own KV cache; there is
no cross-request batching of decode steps. A disaggregated generation_only request (`Generation.first_tokens`: its
context worker's first token) outputs those tokens and decodes on from them; its first forward pass recomputes the
prompt's KV cache here, where TensorRT-LLM's generation worker receives the context worker's.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from trtsweep.serve import drafting

log = logging.getLogger("trtsweep.hf")

# int8: weights quantized to int8 per tensor with torch's dynamic quantization (CPU), activations float32
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int8": torch.float32}
USED_ARGS = ("model", "tokenizer", "dtype", "max_batch_size", "max_seq_len", "enable_iter_perf_stats",
             "iter_stats_max_iterations", "trtsweep_hf", "speculative_config")  # fmt: skip
HF_KEYS = ("device", "torch_threads")
DEFAULT_MAX_BATCH_SIZE = 2048  # TorchLlmArgs sets it when None
SLOT_POLL_S = 0.1  # how often a request waiting for a slot checks its cancellation
DEFAULT_ITER_STATS_MAX_ITERATIONS = 1000  # the executor's kDefaultIterStatsMaxIterations


@dataclass(frozen=True)
class Settings:
    model: str
    tokenizer: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_seq_len: int | None = None
    torch_threads: int = 0
    iter_perf_stats: bool = False
    iter_stats_max_iterations: int = DEFAULT_ITER_STATS_MAX_ITERATIONS
    speculative: drafting.NGramSettings | drafting.DraftModelSettings | None = None


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    return value


def from_llm_args(args: Mapping[str, Any]) -> tuple[Settings, list[str]]:
    """(settings, the argument names the hf backend ignores) from LLM API arguments; ValueError naming a bad one."""
    if not isinstance(args.get("model"), str) or not args["model"]:
        raise ValueError(f"model: expected the HF checkpoint directory, got {args.get('model')!r}")
    dtype = args.get("dtype") or "auto"
    if dtype != "auto" and dtype not in DTYPES:
        raise ValueError(f"dtype: expected auto or one of {', '.join(DTYPES)}, got {dtype!r}")
    hf = args.get("trtsweep_hf") or {}
    if not isinstance(hf, Mapping) or set(hf) - set(HF_KEYS):
        raise ValueError(f"trtsweep_hf: expected a mapping with keys among {', '.join(HF_KEYS)}, got {hf!r}")
    threads = hf.get("torch_threads", 0)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"trtsweep_hf.torch_threads: expected an integer >= 0, got {threads!r}")
    max_seq_len = args.get("max_seq_len")
    iter_stats = args.get("enable_iter_perf_stats", False)
    if not isinstance(iter_stats, bool):
        raise ValueError(f"enable_iter_perf_stats: expected true or false, got {iter_stats!r}")
    max_iterations = args.get("iter_stats_max_iterations") or DEFAULT_ITER_STATS_MAX_ITERATIONS
    settings = Settings(
        model=args["model"],
        tokenizer=args.get("tokenizer") or None,
        dtype=dtype,
        device=str(hf.get("device", "auto")),
        max_batch_size=_positive("max_batch_size", args.get("max_batch_size") or DEFAULT_MAX_BATCH_SIZE),
        max_seq_len=None if max_seq_len is None else _positive("max_seq_len", max_seq_len),
        torch_threads=threads,
        iter_perf_stats=iter_stats,
        iter_stats_max_iterations=_positive("iter_stats_max_iterations", max_iterations),
        speculative=drafting.from_config(args.get("speculative_config")),
    )
    return settings, sorted(k for k in args if k not in USED_ARGS)


@dataclass(frozen=True)
class Sampling:
    """One request's decoding settings (None: TensorRT-LLM's runtime default)."""

    max_tokens: int
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False

    def greedy(self) -> bool:
        top_k, top_p = self.top_k or 0, self.top_p or 0.0
        temperature = 1.0 if self.temperature is None else self.temperature
        return temperature <= 0.0 or top_k == 1 or (top_k == 0 and top_p == 0.0)


@dataclass
class Generation:
    """One request: its prompt and settings, and what it generated so far (complete once the final delta is out)."""

    prompt_ids: list[int]
    sampling: Sampling
    # a disaggregated generation_only request's first tokens, picked by its context worker: output first, then decoding
    # continues from them (the prompt and they go through one forward pass: there is no KV cache handed over here)
    first_tokens: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    text: str = ""  # the deltas so far, joined
    cumulative_logprob: float = 0.0  # log-softmax of the distributions sampled from, after penalties and temperature
    finish_reason: str | None = None  # length | stop | cancelled
    stop_reason: str | None = None  # the stop string that ended it
    arrival_ns: int = field(default_factory=time.time_ns)
    scheduled_ns: int | None = None  # when it got a slot
    first_token_ns: int | None = None
    last_token_ns: int | None = None


@dataclass(frozen=True)
class Delta:
    """New text of one generation: never ends inside a character; `final` once, last (its text may be empty)."""

    text: str
    final: bool = False


class IterationStats:
    """Per-iteration stats in TensorRT-LLM's JSON form (executor IterationStats: iter, iterLatencyMS,
    numActiveRequests, numQueuedRequests, numNewActiveRequests, newActiveRequestsQueueLatencyMS (a total),
    numCompletedRequests, inflightBatchingStats), what trtllm-serve's /metrics hands out. The hf backend runs each
    request's forward passes on its own thread, so an iteration here is one forward pass of one request:
    numScheduledRequests is always 1, and numActiveRequests / numQueuedRequests count the requests holding / waiting
    for one of max_batch_size slots. It has no paged KV cache: no kvCacheStats. Kept in a queue that drops the
    oldest beyond `max_iterations`, as the executor's does; `take` empties it."""

    def __init__(self, max_iterations: int, max_active: int) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=max_iterations)
        self._lock = threading.Lock()
        self._iter = 0
        self.max_active = max_active
        self.counts = {"active": 0, "queued": 0}

    def count(self, name: str, change: int) -> None:
        with self._lock:
            self.counts[name] += change

    def record(self, latency_ms: float, context_tokens: int, queue_ms: float | None, completed: bool,
               gpu_mem: int, spec: dict[str, float] | None = None) -> None:  # fmt: skip
        """One forward pass: context_tokens > 0 for a request's first (its prompt), whose queue time is queue_ms."""
        context = context_tokens > 0
        with self._lock:
            self._items.append({
                "timestamp": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                "iter": self._iter,
                "iterLatencyMS": latency_ms,
                "numNewActiveRequests": int(context),
                "newActiveRequestsQueueLatencyMS": queue_ms if context and queue_ms is not None else 0.0,
                "numActiveRequests": self.counts["active"],
                "numQueuedRequests": self.counts["queued"],
                "numCompletedRequests": int(completed),
                "maxNumActiveRequests": self.max_active,
                "gpuMemUsage": gpu_mem,
                "inflightBatchingStats": {
                    "numScheduledRequests": 1, "numContextRequests": int(context), "numGenRequests": int(not context),
                    "numPausedRequests": 0, "numCtxTokens": context_tokens,
                },
                **({"specDecodingStats": spec} if spec is not None else {}),
            })  # fmt: skip
            self._iter += 1

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self._items)
            self._items.clear()
        return items


def _cache_arg(model: Any) -> str:
    """The KV-cache argument of the model's forward: `cache` since transformers 5.x deprecated `past_key_values`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _greedy(model: Any, context: Sequence[int], count: int) -> list[int]:
    """`count` tokens the model decodes greedily after `context` (a fresh KV cache, one forward pass a token)."""
    device = next(model.parameters()).device
    step_input = torch.tensor([list(context)], dtype=torch.long, device=device)
    cache, tokens = {_cache_arg(model): DynamicCache()}, []
    with torch.inference_mode():
        for _ in range(count):
            token = int(torch.argmax(model(input_ids=step_input, use_cache=True, **cache).logits[0, -1, :]))
            tokens.append(token)
            step_input = torch.tensor([[token]], dtype=torch.long, device=device)
    return tokens


def _device(name: str) -> torch.device:
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)


class Engine:
    """The model and tokenizer of one server; `generate` / `submit` are safe to call from many threads at once."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.device = _device(settings.device)
        if settings.dtype == "int8" and self.device.type != "cpu":
            raise ValueError("dtype int8 (torch dynamic quantization) runs on the CPU only")
        if settings.torch_threads > 0:
            torch.set_num_threads(settings.torch_threads)
        cpu_auto = settings.dtype == "auto" and self.device.type == "cpu"
        dtype: Any = torch.float32 if cpu_auto else DTYPES.get(settings.dtype, "auto")
        if self.device.type == "cuda" and settings.device in ("auto", "cuda") and torch.cuda.device_count() > 1:
            # every GPU the server was given (CUDA_VISIBLE_DEVICES: a tp x pp point's): the layers split evenly over
            # them in order (accelerate's balanced device map: a pipeline, one request's step at a time)
            model = AutoModelForCausalLM.from_pretrained(settings.model, dtype=dtype, device_map="balanced").eval()
        else:
            model = AutoModelForCausalLM.from_pretrained(settings.model, dtype=dtype).to(self.device).eval()
        self.max_seq_len: int | None = settings.max_seq_len or getattr(model.config, "max_position_embeddings", None)
        if settings.dtype == "int8":
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model = model
        self._cache_arg = _cache_arg(model)
        self.propose = self._proposer(settings.speculative, dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(settings.tokenizer or settings.model)
        eos = getattr(model.generation_config, "eos_token_id", None)
        eos_ids = eos if isinstance(eos, list) else [eos]
        self.eos_ids = frozenset(i for i in [self.tokenizer.eos_token_id, *eos_ids] if i is not None)
        self.slots = threading.BoundedSemaphore(settings.max_batch_size)
        self.iteration_stats = (
            IterationStats(settings.iter_stats_max_iterations, settings.max_batch_size)
            if settings.iter_perf_stats else None
        )  # fmt: skip
        self._tokenizer_lock = threading.Lock()  # a fast tokenizer is not safe to share between threads

    def _proposer(self, spec: drafting.NGramSettings | drafting.DraftModelSettings | None,
                  dtype: Any) -> Callable[[Sequence[int]], list[int]] | None:  # fmt: skip
        """What drafts a speculative step: prompt lookup (NGram), or the draft model's greedy tokens (DraftTarget:
        loaded here, on the server's first device, in the model's dtype)."""
        if isinstance(spec, drafting.NGramSettings):
            return lambda context: drafting.draft(context, spec)
        if isinstance(spec, drafting.DraftModelSettings):
            if not os.path.isdir(spec.model):  # (where transformers would take the path for a repo id)
                raise ValueError(f"speculative_config: the draft model's directory {spec.model} is not here")
            draft = AutoModelForCausalLM.from_pretrained(spec.model, dtype=dtype).to(self.device).eval()
            return lambda context: _greedy(draft, context, spec.max_draft_len)
        return None

    # -- text <-> tokens ------------------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        with self._tokenizer_lock:
            return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def decode(self, ids: Sequence[int]) -> str:
        with self._tokenizer_lock:
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def chat_prompt(self, messages: list[dict[str, Any]], **template: Any) -> str:
        """The prompt text of chat messages, with the tokenizer's chat template (or `chat_template=`)."""
        with self._tokenizer_lock:
            return str(self.tokenizer.apply_chat_template(messages, tokenize=False, **template))

    def budget(self, prompt_len: int, max_tokens: int | None) -> int:
        """The request's output budget (None: up to max_seq_len); ValueError when it cannot fit in max_seq_len."""
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if self.max_seq_len is None:
            if max_tokens is None:
                raise ValueError("max_tokens is required: the model has no max_seq_len")
            return max_tokens
        wanted = self.max_seq_len - prompt_len if max_tokens is None else max_tokens
        if prompt_len + max(wanted, 1) > self.max_seq_len:
            raise ValueError(
                f"The sum of prompt length ({prompt_len}) and max_tokens ({max(wanted, 1)}) should not exceed "
                f"max_seq_len ({self.max_seq_len})"
            )
        return wanted

    # -- generation -----------------------------------------------------------------------------------------------
    def submit(self, gen: Generation, cancelled: Callable[[], bool], emit: Callable[[Delta | Exception], None]) -> None:
        """Generate on a thread of its own: emit(delta) per delta, or emit(exception) once if generation fails."""

        def work() -> None:
            deltas = self.generate(gen, cancelled)
            try:
                for delta in deltas:
                    emit(delta)
            except Exception as exc:
                log.exception("generation failed, or handing out its text did")
                emit(exc)
            finally:
                deltas.close()  # gives its slot back at once

        threading.Thread(target=work, name="hf-generate", daemon=True).start()

    def generate(self, gen: Generation, cancelled: Callable[[], bool]) -> Iterator[Delta]:
        """The deltas of one generation, in the calling thread, once one of `max_batch_size` slots is free; stops
        (finish_reason cancelled) as soon as `cancelled()` is true, also while waiting for a slot."""
        with self._counted("queued"):
            acquired = self._acquire(cancelled)
        if not acquired:
            gen.finish_reason = "cancelled"
            yield Delta("", final=True)
            return
        try:
            gen.scheduled_ns = time.time_ns()
            with self._counted("active"):
                yield from self._decode(gen, cancelled)
        finally:
            self.slots.release()

    def _acquire(self, cancelled: Callable[[], bool]) -> bool:
        while not self.slots.acquire(timeout=SLOT_POLL_S):
            if cancelled():
                return False
        return True

    @contextmanager
    def _counted(self, name: str) -> Iterator[None]:
        """Counts a request as queued / active for the iteration stats while the block runs."""
        if self.iteration_stats is None:
            yield
            return
        self.iteration_stats.count(name, 1)
        try:
            yield
        finally:
            self.iteration_stats.count(name, -1)

    def _record_step(self, gen: Generation, context_tokens: int, started: float,
                     spec: dict[str, float] | None) -> None:  # fmt: skip
        if self.iteration_stats is None:
            return
        queued = (gen.scheduled_ns - gen.arrival_ns) / 1e6 if gen.scheduled_ns is not None else None
        gpu_mem = torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0
        latency_ms = (time.perf_counter() - started) * 1000.0
        completed = gen.finish_reason in ("stop", "length")
        self.iteration_stats.record(latency_ms, context_tokens, queued, completed, gpu_mem, spec)

    def _decode(self, gen: Generation, cancelled: Callable[[], bool]) -> Iterator[Delta]:
        sampling, out = gen.sampling, gen.output_ids
        stops = [(s, ids) for s in sampling.stop if (ids := self.encode(s, add_special_tokens=False))]
        generator = torch.Generator().manual_seed(sampling.seed or 0)
        self._take_first(gen)
        step_input = torch.tensor([[*gen.prompt_ids, *out]], dtype=torch.long, device=self.device)
        cache, sent = {self._cache_arg: DynamicCache()}, 0  # the KV cache (updated in place); output tokens sent
        prefilled = False  # the first forward pass takes the prompt
        steps = drafting.DraftSteps(self.propose) if self.propose is not None else None
        with torch.inference_mode():
            while True:
                if gen.finish_reason is not None or len(out) >= sampling.max_tokens:
                    gen.finish_reason = gen.finish_reason or "length"
                    break
                if cancelled():
                    gen.finish_reason = "cancelled"
                    break
                started = time.perf_counter()
                result = self.model(input_ids=step_input, use_cache=True, **cache)
                logits = self._penalized(result.logits[0, -1, :], out, sampling)
                token = self._pick(logits, sampling, generator)
                # drafting starts after the context pass, whose token is a chunk of its own (as TensorRT-LLM's)
                spec = None if steps is None else steps.feed([*gen.prompt_ids, *out], token) if prefilled else (
                    drafting.stats(0, 0, 0))  # fmt: skip
                self._accept(gen, token, logits, stops)
                if steps is not None and spec is not None and gen.finish_reason is not None:
                    spec = drafting.add(spec, steps.close())  # a step the generation ends inside
                self._record_step(gen, 0 if prefilled else step_input.shape[1], started, spec)
                prefilled = True
                if gen.finish_reason is not None:  # the text not sent yet goes out with the final delta
                    break
                if steps is not None and steps.open:
                    step_input = torch.tensor([[token]], dtype=torch.long, device=self.device)
                    continue  # a step's tokens go out together when it ends: a chunk per step, as trtllm-serve's
                stable = len(out) - max((_prefix_overlap(out, ids) for _, ids in stops), default=0)
                text = self._text(gen, sent, stable)
                if text:
                    sent = stable
                    yield Delta(text)
                step_input = torch.tensor([[token]], dtype=torch.long, device=self.device)
        yield Delta(self._text(gen, sent, len(out), final=True), final=True)

    def _take_first(self, gen: Generation) -> None:
        """A generation_only request's first tokens (its context worker's) as output, up to an EOS token."""
        for token in gen.first_tokens:
            if token in self.eos_ids and not gen.sampling.ignore_eos:
                gen.finish_reason = "stop"
                return
            gen.output_ids.append(token)
            gen.last_token_ns = time.time_ns()
            gen.first_token_ns = gen.first_token_ns or gen.last_token_ns

    def _accept(self, gen: Generation, token: int, logits: torch.Tensor, stops: list[tuple[str, list[int]]]) -> None:
        """The picked token: output, or the end of the generation (finish_reason: stop at EOS or a stop string,
        length at max_tokens)."""
        out, sampling = gen.output_ids, gen.sampling
        if token in self.eos_ids and not sampling.ignore_eos:
            gen.finish_reason = "stop"
            return
        gen.cumulative_logprob += float(torch.log_softmax(logits, -1)[token])
        gen.last_token_ns = time.time_ns()
        gen.first_token_ns = gen.first_token_ns or gen.last_token_ns
        out.append(token)
        matched = next(((s, ids) for s, ids in stops if out[-len(ids) :] == ids), None)
        if matched is not None:
            del out[len(out) - len(matched[1]) :]
            gen.finish_reason, gen.stop_reason = "stop", matched[0]
        elif len(out) >= sampling.max_tokens:
            gen.finish_reason = "length"

    def _text(self, gen: Generation, sent: int, upto: int, final: bool = False) -> str:
        """The text output tokens [sent, upto) add to gen.text ('' while it would end inside a character)."""
        if upto <= sent and not final:
            return ""
        before = self.decode(gen.output_ids[max(0, sent - 6) : sent])  # context: a token's text may depend on it
        after = self.decode(gen.output_ids[max(0, sent - 6) : upto])
        if after.startswith(before) and (final or not after.endswith("\ufffd")):
            text = after[len(before) :]
        elif final:  # the context decodes differently with these tokens after it (rare): their text on its own
            text = self.decode(gen.output_ids[sent:upto])
        else:
            return ""
        gen.text += text
        return text

    @staticmethod
    def _penalized(raw: torch.Tensor, generated: list[int], sampling: Sampling) -> torch.Tensor:
        logits = raw.float().cpu()
        if generated and (sampling.presence_penalty or sampling.frequency_penalty):
            ids, counts = torch.unique(torch.tensor(generated), return_counts=True)
            logits[ids] -= sampling.presence_penalty + sampling.frequency_penalty * counts.float()
        if sampling.greedy():
            return logits
        return logits / (1.0 if sampling.temperature is None else sampling.temperature)

    @staticmethod
    def _pick(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> int:
        if sampling.greedy():
            return int(torch.argmax(logits))
        if sampling.top_k:
            kth = torch.topk(logits, min(sampling.top_k, logits.shape[-1])).values[-1]
            logits = torch.where(logits < kth, torch.full_like(logits, -float("inf")), logits)
        probs = torch.softmax(logits, dim=-1)
        if sampling.top_p and 0.0 < sampling.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, 0) - sorted_probs < sampling.top_p
            mask = torch.zeros_like(probs, dtype=torch.bool)
            mask[order[keep]] = True
            probs = torch.where(mask, probs, torch.zeros_like(probs))
        return int(torch.multinomial(probs, 1, generator=generator))


def _prefix_overlap(out: list[int], stop: list[int]) -> int:
    """How many of the last output tokens are a proper prefix of the stop tokens (held back: they may stop it)."""
    for n in range(min(len(stop) - 1, len(out)), 0, -1):
        if out[-n:] == stop[:n]:
            return n
    return 0
