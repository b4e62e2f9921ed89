"""Triton python model `postprocessing`: token ids -> text, as in TensorRT-LLM's inflight_batcher_llm.

Inputs:  TOKENS_BATCH (INT32 [-1, -1]: beams x tokens), SEQUENCE_LENGTH (INT32 [-1]: per beam).
Outputs: OUTPUT (BYTES [-1]: one text per beam), NUM_OUTPUT_TOKENS (INT32 [-1]: the tokens decoded into
         OUTPUT per beam; in streaming, the tokens of this response, so a client summing them gets the exact
         output token count without a tokenizer). NUM_OUTPUT_TOKENS is trtsweep's, not upstream's.
         Up to TensorRT-LLM 0.13 the ensemble routes cum_log_probs, output_log_probs, context and generation
         logits and batch_index through postprocessing: every other input X the request gives is sent on as
         OUT_X when the config declares that output.
Parameters: tokenizer_dir, skip_special_tokens, tokenizer_type (auto, llama, t5; default auto).
"""

import json
import re

import numpy as np
import transformers
import triton_python_backend_utils as pb_utils

TOKENIZER_CLASSES = {"auto": "AutoTokenizer", "llama": "LlamaTokenizer", "t5": "T5Tokenizer"}


UNFILLED = re.compile(r"\$\{\s*\w+\s*\}")


def _param(config, key, default=None):
    value = config["parameters"].get(key, {}).get("string_value", default)
    return default if value is None or UNFILLED.fullmatch(value) else value  # "${name}": left unfilled


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.outputs = {t["name"] for t in config["output"]}
        self.skip_special = _param(config, "skip_special_tokens", "true").lower() in ("true", "1")
        tokenizer_class = getattr(transformers, TOKENIZER_CLASSES[_param(config, "tokenizer_type", "auto")])
        self.tokenizer = tokenizer_class.from_pretrained(_param(config, "tokenizer_dir"), trust_remote_code=True)

    def _one(self, request):
        tokens = pb_utils.get_input_tensor_by_name(request, "TOKENS_BATCH").as_numpy()
        lengths = pb_utils.get_input_tensor_by_name(request, "SEQUENCE_LENGTH").as_numpy()
        texts = np.empty(lengths.shape, dtype=object)
        counts = np.zeros(lengths.shape, dtype=np.int32)
        for b in range(tokens.shape[0]):
            for beam in range(tokens.shape[1]):
                ids = tokens[b, beam, : int(lengths[b, beam])].tolist()
                texts[b, beam] = self.tokenizer.decode(ids, skip_special_tokens=self.skip_special).encode("utf-8")
                counts[b, beam] = len(ids)
        tensors = [pb_utils.Tensor("OUTPUT", texts), pb_utils.Tensor("NUM_OUTPUT_TOKENS", counts)]
        for tensor in request.inputs():
            if f"OUT_{tensor.name()}" in self.outputs:
                tensors.append(pb_utils.Tensor(f"OUT_{tensor.name()}", tensor.as_numpy()))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(self._one(request))
            except Exception as exc:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"postprocessing: {exc}")))
        return responses
