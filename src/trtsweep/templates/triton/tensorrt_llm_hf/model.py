"""Triton python model `tensorrt_llm` for the `hf` backend: any HF causal LM served with transformers.

It has the tensor interface of the TensorRT-LLM backend's `tensorrt_llm` model, so the same
preprocessing / postprocessing / ensemble models and the same client requests work whether the engine
is TensorRT-LLM on a GPU or transformers on a CPU (or CUDA when present):

Inputs:  input_ids INT32 [-1], input_lengths INT32 [1], request_output_len INT32 [1], optional end_id,
         pad_id INT32 [1], stop_words_list / bad_words_list INT32 [2, -1], runtime_top_k INT32 [1],
         runtime_top_p FP32 [1], temperature FP32 [1], min_length INT32 [1], random_seed UINT64 [1],
         beam_width INT32 [1] (1 only: no beam search), streaming BOOL [1], exclude_input_in_output BOOL [1].
Outputs: output_ids INT32 [-1, -1] (beams x tokens), sequence_length INT32 [-1].

Decoupled mode (model_transaction_policy.decoupled) streams one response per generation step when the
request sets `streaming`, otherwise one response with all tokens. A token whose text would end in an
incomplete UTF-8 sequence is held back and sent with the next one, so per-chunk detokenization of CJK
text never yields U+FFFD. `end_id` stops generation and is not part of the output, as in TRT-LLM.

Scheduling: every request generates on its own worker thread (KV cache per request, greedy or sampled);
up to `max_concurrency` requests run at once. There is no cross-request batching of decode steps.
"""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from transformers import AutoModelForCausalLM, AutoTokenizer

# int8: weights quantized to int8 per tensor with torch's dynamic quantization (CPU), activations float32
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int8": torch.float32}


UNFILLED = re.compile(r"\$\{\s*\w+\s*\}")


def _param(config, key, default=None):
    value = config["parameters"].get(key, {}).get("string_value", default)
    return default if value is None or UNFILLED.fullmatch(value) else value  # "${name}": left unfilled


def _scalar(request, name, default, cast):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
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


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
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
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype]).to(self.device).eval()
        if dtype == "int8":
            self.model = torch.ao.quantization.quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        self.tokenizer = AutoTokenizer.from_pretrained(_param(config, "tokenizer_dir", model_dir))
        workers = int(_param(config, "max_concurrency", "8"))
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hf-gen")

    # -- generation ------------------------------------------------------------------------------
    def _select(self, logits, top_k, top_p, temperature, generator, banned):
        if banned:
            logits[list(banned)] = -float("inf")
        if top_k == 1 or temperature <= 0.0 or (top_k == 0 and top_p == 0.0):
            return int(torch.argmax(logits))
        logits = logits.float() / max(temperature, 1e-5)
        if top_k > 0:
            kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[-1]
            logits[logits < kth] = -float("inf")
        probs = torch.softmax(logits, dim=-1)
        if 0.0 < top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, 0) - sorted_probs < top_p
            mask = torch.zeros_like(probs, dtype=torch.bool)
            mask[order[keep]] = True
            probs = torch.where(mask, probs, torch.zeros_like(probs))
        return int(torch.multinomial(probs.cpu(), 1, generator=generator))

    def _generate(self, request, emit, cancelled):
        """Run one request; call emit(new_token_ids, final) for every chunk; stop once cancelled() is true."""
        ids = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy().reshape(-1)
        length = _scalar(request, "input_lengths", len(ids), int)
        prompt = [int(t) for t in ids[:length]]
        max_new = _scalar(request, "request_output_len", 16, int)
        end_id = _scalar(request, "end_id", self.tokenizer.eos_token_id, int)
        top_k = _scalar(request, "runtime_top_k", 0, int)
        top_p = _scalar(request, "runtime_top_p", 0.0, float)
        temperature = _scalar(request, "temperature", 1.0, float)
        min_tokens = _scalar(request, "min_length", 0, int)
        seed = _scalar(request, "random_seed", 0, int)
        if _scalar(request, "beam_width", 1, int) > 1:
            raise ValueError("beam_width > 1: the hf backend has no beam search")
        streaming = _scalar(request, "streaming", False, bool)
        exclude = _scalar(request, "exclude_input_in_output", self.exclude_input, bool)
        stop_words = _word_list(request, "stop_words_list")
        bad_words = _word_list(request, "bad_words_list")
        generator = torch.Generator().manual_seed(seed)
        generated = []
        pending = []
        past = None
        step_input = torch.tensor([prompt], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            for _ in range(max(0, max_new)):
                if cancelled():  # the client gave up (gRPC cancel, closed stream): stop computing for it
                    pb_utils.Logger.log_info(f"trtsweep hf: request cancelled after {len(generated)} tokens")
                    break
                out = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tail = prompt + generated
                banned = {w[-1] for w in bad_words if tuple(tail[len(tail) - len(w) + 1 :]) == w[:-1]}
                if len(generated) < min_tokens and end_id is not None:
                    banned.add(end_id)
                token = self._select(out.logits[0, -1, :].clone(), top_k, top_p, temperature, generator, banned)
                if token == end_id:
                    break
                generated.append(token)
                pending.append(token)
                stopped = any(len(generated) >= len(w) and tuple(generated[-len(w) :]) == w for w in stop_words)
                if streaming and not stopped and not self._utf8_incomplete(pending):
                    emit(pending, False)
                    pending = []
                if stopped:
                    break
                step_input = torch.tensor([[token]], dtype=torch.long, device=self.device)
        if streaming:
            emit(pending, True)
        else:
            emit(generated if exclude else prompt + generated, True)

    def _utf8_incomplete(self, tokens):
        return self.tokenizer.decode(tokens, skip_special_tokens=False).endswith("\ufffd")

    @staticmethod
    def _response(tokens):
        out = np.array(tokens, dtype=np.int32).reshape(1, 1, len(tokens))
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor("output_ids", out),
                pb_utils.Tensor("sequence_length", np.array([[len(tokens)]], dtype=np.int32)),
            ]
        )

    # -- Triton entry points ---------------------------------------------------------------------
    def _run_decoupled(self, request):
        sender = request.get_response_sender()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            # a decoupled request's cancellation is seen on its response sender
            self._generate(
                request,
                lambda toks, last: sender.send(self._response(toks), flags=final if last else 0),
                sender.is_cancelled,
            )
        except Exception as exc:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm(hf): {exc}")), flags=final)

    def _run_single(self, request):
        result = []
        try:
            self._generate(request, lambda toks, last: result.extend(toks), request.is_cancelled)
        except Exception as exc:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm(hf): {exc}"))
        return self._response(result)

    def execute(self, requests):
        if self.decoupled:
            for request in requests:
                self.pool.submit(self._run_decoupled, request)
            return None
        return list(self.pool.map(self._run_single, requests))

    def finalize(self):
        self.pool.shutdown(wait=True, cancel_futures=True)
