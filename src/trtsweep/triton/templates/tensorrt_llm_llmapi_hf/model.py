"""Triton python model `tensorrt_llm` for the `hf` backend's PyTorch flow: TensorRT-LLM's `llmapi` model
(triton_backend/all_models/llmapi/tensorrt_llm) with transformers in place of the LLM API, same tensors, same
model.yaml, same behaviour where transformers can have it (trtsweep.serve.hf_generate generates).

Settings: `1/model.yaml` next to this file. Its LLM API arguments as trtsweep.serve.hf_generate.from_llm_args reads them
(model, tokenizer, dtype, max_batch_size: requests generating at once, max_seq_len: prompt + max_tokens limit,
and trtsweep's own `trtsweep_hf: {device, torch_threads}`; any other argument is logged once as ignored), and
`triton_config: {max_batch_size, decoupled}`, which must agree with config.pbtxt (trtsweep starts Triton with
auto-complete off, so config.pbtxt's policy is the one in force; a mismatch fails the load naming both).

Requests, as TensorRT-LLM's model takes them:
- text_input: one prompt, a 1-D tensor (the first element is the prompt). A 2-D one, which Triton makes of it when
  config.pbtxt sets max_batch_size > 0, is refused as TensorRT-LLM's model refuses it: keep triton_config's
  max_batch_size 0 (TensorRT-LLM's model.yaml: the model does not batch), the LLM API's max_batch_size batches.
- streaming (decoupled mode only, else the request fails): one response per new text, each carrying the text so
  far (text_output is the LLM API's cumulative `output.text`, not a delta), the last one final. Not streaming: one
  response with the whole text; the output tokens start with the prompt's unless
  sampling_param_exclude_input_from_output is true (TensorRT-LLM's model defaults it to false), the text is their
  decoding without special tokens.
- honoured: sampling_param_max_tokens (default 32, the LLM API's), temperature, top_k, top_p, frequency_penalty,
  presence_penalty, seed, stop (stop strings), exclude_input_from_output, best_of / beam_width 1,
  return_perf_metrics (arrival_time_ns, first_scheduled_time_ns, first_token_time_ns, last_token_time_ns, in the
  final response; the KV-cache and speculative-decoding metrics are not sent: transformers has neither),
  return_finish_reason (finish_reason: stop | length, "None" until the final response, as TensorRT-LLM's str()),
  return_stop_reason (the stop string, else "None"), return_cumulative_logprob (FP32 as config.pbtxt declares).
- any other input in effect (not absent, empty or false) fails the request with a sentence naming it: LoRA,
  multimodal input (image_url), stopping a request by its id (`stop`), logits post-processors, best_of /
  beam_width > 1, ...
- a prompt whose length + max_tokens exceeds max_seq_len fails; a cancelled request (client gone) stops generating
  and ends with a CANCELLED error, as TensorRT-LLM's model answers.

Scheduling: every request generates on its own thread (hf_generate), `max_batch_size` of them at once; execute()
returns at once and responses go out on each request's response sender, in decoupled and non-decoupled mode.
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils
import yaml

from trtsweep.serve import hf_generate

# sampling_param_<name> -> hf_generate.Sampling field and cast
SAMPLING = {
    "temperature": float,
    "top_k": int,
    "top_p": float,
    "frequency_penalty": float,
    "presence_penalty": float,
    "seed": int,
}
HONOURED = frozenset({
    "text_input", "streaming", "sampling_param_max_tokens", "sampling_param_stop",
    "sampling_param_exclude_input_from_output", "sampling_param_return_perf_metrics", "sampling_param_best_of",
    "sampling_param_beam_width", "return_finish_reason", "return_stop_reason", "return_cumulative_logprob",
    *(f"sampling_param_{name}" for name in SAMPLING),
})  # fmt: skip
# input name prefix or name -> the feature it belongs to (refused when in effect)
REFUSED = {
    "lora_": "LoRA adapters",
    "image_url": "multimodal input",
    "stop": "stopping a running request by its request id",
    "sampling_param_logits_post_processor_name": "logits post-processors",
}
# boolean inputs that ask for something (false or absent: not asked)
FLAGS = (
    "return_finish_reason", "return_stop_reason", "return_cumulative_logprob", "sampling_param_return_perf_metrics",
    "sampling_param_exclude_input_from_output",
)  # fmt: skip
TIMES = ("arrival_time_ns", "first_scheduled_time_ns", "first_token_time_ns", "last_token_time_ns")


def refused(name, value):
    """The sentence that refuses input `name`, or None when it is honoured or not in effect."""
    if name in HONOURED or value.size == 0 or (value.dtype == np.bool_ and not value.any()):
        return None
    feature = next((f for key, f in REFUSED.items() if name == key or (key.endswith("_") and name.startswith(key))), "")
    reason = f"{feature}: only TensorRT-LLM serves it" if feature else "the hf backend does not honour it"
    return f"input {name!r} is not supported by trtsweep's hf backend: {reason}"


def _scalar(request, name, cast, default=None):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    value = tensor.as_numpy()
    if value.size != 1:
        raise ValueError(f"Expected a scalar tensor for tensor {name}")
    return cast(value.item())


def _strings(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return []
    return [v.decode() if isinstance(v, bytes) else str(v) for v in tensor.as_numpy().reshape(-1)]


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        path = os.path.join(args["model_repository"], args["model_version"], "model.yaml")
        with open(path, encoding="utf-8") as handle:
            spec = yaml.safe_load(handle) or {}
        triton = spec.get("triton_config") or {}
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        if bool(triton.get("decoupled", False)) != self.decoupled:
            raise pb_utils.TritonModelException(
                f"{path}: triton_config.decoupled is {bool(triton.get('decoupled', False))} but config.pbtxt's "
                f"model_transaction_policy.decoupled is {self.decoupled}: they must agree"
            )
        try:
            settings, ignored = hf_generate.from_llm_args({k: v for k, v in spec.items() if k != "triton_config"})
        except ValueError as exc:
            raise pb_utils.TritonModelException(f"{path}: {exc}") from exc
        if ignored:
            pb_utils.Logger.log_info(f"trtsweep hf: LLM API arguments the hf backend ignores: {', '.join(ignored)}")
        self.engine = hf_generate.Engine(settings)
        self.outputs = {t["name"] for t in config["output"]}

    # -- one request ----------------------------------------------------------------------------------------------
    def _prompt(self, request):
        for tensor in request.inputs():
            reason = refused(tensor.name(), tensor.as_numpy())
            if reason:
                raise ValueError(reason)
        for name in ("sampling_param_best_of", "sampling_param_beam_width"):
            if _scalar(request, name, int, 1) > 1:
                raise ValueError(f"input {name!r} > 1: trtsweep's hf backend has no beam search or best-of-n")
        prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
        if prompt.ndim > 1:
            raise ValueError(
                "The current implementation only supports text_input being a 1D tensor (as TensorRT-LLM's llmapi "
                "model: config.pbtxt must set max_batch_size 0, model.yaml's triton_config.max_batch_size 0)"
            )
        first = prompt.reshape(-1)[0]
        return first.decode() if isinstance(first, bytes) else str(first)

    def _generation(self, request):
        prompt_ids = self.engine.encode(self._prompt(request))
        sampling = hf_generate.Sampling(
            max_tokens=self.engine.budget(len(prompt_ids), _scalar(request, "sampling_param_max_tokens", int, 32)),
            stop=tuple(_strings(request, "sampling_param_stop")),
            **{k: _scalar(request, f"sampling_param_{k}", cast) for k, cast in SAMPLING.items()},
        )
        return hf_generate.Generation(prompt_ids, sampling)

    def _response(self, want, gen, text, final):
        out = {"text_output": np.array([text.encode()], dtype=np.object_)}
        if "return_finish_reason" in want:
            out["finish_reason"] = np.array([str(gen.finish_reason).encode()], dtype=np.object_)
        if "return_stop_reason" in want:
            out["stop_reason"] = np.array([str(gen.stop_reason).encode()], dtype=np.object_)
        if "return_cumulative_logprob" in want:
            out["cumulative_logprob"] = np.array([gen.cumulative_logprob], dtype=np.float32)
        if final and "sampling_param_return_perf_metrics" in want:
            times = (gen.arrival_ns, gen.scheduled_ns, gen.first_token_ns, gen.last_token_ns)
            for name, value in zip(TIMES, times, strict=True):
                out[name] = np.array([value or 0], dtype=np.int64)
        tensors = [pb_utils.Tensor(name, value) for name, value in out.items() if name in self.outputs]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _serve(self, request, arrival_ns):
        sender = request.get_response_sender()
        final_flag = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL

        def fail(message, code=None):
            error = pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)
            sender.send(pb_utils.InferenceResponse(error=error), flags=final_flag)

        try:
            gen = self._generation(request)
            streaming = _scalar(request, "streaming", bool, False)
            if streaming and not self.decoupled:
                raise ValueError("Streaming is only supported in decoupled mode.")
            want = {name for name in FLAGS if _scalar(request, name, bool, False)}
        except Exception as exc:
            fail(f"Error generating request: {exc}")
            return
        gen.arrival_ns = arrival_ns
        cancelled = sender.is_cancelled if self.decoupled else request.is_cancelled

        def emit(delta):
            if isinstance(delta, Exception):
                fail(f"Error generating request: {delta}")
            elif delta.final and gen.finish_reason == "cancelled":
                pb_utils.Logger.log_info(f"trtsweep hf: request cancelled after {len(gen.output_ids)} tokens")
                fail("Request cancelled by client", pb_utils.TritonError.CANCELLED)
            elif streaming:
                response = self._response(want, gen, gen.text, delta.final)
                sender.send(response, flags=final_flag if delta.final else 0)
            elif delta.final:
                exclude_input = "sampling_param_exclude_input_from_output" in want
                text = gen.text if exclude_input else self.engine.decode(gen.prompt_ids + gen.output_ids)
                sender.send(self._response(want, gen, text, True), flags=final_flag)

        self.engine.submit(gen, cancelled, emit)

    # -- Triton entry points --------------------------------------------------------------------------------------
    def execute(self, requests):
        arrival_ns = time.time_ns()
        for request in requests:
            self._serve(request, arrival_ns)
        return None
