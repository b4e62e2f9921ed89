"""Triton python model `tensorrt_llm_bls`: the ensemble's pipeline as one BLS (business logic) model.

For every request it calls `preprocessing`, then `tensorrt_llm`, then `postprocessing` with Triton's
in-process BLS API, and answers with `text_output`. Its inputs are the ensemble's: text_input, max_tokens,
optional bad_words, stop_words, end_id, pad_id and the inputs passed straight to tensorrt_llm.

Decoupled mode (model_transaction_policy.decoupled, which tensorrt_llm shares): every tensorrt_llm response
becomes one response here, so a request with `stream` true streams; the last response is an empty one that
carries the final flag. Otherwise one response per request.

Parameters:
  accumulate_tokens: when streaming, decode all tokens generated so far at every step and send only the text
    that is new (held back while it ends in an incomplete UTF-8 sequence), so tokenizers whose pieces decode
    differently alone (leading spaces, multi-byte characters) stream the same text as one whole decode.
    Beam width 1 only. Without it every step's tokens are decoded on their own, as the ensemble does.
  tensorrt_llm_inputs: JSON object, this model's input name -> tensorrt_llm input name, for the inputs passed
    straight through (top_k -> runtime_top_k, stream -> streaming, the version's seed and min-tokens names).

Requests run on a thread pool of max_batch_size workers, so concurrent requests stream concurrently.
"""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils

# this model's inputs -> preprocessing inputs
PREPROCESSING_INPUTS = {
    "text_input": "QUERY",
    "max_tokens": "REQUEST_OUTPUT_LEN",
    "bad_words": "BAD_WORDS_DICT",
    "stop_words": "STOP_WORDS_DICT",
    "end_id": "END_ID",
    "pad_id": "PAD_ID",
}
# preprocessing outputs -> tensorrt_llm inputs
PREPROCESSING_OUTPUTS = {
    "INPUT_ID": "input_ids",
    "REQUEST_INPUT_LEN": "input_lengths",
    "REQUEST_OUTPUT_LEN": "request_output_len",
    "OUT_END_ID": "end_id",
    "OUT_PAD_ID": "pad_id",
    "STOP_WORDS_IDS": "stop_words_list",
    "BAD_WORDS_IDS": "bad_words_list",
}


UNFILLED = re.compile(r"\$\{\s*\w+\s*\}")


def _param(config, key, default=None):
    value = config["parameters"].get(key, {}).get("string_value", default)
    return default if value is None or UNFILLED.fullmatch(value) else value  # "${name}": left unfilled


def _renamed(request, names):
    """The request's tensors among `names` (source -> target), renamed; absent optional ones are skipped."""
    out = []
    for source, target in names.items():
        tensor = pb_utils.get_input_tensor_by_name(request, source)
        if tensor is not None:
            out.append(pb_utils.Tensor(target, tensor.as_numpy()))
    return out


def _check(response, model):
    if response.has_error():
        raise RuntimeError(f"{model}: {response.error().message()}")
    return response


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.accumulate = _param(config, "accumulate_tokens", "false").lower() in ("true", "1")
        self.passthrough = json.loads(_param(config, "tensorrt_llm_inputs", "{}"))
        workers = max(1, int(config.get("max_batch_size", 1)))
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bls")

    # -- the three steps ---------------------------------------------------------------------------------
    def _call(self, model, inputs, outputs):
        request = pb_utils.InferenceRequest(model_name=model, requested_output_names=outputs, inputs=inputs)
        response = _check(request.exec(), model)
        return {name: pb_utils.get_output_tensor_by_name(response, name).as_numpy() for name in outputs}

    def _generate(self, request):
        """Yield (output_ids, sequence_length) of every tensorrt_llm response to this request."""
        pre = self._call("preprocessing", _renamed(request, PREPROCESSING_INPUTS), list(PREPROCESSING_OUTPUTS))
        inputs = [pb_utils.Tensor(PREPROCESSING_OUTPUTS[name], value) for name, value in pre.items()]
        inputs += _renamed(request, self.passthrough)
        trt = pb_utils.InferenceRequest(
            model_name="tensorrt_llm", requested_output_names=["output_ids", "sequence_length"], inputs=inputs
        )
        for response in trt.exec(decoupled=True) if self.decoupled else [trt.exec()]:
            ids = pb_utils.get_output_tensor_by_name(_check(response, "tensorrt_llm"), "output_ids")
            if ids is not None:  # a decoupled stream ends with an empty response
                lengths = pb_utils.get_output_tensor_by_name(response, "sequence_length").as_numpy()
                yield ids.as_numpy(), lengths

    def _detokenize(self, ids, lengths):
        inputs = [pb_utils.Tensor("TOKENS_BATCH", ids), pb_utils.Tensor("SEQUENCE_LENGTH", lengths)]
        return self._call("postprocessing", inputs, ["OUTPUT"])["OUTPUT"]

    # -- responses ---------------------------------------------------------------------------------------
    @staticmethod
    def _response(texts):
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("text_output", texts)])

    def _texts(self, request):
        """Yield the text_output arrays of one request, one per tensorrt_llm response."""
        if not (self.accumulate and self.decoupled):
            for ids, lengths in self._generate(request):
                yield self._detokenize(ids, lengths)
            return
        tokens, sent, text = np.zeros((1, 1, 0), dtype=np.int32), "", ""
        for ids, lengths in self._generate(request):
            if ids.shape[0] != 1 or ids.shape[1] != 1:
                raise ValueError("accumulate_tokens needs batch size 1 and beam width 1")
            tokens = np.concatenate([tokens, ids[:, :, : int(lengths.reshape(-1)[0])]], axis=2)
            text = self._detokenize(tokens, np.array([[tokens.shape[2]]], dtype=np.int32)).reshape(-1)[0].decode()
            if not text.endswith("\ufffd") and len(text) > len(sent):
                yield np.array([[text[len(sent) :].encode("utf-8")]], dtype=object)
                sent = text
        if text != sent:
            yield np.array([[text[len(sent) :].encode("utf-8")]], dtype=object)

    def _run_decoupled(self, request):
        sender = request.get_response_sender()
        try:
            for texts in self._texts(request):
                sender.send(self._response(texts))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception as exc:
            error = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"tensorrt_llm_bls: {exc}"))
            sender.send(error, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _run_single(self, request):
        try:
            (texts,) = list(self._texts(request))
            return self._response(texts)
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
