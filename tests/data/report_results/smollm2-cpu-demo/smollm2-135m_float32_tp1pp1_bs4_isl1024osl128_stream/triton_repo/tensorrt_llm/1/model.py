"""Triton python model `tensorrt_llm` for the `hf` backend: any HF causal LM served with transformers.

Its config has the tensor interface of the TensorRT-LLM backend's `tensorrt_llm` model of the repository's
TensorRT-LLM version (trtsweep.triton.versions), so the same preprocessing / postprocessing / ensemble / BLS
models and the same client requests work whether the engine is TensorRT-LLM on a GPU or transformers on a CPU
(or CUDA when present).

Honoured inputs (HONOURED): the prompt (input_ids, input_lengths), request_output_len, end_id, pad_id,
stop_words_list, bad_words_list, embedding_bias (added to the logits), temperature, runtime_top_k, runtime_top_p,
repetition_penalty (on prompt and output tokens, as transformers does), presence_penalty and frequency_penalty
(on the output tokens so far, as OpenAI defines them), min_length / min_tokens, random_seed / seed, beam_width 1
(len_penalty and early_stopping are accepted: they act on beam search only, as in TensorRT-LLM),
num_return_sequences (decoupled mode: one response stream per sequence, each with its sequence_index),
return_log_probs (cum_log_probs, output_log_probs: log-softmax of the distribution sampled from, after penalties
and temperature, before top-k/top-p), return_context_logits, return_generation_logits, return_perf_metrics
(arrival, first scheduled, first token and last token time, ns since the epoch), return_num_input_tokens,
return_num_output_tokens (the tokens in this response), exclude_input_in_output, streaming.

Any other input, when it is in effect (not absent, empty or false), fails the request with a sentence naming the
input and the feature (REFUSED: LoRA, prompt tables, speculative decoding, encoder-decoder, guided decoding, ...):
those need the TensorRT-LLM backend.

Decoupled mode (model_transaction_policy.decoupled) streams one response per generation step when the
request sets `streaming`, otherwise one response with all tokens. A token whose text would end in an
incomplete UTF-8 sequence is held back and sent with the next one, so per-chunk detokenization of CJK
text never yields U+FFFD. `end_id` stops generation and is not part of the output, as in TRT-LLM.
Outputs are sent only when computed (Triton's ensemble passes on what a step produced).

Scheduling: every request generates on its own worker thread (KV cache per request, greedy or sampled);
up to `max_concurrency` requests run at once. There is no cross-request batching of decode steps.
"""

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from transformers import AutoModelForCausalLM, AutoTokenizer

# int8: weights quantized to int8 per tensor with torch's dynamic quantization (CPU), activations float32
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int8": torch.float32}

HONOURED = frozenset({
    "input_ids", "input_lengths", "request_output_len", "end_id", "pad_id", "stop_words_list", "bad_words_list",
    "embedding_bias", "beam_width", "temperature", "runtime_top_k", "runtime_top_p", "len_penalty",
    "early_stopping", "repetition_penalty", "presence_penalty", "frequency_penalty", "min_length", "min_tokens",
    "random_seed", "seed", "return_log_probs", "return_context_logits", "return_generation_logits",
    "return_perf_metrics", "return_num_input_tokens", "return_num_output_tokens", "exclude_input_in_output",
    "streaming", "num_return_sequences",
})  # fmt: skip
# input name prefix or name -> the feature it belongs to (refused when in effect)
REFUSED = {
    "draft_": "speculative decoding with draft tokens",
    "decoder_input_": "encoder-decoder models",
    "encoder_": "encoder-decoder models",
    "cross_attention_mask": "encoder-decoder models",
    "skip_cross_attn_blocks": "encoder-decoder models",
    "prompt_": "prompt tuning (prompt tables)",
    "lora_": "LoRA adapters",
    "context_phase_params": "disaggregated serving",
    "retention_": "KV-cache retention",
    "guided_decoding_": "guided decoding",
    "lookahead_": "lookahead decoding",
    "mrope_": "multimodal rotary embeddings",
    "runtime_top_p_": "top-p decay",
    "beam_search_diversity_rate": "beam search",
    "return_kv_cache_reuse_stats": "KV-cache reuse statistics (transformers keeps no paged KV cache)",
    "stop": "stopping a running request with a second request",
}


UNFILLED = re.compile(r"\$\{\s*\w+\s*\}")


def _param(config, key, default=None):
    value = config["parameters"].get(key, {}).get("string_value", default)
    return default if value is None or UNFILLED.fullmatch(value) else value  # "${name}": left unfilled


def _scalar(request, name, default, cast):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None or tensor.as_numpy().size == 0:
        return default
    return cast(tensor.as_numpy().reshape(-1)[0])


def _word_list(request, name):
    """[2, N] (or [1, 2, N]) TRT-LLM word list -> list of token-id tuples."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return []
    data = tensor.as_numpy().reshape(2, -1)
    words, start = [], 0
    for end in data[1]:
        if end < 0:
            break
        words.append(tuple(int(t) for t in data[0, start:end]))
        start = int(end)
    return [w for w in words if w]


def refused(name, value):
    """The sentence that refuses input `name`, or None when it is honoured or not in effect."""
    if name in HONOURED or value.size == 0 or (value.dtype == np.bool_ and not value.any()):
        return None
    feature = next(
        (f for key, f in REFUSED.items() if name == key or (key.endswith("_") and name.startswith(key))), None
    )
    reason = f"{feature}: only the TensorRT-LLM backend serves it" if feature else "the hf backend does not honour it"
    return f"input {name!r} is not supported by trtsweep's hf backend: {reason}"


class Sampling:
    """One request's decoding settings, read from its inputs."""

    def __init__(self, request, eos_id):
        self.end_id = _scalar(request, "end_id", eos_id, int)
        self.top_k = _scalar(request, "runtime_top_k", 0, int)
        self.top_p = _scalar(request, "runtime_top_p", 0.0, float)
        self.temperature = _scalar(request, "temperature", 1.0, float)
        self.repetition = _scalar(request, "repetition_penalty", 1.0, float)
        self.presence = _scalar(request, "presence_penalty", 0.0, float)
        self.frequency = _scalar(request, "frequency_penalty", 0.0, float)
        self.min_tokens = max(_scalar(request, "min_length", 0, int), _scalar(request, "min_tokens", 0, int))
        self.seed = _scalar(request, "seed", _scalar(request, "random_seed", 0, int), int)
        bias = pb_utils.get_input_tensor_by_name(request, "embedding_bias")
        self.bias = (
            None
            if bias is None or bias.as_numpy().size == 0
            else torch.from_numpy(bias.as_numpy().reshape(-1).astype(np.float32))
        )
        self.stop_words = _word_list(request, "stop_words_list")
        self.bad_words = _word_list(request, "bad_words_list")

    def penalized(self, logits, prompt, generated):
        """The logits after embedding bias, banned words and penalties, divided by the temperature."""
        logits = logits.float().cpu()
        if self.bias is not None:
            n = min(len(self.bias), logits.shape[-1])
            logits[:n] += self.bias[:n]
        if self.repetition != 1.0:
            seen = torch.tensor(sorted(set(prompt) | set(generated)), dtype=torch.long)
            values = logits[seen]
            logits[seen] = torch.where(values > 0, values / self.repetition, values * self.repetition)
        if generated and (self.presence or self.frequency):
            ids, counts = np.unique(np.array(generated), return_counts=True)
            index = torch.from_numpy(ids).long()
            logits[index] -= self.presence + self.frequency * torch.from_numpy(counts).float()
        tail = prompt + generated
        banned = {w[-1] for w in self.bad_words if tuple(tail[len(tail) - len(w) + 1 :]) == w[:-1]}
        if len(generated) < self.min_tokens and self.end_id is not None:
            banned.add(self.end_id)
        if banned:
            logits[list(banned)] = -float("inf")
        return logits / max(self.temperature, 1e-5) if self.temperature > 0 else logits

    def greedy(self):
        return self.top_k == 1 or self.temperature <= 0.0 or (self.top_k == 0 and self.top_p == 0.0)

    def pick(self, logits, generator):
        if self.greedy():
            return int(torch.argmax(logits))
        if self.top_k > 0:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1])).values[-1]
            logits = torch.where(logits < kth, torch.full_like(logits, -float("inf")), logits)
        probs = torch.softmax(logits, dim=-1)
        if 0.0 < self.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, 0) - sorted_probs < self.top_p
            mask = torch.zeros_like(probs, dtype=torch.bool)
            mask[order[keep]] = True
            probs = torch.where(mask, probs, torch.zeros_like(probs))
        return int(torch.multinomial(probs, 1, generator=generator))

    def stopped(self, generated):
        return any(len(generated) >= len(w) and tuple(generated[-len(w) :]) == w for w in self.stop_words)


class Chunk:
    """What one response carries: token ids, and per token its log prob and logits when asked for."""

    def __init__(self):
        self.tokens, self.log_probs, self.logits, self.first_ns = [], [], [], None

    def add(self, token, log_prob, logits):
        self.first_ns = self.first_ns or time.time_ns()
        self.tokens.append(token)
        self.log_probs.append(log_prob)
        if logits is not None:
            self.logits.append(logits)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.outputs = {t["name"] for t in config["output"]}
        model_dir = _param(config, "hf_model_dir")
        device = _param(config, "hf_device", "auto")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        dtype = _param(config, "hf_dtype", "float32")
        if dtype not in DTYPES:
            raise pb_utils.TritonModelException(f"hf_dtype {dtype!r} not one of {sorted(DTYPES)}")
        threads = int(_param(config, "hf_torch_threads", "0"))
        if threads > 0:
            torch.set_num_threads(threads)
        self.exclude_input = _param(config, "exclude_input_in_output", "true").lower() in ("true", "1")
        if dtype == "int8" and self.device.type != "cpu":
            raise pb_utils.TritonModelException("hf_dtype int8 (torch dynamic quantization) runs on the CPU only")
        if self.device.type == "cuda" and self.device.index is None and torch.cuda.device_count() > 1:
            # every GPU the server was given (CUDA_VISIBLE_DEVICES: the point's): the layers split evenly over them
            # in order (accelerate's balanced device map: a pipeline, one request's step at a time)
            self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype], device_map="balanced")
            self.model.eval()
        else:
            self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype]).to(self.device).eval()
        if dtype == "int8":
            self.model = torch.ao.quantization.quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        self.tokenizer = AutoTokenizer.from_pretrained(_param(config, "tokenizer_dir", model_dir))
        workers = int(_param(config, "max_concurrency", "8"))
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hf-gen")

    # -- one request ----------------------------------------------------------------------------------------
    def _check(self, request):
        for tensor in request.inputs():
            reason = refused(tensor.name(), tensor.as_numpy())
            if reason:
                raise ValueError(reason)
        if _scalar(request, "beam_width", 1, int) > 1:
            raise ValueError("beam_width > 1: the hf backend has no beam search")

    def _generate(self, request, sampling, seed, send, cancelled):
        """Generate one sequence; send(chunk, final, context_logits) per response; stop once cancelled()."""
        ids = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy().reshape(-1)
        prompt = [int(t) for t in ids[: _scalar(request, "input_lengths", len(ids), int)]]
        max_new = _scalar(request, "request_output_len", 16, int)
        streaming = _scalar(request, "streaming", False, bool)
        want_log_probs = _scalar(request, "return_log_probs", False, bool)
        want_logits = _scalar(request, "return_generation_logits", False, bool)
        context = None
        generator = torch.Generator().manual_seed(seed)
        generated, chunk, past = [], Chunk(), None
        step_input = torch.tensor([prompt], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            for _ in range(max(0, max_new)):
                if cancelled():  # the client gave up (gRPC cancel, closed stream): stop computing for it
                    pb_utils.Logger.log_info(f"trtsweep hf: request cancelled after {len(generated)} tokens")
                    break
                out = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
                past = out.past_key_values
                if context is None and _scalar(request, "return_context_logits", False, bool):
                    context = out.logits[0].float().cpu().numpy()
                raw = out.logits[0, -1, :]
                logits = sampling.penalized(raw.clone(), prompt, generated)
                token = sampling.pick(logits, generator)
                if token == sampling.end_id:
                    break
                log_prob = float(torch.log_softmax(logits, -1)[token]) if want_log_probs else None
                generated.append(token)
                chunk.add(token, log_prob, raw.float().cpu().numpy() if want_logits else None)
                stopped = sampling.stopped(generated)
                if streaming and not stopped and not self._utf8_incomplete(chunk.tokens):
                    send(chunk, False, context)
                    chunk, context = Chunk(), None
                if stopped:
                    break
                step_input = torch.tensor([[token]], dtype=torch.long, device=self.device)
        if not streaming and not _scalar(request, "exclude_input_in_output", self.exclude_input, bool):
            whole = Chunk()
            whole.tokens, whole.log_probs, whole.logits = prompt + chunk.tokens, chunk.log_probs, chunk.logits
            whole.first_ns = chunk.first_ns
            chunk = whole
        send(chunk, True, context)

    def _utf8_incomplete(self, tokens):
        return self.tokenizer.decode(tokens, skip_special_tokens=False).endswith("\ufffd")

    def _response(self, request, state, chunk, context, final):
        """The response tensors of one chunk; state carries the running cum log prob and the timings."""
        tokens = chunk.tokens
        out = {
            "output_ids": np.array(tokens, dtype=np.int32).reshape(1, 1, len(tokens)),
            "sequence_length": np.array([[len(tokens)]], dtype=np.int32),
        }
        if _scalar(request, "return_log_probs", False, bool):
            state["cum"] += sum(p for p in chunk.log_probs if p is not None)
            out["cum_log_probs"] = np.array([[state["cum"]]], dtype=np.float32)
            out["output_log_probs"] = np.array(chunk.log_probs, dtype=np.float32).reshape(1, 1, -1)
        if context is not None:
            out["context_logits"] = context[np.newaxis]
        if chunk.logits:
            out["generation_logits"] = np.stack(chunk.logits)[np.newaxis, np.newaxis]
        if _scalar(request, "return_num_input_tokens", False, bool):
            out["num_input_tokens"] = np.array([[state["input_tokens"]]], dtype=np.int32)
        if _scalar(request, "return_num_output_tokens", False, bool):
            out["num_output_tokens"] = np.array([[len(chunk.log_probs)]], dtype=np.int32)
        if state["sequences"] > 1:
            out["sequence_index"] = np.array([[state["index"]]], dtype=np.int32)
        now = time.time_ns()
        state.setdefault("first_token", chunk.first_ns or now)
        if final and _scalar(request, "return_perf_metrics", False, bool):
            for name in ("arrival", "scheduled", "first_token"):
                out[f"{name}_time_ns" if name != "scheduled" else "first_scheduled_time_ns"] = np.array(
                    [[state[name]]], dtype=np.int64
                )
            out["last_token_time_ns"] = np.array([[now]], dtype=np.int64)
        tensors = [pb_utils.Tensor(name, value) for name, value in out.items() if name in self.outputs]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _run(self, request, arrival, respond, cancelled):
        """Every sequence of one request; respond(response, final) for each response."""
        self._check(request)
        sampling = Sampling(request, self.tokenizer.eos_token_id)
        sequences = _scalar(request, "num_return_sequences", 1, int)
        if sequences > 1 and not self.decoupled:
            raise ValueError("num_return_sequences > 1 needs decoupled mode (one response stream per sequence)")
        count = max(1, sequences)
        for index in range(count):
            state = {"cum": 0.0, "arrival": arrival, "scheduled": time.time_ns(), "sequences": sequences,
                     "index": index, "input_tokens": _scalar(request, "input_lengths", 0, int)}  # fmt: skip
            last = index == count - 1

            def send(chunk, final, context, state=state, last=last):
                respond(self._response(request, state, chunk, context, final), final and last)

            self._generate(request, sampling, sampling.seed + index, send, cancelled)

    # -- Triton entry points ---------------------------------------------------------------------------------
    def _run_decoupled(self, request, arrival):
        sender = request.get_response_sender()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            # a decoupled request's cancellation is seen on its response sender
            self._run(request, arrival, lambda r, last: sender.send(r, flags=final if last else 0), sender.is_cancelled)
        except Exception as exc:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm(hf): {exc}")), flags=final)

    def _run_single(self, request, arrival):
        result = []
        try:
            self._run(request, arrival, lambda r, last: result.append(r), request.is_cancelled)
        except Exception as exc:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm(hf): {exc}"))
        return result[-1]

    def execute(self, requests):
        arrival = time.time_ns()
        if self.decoupled:
            for request in requests:
                self.pool.submit(self._run_decoupled, request, arrival)
            return None
        return list(self.pool.map(lambda r: self._run_single(r, arrival), requests))

    def finalize(self):
        self.pool.shutdown(wait=True, cancel_futures=True)
