"""The `tensorrtllm` backend of the model-repository generator: seed repositories, upstream reference
configs, cross-field rules, the version table and idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.triton import repository, versions

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "trtllm_reference"


def parsed(files: dict[str, str], model: str):
    return repository._parse(f"{model}/config.pbtxt", files[f"{model}/config.pbtxt"])


def params(config) -> dict[str, str]:
    return {key: value.string_value for key, value in config.parameters.items()}


def engine(tmp_path: Path, max_batch_size: int = 64, version: str = "0.14.0", **build: object) -> str:
    """A trtllm-build style engine directory: config.json with version, pretrained_config, build_config."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = {
        "version": version,
        "pretrained_config": {"architecture": "Qwen2ForCausalLM", "mapping": {"tp_size": 1, "pp_size": 2}},
        "build_config": {"max_batch_size": max_batch_size, "max_beam_width": 1, **build},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


# -- (1) the seed repositories -------------------------------------------------------------------------------

# seed 001: Qwen2-14B-Instruct INT4 weight-only, pp_size 2 (2 GPUs), tritonserver 24.10 + backend v0.14.0, the
# second ("opti") fill_template set: engine built with --max_batch_size 64, BLS with accumulate_tokens.
SEED_001 = {
    "backend": "tensorrtllm",
    "trtllm_version": "0.14.0",
    "tokenizer_dir": "/models/Qwen2-14B-Instruct/",
    "triton_max_batch_size": 64,
    "decoupled_mode": False,
    "max_queue_delay_microseconds": 0,
    "max_queue_size": 0,
    "batching_strategy": "inflight_fused_batching",
    "max_beam_width": 1,
    "exclude_input_in_output": True,
    "enable_kv_cache_reuse": False,
    "preprocessing_instance_count": 1,
    "postprocessing_instance_count": 1,
    "bls": True,
    "bls_instance_count": 1,
    "accumulate_tokens": True,
}

# seed 003: Llama-2-7b-chat fp16 on one GPU, tensorrt_llm 0.8.0 (backend commit da59830, between v0.8.0 and
# v0.9.0); its fill_template line sets batching_strategy inflight_batching.
SEED_003 = {
    "backend": "tensorrtllm",
    "trtllm_version": "0.8.0",
    "engine_dir": "engines/1gpu",
    "tokenizer_dir": "Llama-2-7b-chat-hf/",
    "triton_max_batch_size": 64,
    "decoupled_mode": False,
    "max_beam_width": 1,
    "max_tokens_in_paged_kv_cache": 2560,
    "max_attention_window_size": 2560,
    "kv_cache_free_gpu_mem_fraction": 0.5,
    "exclude_input_in_output": True,
    "enable_kv_cache_reuse": False,
    "batching_strategy": "inflight_batching",
    "max_queue_delay_microseconds": 600,
    "preprocessing_instance_count": 1,
    "postprocessing_instance_count": 1,
    "bls": True,
    "bls_instance_count": 1,
    "accumulate_tokens": False,
}


def test_seed_001_qwen2_14b_int4_two_gpu_repository(tmp_path):
    engine_dir = engine(tmp_path / "2-gpu-opti", max_batch_size=64, version="0.14.0")
    files = repository.render({**SEED_001, "engine_dir": engine_dir})
    assert sorted(f.split("/")[0] for f in files if f.endswith("config.pbtxt")) == [
        "ensemble",
        "postprocessing",
        "preprocessing",
        "tensorrt_llm",
        "tensorrt_llm_bls",
    ]
    trt = parsed(files, "tensorrt_llm")
    assert trt.backend == "tensorrtllm" and trt.max_batch_size == 64
    assert trt.model_transaction_policy.decoupled is False
    assert trt.dynamic_batching.max_queue_delay_microseconds == 0
    assert trt.dynamic_batching.default_queue_policy.max_queue_size == 0
    assert params(trt) == {
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "executor_worker_path": "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker",
        "gpt_model_path": engine_dir,
        "gpt_model_type": "inflight_fused_batching",
        "max_beam_width": "1",
        "exclude_input_in_output": "true",
        "enable_kv_cache_reuse": "false",
    }
    bls = parsed(files, "tensorrt_llm_bls")
    assert bls.backend == "python" and bls.max_batch_size == 64 and bls.instance_group[0].count == 1
    assert bls.model_transaction_policy.decoupled is False
    assert params(bls)["accumulate_tokens"] == "true"
    steps = json.loads(params(bls)["ensemble_steps"])
    assert [step["model"] for step in steps] == ["preprocessing", "tensorrt_llm", "postprocessing"]
    assert steps[1]["inputs"]["random_seed"] == "random_seed"
    for name in ("preprocessing", "postprocessing"):
        config = parsed(files, name)
        assert config.max_batch_size == 64 and config.instance_group[0].count == 1
        assert params(config)["tokenizer_dir"] == "/models/Qwen2-14B-Instruct/"
        assert "tokenizer_type" not in params(config)
    ensemble = parsed(files, "ensemble")
    assert ensemble.max_batch_size == 64
    assert {"min_length", "random_seed", "stream"} <= {t.name for t in ensemble.input}


def test_seed_003_llama2_7b_repository():
    files = repository.render(SEED_003)
    trt = parsed(files, "tensorrt_llm")
    assert trt.max_batch_size == 64 and trt.model_transaction_policy.decoupled is False
    assert trt.dynamic_batching.max_queue_delay_microseconds == 600
    assert not trt.dynamic_batching.HasField("default_queue_policy")  # no max_queue_size in 0.8
    assert params(trt) == {
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "gpt_model_path": "engines/1gpu",
        "gpt_model_type": "inflight_batching",
        "max_beam_width": "1",
        "max_tokens_in_paged_kv_cache": "2560",
        "max_attention_window_size": "2560",
        "kv_cache_free_gpu_mem_fraction": "0.5",
        "exclude_input_in_output": "true",
        "enable_kv_cache_reuse": "false",
    }
    inputs = {t.name: t for t in trt.input}
    assert not inputs["input_ids"].optional and "min_length" in inputs and "draft_logits" not in inputs
    assert [t.name for t in trt.output] == [
        "output_ids",
        "sequence_length",
        "cum_log_probs",
        "output_log_probs",
        "context_logits",
        "generation_logits",
    ]
    for name in ("preprocessing", "postprocessing"):
        assert params(parsed(files, name)) == {
            "tokenizer_dir": "Llama-2-7b-chat-hf/",
            "tokenizer_type": "auto",
            **({"add_special_tokens": "false"} if name == "preprocessing" else {"skip_special_tokens": "true"}),
        }
    assert params(parsed(files, "tensorrt_llm_bls"))["accumulate_tokens"] == "false"


# -- (2) reference configs derived from the TensorRT-LLM backend's own templates + fill_template.py -----------

# trtsweep parameters equivalent to the references' fill_template substitutions
REFERENCE_PARAMS = {
    "backend": "tensorrtllm",
    "engine_dir": "/engines/llama-2-7b-chat/fp16/1-gpu",
    "tokenizer_dir": "/models/Llama-2-7b-chat-hf",
    "triton_max_batch_size": 64,
    "decoupled_mode": False,
    "max_beam_width": 1,
    "max_tokens_in_paged_kv_cache": 2560,
    "max_attention_window_size": 2560,
    "kv_cache_free_gpu_mem_fraction": 0.5,
    "exclude_input_in_output": True,
    "enable_kv_cache_reuse": False,
    "batching_strategy": "inflight_fused_batching",
    "max_queue_delay_microseconds": 600,
    "bls": True,
    "accumulate_tokens": False,
}
# keys of trtsweep's own python models that upstream's models do not have, and the reverse
TRTSWEEP_ONLY = {"tensorrt_llm_bls": {"ensemble_steps"}}
# exact output token counts for clients (llm-perf sums them); upstream exposes none through the ensemble
TRTSWEEP_ONLY_OUTPUTS = {"ensemble": {"num_output_tokens"}, "postprocessing": {"NUM_OUTPUT_TOKENS"}}
UPSTREAM_ONLY = {"preprocessing": {"gpt_model_path"}}  # upstream reads the engine for multimodal models


def tensor(t, full: bool) -> dict[str, object]:
    from tritonclient.grpc import model_config_pb2

    out: dict[str, object] = {
        "name": t.name,
        "data_type": model_config_pb2.DataType.Name(t.data_type),
        "dims": list(t.dims),
    }
    if full and getattr(t, "optional", False):  # ModelOutput has no optional / allow_ragged_batch
        out["optional"] = True
    if full and t.HasField("reshape"):
        out["reshape"] = list(t.reshape.shape)
    if full and getattr(t, "allow_ragged_batch", False):
        out["allow_ragged_batch"] = True
    return out


def reference_files() -> list[Path]:
    return sorted(REFERENCE.glob("*.json"))


@pytest.mark.parametrize("path", reference_files(), ids=lambda p: p.stem)
def test_tensorrt_llm_config_matches_the_upstream_reference(path):
    ref = json.loads(path.read_text())
    expected = ref["models"]["tensorrt_llm"]
    trt = parsed(repository.render({**REFERENCE_PARAMS, "trtllm_version": ref["trtllm_version"]}), "tensorrt_llm")
    required = set(expected["unset_parameters"]) & set(versions.REQUIRED_KEYS)
    assert params(trt) == {**expected["parameters"], **dict.fromkeys(required, "")}
    assert [tensor(t, True) for t in trt.input] == expected["inputs"]
    assert [tensor(t, True) for t in trt.output] == expected["outputs"]
    assert trt.backend == expected["backend"] and trt.max_batch_size == expected["max_batch_size"]
    assert trt.model_transaction_policy.decoupled == expected["decoupled"]
    assert list(trt.dynamic_batching.preferred_batch_size) == expected["preferred_batch_size"]
    assert trt.dynamic_batching.max_queue_delay_microseconds == expected["max_queue_delay_microseconds"]
    if "max_queue_size" in expected:
        assert trt.dynamic_batching.default_queue_policy.max_queue_size == expected["max_queue_size"]
    else:
        assert not trt.dynamic_batching.HasField("default_queue_policy")


@pytest.mark.parametrize("path", reference_files(), ids=lambda p: p.stem)
def test_python_models_and_ensemble_are_compatible_with_the_upstream_reference(path):
    ref = json.loads(path.read_text())
    files = repository.render({**REFERENCE_PARAMS, "trtllm_version": ref["trtllm_version"]})
    for model, expected in ref["models"].items():
        if model == "tensorrt_llm":
            continue
        config = parsed(files, model)
        ours = params(config)
        assert {k: ours[k] for k in set(ours) - TRTSWEEP_ONLY.get(model, set())} == {
            k: v for k, v in expected["parameters"].items() if k not in UPSTREAM_ONLY.get(model, set())
        }, model
        assert config.max_batch_size == expected["max_batch_size"]
        upstream_inputs = {t["name"]: t["data_type"] for t in expected["inputs"]}
        upstream_outputs = {t["name"]: t["data_type"] for t in expected["outputs"]}
        # same names and types as the upstream model, for every tensor trtsweep's model has
        assert {t.name: tensor(t, False)["data_type"] for t in config.input}.items() <= upstream_inputs.items()
        ours_out = {t.name: tensor(t, False)["data_type"] for t in config.output}
        # trtsweep's own count, unless the version's upstream model has an output of that name (1.2)
        extra = TRTSWEEP_ONLY_OUTPUTS.get(model, set()) - set(upstream_outputs)
        assert extra <= set(ours_out)
        assert {k: v for k, v in ours_out.items() if k not in extra}.items() <= upstream_outputs.items()


def test_ensemble_input_names_follow_the_version():
    def names(version: str) -> set[str]:
        files = repository.render({**REFERENCE_PARAMS, "trtllm_version": version})
        ensemble = parsed(files, "ensemble")
        step = ensemble.ensemble_scheduling.step[1]
        assert step.model_name == "tensorrt_llm"
        return {t.name for t in ensemble.input} | {f"{k}<-{v}" for k, v in step.input_map.items()}

    assert {"min_length", "random_seed", "min_length<-min_length", "random_seed<-random_seed"} <= names("0.19.0")
    new = names("1.2.1")
    assert {"min_tokens", "seed", "min_tokens<-min_tokens", "seed<-seed"} <= new
    assert not {"min_length", "random_seed"} & new


# -- unset values, data types, extra parameters ------------------------------------------------------------


def test_unset_options_are_left_out_and_required_keys_are_empty():
    base = {"backend": "tensorrtllm", "engine_dir": "/e", "tokenizer_dir": "/t"}
    for version in versions.VERSIONS:
        files = repository.render({**base, "trtllm_version": version})
        assert not any("${" in text for rel, text in files.items() if rel.endswith(".pbtxt"))
        got = params(parsed(files, "tensorrt_llm"))
        facts = versions.facts(version)
        managed = {
            "gpt_model_path": "/e",
            "gpt_model_type": "inflight_fused_batching",
            "exclude_input_in_output": "true",
        }
        if "tokenizer_dir" in facts.parameter_keys:
            managed["tokenizer_dir"] = "/t"
        expected = {**facts.constants, **managed, **{k: "" for k in facts.required_keys if k not in managed}}
        assert got == expected, version


def test_data_type_parameters_and_extra_parameters():
    files = repository.render(
        {
            **REFERENCE_PARAMS,
            "trtllm_version": "1.2",
            "logits_datatype": "TYPE_BF16",
            "prompt_embedding_table_data_type": "TYPE_BF16",
            "extra_parameters": {"gpu_device_ids": "0,1", "enable_context_fmha_fp32_acc": True, "num_nodes": 1},
        }
    )
    trt = parsed(files, "tensorrt_llm")
    types = {t["name"]: t["data_type"] for t in (tensor(x, False) for x in [*trt.input, *trt.output])}
    assert types["context_logits"] == types["draft_logits"] == types["prompt_embedding_table"] == "TYPE_BF16"
    assert types["encoder_input_features"] == "TYPE_FP16"
    got = params(trt)
    assert (got["gpu_device_ids"], got["enable_context_fmha_fp32_acc"], got["num_nodes"]) == ("0,1", "true", "1")
    window = params(
        parsed(
            repository.render({**REFERENCE_PARAMS, "trtllm_version": "0.17", "max_attention_window_size": [512, 4096]}),
            "tensorrt_llm",
        )
    )
    assert window["max_attention_window_size"] == "512,4096"


def test_hf_backend_ignores_tensorrtllm_options():
    hf = {"engine_dir": "/models/m", "tokenizer_dir": "/models/m"}
    plain = repository.render(hf)
    assert (
        repository.render({**hf, "kv_cache_free_gpu_mem_fraction": 0.5, "batch_scheduler_policy": "max_utilization"})
        == plain
    )
    with_bls = repository.render({**hf, "bls": True, "accumulate_tokens": True})
    steps = json.loads(params(parsed(with_bls, "tensorrt_llm_bls"))["ensemble_steps"])
    assert steps[1]["inputs"]["streaming"] == "stream"


# -- (3) cross-field rules -----------------------------------------------------------------------------------

BASE = {"backend": "tensorrtllm", "trtllm_version": "0.14.0", "engine_dir": "/e", "tokenizer_dir": "/t"}


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"streaming": True, "decoupled_mode": False}, "streaming: true needs decoupled_mode: true"),
        ({"max_beam_width": 4, "decoding_mode": "top_k"}, "decoding_mode 'top_k' cannot serve max_beam_width 4"),
        ({"decoding_mode": "beam_search"}, "decoding_mode beam_search needs max_beam_width > 1"),
        ({"trtllm_version": "0.12.0", "max_beam_width": 2, "streaming": True}, "needs TensorRT-LLM 0.13+, not 0.12"),
        ({"kv_cache_free_gpu_mem_fraction": 0}, "kv_cache_free_gpu_mem_fraction must be a number in (0, 1]"),
        ({"kv_cache_free_gpu_mem_fraction": 1.5}, "kv_cache_free_gpu_mem_fraction must be a number in (0, 1]"),
        ({"batching_strategy": "V1", "enable_chunked_context": True}, "enable_chunked_context needs in-flight"),
        ({"batching_strategy": "V1", "enable_kv_cache_reuse": True}, "enable_kv_cache_reuse needs in-flight"),
        ({"batching_strategy": "V1", "batch_scheduler_policy": "max_utilization"}, "max_utilization needs in-flight"),
        (
            {"trtllm_version": "0.11.0", "batch_scheduler_policy": "max_utilization"},
            "needs enable_chunked_context: true in TensorRT-LLM 0.11",
        ),
        ({"accumulate_tokens": True}, "accumulate_tokens is a tensorrt_llm_bls option; set bls: true"),
        ({"bls": True, "accumulate_tokens": True, "max_beam_width": 2}, "accumulate_tokens works with beam width 1"),
        ({"trtllm_version": "0.8.0", "decoding_mode": "top_k"}, "decoding_mode is not a tensorrt_llm parameter of"),
        ({"enable_trt_overlap": True}, "enable_trt_overlap is not a tensorrt_llm parameter of TensorRT-LLM 0.14"),
        ({"trtllm_version": "0.11.0", "max_queue_size": 10}, "max_queue_size is not in the tensorrt_llm config"),
        ({"tokenizer_type": "llama"}, "tokenizer_type is a parameter of TensorRT-LLM 0.8 only"),
        ({"trtllm_version": "0.15.0", "decoding_mode": "eagle"}, "decoding_mode 'eagle': TensorRT-LLM 0.15 accepts"),
        ({"batching_strategy": "static"}, "batching_strategy must be one of inflight_fused_batching"),
        ({"trtllm_version": None}, "trtllm_version is required for backend tensorrtllm"),
        ({"extra_parameters": {"gpt_model_path": "/x"}}, "key 'gpt_model_path' is set by the parameter 'engine_dir'"),
        ({"extra_parameters": {"gpu_device_ids": [0, 1]}}, "extra_parameters: 'gpu_device_ids' must be a string"),
        ({"max_attention_window_size": [512, 0]}, "max_attention_window_size must be an integer >= 1 or a list"),
        ({"logits_datatype": "TYPE_INT8"}, "logits_datatype must be one of TYPE_FP32"),
    ],
)
def test_cross_field_and_value_rules(update, message):
    with pytest.raises(TrtsweepError) as err:
        repository.render({**BASE, **update})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "update",
    [
        {"trtllm_version": "0.13.0", "max_beam_width": 2, "streaming": True},
        {"trtllm_version": "0.12.0", "batch_scheduler_policy": "max_utilization"},
        {"trtllm_version": "0.11.0", "batch_scheduler_policy": "max_utilization", "enable_chunked_context": True},
        {"max_beam_width": 4, "decoding_mode": "beam_search", "kv_cache_free_gpu_mem_fraction": 1.0},
        {"trtllm_version": "0.9.0", "enable_trt_overlap": True},
        {"trtllm_version": "1.2.1", "enable_trt_overlap": False, "decoding_mode": "eagle"},
        {"batching_strategy": "V1", "enable_kv_cache_reuse": False},
    ],
)
def test_allowed_combinations(update):
    repository.render({**BASE, **update})


def test_batch_size_and_beams_are_checked_against_the_engine(tmp_path):
    small = engine(tmp_path / "small", max_batch_size=8)
    with pytest.raises(TrtsweepError, match=r"triton_max_batch_size 16 exceeds the engine's max_batch_size 8"):
        repository.render({**BASE, "engine_dir": small, "triton_max_batch_size": 16})
    repository.render({**BASE, "engine_dir": small, "triton_max_batch_size": 8})
    with pytest.raises(TrtsweepError, match=r"max_beam_width 2 exceeds the engine's max_beam_width 1"):
        repository.render({**BASE, "engine_dir": small, "triton_max_batch_size": 8, "max_beam_width": 2})
    with pytest.raises(TrtsweepError, match=r"does not match the engine, built by TensorRT-LLM 0.17.0"):
        repository.render({**BASE, "engine_dir": engine(tmp_path / "new", version="0.17.0")})
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "config.json").write_text(json.dumps({"builder_config": {"max_batch_size": 4}, "plugin_config": {}}))
    with pytest.raises(TrtsweepError, match=r"exceeds the engine's max_batch_size 4"):
        repository.render({**BASE, "engine_dir": str(legacy)})
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(TrtsweepError, match=r"engine_dir: .*config.json has no build_config.max_batch_size"):
        repository.render({**BASE, "engine_dir": str(hf_dir)})


# -- (4) versions outside the table --------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0.0", "1.1.0rc5", "0.21.0", "0.7.1", "2.0", "latest"])
def test_unknown_version_is_one_clear_error(version):
    with pytest.raises(TrtsweepError) as err:
        repository.render({**BASE, "trtllm_version": version})
    text = str(err.value)
    assert text.startswith(f"trtllm_version {version!r} is not in trtsweep's table; expected one of 0.8,")
    assert "\n" not in text


@pytest.mark.parametrize(
    ("version", "commit"), [("0.21.0", "@751d5f17"), ("1.0.0", "@ae8270b7"), ("1.1.0rc5", "@48b7b5d8")]
)
def test_a_release_whose_templates_were_not_read_says_so_and_the_way_out(version, commit):
    # between the table's versions (0.20 < 0.21, 1.0, 1.1 < 1.2): refused naming the release commit not read
    assert versions.VERSIONS.index("0.20") + 1 == versions.VERSIONS.index("1.2")
    with pytest.raises(TrtsweepError) as err:
        versions.facts(version)
    text = str(err.value)
    assert f"NVIDIA/TensorRT-LLM{commit}" in text
    assert "were not read, so trtsweep does not guess them" in text
    assert "triton.trtllm_version" in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("given", "key"), [("0.14.0", "0.14"), ("v0.17.0.post1", "0.17"), ("1.2.0rc8", "1.2"), ("0.18.2", "0.18")]
)
def test_version_spellings(given, key):
    assert versions.version_key(given) == key


# -- (5) idempotence -----------------------------------------------------------------------------------------


def test_write_twice_changes_nothing_and_one_parameter_changes_one_file(tmp_path):
    first = repository.render({**SEED_003, "trtllm_version": "0.17.0"})
    assert len(repository.write(first, tmp_path).changed) == len(first)
    assert repository.write(repository.render({**SEED_003, "trtllm_version": "0.17.0"}), tmp_path).changed == []
    changed = repository.write(
        repository.render({**SEED_003, "trtllm_version": "0.17.0", "kv_cache_free_gpu_mem_fraction": 0.8}), tmp_path
    )
    assert changed.changed == ["tensorrt_llm/config.pbtxt"]
    assert '+  value: { string_value: "0.8" }' in repository.unified_diff(changed.diffs)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (
            {"max_queue_delay_microsecond": 5},
            "unknown triton repository parameter(s): max_queue_delay_microsecond "
            "(did you mean 'max_queue_delay_microseconds'?)",
        ),
        (
            {"extra_parameters": {"gpu_device_id": "0"}},
            "extra_parameters: 'gpu_device_id' is not a tensorrt_llm parameter of TensorRT-LLM 0.14 (TB@v0.14.0); "
            "did you mean 'gpu_device_ids'?",
        ),
        (
            {"extra_parameters": {"num_nodes": 2}},
            "extra_parameters: 'num_nodes' is not a tensorrt_llm parameter of TensorRT-LLM 0.14 (TB@v0.14.0) "
            "(it is one in TensorRT-LLM 0.19, 0.20, 1.2)",
        ),
        (
            {"backend": "hf", "extra_parameters": {"kv_cache_host_memory_byte": 1}},
            "did you mean 'kv_cache_host_memory_bytes'",
        ),
    ],
)
def test_unknown_or_unsupported_keys_are_refused_with_the_closest_name(update, message):
    # before: extra_parameters keys were written into config.pbtxt as given (the backend ignores a key it does not
    # read), and an unknown parameter was refused without a hint
    with pytest.raises(TrtsweepError) as err:
        repository.render({**BASE, **update})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_extra_parameters_of_the_version_and_its_fixed_values_pass():
    files = repository.render({**BASE, "extra_parameters": {"gpu_device_ids": "0,1", "executor_worker_path": "/w"}})
    got = params(parsed(files, "tensorrt_llm"))
    assert (got["gpu_device_ids"], got["executor_worker_path"]) == ("0,1", "/w")
