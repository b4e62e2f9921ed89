"""Triton python model `preprocessing`: text -> token ids, as in TensorRT-LLM's inflight_batcher_llm.

Its config declares the upstream preprocessing tensors that the version's ensemble maps
(trtsweep.triton.interface); it sends the outputs its config declares that the request gives it the input for:

  QUERY (BYTES [1])                  -> INPUT_ID (INT32 [-1]), REQUEST_INPUT_LEN (INT32 [1])
  DECODER_QUERY (BYTES [1])          -> DECODER_INPUT_ID, REQUEST_DECODER_INPUT_LEN (encoder-decoder engines)
  REQUEST_OUTPUT_LEN (INT32 [1])     -> REQUEST_OUTPUT_LEN
  BAD_WORDS_DICT / STOP_WORDS_DICT   -> BAD_WORDS_IDS / STOP_WORDS_IDS (INT32 [2, -1]: flattened ids, then
                                        cumulative end offsets padded with -1; always sent)
  EMBEDDING_BIAS_WORDS + _WEIGHTS    -> EMBEDDING_BIAS (FP32 [vocab]: each word's tokens get its weight added)
  END_ID / PAD_ID                    -> OUT_END_ID / OUT_PAD_ID (the tokenizer's when not given; always sent)
  PROMPT_TABLE_EXTRA_ID (UINT64 [1]) -> OUT_PROMPT_TABLE_EXTRA_IDS (the id once per input token)
  PROMPT_EMBEDDING_TABLE             -> OUT_PROMPT_EMBEDDING_TABLE (as given)

Image and video inputs (IMAGE, IMAGE_BYTES, IMAGE_URL, VIDEO_BYTES) fail the request with a sentence naming
them: multimodal models are outside trtsweep's repository. An output missing from the response is simply not
passed on by Triton's ensemble, so an optional tensorrt_llm input it feeds stays unset.
Parameters: tokenizer_dir, add_special_tokens, tokenizer_type (auto, llama, t5; default auto).
"""

import json
import re

import numpy as np
import transformers
import triton_python_backend_utils as pb_utils

TOKENIZER_CLASSES = {"auto": "AutoTokenizer", "llama": "LlamaTokenizer", "t5": "T5Tokenizer"}
MULTIMODAL = ("IMAGE", "IMAGE_BYTES", "IMAGE_URL", "VIDEO_BYTES")


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
        self.outputs = {t["name"] for t in config["output"]}
        tokenizer_dir = _param(config, "tokenizer_dir")
        self.add_special_tokens = _param(config, "add_special_tokens", "false").lower() in ("true", "1")
        tokenizer_class = getattr(transformers, TOKENIZER_CLASSES[_param(config, "tokenizer_type", "auto")])
        self.tokenizer = tokenizer_class.from_pretrained(tokenizer_dir, padding_side="left", trust_remote_code=True)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.end_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id

    def _ids(self, texts, pad):
        """[batch, longest] token ids (right-padded with pad) and [batch, 1] lengths of BYTES [batch, 1] texts."""
        tokens = [
            self.tokenizer.encode(t[0].decode("utf-8"), add_special_tokens=self.add_special_tokens) for t in texts
        ]
        ids = np.full((len(tokens), max(len(t) for t in tokens)), pad, dtype=np.int32)
        for row, row_ids in enumerate(tokens):
            ids[row, : len(row_ids)] = row_ids
        return ids, np.array([[len(t)] for t in tokens], dtype=np.int32)

    def _words(self, request, name, batch):
        value = _optional(request, name)
        rows = [_words_to_ids(self.tokenizer, [] if value is None else value[i].reshape(-1)) for i in range(batch)]
        out = np.full((batch, 2, max(r.shape[1] for r in rows)), -1, dtype=np.int32)
        for i, r in enumerate(rows):
            out[i, 0, :] = 0
            out[i, :, : r.shape[1]] = r
        return out

    def _bias(self, words, weights):
        """[batch, vocab] FP32: for every word, its weight added at each of its tokens."""
        if words.shape != weights.shape:
            raise ValueError(f"embedding_bias_words {words.shape} and embedding_bias_weights {weights.shape} differ")
        bias = np.zeros((words.shape[0], len(self.tokenizer)), dtype=np.float32)
        for row in range(words.shape[0]):
            for word, weight in zip(words[row].reshape(-1), weights[row].reshape(-1), strict=True):
                text = word.decode("utf-8") if isinstance(word, bytes) else str(word)
                for token in self.tokenizer.encode(text, add_special_tokens=False) if text else []:
                    bias[row, token] += weight
        return bias

    def _one(self, request):
        for name in MULTIMODAL:
            if _optional(request, name) is not None:
                raise ValueError(f"input {name}: multimodal (image / video) requests are outside trtsweep's repository")
        query = _optional(request, "QUERY")
        batch = query.shape[0]
        end_id, pad_id = _optional(request, "END_ID"), _optional(request, "PAD_ID")
        pad = int(pad_id.reshape(-1)[0]) if pad_id is not None else self.pad_id
        input_ids, lengths = self._ids(query, pad)
        out = {
            "INPUT_ID": input_ids,
            "REQUEST_INPUT_LEN": lengths,
            "REQUEST_OUTPUT_LEN": _optional(request, "REQUEST_OUTPUT_LEN").astype(np.int32).reshape(batch, 1),
            "BAD_WORDS_IDS": self._words(request, "BAD_WORDS_DICT", batch),
            "STOP_WORDS_IDS": self._words(request, "STOP_WORDS_DICT", batch),
            "OUT_END_ID": end_id.astype(np.int32) if end_id is not None else np.full((batch, 1), self.end_id, np.int32),
            "OUT_PAD_ID": np.full((batch, 1), pad, dtype=np.int32),
        }
        decoder = _optional(request, "DECODER_QUERY")
        if decoder is not None:
            out["DECODER_INPUT_ID"], out["REQUEST_DECODER_INPUT_LEN"] = self._ids(decoder, pad)
        words, weights = _optional(request, "EMBEDDING_BIAS_WORDS"), _optional(request, "EMBEDDING_BIAS_WEIGHTS")
        if words is not None and weights is not None and words.size:
            out["EMBEDDING_BIAS"] = self._bias(words, weights)
        extra_id = _optional(request, "PROMPT_TABLE_EXTRA_ID")
        if extra_id is not None:
            out["OUT_PROMPT_TABLE_EXTRA_IDS"] = np.repeat(
                extra_id.astype(np.uint64).reshape(batch, 1), input_ids.shape[1], axis=1
            )
        table = _optional(request, "PROMPT_EMBEDDING_TABLE")
        if table is not None:
            out["OUT_PROMPT_EMBEDDING_TABLE"] = table
        tensors = [pb_utils.Tensor(name, value) for name, value in out.items() if name in self.outputs]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(self._one(request))
            except Exception as exc:  # one bad request must not fail the batch
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"preprocessing: {exc}")))
        return responses
