"""What each TensorRT-LLM release's build tools accept, grouped into ranges of releases whose flags are equal.

Three tools make an engine: ``convert_checkpoint.py`` (one per model family, under the examples directory),
``examples/quantization/quantize.py`` (ModelOpt/AMMO post-training quantization) and ``trtllm-build``
(``tensorrt_llm/commands/build.py`` plus the plugin flags of ``tensorrt_llm/plugin/plugin.py``). For each
tool a *table* maps every accepted flag to a `Flag`; every command trtsweep generates, and every
``extra_flags`` entry a user passes, is checked against the table of the configured version before
anything runs, so a flag the release does not know fails as one line instead of as an argparse error
half-way through a sweep.

Sources (NVIDIA/TensorRT-LLM; a tag is cited where the file was read at that tag's commit, the commit
where only a copy of the file from that era was available). *Verified* ranges were read flag by flag;
*inferred* ranges interpolate between verified neighbours with the changes listed in the release notes
(``docs/source/release-notes.md``) and are marked so in the comments.

Versions are compared by (major, minor): patch releases, ``.postN`` and ``rcN`` share their minor's table.
The engine flow exists from 0.8 (first release where the models build through ``trtllm-build``) to 1.2
(the last line that ships ``trtllm-build``; the TensorRT backend is removed after 1.3.0rc20).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trtsweep.errors import TrtsweepError

Version = tuple[int, int]
FIRST: Version = (0, 8)
LAST: Version = (1, 2)
FAMILIES = ("llama", "qwen")
TOOLS = ("trtllm-build", "convert_checkpoint.py", "quantize.py")


@dataclass(frozen=True)
class Flag:
    """One command-line option. ``takes_value``: it is followed by one argument (else it is a switch);
    ``choices``: the only arguments argparse accepts (None: any)."""

    takes_value: bool = True
    choices: tuple[str, ...] | None = None


SWITCH = Flag(takes_value=False)
VALUE = Flag()


def one_of(*choices: str) -> Flag:
    return Flag(True, tuple(choices))


ENABLE = one_of("enable", "disable")


@dataclass(frozen=True)
class Table:
    """The flags one tool accepts in the releases ``first`` .. ``last`` (inclusive), and where that was read."""

    first: Version
    last: Version
    flags: Mapping[str, Flag]
    source: str


def _with(base: Mapping[str, Flag], add: Mapping[str, Flag] | None = None, drop: Iterable[str] = ()) -> dict:
    out = {k: v for k, v in base.items() if k not in set(drop)}
    out.update(add or {})
    return out


def _values(*names: str) -> dict[str, Flag]:
    return dict.fromkeys(names, VALUE)


def _switches(*names: str) -> dict[str, Flag]:
    return dict.fromkeys(names, SWITCH)


def _plugins(dtype_plugins: Mapping[str, tuple[str, ...]], features: Iterable[str]) -> dict[str, Flag]:
    """Plugin flags as ``add_plugin_argument`` makes them: a dtype (or ``disable``) per plugin, enable/disable
    per feature, and ``--tokens_per_block`` (an int)."""
    flags = {f"--{name}": Flag(True, choices) for name, choices in dtype_plugins.items()}
    flags.update({f"--{name}": ENABLE for name in features})
    flags["--tokens_per_block"] = VALUE
    return flags


# fmt: off
# ---------------------------------------------------------------------------------------------- trtllm-build
DTYPES_08 = ("float16", "float32", "bfloat16", "disable")  # plugin_options, v0.8.0 .. 0.10 plugin.py
DTYPES_11 = ("auto", "float16", "float32", "bfloat16", "int32", "disable")  # DEFAULT_PLUGIN_DTYPE_OPTIONS, 0.11+
GEMM_11 = ("auto", "float16", "float32", "bfloat16", "int32", "fp8", "disable")
GEMM_17 = (*GEMM_11[:-1], "nvfp4", "disable")
FP8_ONLY = ("fp8", "disable")
LOG_LEVELS = ("internal_error", "error", "warning", "info", "verbose", "debug", "trace")
SPEC_MODES = ("draft_tokens_external", "lookahead_decoding", "medusa", "explicit_draft_tokens", "eagle")

# v0.8.0 tensorrt_llm/commands/build.py (commit 5955b8af, verified): --max_output_len, no --max_seq_len, no
# --tp_size/--pp_size (TP/PP always come from the checkpoint's mapping), --weight_only_precision,
# --strongly_typed, --builder_opt, --use_fused_mlp as a switch, a single --timing_cache.
_CORE_08 = {
    **_values("--checkpoint_dir", "--model_config", "--build_config", "--model_cls_file", "--model_cls_name",
              "--timing_cache", "--log_level", "--output_dir", "--workers", "--max_batch_size", "--max_input_len",
              "--max_output_len", "--max_beam_width", "--max_num_tokens", "--max_prompt_embedding_table_size",
              "--max_multimodal_len", "--builder_opt"),
    **_switches("--enable_debug_output", "--use_fused_mlp", "--gather_all_token_logits", "--gather_context_logits",
                "--gather_generation_logits", "--strongly_typed"),
    "--profiling_verbosity": one_of("layer_names_only", "detailed", "none"),
    "--logits_dtype": one_of("float16", "float32"),
    "--weight_only_precision": one_of("int8", "int4"),
}
# 0.8-era tensorrt_llm/plugin/plugin.py cli_plugin_args (a copy of the file from that release line; not the tag).
_PLUGINS_08 = _plugins(
    dict.fromkeys(("bert_attention_plugin", "gpt_attention_plugin", "gemm_plugin", "lookup_plugin", "lora_plugin"),
                  DTYPES_08),
    ("context_fmha", "context_fmha_fp32_acc", "paged_kv_cache", "remove_input_padding", "use_custom_all_reduce",
     "multi_block_mode", "enable_xqa", "attention_qk_half_accumulation", "use_paged_context_fmha",
     "use_context_fmha_for_generation"),
)
# 0.10-era tensorrt_llm/plugin/plugin.py (commit 035b99e0, verified copy): adds moe/mamba_conv1d/nccl plugins,
# use_fp8_context_fmha, multiple_profiles (0.10 release notes), paged_state, streamingllm; no "auto" yet.
_PLUGINS_10 = _plugins(
    dict.fromkeys(("bert_attention_plugin", "gpt_attention_plugin", "gemm_plugin", "lookup_plugin", "lora_plugin",
                   "moe_plugin", "mamba_conv1d_plugin", "nccl_plugin"), DTYPES_08),
    ("context_fmha", "context_fmha_fp32_acc", "paged_kv_cache", "remove_input_padding", "use_custom_all_reduce",
     "multi_block_mode", "enable_xqa", "attention_qk_half_accumulation", "use_paged_context_fmha",
     "use_fp8_context_fmha", "use_context_fmha_for_generation", "multiple_profiles", "paged_state", "streamingllm"),
)
# Inferred 0.9: the 0.10 plugin set without multiple_profiles; 0.9 release notes: --world_size became
# --auto_parallel, LoRA / draft-token options moved to trtllm-build; --tp_size/--pp_size exist until 0.11.
_CORE_09 = _with(_CORE_08, {
    **_values("--tp_size", "--pp_size", "--auto_parallel", "--gpus_per_node", "--cluster_key", "--lora_dir",
              "--lora_target_modules", "--max_lora_rank", "--max_draft_len"),
    "--lora_ckpt_source": one_of("hf", "nemo"),
})
_PLUGINS_09 = _with(_PLUGINS_10, drop=["--multiple_profiles"])
_CORE_10 = _with(_CORE_09, _switches("--visualize_network", "--dry_run"))  # 0.10 release notes
# 0.11-era plugin.py (verified copy, it warns that use_custom_all_reduce will be deprecated): "auto" and int32
# plugin dtypes, fp8 gemm, gemm_swiglu_plugin, reduce_fusion; attention_qk_half_accumulation and
# use_context_fmha_for_generation removed. build.py (0.11 release notes): --max_seq_len added next to the
# deprecated --max_output_len; --weight_only_precision and --strongly_typed removed.
_PLUGINS_11 = _plugins(
    {**dict.fromkeys(("bert_attention_plugin", "gpt_attention_plugin", "lookup_plugin", "lora_plugin", "moe_plugin",
                      "mamba_conv1d_plugin", "nccl_plugin"), DTYPES_11),
     "gemm_plugin": GEMM_11, "gemm_swiglu_plugin": FP8_ONLY},
    ("context_fmha", "context_fmha_fp32_acc", "paged_kv_cache", "remove_input_padding", "use_custom_all_reduce",
     "multi_block_mode", "enable_xqa", "use_paged_context_fmha", "use_fp8_context_fmha", "multiple_profiles",
     "paged_state", "streamingllm", "reduce_fusion"),
)
_CORE_11 = _with(_CORE_10, _values("--max_seq_len"), drop=["--weight_only_precision", "--strongly_typed"])
# Inferred 0.12 (release notes): --max_output_len and --tp_size/--pp_size removed (TP/PP come from the
# checkpoint), use_custom_all_reduce removed, multi_block_mode / context_fmha_fp32_acc moved to the runtime,
# --fast_build added.
_CORE_12 = _with(_CORE_11, _switches("--fast_build"), drop=["--max_output_len", "--tp_size", "--pp_size"])
_PLUGINS_12 = _with(_PLUGINS_11, drop=["--use_custom_all_reduce", "--multi_block_mode", "--context_fmha_fp32_acc"])
# v0.16.0 tensorrt_llm/commands/build.py (commit 42a7b092, verified): --kv_cache_type (continuous | paged |
# disabled) with --paged_kv_cache kept as a deprecated build.py option, timing caches split in two,
# --max_decoder_seq_len alias, --strip_plan, --weight_sparsity, --weight_streaming, --monitor_memory,
# speculative decoding, no --builder_opt, no --use_fused_mlp switch (a plugin feature from 0.13).
_CORE_16 = {
    **_values("--checkpoint_dir", "--model_config", "--build_config", "--model_cls_file", "--model_cls_name",
              "--output_dir", "--max_batch_size", "--max_input_len", "--max_seq_len", "--max_decoder_seq_len",
              "--max_beam_width", "--max_num_tokens", "--opt_num_tokens", "--max_encoder_input_len",
              "--max_prompt_embedding_table_size", "--max_multimodal_len", "--input_timing_cache",
              "--output_timing_cache", "--workers", "--log_level", "--lora_dir", "--lora_target_modules",
              "--max_lora_rank", "--max_draft_len", "--auto_parallel", "--gpus_per_node", "--cluster_key"),
    **_switches("--strip_plan", "--weight_sparsity", "--weight_streaming", "--fast_build", "--enable_debug_output",
                "--visualize_network", "--dry_run", "--monitor_memory", "--gather_context_logits",
                "--gather_generation_logits", "--gather_all_token_logits"),
    "--kv_cache_type": one_of("continuous", "paged", "disabled"),
    "--paged_kv_cache": ENABLE,
    "--profiling_verbosity": one_of("layer_names_only", "detailed", "none"),
    "--logits_dtype": one_of("float16", "float32"),
    "--lora_ckpt_source": one_of("hf", "nemo"),
    "--speculative_decoding_mode": one_of(*SPEC_MODES),
}
# Inferred 0.13 .. 0.15: the 0.16 options; 0.13 release notes: --kv_cache_type replaces
# `--paged_kv_cache enable`, use_fused_mlp becomes an (on by default) plugin feature; --builder_opt is
# removed in 0.14; --enable_xqa in 0.16.
_PLUGINS_13 = _with(_PLUGINS_12, {"--use_fused_mlp": ENABLE}, drop=["--paged_kv_cache"])
_PLUGINS_16 = _with(_PLUGINS_13, drop=["--enable_xqa"])
# 0.17+ plugin.py (a copy with dora/fp8-rowwise/low-latency gemm plugins and nvfp4 gemm; the 1.x pydantic
# PluginConfig exposes the same cli_plugin_args) and build.py (commit 008b2b8d: --visualize_network takes a
# directory, --log_level lists its choices).
_PLUGINS_17 = _plugins(
    {**dict.fromkeys(("bert_attention_plugin", "gpt_attention_plugin", "fp8_rowwise_gemm_plugin", "lora_plugin",
                      "moe_plugin", "mamba_conv1d_plugin", "nccl_plugin"), DTYPES_11),
     "gemm_plugin": GEMM_17, "gemm_swiglu_plugin": FP8_ONLY, "low_latency_gemm_plugin": FP8_ONLY,
     "low_latency_gemm_swiglu_plugin": FP8_ONLY, "gemm_allreduce_plugin": ("float16", "bfloat16", "disable")},
    ("dora_plugin", "context_fmha", "bert_context_fmha_fp32_acc", "remove_input_padding", "use_paged_context_fmha",
     "use_fp8_context_fmha", "fuse_fp4_quant", "multiple_profiles", "paged_state", "streamingllm",
     "norm_quant_fusion", "reduce_fusion", "user_buffer", "use_fused_mlp", "pp_reduce_scatter"),
)
_CORE_17 = _with(_CORE_16, {"--visualize_network": VALUE, "--log_level": one_of(*LOG_LEVELS)})

BUILD = (
    Table((0, 8), (0, 8), {**_CORE_08, **_PLUGINS_08}, "v0.8.0 tensorrt_llm/commands/build.py + plugin/plugin.py"),
    Table((0, 9), (0, 9), {**_CORE_09, **_PLUGINS_09}, "inferred: v0.8.0 build.py + 0.9 release notes"),
    Table((0, 10), (0, 10), {**_CORE_10, **_PLUGINS_10}, "0.10-era tensorrt_llm/plugin/plugin.py (035b99e0)"),
    Table((0, 11), (0, 11), {**_CORE_11, **_PLUGINS_11}, "0.11-era plugin.py + 0.11 release notes"),
    Table((0, 12), (0, 12), {**_CORE_12, **_PLUGINS_12}, "inferred: 0.12 release notes"),
    Table((0, 13), (0, 13), {**_CORE_16, "--builder_opt": VALUE, **_PLUGINS_13}, "inferred: 0.13 release notes"),
    Table((0, 14), (0, 15), {**_CORE_16, **_PLUGINS_13}, "inferred: v0.16.0 build.py + 0.14 release notes"),
    Table((0, 16), (0, 16), {**_CORE_16, **_PLUGINS_16}, "v0.16.0 tensorrt_llm/commands/build.py (42a7b092)"),
    Table((0, 17), LAST, {**_CORE_17, **_PLUGINS_17}, "tensorrt_llm/commands/build.py 008b2b8d + 0.17+ plugin.py"),
)

# ------------------------------------------------------------------------------------- convert_checkpoint.py
# v0.8.0 examples/llama/convert_checkpoint.py (commit 5955b8af, verified): no --calib_dataset (SmoothQuant
# and INT8 KV always calibrate on cnn_dailymail), FP8 through --enable_fp8 / --fp8_kv_cache.
_LLAMA_08 = {
    **_values("--model_dir", "--meta_ckpt_dir", "--tp_size", "--pp_size", "--vocab_size", "--n_positions",
              "--n_layer", "--n_head", "--n_kv_head", "--n_embd", "--inter_size", "--rms_norm_eps", "--smoothquant",
              "-sq", "--ammo_quant_ckpt_path", "--hidden_act", "--rotary_base", "--group_size", "--dataset-cache-dir",
              "--output_dir", "--workers", "--moe_num_experts", "--moe_top_k", "--moe_tp_mode", "--moe_renorm_mode",
              "--hf_lora_dir", "--lora_target_modules", "--max_lora_rank"),
    **_switches("--use_weight_only", "--disable_weight_only_quant_plugin", "--per_channel", "--per_token",
                "--int8_kv_cache", "--per_group", "--enable_fp8", "--fp8_kv_cache", "--load_by_shard",
                "--load_model_on_cpu", "--use_parallel_embedding", "--use_embedding_sharing", "--use_prompt_tuning",
                "--enable_pos_shift", "--dense_context_fmha"),
    "--dtype": one_of("float32", "bfloat16", "float16"),
    "--weight_only_precision": one_of("int8", "int4", "int4_gptq"),
    "--storage-type": one_of("fp32", "fp16"),
    "-t": one_of("fp32", "fp16"),
    "--embedding_sharding_dim": one_of("0", "1"),
}
# v0.11.0 examples/llama/convert_checkpoint.py (commit 05316d33, verified); used for 0.9 .. 0.19 (inferred
# outside 0.11; the 0.15 release notes make --dtype default to "auto").
_LLAMA_11 = {
    **_values("--model_dir", "--meta_ckpt_dir", "--tp_size", "--pp_size", "--moe_tp_size", "--moe_ep_size",
              "--vocab_size", "--n_positions", "--n_layer", "--n_head", "--n_kv_head", "--n_embd", "--inter_size",
              "--rms_norm_eps", "--calib_dataset", "--smoothquant", "-sq", "--quant_ckpt_path", "--hidden_act",
              "--rotary_base", "--group_size", "--output_dir", "--workers", "--moe_num_experts", "--moe_top_k",
              "--moe_renorm_mode"),
    **_switches("--use_weight_only", "--disable_weight_only_quant_plugin", "--per_channel", "--per_token",
                "--int8_kv_cache", "--per_group", "--load_by_shard", "--load_model_on_cpu", "--use_parallel_embedding",
                "--use_embedding_sharing", "--save_config_only"),
    "--dtype": one_of("float32", "bfloat16", "float16"),
    "--weight_only_precision": one_of("int8", "int4", "int4_gptq"),
    "--embedding_sharding_dim": one_of("0", "1"),
}
_DTYPE_AUTO = one_of("auto", "float16", "bfloat16", "float32")
# examples/models/core/llama/convert_checkpoint.py (commit 368f8f2a, 1.2-era: it emits the engine-flow
# deprecation warning; verified): --calib_size / --calib_max_seq_length, --cp_size, FP8 / NVFP4 / QServe.
_LLAMA_20 = {
    **_with(_LLAMA_11, {
        **_values("--cp_size", "--calib_size", "--calib_max_seq_length", "--multiple_of", "--ffn_dim_multiplier",
                  "--log_level"),
        **_switches("--use_qserve", "--fp8_kv_cache", "--use_fp8", "--use_nvfp4", "--use_fp8_rowwise",
                    "--use_meta_fp8_rowwise_recipe", "--remove_duplicated_kv_heads"),
        "--dtype": _DTYPE_AUTO,
        "--weight_only_precision": one_of("int8", "int4", "int8_gptq", "int4_gptq", "int4_awq"),
    }, drop=["--use_embedding_sharing"]),
}
# v0.11.0 examples/qwen/convert_checkpoint.py (commit 05316d33, verified); used for 0.9 .. 0.19. Qwen joined
# the checkpoint flow in 0.9 (release notes); v0.8.0 still builds Qwen with examples/qwen/build.py.
_QWEN_11 = {
    **_values("--model_dir", "--tp_size", "--pp_size", "--calib_dataset", "--smoothquant", "-sq", "--group_size",
              "--dataset-cache-dir", "--output_dir", "--workers", "--moe_tp_size", "--moe_ep_size"),
    **_switches("--use_weight_only", "--disable_weight_only_quant_plugin", "--per_channel", "--per_token",
                "--int8_kv_cache", "--per_group", "--load_model_on_cpu", "--use_parallel_embedding",
                "--use_embedding_sharing"),
    "--dtype": one_of("float32", "bfloat16", "float16"),
    "--weight_only_precision": one_of("int8", "int4", "int4_gptq"),
    "--embedding_sharding_dim": one_of("0", "1"),
}
# examples/models/core/qwen/convert_checkpoint.py (commit 0df9aaf3, 0.20+ layout; verified).
_QWEN_20 = _with(
    _QWEN_11,
    {"--cp_size": VALUE, "--dtype": _DTYPE_AUTO,
     "--weight_only_precision": one_of("int8", "int4", "int4_gptq", "int8_gptq")},
    drop=["--dataset-cache-dir", "--use_embedding_sharing"],
)

CONVERT = {
    "llama": (
        Table((0, 8), (0, 8), _LLAMA_08, "v0.8.0 examples/llama/convert_checkpoint.py"),
        Table((0, 9), (0, 14), _LLAMA_11, "v0.11.0 examples/llama/convert_checkpoint.py"),
        Table((0, 15), (0, 19), {**_LLAMA_11, "--dtype": _DTYPE_AUTO}, "v0.11.0 llama + 0.15 release notes"),
        Table((0, 20), LAST, _LLAMA_20, "examples/models/core/llama/convert_checkpoint.py (368f8f2a)"),
    ),
    "qwen": (
        Table((0, 9), (0, 14), _QWEN_11, "v0.11.0 examples/qwen/convert_checkpoint.py"),
        Table((0, 15), (0, 19), {**_QWEN_11, "--dtype": _DTYPE_AUTO}, "v0.11.0 qwen + 0.15 release notes"),
        Table((0, 20), LAST, _QWEN_20, "examples/models/core/qwen/convert_checkpoint.py (0df9aaf3)"),
    ),
}

# ------------------------------------------------------------------------------------------------ quantize.py
# v0.8.0 examples/quantization/quantize.py (commit 5955b8af, verified): AMMO, calibration on cnn_dailymail
# only (no --calib_dataset), --dtype free text.
_QUANT_08 = {
    **_values("--model_dir", "--device", "--dtype", "--batch_size", "--calib_size", "--output_dir", "--tp_size",
              "--pp_size", "--awq_block_size"),
    "--qformat": one_of("fp8", "int8_sq", "int4_awq", "w4a8_awq", "int8_wo", "int4_wo", "full_prec"),
    "--kv_cache_dtype": one_of("int8", "fp8"),
}
# examples/quantization/quantize.py (commit 059c97c1, the 0.19/0.20 line with nvfp4 and --export_format;
# verified); used for 0.9 .. 1.2 (inferred outside that line: 0.9 moved the logic into
# tensorrt_llm.quantization and added --calib_dataset with local directories).
_QUANT_19 = {
    **_values("--model_dir", "--nemo_ckpt_path", "--calib_dataset", "--calib_tp_size", "--calib_pp_size", "--seed",
              "--tokenizer_max_seq_length", "--batch_size", "--calib_size", "--calib_max_seq_length", "--output_dir",
              "--tp_size", "--pp_size", "--cp_size", "--awq_block_size", "--num_medusa_heads", "--num_medusa_layers",
              "--max_draft_len", "--medusa_hidden_act", "--medusa_model_dir", "--autoq_format", "--auto_quantize_bits"),
    **_switches("--quantize_lm_head", "--quant_medusa_head"),
    "--decoder_type": one_of("gptnext", "llama"),
    "--device": one_of("cuda", "cpu"),
    "--device_map": one_of("auto", "sequential", "cpu", "gpu"),
    "--dtype": _DTYPE_AUTO,
    "--qformat": one_of("nvfp4", "fp8", "int8_sq", "int4_awq", "w4a8_awq", "int8_wo", "int4_wo", "full_prec"),
    "--kv_cache_dtype": one_of("int8", "fp8"),
    "--export_format": one_of("tensorrt_llm", "hf"),
}
QUANTIZE = (
    Table((0, 8), (0, 8), _QUANT_08, "v0.8.0 examples/quantization/quantize.py"),
    Table((0, 9), LAST, _QUANT_19, "examples/quantization/quantize.py (059c97c1)"),
)

# fmt: on

VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:(?:\.post|rc|\.dev|a|b)\d*)*$")


def parse(version: str) -> Version:
    """'0.11.0', '0.17.0.post1', '1.2.0rc7' -> (major, minor); TrtsweepError outside the engine flow's range."""
    match = VERSION_RE.match(str(version).strip())
    if not match:
        raise TrtsweepError(f"trtllm_version {version!r}: expected a TensorRT-LLM release such as 0.11.0 or 1.2.0rc7")
    parsed = (int(match.group(1)), int(match.group(2)))
    if not FIRST <= parsed <= LAST:
        raise TrtsweepError(
            f"trtllm_version {version}: the engine flow (convert_checkpoint.py + trtllm-build) is supported for "
            f"{FIRST[0]}.{FIRST[1]} .. {LAST[0]}.{LAST[1]}"
        )
    return parsed


def _pick(tables: Iterable[Table], version: Version, what: str) -> Table:
    for table in tables:
        if table.first <= version <= table.last:
            return table
    raise TrtsweepError(f"{what} does not exist in TensorRT-LLM {version[0]}.{version[1]}")


def build_table(version: Version) -> Table:
    return _pick(BUILD, version, "trtllm-build")


def convert_table(version: Version, family: str) -> Table:
    if family not in CONVERT:
        raise TrtsweepError(f"model family {family!r}: expected one of {FAMILIES}")
    return _pick(CONVERT[family], version, f"examples/{family}/convert_checkpoint.py")


def quantize_table(version: Version) -> Table:
    return _pick(QUANTIZE, version, "examples/quantization/quantize.py")


def convert_script(version: Version, family: str) -> str:
    """The family's convert_checkpoint.py relative to the TensorRT-LLM checkout: ``examples/<family>/``
    up to 0.19, ``examples/models/core/<family>/`` from 0.20 (0.20 release notes, README paths)."""
    convert_table(version, family)
    base = "examples/models/core" if version >= (0, 20) else "examples"
    return f"{base}/{family}/convert_checkpoint.py"


def quantize_script(version: Version) -> str:
    """quantize.py relative to the TensorRT-LLM checkout (the same path in every release)."""
    quantize_table(version)
    return "examples/quantization/quantize.py"
