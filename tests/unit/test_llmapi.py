"""The PyTorch flow's LLM API options and trtllm-serve command, checked against each release's argument tables
(src/trtsweep/toolchain/llmapi/args/<release>.json, read from the TensorRT-LLM sources of that release)."""

from __future__ import annotations

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import args, options, serve

RELEASES = list(args.releases())


def point(**over: object) -> options.PointOptions:
    return options.PointOptions(**{"max_batch_size": 64, "max_input_len": 1024, "max_output_len": 256, **over})


def test_every_table_names_its_sources_and_has_the_options_trtsweep_sets():
    assert RELEASES and RELEASES[0] == "1.0"
    for release in RELEASES:
        table = args.table(release)
        assert all(table["source"][part] for part in ("llm_args", "serve"))
        assert set(options.MATRIX) <= set(table["llm_args"]), release
        assert {"--backend", "--host", "--port", "--tp_size", "--pp_size", "--extra_llm_api_options"} <= set(
            table["serve"]["options"]
        ), release


@pytest.mark.parametrize("release", RELEASES)
def test_the_sweep_matrix_becomes_llm_api_options(release):
    got = options.build(
        release,
        point(tp=2, pp=2, kv_cache_free_gpu_memory_fraction=0.85, enable_block_reuse=True,
              cuda_graph_batch_sizes=[1, 8, 64], disable_overlap_scheduler=False, enable_chunked_prefill=True,
              llm_api={"kv_cache_config": {"dtype": "fp8"}, "max_num_tokens": 4096}),
    )  # fmt: skip
    assert got == {
        "max_batch_size": 64,
        "max_input_len": 1024,
        "max_seq_len": 1280,
        "max_num_tokens": 4096,
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 2,
        "kv_cache_config": {"free_gpu_memory_fraction": 0.85, "enable_block_reuse": True, "dtype": "fp8"},
        "cuda_graph_config": {"batch_sizes": [1, 8, 64]},
        "disable_overlap_scheduler": False,
        "enable_chunked_prefill": True,
        "enable_iter_perf_stats": True,  # unless turned off: llm-perf reads trtllm-serve's iteration stats
    }
    assert yaml.safe_load(options.to_yaml(got)) == got


@pytest.mark.parametrize(
    ("llm_api", "message"),
    [
        ({"max_num_token": 4096}, "llm_api.max_num_token: TensorRT-LLM 1.0's LLM API has no such option; did you "
         "mean 'max_num_tokens'?"),
        ({"kv_cache_config": {"free_gpu_mem_fraction": 0.5}}, "llm_api.kv_cache_config.free_gpu_mem_fraction: "
         "TensorRT-LLM 1.0's LLM API has no such option; did you mean 'free_gpu_memory_fraction'?"),
        ({"kv_cache_config": {"enable_block_reuse": "yes"}}, "llm_api.kv_cache_config.enable_block_reuse: "
         "expected true or false, got 'yes'"),
        ({"max_batch_size": 8}, "llm_api.max_batch_size: set by the sweep matrix (max batch size, lengths, TP/PP)"),
        ({"kv_cache_config": 0.5}, "llm_api.kv_cache_config: expected a mapping of KvCacheConfig fields, got 0.5"),
    ],
)  # fmt: skip
def test_a_wrong_llm_api_option_is_refused_in_one_line(llm_api, message):
    with pytest.raises(TrtsweepError) as err:
        options.build("1.0", point(llm_api=llm_api))
    assert str(err.value) == message


def test_an_unknown_release_is_refused():
    with pytest.raises(TrtsweepError, match=r"TensorRT-LLM 0\.19 has no PyTorch-flow table"):
        options.build("0.19", point())


@pytest.mark.parametrize("release", RELEASES)
def test_the_trtllm_serve_command_uses_only_the_releases_options(release):
    spec = serve.ServeSpec(model="/models/qwen", options_file="/run/p/llm_api.yaml", port=8000, tp=2, pp=1)
    argv = serve.argv(release, spec)
    assert argv == ["trtllm-serve", "/models/qwen", "--backend", "pytorch", "--host", "127.0.0.1", "--port", "8000",
                    "--tp_size", "2", "--pp_size", "1", "--extra_llm_api_options", "/run/p/llm_api.yaml"]  # fmt: skip
    table = args.table(release)["serve"]["options"]
    assert all(flag in table for flag in argv if flag.startswith("--"))


def test_a_serve_value_outside_the_choices_is_refused():
    spec = serve.ServeSpec(model="/m", options_file="/o.yaml", port=8000, log_level="loud")
    with pytest.raises(TrtsweepError, match="trtllm-serve --log_level: expected one of internal_error, error"):
        serve.argv("1.0", spec)


def test_an_option_follows_its_release():
    """1.1 replaced enable_mixed_sampler / enable_trtllm_sampler by sampler_type: each release takes only its own."""
    options.build("1.0", point(llm_api={"enable_trtllm_sampler": True}))
    with pytest.raises(TrtsweepError, match=r"llm_api\.enable_trtllm_sampler: TensorRT-LLM 1\.2's LLM API has no"):
        options.build("1.2", point(llm_api={"enable_trtllm_sampler": True}))
    options.build("1.2", point(llm_api={"sampler_type": "TorchSampler"}))
    with pytest.raises(TrtsweepError, match=r"llm_api\.sampler_type: TensorRT-LLM 1\.0's LLM API has no"):
        options.build("1.0", point(llm_api={"sampler_type": "TorchSampler"}))
    with pytest.raises(TrtsweepError, match=r"llm_api\.sampler_type: expected one of"):
        options.build("1.2", point(llm_api={"sampler_type": "fastest"}))
