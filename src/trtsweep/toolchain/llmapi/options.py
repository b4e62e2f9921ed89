"""The LLM API options of a PyTorch-flow point: what `trtllm_build` writes instead of building an engine.

The sweep matrix keeps its meaning: max batch size, input/output lengths and TP/PP become `max_batch_size`,
`max_input_len`, `max_seq_len` (input + output), `tensor_parallel_size` / `pipeline_parallel_size`, as
trtllm-build's flags do in the engine flow (`max_num_tokens` only when the point sets it); the KV cache, CUDA graphs,
overlap scheduler, chunked prefill, attention backend and iteration stats (on unless turned off: llm-perf reads
them from trtllm-serve) come from the point's `pytorch:` settings; a sweep's
`llm_api:` mapping passes any other option through. Everything is checked against the release's LLM API
(args.check_options) before a point runs, so a misspelled option fails the plan, not the server start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import args

# options the sweep matrix sets: `llm_api:` may not change them, or a point would not be what its id says
MATRIX = ("max_batch_size", "max_input_len", "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size")


@dataclass(frozen=True)
class PointOptions:
    """One point's settings that reach the LLM API (None: the release's default)."""

    max_batch_size: int
    max_input_len: int
    max_output_len: int
    tp: int = 1
    pp: int = 1
    ep: int | None = None
    max_num_tokens: int | None = None
    kv_cache_free_gpu_memory_fraction: float | None = None
    enable_block_reuse: bool | None = None
    kv_cache_dtype: str | None = None
    cuda_graph_batch_sizes: list[int] | None = None
    disable_overlap_scheduler: bool | None = None
    enable_chunked_prefill: bool | None = None
    attn_backend: str | None = None
    enable_iter_perf_stats: bool = True  # trtllm-serve's /metrics is empty without it (llm-perf reads it per level)
    llm_api: dict[str, Any] = field(default_factory=dict)


def _set(options: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        options[key] = value


def build(release: str, point: PointOptions) -> dict[str, Any]:
    """The options mapping (written as the `--extra_llm_api_options` YAML), checked against the release."""
    for name in ("max_batch_size", "max_input_len", "max_output_len", "tp", "pp"):
        value = getattr(point, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TrtsweepError(f"{name} must be an integer >= 1, got {value!r}")
    options: dict[str, Any] = {
        "max_batch_size": point.max_batch_size,
        "max_input_len": point.max_input_len,
        "max_seq_len": point.max_input_len + point.max_output_len,
        "tensor_parallel_size": point.tp,
        "pipeline_parallel_size": point.pp,
    }
    _set(options, "max_num_tokens", point.max_num_tokens)
    _set(options, "moe_expert_parallel_size", point.ep)
    kv: dict[str, Any] = {}
    _set(kv, "free_gpu_memory_fraction", point.kv_cache_free_gpu_memory_fraction)
    _set(kv, "enable_block_reuse", point.enable_block_reuse)
    _set(kv, "dtype", point.kv_cache_dtype)
    if kv:
        options["kv_cache_config"] = kv
    if point.cuda_graph_batch_sizes is not None:
        options["cuda_graph_config"] = {"batch_sizes": list(point.cuda_graph_batch_sizes)}
    _set(options, "disable_overlap_scheduler", point.disable_overlap_scheduler)
    _set(options, "enable_chunked_prefill", point.enable_chunked_prefill)
    _set(options, "attn_backend", point.attn_backend)
    options["enable_iter_perf_stats"] = point.enable_iter_perf_stats
    args.check_options(release, options, prefix="pytorch")
    clash = sorted(set(point.llm_api) & set(MATRIX))
    if clash:
        raise TrtsweepError(f"llm_api.{clash[0]}: set by the sweep matrix (max batch size, lengths, TP/PP)")
    args.check_options(release, point.llm_api)
    merged = dict(options)
    for key, value in point.llm_api.items():  # nested mappings (kv_cache_config, ...) merge field by field
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = {**merged[key], **value} if both else value
    return merged


def draft_field(release: str, decoding_type: str) -> str:
    """The draft directory's field: `speculative_model` where the release names it so (1.2), else
    `speculative_model_dir` (1.0, 1.1)."""
    fields = args.decoding_fields(release, decoding_type)
    return "speculative_model" if "speculative_model" in fields else "speculative_model_dir"


def with_draft(llm_api: dict[str, Any], release: str, draft_dir: str) -> dict[str, Any]:
    """A point's LLM API options with its draft model's directory on the host (the lane's part, once the draft is
    downloaded); unchanged without a speculative_config."""
    config = llm_api.get("speculative_config")
    if not isinstance(config, dict):
        return llm_api
    return {**llm_api, "speculative_config": {**config, draft_field(release, config["decoding_type"]): draft_dir}}


def to_yaml(options: dict[str, Any]) -> str:
    return yaml.safe_dump(options, sort_keys=True, default_flow_style=False)
