"""What the TensorRT-LLM C++ Triton backend expects of a model repository, per TensorRT-LLM version.

Every fact below was read from the backend's own `inflight_batcher_llm` templates and C++ sources and is
cited as `<repository>@<tag or commit> <path>`. Abbreviations used in the citations:

- `TB@vX` is triton-inference-server/tensorrtllm_backend at tag vX, which holds the templates and the C++
  backend up to v0.19.0 (`all_models/inflight_batcher_llm/<model>/config.pbtxt`, `tools/fill_template.py`,
  `inflight_batcher_llm/src/*.cc`).
- `TB@c2e65b8` is that repository's last commit with these files (2025-05-13, "Update TensorRT-LLM backend",
  `tools/version.txt` = TensorRT-LLM ca1041f): the 0.20 development line. The files then moved to
  NVIDIA/TensorRT-LLM `triton_backend/` (TB commit c4a49e8 "Remove backend files").
- `TL@0c8de69` is NVIDIA/TensorRT-LLM commit 0c8de69a, whose `tensorrt_llm/version.py` says 1.2.0rc8, files
  `triton_backend/all_models/inflight_batcher_llm/<model>/config.pbtxt` and
  `triton_backend/inflight_batcher_llm/src/model_instance_state.cc`.
- `TPL` is `all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt`, `MIS` is
  `inflight_batcher_llm/src/model_instance_state.cc`.

TensorRT-LLM 0.21, 1.0 and 1.1 are not in the table (NOT_READ says why, per release): trtsweep refuses them
rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trtsweep.errors import TrtsweepError

# Versions in order (major.minor); the source each one was read from.
SOURCES: dict[str, str] = {
    "0.8": "TB@v0.8.0",
    "0.9": "TB@v0.9.0",
    "0.10": "TB@v0.10.0",
    "0.11": "TB@v0.11.0",
    "0.12": "TB@v0.12.0",
    "0.13": "TB@v0.13.0",
    "0.14": "TB@v0.14.0",
    "0.15": "TB@v0.15.0",
    "0.16": "TB@v0.16.0",
    "0.17": "TB@v0.17.0",
    "0.18": "TB@v0.18.0 (v0.18.1, v0.18.2: same templates)",
    "0.19": "TB@v0.19.0",
    "0.20": "TB@c2e65b8 (0.20 development line; the 0.20.0 release itself was not re-read)",
    "1.2": "TL@0c8de69 (1.2.0rc8)",
}
VERSIONS: tuple[str, ...] = tuple(SOURCES)

# Releases between the table's versions whose templates were not read. Their release commits are known (the
# tensorrt_llm submodule of tensorrtllm_backend's release commits, which hold nothing else: tags v0.20.0, v0.21.0
# and v1.0.0 have no all_models/; there is no v1.1.0 tag), but NVIDIA/TensorRT-LLM (2.5 GB) could not be fetched
# here and the file index holds triton_backend/all_models/inflight_batcher_llm/*/config.pbtxt only at main-line
# commits (a7a3d3b2: min_length / random_seed; 5cdd6921: TB@c2e65b8's length, not compared; 0c8de69a: 1.2.0rc8;
# 2a9abd95; 7ed07f06: prompt_ignore_length, early_stopping TYPE_INT32), none of them a release commit. Between
# TB@c2e65b8 and TL@0c8de69 the tensorrt_llm model gained inputs and outputs, a typed prompt_embedding_table and
# enable_trt_overlap (SOURCES["1.2"]), at commits not dated here: which of those each release has is not established.
NOT_READ: dict[str, str] = {
    "0.21": "NVIDIA/TensorRT-LLM@751d5f17 (tensorrtllm_backend@3815eb3 'v0.21.0 release'; tag v0.21.0: @b4b1185a)",
    "1.0": "NVIDIA/TensorRT-LLM@ae8270b7 (tensorrtllm_backend tag v1.0.0, efb8a49)",
    "1.1": "NVIDIA/TensorRT-LLM@48b7b5d8 (tensorrtllm_backend@b9cc224 'v1.1.0 release'; no v1.1.0 tag)",
}


@dataclass(frozen=True)
class Span:
    """Versions `since` .. `until` (inclusive, in VERSIONS order; `until` None = up to the newest)."""

    since: str
    until: str | None = None

    def covers(self, version: str) -> bool:
        last = VERSIONS.index(self.until) if self.until else len(VERSIONS) - 1
        return VERSIONS.index(self.since) <= VERSIONS.index(version) <= last


ALL = Span("0.8")


def covered(spans: tuple[Span, ...], version: str) -> bool:
    """Whether any of the spans covers the version."""
    return any(span.covers(version) for span in spans)


@dataclass(frozen=True)
class Tensor:
    """One input or output of a model config.

    data_type is a Triton type (TYPE_INT32) or the name of the repository parameter that holds it
    (logits_datatype); reshape None means no `reshape` field; ragged is `allow_ragged_batch`.
    """

    name: str
    data_type: str
    dims: tuple[int, ...]
    optional: bool = False
    reshape: tuple[int, ...] | None = None
    ragged: bool = False
    span: Span = ALL


_R: tuple[int, ...] = ()  # reshape: { shape: [ ] }

# Inputs of the tensorrt_llm model, in template order (TPL at each version; "+vX" = first seen there).
TENSORRT_LLM_INPUTS: tuple[Tensor, ...] = (
    Tensor("input_ids", "TYPE_INT32", (-1,), ragged=True, span=Span("0.8", "0.14")),
    Tensor("input_ids", "TYPE_INT32", (-1,), optional=True, ragged=True, span=Span("0.15")),  # optional TB@v0.15.0
    Tensor("encoder_input_features", "encoder_input_features_data_type", (-1, -1), True, None, True, Span("0.15")),
    Tensor("encoder_output_lengths", "TYPE_INT32", (1,), True, _R, span=Span("0.15")),  # +v0.15.0
    Tensor("input_lengths", "TYPE_INT32", (1,), reshape=_R),
    Tensor("request_output_len", "TYPE_INT32", (1,), span=Span("0.8", "0.11")),
    Tensor("request_output_len", "TYPE_INT32", (1,), reshape=_R, span=Span("0.12")),  # reshape TB@v0.12.0
    Tensor("num_return_sequences", "TYPE_INT32", (1,), True, _R, span=Span("0.14")),  # +v0.14.0
    Tensor("draft_input_ids", "TYPE_INT32", (-1,), True, ragged=True),
    Tensor("decoder_input_ids", "TYPE_INT32", (-1,), True, ragged=True, span=Span("0.11")),  # +v0.11.0
    Tensor("decoder_input_lengths", "TYPE_INT32", (1,), True, _R, span=Span("0.11")),  # +v0.11.0
    Tensor("draft_logits", "TYPE_FP32", (-1, -1), True, ragged=True, span=Span("0.9", "0.16")),  # +v0.9.0
    Tensor("draft_logits", "logits_datatype", (-1, -1), True, ragged=True, span=Span("0.17")),  # typed TB@v0.17.0
    Tensor("draft_acceptance_threshold", "TYPE_FP32", (1,), True, _R, span=Span("0.10")),  # +v0.10.0
    Tensor("end_id", "TYPE_INT32", (1,), True, _R),
    Tensor("pad_id", "TYPE_INT32", (1,), True, _R),
    Tensor("stop_words_list", "TYPE_INT32", (2, -1), True, ragged=True),
    Tensor("bad_words_list", "TYPE_INT32", (2, -1), True, ragged=True),
    Tensor("embedding_bias", "TYPE_FP32", (-1,), True, ragged=True),
    Tensor("beam_width", "TYPE_INT32", (1,), True, _R),
    Tensor("temperature", "TYPE_FP32", (1,), True, _R),
    Tensor("runtime_top_k", "TYPE_INT32", (1,), True, _R),
    Tensor("runtime_top_p", "TYPE_FP32", (1,), True, _R),
    Tensor("runtime_top_p_min", "TYPE_FP32", (1,), True, _R, span=Span("0.10")),  # +v0.10.0
    Tensor("runtime_top_p_decay", "TYPE_FP32", (1,), True, _R, span=Span("0.10")),  # +v0.10.0
    Tensor("runtime_top_p_reset_ids", "TYPE_INT32", (1,), True, _R, span=Span("0.10")),  # +v0.10.0
    Tensor("len_penalty", "TYPE_FP32", (1,), True, _R),
    Tensor("early_stopping", "TYPE_BOOL", (1,), True, _R, span=Span("0.10")),  # +v0.10.0
    Tensor("repetition_penalty", "TYPE_FP32", (1,), True, _R),
    Tensor("min_length", "TYPE_INT32", (1,), True, _R, span=Span("0.8", "0.19")),
    Tensor("min_tokens", "TYPE_INT32", (1,), True, _R, span=Span("0.20")),  # renamed TB@c2e65b8
    Tensor("beam_search_diversity_rate", "TYPE_FP32", (1,), True, _R, span=Span("0.10")),  # +v0.10.0
    Tensor("presence_penalty", "TYPE_FP32", (1,), True, _R),
    Tensor("frequency_penalty", "TYPE_FP32", (1,), True, _R),
    Tensor("random_seed", "TYPE_UINT64", (1,), True, _R, span=Span("0.8", "0.19")),
    Tensor("seed", "TYPE_UINT64", (1,), True, _R, span=Span("0.20")),  # renamed TB@c2e65b8
    Tensor("return_log_probs", "TYPE_BOOL", (1,), True, _R),
    Tensor("return_context_logits", "TYPE_BOOL", (1,), True, _R),
    Tensor("return_generation_logits", "TYPE_BOOL", (1,), True, _R),
    Tensor("return_kv_cache_reuse_stats", "TYPE_BOOL", (1,), True, _R, span=Span("0.16", "0.18")),  # -v0.19.0
    Tensor("return_perf_metrics", "TYPE_BOOL", (1,), True, _R, span=Span("0.19")),  # +v0.19.0
    Tensor("return_num_input_tokens", "TYPE_BOOL", (1,), True, _R, span=Span("1.2")),  # TL@0c8de69
    Tensor("return_num_output_tokens", "TYPE_BOOL", (1,), True, _R, span=Span("1.2")),  # TL@0c8de69
    Tensor("exclude_input_in_output", "TYPE_BOOL", (1,), True, _R, span=Span("0.14")),  # +v0.14.0
    Tensor("stop", "TYPE_BOOL", (1,), True, span=Span("0.8", "0.11")),
    Tensor("stop", "TYPE_BOOL", (1,), True, _R, span=Span("0.12")),  # reshape TB@v0.12.0
    Tensor("streaming", "TYPE_BOOL", (1,), True, span=Span("0.8", "0.11")),
    Tensor("streaming", "TYPE_BOOL", (1,), True, _R, span=Span("0.12")),  # reshape TB@v0.12.0
    Tensor("prompt_embedding_table", "TYPE_FP16", (-1, -1), True, ragged=True, span=Span("0.8", "0.20")),
    Tensor("prompt_embedding_table", "prompt_embedding_table_data_type", (-1, -1), True, None, True, Span("1.2")),
    Tensor("prompt_table_extra_ids", "TYPE_UINT64", (-1,), True, ragged=True, span=Span("0.13")),  # +v0.13.0
    Tensor("prompt_vocab_size", "TYPE_INT32", (1,), True, _R),
    Tensor("cross_attention_mask", "TYPE_BOOL", (-1, -1), True, ragged=True, span=Span("0.15")),  # +v0.15.0
    Tensor("mrope_rotary_cos_sin", "TYPE_FP32", (-1,), True, span=Span("0.19")),  # +v0.19.0
    Tensor("mrope_position_deltas", "TYPE_INT64", (1,), True, span=Span("0.19")),  # +v0.19.0
    Tensor("lora_task_id", "TYPE_UINT64", (1,), True, _R, span=Span("0.9")),  # +v0.9.0
    Tensor("lora_weights", "TYPE_FP16", (-1, -1), True, ragged=True),
    Tensor("lora_config", "TYPE_INT32", (-1, 3), True, ragged=True),
    Tensor("context_phase_params", "TYPE_UINT8", (-1,), True, ragged=True, span=Span("0.14")),  # +v0.14.0
    Tensor("skip_cross_attn_blocks", "TYPE_BOOL", (1,), True, ragged=True, span=Span("0.16")),  # +v0.16.0
    Tensor("retention_token_range_starts", "TYPE_INT32", (-1,), True, ragged=True, span=Span("0.17")),  # +v0.17.0
    Tensor("retention_token_range_ends", "TYPE_INT32", (-1,), True, ragged=True, span=Span("0.17")),
    Tensor("retention_token_range_priorities", "TYPE_INT32", (-1,), True, ragged=True, span=Span("0.17")),
    Tensor("retention_token_range_durations_ms", "TYPE_INT32", (-1,), True, ragged=True, span=Span("0.17")),
    Tensor("retention_decode_priority", "TYPE_INT32", (1,), True, ragged=True, span=Span("0.17")),
    Tensor("retention_decode_duration_ms", "TYPE_INT32", (1,), True, ragged=True, span=Span("0.17")),
    Tensor("guided_decoding_guide_type", "TYPE_STRING", (1,), True, ragged=True, span=Span("0.19")),  # +v0.19.0
    Tensor("guided_decoding_guide", "TYPE_STRING", (1,), True, ragged=True, span=Span("0.19")),
    Tensor("lookahead_window_size", "TYPE_INT32", (1,), True, ragged=True, span=Span("0.19")),  # +v0.19.0
    Tensor("lookahead_ngram_size", "TYPE_INT32", (1,), True, ragged=True, span=Span("0.19")),
    Tensor("lookahead_verification_set_size", "TYPE_INT32", (1,), True, ragged=True, span=Span("0.19")),
)

# Outputs of the tensorrt_llm model, in template order (TPL at each version).
TENSORRT_LLM_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("output_ids", "TYPE_INT32", (-1, -1)),
    Tensor("sequence_length", "TYPE_INT32", (-1,)),
    Tensor("cum_log_probs", "TYPE_FP32", (-1,)),
    Tensor("output_log_probs", "TYPE_FP32", (-1, -1)),
    Tensor("context_logits", "TYPE_FP32", (-1, -1), span=Span("0.8", "0.16")),
    Tensor("context_logits", "logits_datatype", (-1, -1), span=Span("0.17")),  # typed TB@v0.17.0
    Tensor("generation_logits", "TYPE_FP32", (-1, -1, -1), span=Span("0.8", "0.16")),
    Tensor("generation_logits", "logits_datatype", (-1, -1, -1), span=Span("0.17")),
    Tensor("batch_index", "TYPE_INT32", (1,), span=Span("0.12")),  # +v0.12.0
    Tensor("sequence_index", "TYPE_INT32", (1,), span=Span("0.14")),  # +v0.14.0
    Tensor("context_phase_params", "TYPE_UINT8", (-1,), span=Span("0.14")),  # +v0.14.0
    Tensor("kv_cache_alloc_new_blocks", "TYPE_INT32", (1,), span=Span("0.16")),  # +v0.16.0
    Tensor("kv_cache_reused_blocks", "TYPE_INT32", (1,), span=Span("0.16")),
    Tensor("kv_cache_alloc_total_blocks", "TYPE_INT32", (1,), span=Span("0.16")),
    Tensor("arrival_time_ns", "TYPE_INT64", (1,), span=Span("0.19")),  # +v0.19.0
    Tensor("first_scheduled_time_ns", "TYPE_INT64", (1,), span=Span("0.19")),
    Tensor("first_token_time_ns", "TYPE_INT64", (1,), span=Span("0.19")),
    Tensor("last_token_time_ns", "TYPE_INT64", (1,), span=Span("0.19")),
    Tensor("acceptance_rate", "TYPE_FP32", (1,), span=Span("0.19")),
    Tensor("total_accepted_draft_tokens", "TYPE_INT32", (1,), span=Span("0.19")),
    Tensor("total_draft_tokens", "TYPE_INT32", (1,), span=Span("0.19")),
    Tensor("num_input_tokens", "TYPE_INT32", (1,), span=Span("1.2")),  # TL@0c8de69
    Tensor("num_output_tokens", "TYPE_INT32", (1,), span=Span("1.2")),  # TL@0c8de69
)

# The `parameters` keys of the tensorrt_llm model (uncommented entries of TPL). The C++ backend reads each
# with a fallback when the key is absent or does not parse (MIS: `try { GetParameter } catch { default }`),
# so trtsweep writes only the keys that have a value; see REQUIRED_KEYS for the exceptions.
TENSORRT_LLM_PARAMETER_KEYS: dict[str, tuple[Span, ...]] = {
    "max_beam_width": (ALL,),
    "gpt_model_type": (ALL,),  # from batching_strategy
    "gpt_model_path": (ALL,),  # from engine_dir
    "max_tokens_in_paged_kv_cache": (ALL,),
    "max_attention_window_size": (ALL,),
    "batch_scheduler_policy": (ALL,),
    "kv_cache_free_gpu_mem_fraction": (ALL,),
    "exclude_input_in_output": (ALL,),
    "enable_kv_cache_reuse": (ALL,),
    "normalize_log_probs": (ALL,),
    "enable_chunked_context": (ALL,),
    "gpu_device_ids": (ALL,),
    # commented out as "deprecated and doesn't have any effect" in TPL v0.10.0 .. TB@c2e65b8 (MIS v0.19.0:
    # "enable_trt_overlap is deprecated and will be ignored"); active again in TL@0c8de69 (MIS calls
    # setEnableTrtOverlap).
    "enable_trt_overlap": (Span("0.8", "0.9"), Span("1.2")),
    "decoding_mode": (Span("0.9"),),  # +v0.9.0
    "medusa_choices": (Span("0.9"),),
    "lora_cache_optimal_adapter_size": (Span("0.9"),),
    "lora_cache_max_adapter_size": (Span("0.9"),),
    "lora_cache_gpu_memory_fraction": (Span("0.9"),),
    "lora_cache_host_memory_bytes": (Span("0.9"),),
    "kv_cache_host_memory_bytes": (Span("0.10"),),  # +v0.10.0
    "kv_cache_onboard_blocks": (Span("0.10"),),
    "sink_token_length": (Span("0.10"),),
    "cancellation_check_period_ms": (Span("0.10"),),
    "stats_check_period_ms": (Span("0.10"),),
    "iter_stats_max_iterations": (Span("0.10"),),
    "request_stats_max_iterations": (Span("0.10"),),
    "gpu_weights_percent": (Span("0.10"),),
    "encoder_model_path": (Span("0.11"),),  # +v0.11.0, from encoder_engine_dir
    "enable_context_fmha_fp32_acc": (Span("0.12"),),  # +v0.12.0
    "multi_block_mode": (Span("0.12"),),
    "participant_ids": (Span("0.13"),),  # +v0.13.0
    "cross_kv_cache_fraction": (Span("0.14"),),  # +v0.14.0
    "cuda_graph_mode": (Span("0.15"),),  # +v0.15.0
    "cuda_graph_cache_size": (Span("0.15"),),
    "speculative_decoding_fast_logits": (Span("0.15"),),
    "eagle_choices": (Span("0.16"),),  # +v0.16.0
    "num_nodes": (Span("0.19"),),  # +v0.19.0
    "lora_prefetch_dir": (Span("0.19"),),
    "lookahead_window_size": (Span("0.19"),),
    "lookahead_ngram_size": (Span("0.19"),),
    "lookahead_verification_set_size": (Span("0.19"),),
    "tokenizer_dir": (Span("0.19"),),
    "guided_decoding_backend": (Span("0.19"),),
    "xgrammar_tokenizer_info_path": (Span("0.19"),),
}

# Keys the backend reads without a fallback, so they must be present; an empty value means "not set"
# (MIS v0.19.0 and TL@0c8de69 getGuidedDecodingConfigFromParams: GetParameter outside any try, then
# `empty() || == "${...}"` = unset).
REQUIRED_KEYS: tuple[str, ...] = ("tokenizer_dir", "guided_decoding_backend", "xgrammar_tokenizer_info_path")

# Fixed parameter values of TPL.
TENSORRT_LLM_CONSTANTS: tuple[tuple[str, str, Span], ...] = (
    ("FORCE_CPU_ONLY_INPUT_TENSORS", "no", ALL),
    ("worker_path", "/opt/tritonserver/backends/tensorrtllm/triton_tensorrtllm_worker", Span("0.9", "0.9")),
    # TB@v0.10.0 renamed it; MIS v0.17.0 ModelState::GetExecutorWorkerPath throws if worker_path is set
    ("executor_worker_path", "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker", Span("0.10")),
)

# `dynamic_batching { default_queue_policy { max_queue_size } }` in TPL from v0.12.0; tools/fill_template.py
# fills max_queue_size with 0 when not given from TB@v0.12.0 on.
MAX_QUEUE_SIZE = Span("0.12")

# gpt_model_type values; MIS getBatchingTypeFromParams (v0.8.0: TrtGptModelType V1 / InflightBatching /
# InflightFusedBatching; v0.10.0 .. TL@0c8de69: V1/v1 -> kSTATIC, both inflight_* -> kINFLIGHT).
BATCHING_STRATEGIES: tuple[str, ...] = ("inflight_fused_batching", "inflight_batching", "V1", "v1")

# MIS getSchedulerConfigFromParams (all versions).
BATCH_SCHEDULER_POLICIES: tuple[str, ...] = ("max_utilization", "guaranteed_no_evict")

# decoding_mode values accepted by MIS (anything else: a warning and the default).
DECODING_MODES: tuple[tuple[str, Span], ...] = (
    ("top_k", Span("0.9")),
    ("top_p", Span("0.9")),
    ("top_k_top_p", Span("0.9")),
    ("beam_search", Span("0.9")),
    ("medusa", Span("0.10")),  # MIS v0.10.0
    ("redrafter", Span("0.16")),  # MIS v0.16.0
    ("lookahead", Span("0.16")),
    ("eagle", Span("0.16")),
)

# Request inputs renamed in the 0.20 line: ensemble, tensorrt_llm and tensorrt_llm_bls configs of
# TB@c2e65b8 (and TL@0c8de69) use min_tokens / seed where TB@v0.19.0 used min_length / random_seed.
MIN_TOKENS_INPUT: tuple[tuple[str, Span], ...] = (("min_length", Span("0.8", "0.19")), ("min_tokens", Span("0.20")))
SEED_INPUT: tuple[tuple[str, Span], ...] = (("random_seed", Span("0.8", "0.19")), ("seed", Span("0.20")))

# Streaming with beam width > 1: refused by the batch manager before 0.13 ("Streaming mode is only supported
# with beam width of 1", tensorrtllm_backend issue #140, feature request #408 open in 2024-04); NVIDIA/
# TensorRT-LLM release v0.13.0 notes: "Supported beam search for streaming mode".
STREAMING_BEAM_SEARCH = Span("0.13")

# MIS v0.8.0 .. v0.11.0: in decoupled mode, max_utilization without enable_chunked_context is silently
# replaced by guaranteed_no_evict (a warning only); the code is gone in MIS v0.12.0.
SCHEDULER_POLICY_FALLBACK = Span("0.8", "0.11")

# `tokenizer_type` parameter of preprocessing and postprocessing: TB@v0.8.0 only (gone in v0.9.0).
TOKENIZER_TYPE = Span("0.8", "0.8")
TOKENIZER_TYPES: tuple[str, ...] = ("auto", "llama", "t5")  # TB@v0.8.0 preprocessing/1/model.py


@dataclass(frozen=True)
class VersionFacts:
    """Everything trtsweep needs to know about one TensorRT-LLM version (see the module tables)."""

    version: str
    source: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    parameter_keys: frozenset[str]
    required_keys: tuple[str, ...]
    constants: dict[str, str]
    max_queue_size: bool
    decoding_modes: tuple[str, ...]
    min_tokens_input: str
    seed_input: str
    streaming_beam_search: bool
    scheduler_policy_fallback: bool
    tokenizer_type: bool


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:\.?(?:post|rc|dev)\d*)*$")


def major_minor(text: str) -> str | None:
    """'0.14.0', 'v0.17.0.post1', '1.2.0rc8' -> '0.14', '0.17', '1.2'; None if it is no version."""
    match = _VERSION.match(text.strip())
    return f"{int(match.group(1))}.{int(match.group(2))}" if match else None


def version_key(trtllm_version: str) -> str:
    """The table key of a TensorRT-LLM version (see major_minor); TrtsweepError if it is not in the table."""
    key = major_minor(str(trtllm_version))
    if key not in SOURCES:
        why = (
            f"; TensorRT-LLM {key}'s Triton templates ({NOT_READ[key]} triton_backend/) were not read, so trtsweep "
            "does not guess them: name a release of the table in triton.trtllm_version to serve the engine with its "
            "templates"
            if key in NOT_READ
            else ""
        )
        raise TrtsweepError(
            f"trtllm_version {trtllm_version!r} is not in trtsweep's table; expected one of {', '.join(VERSIONS)} "
            f"(x.y or x.y.z){why}"
        )
    return key


def facts(trtllm_version: str) -> VersionFacts:
    """The table's view for one TensorRT-LLM version."""
    v = version_key(trtllm_version)
    return VersionFacts(
        version=v,
        source=SOURCES[v],
        inputs=tuple(t for t in TENSORRT_LLM_INPUTS if t.span.covers(v)),
        outputs=tuple(t for t in TENSORRT_LLM_OUTPUTS if t.span.covers(v)),
        parameter_keys=frozenset(k for k, spans in TENSORRT_LLM_PARAMETER_KEYS.items() if covered(spans, v)),
        required_keys=tuple(k for k in REQUIRED_KEYS if covered(TENSORRT_LLM_PARAMETER_KEYS[k], v)),
        constants={key: value for key, value, span in TENSORRT_LLM_CONSTANTS if span.covers(v)},
        max_queue_size=MAX_QUEUE_SIZE.covers(v),
        decoding_modes=tuple(mode for mode, span in DECODING_MODES if span.covers(v)),
        min_tokens_input=next(name for name, span in MIN_TOKENS_INPUT if span.covers(v)),
        seed_input=next(name for name, span in SEED_INPUT if span.covers(v)),
        streaming_beam_search=STREAMING_BEAM_SEARCH.covers(v),
        scheduler_policy_fallback=SCHEDULER_POLICY_FALLBACK.covers(v),
        tokenizer_type=TOKENIZER_TYPE.covers(v),
    )
