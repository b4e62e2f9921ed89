"""Triton python model `tensorrt_llm_bls`: the ensemble's pipeline as one BLS (business logic) model.

Its inputs and outputs are the upstream `tensorrt_llm_bls` model's of the repository's TensorRT-LLM version
(trtsweep.triton.interface). For every request it runs the ensemble's own steps (parameter `ensemble_steps`:
model, input_map, output_map, exactly as the ensemble config wires them) with Triton's in-process BLS API:
`preprocessing`, then `tensorrt_llm`, then `postprocessing` on every tensorrt_llm response, and answers with
every output of this model that the steps produced (text_output, cum_log_probs, ...). So the BLS model honours
and refuses exactly what the ensemble does; its own extra inputs are refused by name when in effect:
image / video inputs (multimodal models) and num_draft_tokens / use_draft_logits (speculative decoding with a
draft model), both outside trtsweep's repository.

Decoupled mode (model_transaction_policy.decoupled, which tensorrt_llm shares): every tensorrt_llm response
becomes one response here, so a request with `stream` true streams; the last response is an empty one that
carries the final flag. Otherwise one response per request.

Parameters:
  accumulate_tokens: when streaming, decode all tokens generated so far at every step and send only the text
    that is new (held back while it ends in an incomplete UTF-8 sequence), so tokenizers whose pieces decode
    differently alone (leading spaces, multi-byte characters) stream the same text as one whole decode.
    Beam width 1 only. Without it every step's tokens are decoded on their own, as the ensemble does.
  ensemble_steps: JSON list of the ensemble's steps.

Requests run on a thread pool of max_batch_size workers, so concurrent requests stream concurrently.
"""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils

# this model's own inputs beyond the ensemble's -> the feature they belong to
REFUSED = {
    "image_input": "multimodal models",
    "image_bytes_input": "multimodal models",
    "image_url_input": "multimodal models",
    "video_bytes_input": "multimodal models",
    "num_draft_tokens": "speculative decoding with a draft model",
    "use_draft_logits": "speculative decoding with a draft model",
}

UNFILLED = re.compile(r"\$\{\s*\w+\s*\}")


def _param(config, key, default=None):
    value = config["parameters"].get(key, {}).get("string_value", default)
    return default if value is None or UNFILLED.fullmatch(value) else value  # "${name}": left unfilled


def _check(response, model):
    if response.has_error():
        raise RuntimeError(f"{model}: {response.error().message()}")
    return response


def _in_effect(value):
    return value.size > 0 and (value.dtype != np.bool_ or value.any()) and (value.dtype.kind != "i" or value.any())


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.accumulate = _param(config, "accumulate_tokens", "false").lower() in ("true", "1")
        self.steps = {step["model"]: step for step in json.loads(_param(config, "ensemble_steps", "[]"))}
        self.outputs = [t["name"] for t in config["output"]]
        # inputs with a `reshape` arrive without their dims ([batch]); the steps' models take [batch, *dims]
        self.dims = {t["name"]: [int(d) for d in t["dims"]] for t in config["input"] if "reshape" in t}
        post = self.steps["postprocessing"]["inputs"]
        self.tokens_name, self.lengths_name = post["TOKENS_BATCH"], post["SEQUENCE_LENGTH"]
        workers = max(1, int(config.get("max_batch_size", 1)))
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bls")

    # -- the ensemble's steps ------------------------------------------------------------------------------------
    def _request(self, model, tensors):
        step = self.steps[model]
        inputs = [pb_utils.Tensor(key, tensors[name]) for key, name in step["inputs"].items() if name in tensors]
        return pb_utils.InferenceRequest(model_name=model, requested_output_names=list(step["outputs"]), inputs=inputs)

    def _outputs(self, model, response):
        """The step's outputs that the response carries, under the ensemble's tensor names."""
        produced = {}
        for key, name in self.steps[model]["outputs"].items():
            tensor = pb_utils.get_output_tensor_by_name(_check(response, model), key)
            if tensor is not None:
                produced[name] = tensor.as_numpy()
        return produced

    def _call(self, model, tensors):
        return self._outputs(model, self._request(model, tensors).exec())

    def _generate(self, request):
        """Yield the tensors known after every tensorrt_llm response: the request's, preprocessing's, its own."""
        tensors = {t.name(): t.as_numpy() for t in request.inputs()}
        for name, dims in self.dims.items():
            if name in tensors:
                tensors[name] = tensors[name].reshape(tensors[name].shape[0], *dims)
        for name, feature in REFUSED.items():
            if name in tensors and _in_effect(tensors[name]):
                raise ValueError(f"input {name!r}: {feature} are outside trtsweep's repository")
        tensors.update(self._call("preprocessing", tensors))
        trt = self._request("tensorrt_llm", tensors)
        for response in trt.exec(decoupled=True) if self.decoupled else [trt.exec()]:
            produced = self._outputs("tensorrt_llm", response)
            if self.tokens_name in produced:  # a decoupled stream ends with an empty response
                yield {**tensors, **produced}

    # -- responses ---------------------------------------------------------------------------------------------
    def _response(self, tensors):
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor(name, tensors[name]) for name in self.outputs if name in tensors]
        )

    def _results(self, request):
        """Yield the tensors of every response to one request: postprocessing's text beside the others."""
        if not (self.accumulate and self.decoupled):
            for tensors in self._generate(request):
                yield {**tensors, **self._call("postprocessing", tensors)}
            return
        tokens, sent, text, last = np.zeros((1, 1, 0), dtype=np.int32), "", "", None
        for tensors in self._generate(request):
            ids, lengths = tensors[self.tokens_name], tensors[self.lengths_name]
            if ids.shape[0] != 1 or ids.shape[1] != 1:
                raise ValueError("accumulate_tokens needs batch size 1 and beam width 1")
            tokens = np.concatenate([tokens, ids[:, :, : int(lengths.reshape(-1)[0])]], axis=2)
            whole = {**tensors, self.tokens_name: tokens, self.lengths_name: np.array([[tokens.shape[2]]], np.int32)}
            last = {**tensors, **self._call("postprocessing", whole)}
            text = last["text_output"].reshape(-1)[0].decode()
            if not text.endswith("\ufffd") and len(text) > len(sent):
                yield {**last, "text_output": np.array([[text[len(sent) :].encode("utf-8")]], dtype=object)}
                sent = text
        if last is not None and text != sent:
            yield {**last, "text_output": np.array([[text[len(sent) :].encode("utf-8")]], dtype=object)}

    def _run_decoupled(self, request):
        sender = request.get_response_sender()
        try:
            for tensors in self._results(request):
                sender.send(self._response(tensors))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception as exc:
            error = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm_bls: {exc}"))
            sender.send(error, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _run_single(self, request):
        try:
            (tensors,) = list(self._results(request))
            return self._response(tensors)
        except Exception as exc:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm_bls: {exc}"))

    def execute(self, requests):
        if self.decoupled:
            for request in requests:
                self.pool.submit(self._run_decoupled, request)
            return None
        return list(self.pool.map(self._run_single, requests))

    def finalize(self):
        self.pool.shutdown(wait=True, cancel_futures=True)
