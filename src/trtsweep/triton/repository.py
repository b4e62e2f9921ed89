"""Generate and check a Triton model repository of the `inflight_batcher_llm` layout.

`render()` turns one dict of repository parameters into files (`<model>/config.pbtxt`, `<model>/1/model.py`)
from the project's Jinja2 templates under `trtsweep/triton/templates/`. `write()` writes only files whose
content changed and reports a unified diff per file. `check()` refuses a repository in which any
placeholder is left, any `config.pbtxt` does not parse with Triton's ModelConfig protobuf schema, or an
ensemble step reads a tensor that nothing produces.

Two backends serve the `tensorrt_llm` model behind the same preprocessing / postprocessing / ensemble
(and optional `tensorrt_llm_bls`) models:

- `hf`: transformers in Triton's python backend (`src/trtsweep/triton/templates/tensorrt_llm_hf/`), for CPU runs;
- `tensorrtllm`: the TensorRT-LLM C++ backend serving a `trtllm-build` engine; its config follows the
  TensorRT-LLM version given as `trtllm_version` (facts in `trtsweep.triton.versions`).

Parameters (None = not set: the key is left out and the backend uses its own default):

- backend: `hf` or `tensorrtllm`.
- engine_dir: hf: the HF model directory; tensorrtllm: the `trtllm-build` output directory. Required.
- tokenizer_dir: tokenizer of preprocessing / postprocessing (and `tokenizer_dir` of the tensorrt_llm model
  where the version has that key). Required.
- triton_max_batch_size: max_batch_size of every model; must not exceed the engine's build max_batch_size.
- decoupled_mode: decoupled transaction policy of tensorrt_llm and tensorrt_llm_bls (needed to stream).
- streaming: clients will send `stream: true`; needs decoupled_mode.
- max_queue_delay_microseconds, max_queue_size: dynamic batching of tensorrt_llm (max_queue_size: 0.12+,
  0 when not set, as tools/fill_template.py does).
- exclude_input_in_output: return only generated tokens.
- add_special_tokens / skip_special_tokens: preprocessing / postprocessing tokenizer options.
- tokenizer_type: preprocessing / postprocessing tokenizer class (auto, llama, t5); TensorRT-LLM 0.8 only.
- preprocessing_instance_count, postprocessing_instance_count, bls_instance_count: python model instances.
- bls: also generate `tensorrt_llm_bls` (python BLS model: preprocessing -> tensorrt_llm -> postprocessing).
- accumulate_tokens: BLS streaming decodes all tokens so far each step and sends the new text (beam width 1).
- hf_dtype, hf_device, hf_torch_threads: hf only (weights dtype, device, torch threads; 0 = torch default).
- trtllm_version: tensorrtllm: the TensorRT-LLM version of the serving container (e.g. 0.14.0). Required.
  The repository presents that version's request interface (trtsweep.triton.interface: the upstream ensemble's
  and BLS model's inputs, outputs and wiring); hf: the version whose interface it presents (default
  HF_INTERFACE_VERSION), with the tensorrt_llm model's tensors of that version.
- batching_strategy: gpt_model_type (inflight_fused_batching, inflight_batching, V1).
- batch_scheduler_policy: max_utilization or guaranteed_no_evict.
- max_beam_width, decoding_mode, normalize_log_probs, enable_trt_overlap: executor options.
- enable_kv_cache_reuse, kv_cache_free_gpu_mem_fraction (0, 1], max_tokens_in_paged_kv_cache,
  max_attention_window_size (int or list of ints, one per layer group), enable_chunked_context: KV cache.
- logits_datatype, encoder_input_features_data_type, prompt_embedding_table_data_type: data types of the
  tensorrt_llm tensors that take them in the version (TYPE_FP32, TYPE_FP16 or TYPE_BF16).
- extra_parameters: further `parameters` of the tensorrtllm model, written as given (bools as true/false); each
  key must be one of the version's (`versions.TENSORRT_LLM_PARAMETER_KEYS`, `TENSORRT_LLM_CONSTANTS`); hf: of any
  version's (ignored there). An unknown parameter or key is refused with the closest known name (`check_keys`).

Parameters of the other backend are accepted and ignored, so one sweep can cover both backends.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError
from trtsweep.triton import interface, versions
from trtsweep.triton.versions import VersionFacts

BACKENDS = ("hf", "tensorrtllm")
HF_DTYPES = ("float32", "bfloat16", "float16", "int8")
TENSOR_DTYPES = ("TYPE_FP32", "TYPE_FP16", "TYPE_BF16")

DEFAULTS: dict[str, Any] = {
    "backend": "hf",
    "triton_max_batch_size": 8,
    "decoupled_mode": True,
    "streaming": False,
    "max_queue_delay_microseconds": 0,
    "max_queue_size": None,
    "exclude_input_in_output": True,
    "add_special_tokens": False,
    "skip_special_tokens": True,
    "tokenizer_type": None,
    "preprocessing_instance_count": 1,
    "postprocessing_instance_count": 1,
    "bls": False,
    "bls_instance_count": 1,
    "accumulate_tokens": False,
    "hf_dtype": "float32",
    "hf_device": "auto",
    "hf_torch_threads": 0,
    "trtllm_version": None,
    "batching_strategy": "inflight_fused_batching",
    "batch_scheduler_policy": None,
    "max_beam_width": None,
    "decoding_mode": None,
    "normalize_log_probs": None,
    "enable_trt_overlap": None,
    "enable_kv_cache_reuse": None,
    "kv_cache_free_gpu_mem_fraction": None,
    "max_tokens_in_paged_kv_cache": None,
    "max_attention_window_size": None,
    "enable_chunked_context": None,
    "logits_datatype": "TYPE_FP32",
    "encoder_input_features_data_type": "TYPE_FP16",
    "prompt_embedding_table_data_type": "TYPE_FP16",
    "extra_parameters": {},
}
REQUIRED = ("engine_dir", "tokenizer_dir")
# A left-over placeholder: `${name}` of a template parameter (below), or Jinja2 markup. Any other `${...}` is part
# of a value (a path such as `${HOME}/models`) and written as given.
PLACEHOLDER = re.compile(r"\$\{\s*([^}]*?)\s*\}|\{\{|\{%")
# The `${name}` placeholders tools/fill_template.py fills in the upstream inflight_batcher_llm templates
# (TB@v0.8.0 .. TB@v0.19.0 and TB@c2e65b8 all_models/inflight_batcher_llm/*/config.pbtxt); with trtsweep's own
# parameter names and the tensorrt_llm parameter keys (TEMPLATE_PARAMETERS) these are the names a placeholder has.
UPSTREAM_PLACEHOLDERS = frozenset({
    "accumulate_tokens", "add_special_tokens", "batch_scheduler_policy", "batching_strategy", "bls_instance_count",
    "cancellation_check_period_ms", "cross_kv_cache_fraction", "cuda_graph_cache_size", "cuda_graph_mode",
    "decoding_mode", "decoupled_mode", "eagle_choices", "enable_chunked_context", "enable_context_fmha_fp32_acc",
    "enable_kv_cache_reuse", "enable_trt_overlap", "encoder_engine_dir", "encoder_input_features_data_type",
    "engine_dir", "exclude_input_in_output", "gpu_device_ids", "gpu_weights_percent", "guided_decoding_backend",
    "iter_stats_max_iterations", "kv_cache_free_gpu_mem_fraction", "kv_cache_host_memory_bytes",
    "kv_cache_onboard_blocks", "logits_datatype", "lookahead_ngram_size", "lookahead_verification_set_size",
    "lookahead_window_size", "lora_cache_gpu_memory_fraction", "lora_cache_host_memory_bytes",
    "lora_cache_max_adapter_size", "lora_cache_optimal_adapter_size", "lora_prefetch_dir",
    "max_attention_window_size", "max_beam_width", "max_num_images", "max_queue_delay_microseconds", "max_queue_size",
    "max_tokens_in_paged_kv_cache", "medusa_choices", "multi_block_mode", "multimodal_encoders_name",
    "multimodal_model_path", "normalize_log_probs", "num_nodes", "participant_ids", "postprocessing_instance_count",
    "preprocessing_instance_count", "request_stats_max_iterations", "sink_token_length", "skip_special_tokens",
    "speculative_decoding_fast_logits", "stats_check_period_ms", "tensorrt_llm_draft_model_name",
    "tensorrt_llm_model_name", "tokenizer_dir", "tokenizer_type", "triton_backend", "triton_max_batch_size",
    "visual_model_path", "xgrammar_tokenizer_info_path",
})  # fmt: skip

# trtsweep parameter -> `parameters` key of the tensorrtllm model (versions.TENSORRT_LLM_PARAMETER_KEYS).
TENSORRT_LLM_PARAMETERS: dict[str, str] = {
    "engine_dir": "gpt_model_path",
    "batching_strategy": "gpt_model_type",
    "tokenizer_dir": "tokenizer_dir",
    "exclude_input_in_output": "exclude_input_in_output",
    "batch_scheduler_policy": "batch_scheduler_policy",
    "max_beam_width": "max_beam_width",
    "decoding_mode": "decoding_mode",
    "normalize_log_probs": "normalize_log_probs",
    "enable_trt_overlap": "enable_trt_overlap",
    "enable_kv_cache_reuse": "enable_kv_cache_reuse",
    "kv_cache_free_gpu_mem_fraction": "kv_cache_free_gpu_mem_fraction",
    "max_tokens_in_paged_kv_cache": "max_tokens_in_paged_kv_cache",
    "max_attention_window_size": "max_attention_window_size",
    "enable_chunked_context": "enable_chunked_context",
}
TEMPLATE_PARAMETERS = frozenset(
    {*DEFAULTS, *REQUIRED, *TENSORRT_LLM_PARAMETERS.values(), *versions.TENSORRT_LLM_PARAMETER_KEYS}
    | UPSTREAM_PLACEHOLDERS
)

# The TensorRT-LLM version whose request interface an hf repository presents when trtllm_version is not set:
# the last tensorrtllm_backend release (min_length / random_seed, as trtsweep's hf repositories always had).
HF_INTERFACE_VERSION = "0.19"

# model name -> template directory, per backend; tensorrt_llm_bls is added when `bls` is set
MODELS = {
    "hf": {
        "preprocessing": "preprocessing",
        "tensorrt_llm": "tensorrt_llm_hf",
        "postprocessing": "postprocessing",
        "ensemble": "ensemble",
    },
    "tensorrtllm": {
        "preprocessing": "preprocessing",
        "tensorrt_llm": "tensorrt_llm",
        "postprocessing": "postprocessing",
        "ensemble": "ensemble",
    },
}
BLS_MODEL = ("tensorrt_llm_bls", "tensorrt_llm_bls")


def _pbtxt_string(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


# -- parameter validation ------------------------------------------------------------------------------------


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _fail(key: str, expected: str, value: object) -> TrtsweepError:
    return TrtsweepError(f"{key} must be {expected}, got {value!r}")


def _check_int(p: dict[str, Any], key: str, minimum: int) -> None:
    if p[key] is not None and not _is_int(p[key], minimum):
        raise _fail(key, f"an integer >= {minimum}", p[key])


def _check_bool(p: dict[str, Any], key: str) -> None:
    if p[key] is not None and not isinstance(p[key], bool):
        raise _fail(key, "true or false", p[key])


def _check_choice(p: dict[str, Any], key: str, choices: tuple[str, ...]) -> None:
    if p[key] is not None and p[key] not in choices:
        raise _fail(key, f"one of {', '.join(choices)}", p[key])


def _check_window(value: object) -> None:
    values = value if isinstance(value, list) else [value]
    if value is not None and (not values or not all(_is_int(v, 1) for v in values)):
        raise _fail("max_attention_window_size", "an integer >= 1 or a list of them", value)


def _check_fraction(value: object) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if value is not None and not (number and 0 < value <= 1):
        raise _fail("kv_cache_free_gpu_mem_fraction", "a number in (0, 1]", value)


def _check_extra(extra: object) -> None:
    if not isinstance(extra, dict):
        raise _fail("extra_parameters", "a mapping of parameter key to value", extra)
    for key, value in extra.items():  # keys: check_keys
        if not isinstance(value, (str, int, float, bool)):
            raise TrtsweepError(f"extra_parameters: {key!r} must be a string, number or boolean, got {value!r}")


def check_text(p: Mapping[str, Any]) -> None:
    """Paths and other strings are one line of printable text: a control character (a newline, a tab, ...) in
    engine_dir, tokenizer_dir or an extra_parameters path would be written into config.pbtxt as it is."""
    strings = [(k, v) for k, v in p.items() if isinstance(v, str)]
    extra = p.get("extra_parameters")
    if isinstance(extra, dict):
        strings += [(f"extra_parameters.{k}", v) for k, v in extra.items() if isinstance(v, str)]
    for field, value in strings:
        bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
        if bad is not None:
            raise TrtsweepError(f"{field}: {value!r} contains the control character {bad!r}; give it on one line")


def _check_types(p: dict[str, Any]) -> None:
    if p["backend"] not in BACKENDS:
        raise TrtsweepError(f"backend {p['backend']!r} is not supported; expected one of {BACKENDS}")
    if p["hf_dtype"] not in HF_DTYPES:
        raise TrtsweepError(f"hf_dtype {p['hf_dtype']!r} is not one of {HF_DTYPES}")
    for key in ("triton_max_batch_size", "preprocessing_instance_count", "postprocessing_instance_count"):
        _check_int(p, key, 1)
    for key in ("bls_instance_count", "max_beam_width", "max_tokens_in_paged_kv_cache"):
        _check_int(p, key, 1)
    for key in ("max_queue_delay_microseconds", "max_queue_size", "hf_torch_threads"):
        _check_int(p, key, 0)
    for key in ("decoupled_mode", "streaming", "exclude_input_in_output", "add_special_tokens", "bls"):
        _check_bool(p, key)
    for key in ("skip_special_tokens", "accumulate_tokens", "normalize_log_probs", "enable_trt_overlap"):
        _check_bool(p, key)
    for key in ("enable_kv_cache_reuse", "enable_chunked_context"):
        _check_bool(p, key)
    _check_choice(p, "batching_strategy", versions.BATCHING_STRATEGIES)
    _check_choice(p, "batch_scheduler_policy", versions.BATCH_SCHEDULER_POLICIES)
    _check_choice(p, "tokenizer_type", versions.TOKENIZER_TYPES)
    for key in ("logits_datatype", "encoder_input_features_data_type", "prompt_embedding_table_data_type"):
        _check_choice(p, key, TENSOR_DTYPES)
    _check_window(p["max_attention_window_size"])
    _check_fraction(p["kv_cache_free_gpu_mem_fraction"])
    _check_extra(p["extra_parameters"])


# -- cross-field rules -----------------------------------------------------------------------------------


def _check_streaming(p: dict[str, Any]) -> None:
    if p["streaming"] and not p["decoupled_mode"]:
        raise TrtsweepError("streaming: true needs decoupled_mode: true (the backends stream only when decoupled)")


def _check_bls(p: dict[str, Any]) -> None:
    if p["accumulate_tokens"] and not p["bls"]:
        raise TrtsweepError("accumulate_tokens is a tensorrt_llm_bls option; set bls: true")
    if p["accumulate_tokens"] and (p["max_beam_width"] or 1) > 1:
        raise TrtsweepError("accumulate_tokens works with beam width 1 only; max_beam_width is > 1")


def _check_version_keys(p: dict[str, Any], f: VersionFacts) -> None:
    # options only (default None): engine_dir, batching_strategy and exclude_input_in_output exist in every
    # version; tokenizer_dir is needed by preprocessing / postprocessing whether or not tensorrt_llm has it
    for name, key in TENSORRT_LLM_PARAMETERS.items():
        optional = name in DEFAULTS and DEFAULTS[name] is None
        if optional and p[name] is not None and key not in f.parameter_keys:
            raise TrtsweepError(f"{name} is not a tensorrt_llm parameter of TensorRT-LLM {f.version} ({f.source})")
    if p["max_queue_size"] is not None and not f.max_queue_size:
        raise TrtsweepError(f"max_queue_size is not in the tensorrt_llm config of TensorRT-LLM {f.version} (0.12+)")
    if p["tokenizer_type"] is not None and not f.tokenizer_type:
        raise TrtsweepError(f"tokenizer_type is a parameter of TensorRT-LLM 0.8 only, not {f.version}")
    if p["decoding_mode"] is not None and p["decoding_mode"] not in f.decoding_modes:
        expected = ", ".join(f.decoding_modes)
        raise TrtsweepError(f"decoding_mode {p['decoding_mode']!r}: TensorRT-LLM {f.version} accepts {expected}")


def _check_beams(p: dict[str, Any], f: VersionFacts) -> None:
    beams, mode = p["max_beam_width"] or 1, p["decoding_mode"]
    if beams > 1 and mode is not None and mode != "beam_search":
        raise TrtsweepError(f"decoding_mode {mode!r} cannot serve max_beam_width {beams}; use beam_search or unset")
    if beams == 1 and mode == "beam_search":
        raise TrtsweepError("decoding_mode beam_search needs max_beam_width > 1")
    if beams > 1 and p["streaming"] and not f.streaming_beam_search:
        raise TrtsweepError(f"max_beam_width > 1 with streaming needs TensorRT-LLM 0.13+, not {f.version}")


def _check_batching(p: dict[str, Any], f: VersionFacts) -> None:
    if p["batching_strategy"] in ("V1", "v1"):
        for key in ("enable_chunked_context", "enable_kv_cache_reuse"):
            if p[key]:
                raise TrtsweepError(f"{key} needs in-flight batching; batching_strategy is V1")
        if p["batch_scheduler_policy"] == "max_utilization":
            raise TrtsweepError(
                "batch_scheduler_policy max_utilization needs in-flight batching; batching_strategy is V1"
            )
    fallback = (
        p["decoupled_mode"] and p["batch_scheduler_policy"] == "max_utilization" and not p["enable_chunked_context"]
    )
    if fallback and f.scheduler_policy_fallback:
        raise TrtsweepError(
            f"batch_scheduler_policy max_utilization with decoupled_mode needs enable_chunked_context: true in "
            f"TensorRT-LLM {f.version} (it falls back to guaranteed_no_evict)"
        )


def _engine_build(engine_dir: str) -> dict[str, Any] | None:
    """`<engine_dir>/config.json` as {version, max_batch_size, max_beam_width}; None when there is none."""
    path = Path(engine_dir) / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrtsweepError(f"engine_dir: cannot read {path}: {exc}") from exc
    # trtllm-build (0.8+): {"version", "pretrained_config", "build_config"}; legacy build.py: "builder_config"
    build = (config.get("build_config") or config.get("builder_config")) if isinstance(config, dict) else None
    if not isinstance(build, dict) or not _is_int(build.get("max_batch_size"), 1):
        raise TrtsweepError(f"engine_dir: {path} has no build_config.max_batch_size; is it a trtllm-build engine?")
    return {
        "version": config.get("version"),
        "max_batch_size": build["max_batch_size"],
        "max_beam_width": build.get("max_beam_width", 1),
    }


def _check_engine(p: dict[str, Any], f: VersionFacts) -> None:
    build = _engine_build(p["engine_dir"])
    if build is None:
        return
    if p["triton_max_batch_size"] > build["max_batch_size"]:
        raise TrtsweepError(
            f"triton_max_batch_size {p['triton_max_batch_size']} exceeds the engine's max_batch_size "
            f"{build['max_batch_size']} ({p['engine_dir']}/config.json)"
        )
    if (p["max_beam_width"] or 1) > build["max_beam_width"]:
        raise TrtsweepError(
            f"max_beam_width {p['max_beam_width']} exceeds the engine's max_beam_width {build['max_beam_width']}"
        )
    if build["version"] and versions.major_minor(str(build["version"])) != f.version:
        raise TrtsweepError(
            f"trtllm_version {p['trtllm_version']!r} does not match the engine, built by TensorRT-LLM "
            f"{build['version']} ({p['engine_dir']}/config.json)"
        )


def _check_tensorrtllm(p: dict[str, Any]) -> None:
    if not p["trtllm_version"]:
        raise TrtsweepError("trtllm_version is required for backend tensorrtllm (e.g. 0.14.0)")
    f = versions.facts(p["trtllm_version"])
    _check_version_keys(p, f)
    _check_beams(p, f)
    _check_batching(p, f)
    _check_engine(p, f)


def _closest(name: str, known: set[str]) -> str | None:
    match = difflib.get_close_matches(name, sorted(known), n=1)
    return match[0] if match else None


def _extra_keys(backend: str, trtllm_version: str | None) -> tuple[set[str], str]:
    """The keys extra_parameters may set (the version's tensorrt_llm `parameters` and fixed values), and where
    they come from; hf (whose config has no such parameters) and an unset version: any version's."""
    if backend == "tensorrtllm" and trtllm_version:
        f = versions.facts(trtllm_version)
        return set(f.parameter_keys) | set(f.constants), f"TensorRT-LLM {f.version} ({f.source})"
    every = set(versions.TENSORRT_LLM_PARAMETER_KEYS) | {key for key, _, _ in versions.TENSORRT_LLM_CONSTANTS}
    return every, "any TensorRT-LLM version in trtsweep.triton.versions"


def check_keys(params: Mapping[str, Any], backend: str | None = None, trtllm_version: str | None = None) -> None:
    """Refuse a parameter trtsweep does not know and an extra_parameters key that is no `parameters` key of the
    tensorrt_llm model of the TensorRT-LLM version (backend hf: of any version), in one line with the closest
    known name: a misspelled key would otherwise be written into config.pbtxt, or dropped, without a word.
    `backend` / `trtllm_version` apply where `params` does not set them (the sweep's plan)."""
    known = set(DEFAULTS) | set(REQUIRED)
    unknown = sorted(str(name) for name in set(params) - known)
    if unknown:
        guesses = {name: _closest(name, known) for name in unknown}
        named = ", ".join(f"{name} (did you mean {guess!r}?)" if guess else name for name, guess in guesses.items())
        rest = "" if all(guesses.values()) else f"; known: {', '.join(sorted(known))}"
        raise TrtsweepError(f"unknown triton repository parameter(s): {named}{rest}")
    extra = params.get("extra_parameters")
    if not isinstance(extra, dict):
        return  # None: not set; any other type: _check_extra says what it must be
    backend = params.get("backend") or backend or DEFAULTS["backend"]
    allowed, where = _extra_keys(str(backend), params.get("trtllm_version") or trtllm_version)
    for key in extra:
        if key in TENSORRT_LLM_PARAMETERS.values():
            owner = next(k for k, v in TENSORRT_LLM_PARAMETERS.items() if v == key)
            raise TrtsweepError(f"extra_parameters: key {key!r} is set by the parameter {owner!r}; use that")
        if key in allowed:
            continue
        spans = versions.TENSORRT_LLM_PARAMETER_KEYS.get(str(key), ())
        elsewhere = [version for version in versions.VERSIONS if versions.covered(spans, version)]
        guess = _closest(str(key), allowed)
        hint = (
            f" (it is one in TensorRT-LLM {', '.join(elsewhere)})" if elsewhere
            else f"; did you mean {guess!r}?" if guess
            else f"; known: {', '.join(sorted(allowed))}"
        )  # fmt: skip
        raise TrtsweepError(f"extra_parameters: {key!r} is not a tensorrt_llm parameter of {where}{hint}")


def resolve(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults + user parameters, validated; raises TrtsweepError naming the bad field."""
    check_keys(params)
    check_text(params)
    resolved = {**DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    for key in REQUIRED:
        if not resolved.get(key):
            raise TrtsweepError(f"triton repository parameter {key!r} is required")
    _check_types(resolved)
    _check_streaming(resolved)
    _check_bls(resolved)
    if resolved["backend"] == "tensorrtllm":
        _check_tensorrtllm(resolved)
    return resolved


# -- template context ------------------------------------------------------------------------------------


def _param_text(value: object) -> str:
    """A parameter value as the backend parses it: bools true/false, lists comma-separated."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _tensor(t: versions.Tensor, p: dict[str, Any]) -> dict[str, Any]:
    data_type = t.data_type if t.data_type.startswith("TYPE_") else p[t.data_type]
    return {
        "name": t.name,
        "data_type": data_type,
        "dims": list(t.dims),
        "optional": t.optional,
        "reshape": None if t.reshape is None else list(t.reshape),
        "ragged": t.ragged,
    }


def _tensorrt_llm_parameters(p: dict[str, Any], f: VersionFacts) -> dict[str, str]:
    out = dict(f.constants)
    for name, key in TENSORRT_LLM_PARAMETERS.items():
        if key in f.parameter_keys and p[name] is not None:
            out[key] = _param_text(p[name])
    for key in f.required_keys:
        out.setdefault(key, "")
    out.update({key: _param_text(value) for key, value in p["extra_parameters"].items()})
    return out


def _iface_tensor(t: Mapping[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """An interface.json tensor as the templates take it (a data type named by a parameter resolved)."""
    return _tensor(
        versions.Tensor(
            t["name"], t["data_type"], tuple(t["dims"]), t.get("optional", False),
            None if t.get("reshape") is None else tuple(t["reshape"]), t.get("ragged", False),
        ),
        p,
    )  # fmt: skip


def _interface(p: dict[str, Any], version: str) -> dict[str, Any]:
    iface = interface.load(version)

    def tensors(group: Mapping[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        return {kind: [_iface_tensor(t, p) for t in group[kind]] for kind in ("inputs", "outputs")}

    return {
        "ensemble": tensors({"inputs": iface.ensemble_inputs, "outputs": iface.ensemble_outputs}),
        "preprocessing": tensors(iface.preprocessing),
        "postprocessing": tensors(iface.postprocessing),
        "bls": tensors(iface.bls),
        "steps": iface.steps,
        "steps_json": json.dumps(iface.steps, separators=(",", ":")),
    }


def _context(p: dict[str, Any]) -> dict[str, Any]:
    tensorrtllm = p["backend"] == "tensorrtllm"
    f = versions.facts(p["trtllm_version"] or HF_INTERFACE_VERSION)
    return {
        **p,
        "iface": _interface(p, f.version),
        "tokenizer_type": (p["tokenizer_type"] or "auto") if tensorrtllm and f.tokenizer_type else None,
        "trt": {
            "inputs": [_tensor(t, p) for t in f.inputs],
            "outputs": [_tensor(t, p) for t in f.outputs],
            "parameters": _tensorrt_llm_parameters(p, f) if tensorrtllm else {},
            "max_queue_size": (p["max_queue_size"] or 0) if f.max_queue_size else None,
        },
    }


def _environment() -> jinja2.Environment:
    root = resources.files("trtsweep.triton") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["pbtxt_string"] = _pbtxt_string
    return env


def render(params: dict[str, Any]) -> dict[str, str]:
    """Relative path -> file content for the whole repository."""
    resolved = resolve(params)
    context = _context(resolved)
    env = _environment()
    root = resources.files("trtsweep.triton") / "templates"
    models = dict(MODELS[resolved["backend"]])
    if resolved["bls"]:
        models[BLS_MODEL[0]] = BLS_MODEL[1]
    files: dict[str, str] = {}
    for model, template_dir in models.items():
        try:
            files[f"{model}/config.pbtxt"] = env.get_template(f"{template_dir}/config.pbtxt.j2").render(context)
        except jinja2.UndefinedError as exc:
            raise TrtsweepError(f"template {template_dir}/config.pbtxt.j2: {exc.message}") from exc
        code = root / template_dir / "model.py"
        if code.is_file():
            files[f"{model}/1/model.py"] = code.read_text(encoding="utf-8")
        else:
            files[f"{model}/1/.keep"] = ""
    check(files)
    return files


@dataclass
class WriteResult:
    changed: list[str]
    diffs: list[dict[str, str]]


def write(files: dict[str, str], out_dir: Path, check_mode: bool = False) -> WriteResult:
    """Write files whose content differs; in check mode only report what would change."""
    changed, diffs = [], []
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        before = path.read_text(encoding="utf-8") if path.is_file() else None
        if before == content:
            continue
        changed.append(rel)
        diffs.append(
            {
                "before_header": str(path) if before is not None else "/dev/null",
                "after_header": str(path),
                "before": before or "",
                "after": content,
            }
        )
        if not check_mode:
            atomic_write_text(path, content)
    return WriteResult(changed, diffs)


def unified_diff(diffs: list[dict[str, str]]) -> str:
    out: list[str] = []
    for d in diffs:
        out.extend(
            difflib.unified_diff(
                d["before"].splitlines(keepends=True),
                d["after"].splitlines(keepends=True),
                d["before_header"],
                d["after_header"],
            )
        )
    return "".join(out)


def _parse(rel: str, text: str) -> Any:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise TrtsweepError(f"{rel}: not a valid Triton ModelConfig: {exc}") from exc


def _placeholder(line: str) -> str | None:
    """The first left-over placeholder of the line: Jinja2 markup, or `${name}` of a template parameter."""
    for match in PLACEHOLDER.finditer(line):
        if match.group(1) is None or match.group(1) in TEMPLATE_PARAMETERS:
            return match.group(0)
    return None


def check(files: dict[str, str]) -> None:
    """Placeholders, protobuf schema, and ensemble wiring; raises TrtsweepError on the first problem."""
    for rel, text in files.items():
        for lineno, line in enumerate(text.splitlines(), 1):
            if rel.endswith(".pbtxt") and _placeholder(line):
                raise TrtsweepError(f"{rel}:{lineno}: unfilled placeholder {_placeholder(line)}: {line.strip()}")
    configs = {rel.split("/")[0]: _parse(rel, text) for rel, text in files.items() if rel.endswith("config.pbtxt")}
    for name, config in configs.items():
        if config.name != name:
            raise TrtsweepError(f"{name}/config.pbtxt: name is {config.name!r}, expected {name!r}")
        if config.platform == "ensemble":
            _check_ensemble(name, config, configs)


def _check_ensemble(name: str, ensemble: Any, configs: dict[str, Any]) -> None:
    available = {t.name for t in ensemble.input}
    for index, step in enumerate(ensemble.ensemble_scheduling.step, 1):
        target = configs.get(step.model_name)
        where = f"{name}/config.pbtxt step {index} ({step.model_name})"
        if target is None:
            raise TrtsweepError(f"{where}: model {step.model_name!r} is not in the repository")
        inputs = {t.name for t in target.input}
        outputs = {t.name for t in target.output}
        for key, value in step.input_map.items():
            if key not in inputs:
                raise TrtsweepError(f"{where}: {step.model_name} has no input {key!r}")
            if value not in available:
                raise TrtsweepError(f"{where}: input {key!r} reads {value!r}, which nothing produces")
        required = {t.name for t in target.input if not t.optional}
        missing = required - set(step.input_map.keys())
        if missing:
            raise TrtsweepError(f"{where}: required input(s) {sorted(missing)} not mapped")
        for key, value in step.output_map.items():
            if key not in outputs:
                raise TrtsweepError(f"{where}: {step.model_name} has no output {key!r}")
            available.add(value)
    for tensor in ensemble.output:
        if tensor.name not in available:
            raise TrtsweepError(f"{name}/config.pbtxt: output {tensor.name!r} is produced by no step")
