"""Triton python model `preprocessing`: text -> token ids, as in TensorRT-LLM's inflight_batcher_llm.

Inputs:  QUERY (BYTES [1]), REQUEST_OUTPUT_LEN (INT32 [1]), optional BAD_WORDS_DICT / STOP_WORDS_DICT
         (BYTES [-1]), END_ID / PAD_ID (INT32 [1]).
Outputs: INPUT_ID (INT32 [-1]), REQUEST_INPUT_LEN (INT32 [1]), REQUEST_OUTPUT_LEN (INT32 [1]),
         BAD_WORDS_IDS / STOP_WORDS_IDS (INT32 [2, -1]: flattened ids, then cumulative end offsets padded
         with -1), OUT_END_ID / OUT_PAD_ID (INT32 [1]).
Parameters: tokenizer_dir, add_special_tokens, tokenizer_type (auto, llama, t5; default auto).
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


def _optional(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


def _words_to_ids(tokenizer, words):
    """[2, N] int32: concatenated token ids of every word, then their cumulative end offsets (-1 padded)."""
    ids, offsets = [], []
    for word in words:
        text = word.decode("utf-8") if isinstance(word, bytes) else str(word)
        if not text:
            continue
        ids.extend(tokenizer.encode(text, add_special_tokens=False))
        offsets.append(len(ids))
    if not ids:
        return np.array([[0], [-1]], dtype=np.int32)
    width = max(len(ids), len(offsets))
    out = np.full((2, width), -1, dtype=np.int32)
    out[0, : len(ids)] = ids
    out[0, len(ids) :] = 0
    out[1, : len(offsets)] = offsets
    return out


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        tokenizer_dir = _param(config, "tokenizer_dir")
        self.add_special_tokens = _param(config, "add_special_tokens", "false").lower() in ("true", "1")
        tokenizer_class = getattr(transformers, TOKENIZER_CLASSES[_param(config, "tokenizer_type", "auto")])
        self.tokenizer = tokenizer_class.from_pretrained(tokenizer_dir, padding_side="left", trust_remote_code=True)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.end_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id

    def _one(self, request):
        query = _optional(request, "QUERY")
        out_len = _optional(request, "REQUEST_OUTPUT_LEN")
        batch = query.shape[0]
        tokens = [
            self.tokenizer.encode(q[0].decode("utf-8"), add_special_tokens=self.add_special_tokens) for q in query
        ]
        longest = max(len(t) for t in tokens)
        end_id = _optional(request, "END_ID")
        pad_id = _optional(request, "PAD_ID")
        pad = int(pad_id.reshape(-1)[0]) if pad_id is not None else self.pad_id
        input_ids = np.full((batch, longest), pad, dtype=np.int32)
        for row, ids in enumerate(tokens):
            input_ids[row, : len(ids)] = ids
        lengths = np.array([[len(t)] for t in tokens], dtype=np.int32)

        def words(name):
            value = _optional(request, name)
            rows = [_words_to_ids(self.tokenizer, [] if value is None else value[i].reshape(-1)) for i in range(batch)]
            width = max(r.shape[1] for r in rows)
            out = np.full((batch, 2, width), -1, dtype=np.int32)
            for i, r in enumerate(rows):
                out[i, 0, :] = 0
                out[i, :, : r.shape[1]] = r
            return out

        outputs = [
            pb_utils.Tensor("INPUT_ID", input_ids),
            pb_utils.Tensor("REQUEST_INPUT_LEN", lengths),
            pb_utils.Tensor("REQUEST_OUTPUT_LEN", out_len.astype(np.int32).reshape(batch, 1)),
            pb_utils.Tensor("BAD_WORDS_IDS", words("BAD_WORDS_DICT")),
            pb_utils.Tensor("STOP_WORDS_IDS", words("STOP_WORDS_DICT")),
            pb_utils.Tensor(
                "OUT_END_ID",
                (end_id.astype(np.int32) if end_id is not None else np.full((batch, 1), self.end_id, np.int32)),
            ),
            pb_utils.Tensor("OUT_PAD_ID", np.full((batch, 1), pad, dtype=np.int32)),
        ]
        return pb_utils.InferenceResponse(output_tensors=outputs)

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(self._one(request))
            except Exception as exc:  # one bad request must not fail the batch
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"preprocessing: {exc}")))
        return responses
