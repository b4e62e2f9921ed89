from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.sweep.planning import expand


def sweep(**over):
    base = {
        "name": "demo",
        "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": ["float32", "bfloat16"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4, 8],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"concurrency": [1, 2], "input_data": "data/prompts.jsonl"},
    }
    base.update(over)
    return base


def test_matrix_is_the_cartesian_product_with_stable_ids():
    points = expand(sweep())
    assert [p["id"] for p in points] == [
        "smol_float32_tp1pp1_bs4_isl512osl64_stream",
        "smol_float32_tp1pp1_bs8_isl512osl64_stream",
        "smol_bfloat16_tp1pp1_bs4_isl512osl64_stream",
        "smol_bfloat16_tp1pp1_bs8_isl512osl64_stream",
    ]
    first = points[0]
    assert first["world_size"] == 1 and first["max_batch_size"] == 4 and first["streaming"] is True
    assert first["benchmark"]["protocol"] == "grpc"  # default filled in


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"precisions": ["int3"]}, "sweep field 'precisions[0]': expected one of 'float32'"),
        ({"max_batch_sizes": [0]}, "sweep field 'max_batch_sizes[0]': expected a positive integer, got 0"),
        ({"streaming": ["yes"]}, "sweep field 'streaming[0]': expected true or false, got 'yes'"),
        ({"models": []}, "sweep field 'models': expected a non-empty list"),
        ({"name": "has space"}, "sweep field 'name'"),
        ({"colour": "red"}, "unknown field(s) ['colour']"),
        ({"benchmark": {"input_data": "x", "protocol": "smtp"}}, "sweep field 'benchmark.protocol'"),
        ({"lengths": [{"input": 1}]}, "sweep field 'lengths[0].output'"),
        ({"parallelism": [{"tp": 2, "pp": 1}]}, "sweep field 'parallelism': backend hf serves one rank"),
        (
            {"lengths": [{"input": 512, "output": 64}, {"input": 1024, "output": 64}]},
            "sweep field 'lengths': backend hf has no engine length limits",
        ),
    ],
)
def test_bad_fields_are_named(override, message):
    with pytest.raises(TrtsweepError) as err:
        expand(sweep(**override))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ({"mode": "spread"}, "sweep field 'placement.mode'"),
        ({"gpus_per_point": -1}, "sweep field 'placement.gpus_per_point'"),
        ({"min_gpu_memory_gb": 0}, "sweep field 'placement.min_gpu_memory_gb'"),
        ({"weights": {"*": -2}}, "sweep field 'placement.weights['*']': expected a positive number, got -2"),
        ({"colour": 1}, "sweep field 'placement': unknown key(s) ['colour']"),
    ],
)
def test_bad_placement_settings(placement, message):
    with pytest.raises(TrtsweepError) as err:
        expand(sweep(placement=placement))
    assert message in str(err.value)


def test_points_carry_their_resources_and_weight():
    points = expand(sweep(placement={"gpus_per_point": 1, "gpu_type": "H100", "weights": {"*bfloat16*": 3}}))
    assert points[0]["resources"] == {"gpus": 1, "gpu_type": "H100", "min_gpu_memory_gb": None}
    assert [p["weight"] for p in points] == [1.0, 1.0, 3.0, 3.0]
    assert expand(trt())[0]["resources"]["gpus"] == 2  # tensorrtllm: tp x pp


def trt(**over):
    return sweep(backend="tensorrtllm", precisions=["fp8", "int8_wo"], parallelism=[{"tp": 2, "pp": 1}],
                 trtllm={"version": "0.11.0", "family": "qwen", "dir": "/app/tensorrt_llm", **over})  # fmt: skip


def test_tensorrtllm_points_carry_the_build_installation():
    points = expand(trt())
    assert [p["id"] for p in points][:2] == [
        "smol_fp8_tp2pp1_bs4_isl512osl64_stream",
        "smol_fp8_tp2pp1_bs8_isl512osl64_stream",
    ]
    assert points[0]["world_size"] == 2
    assert points[0]["trtllm"] == {"version": "0.11.0", "family": "qwen", "dir": "/app/tensorrt_llm",
                                   "runtime": "native", "python": "python3", "calibrate_on_prompts": False}  # fmt: skip
    assert expand(sweep())[0]["trtllm"] == {}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"version": "0.6.0"},
            "'trtllm.version': TensorRT-LLM 0.6.0 has no engine flow (trtllm-build): that flow is 0.8 .. 1.2",
        ),
        ({"family": "mistral"}, "sweep field 'trtllm.family'"),
        ({"runtime": "k8s"}, "sweep field 'trtllm.runtime'"),
        ({"colour": 1}, "sweep field 'trtllm': unknown key(s) ['colour']"),
    ],
)
def test_bad_trtllm_settings(over, message):
    with pytest.raises(TrtsweepError) as err:
        expand(trt(**over))
    assert message in str(err.value)


def test_trtllm_settings_only_with_the_tensorrtllm_backend():
    with pytest.raises(TrtsweepError, match="only used with backend: tensorrtllm"):
        expand(sweep(trtllm={"version": "0.11.0"}))
    with pytest.raises(TrtsweepError, match="is not supported by backend tensorrtllm"):
        expand(trt() | {"precisions": ["float32"]})


def test_the_example_sweep_files_plan():
    import yaml

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "sweeps").glob("*.yml")):
        points = expand(yaml.safe_load(path.read_text())["trtsweep_sweep"], path.parent)  # where its paths start
        assert points, path
    assert expand(yaml.safe_load((root / "group_vars" / "all" / "sweep.yml").read_text())["trtsweep_sweep"])  # inline


def bench(**over):
    return {"benchmark": {"concurrency": [1, 2], "input_data": "data/prompts.jsonl", **over}}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (bench(num_requests=-5), "sweep field 'benchmark.num_requests': expected a positive integer, got -5"),
        (bench(num_requests=0), "sweep field 'benchmark.num_requests': expected a positive integer, got 0"),
        (bench(num_requests="10"), "sweep field 'benchmark.num_requests'"),
        (bench(warmup_requests=-1), "sweep field 'benchmark.warmup_requests': expected an integer >= 0, got -1"),
        (bench(warmup_requests=1.5), "sweep field 'benchmark.warmup_requests'"),
        (bench(max_tokens=0), "sweep field 'benchmark.max_tokens': expected a positive integer, got 0"),
        (bench(seed="x"), "sweep field 'benchmark.seed': expected an integer, got 'x'"),
        (bench(seed=True), "sweep field 'benchmark.seed'"),
        (bench(seed=1.0), "sweep field 'benchmark.seed'"),
        (bench(request_timeout=0), "sweep field 'benchmark.request_timeout': expected a positive number, got 0"),
        (bench(request_timeout=-1), "sweep field 'benchmark.request_timeout'"),
        (bench(request_timeout=float("nan")), "sweep field 'benchmark.request_timeout'"),
        (bench(connect_timeout=0), "sweep field 'benchmark.connect_timeout'"),
        (bench(connect_timeout="10s"), "sweep field 'benchmark.connect_timeout'"),
        (bench(stall_timeout=-1), "sweep field 'benchmark.stall_timeout': expected a number >= 0, got -1"),
        (bench(concurrency=[0]), "sweep field 'benchmark.concurrency[0]': expected a positive integer, got 0"),
        (bench(chat_template="yes"), "sweep field 'benchmark.chat_template'"),
        (bench(extra_inputs=[1]), "sweep field 'benchmark.extra_inputs'"),
        (bench(extra_inputs={"top_k": [1, 2]}), "sweep field 'benchmark.extra_inputs.top_k'"),
        (bench(extra_inputs={"stop": "a,b"}), "sweep field 'benchmark.extra_inputs.stop'"),
        (bench(extra_inputs={"top k": 1}), "sweep field 'benchmark.extra_inputs'"),
    ],
)
def test_every_benchmark_number_has_its_range(override, message):
    with pytest.raises(TrtsweepError) as err:
        expand(sweep(**override))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_benchmark_edges_that_are_allowed_and_the_filled_defaults():
    point = expand(sweep(**bench(warmup_requests=0, stall_timeout=0, seed=-3, request_timeout=0.5)))[0]
    assert point["benchmark"] == {
        "protocol": "grpc", "concurrency": [1, 2], "input_data": "data/prompts.jsonl", "num_requests": None,
        "warmup_requests": 0, "max_tokens": None, "chat_template": False, "seed": -3, "extra_inputs": {},
        "request_timeout": 0.5, "stall_timeout": 0, "connect_timeout": 10,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"calib_size": 0}, "sweep field 'trtllm.calib_size': expected a positive integer, got 0"),
        ({"kv_cache_dtype": "fp4"}, "sweep field 'trtllm.kv_cache_dtype'"),
        ({"calibrate_on_prompts": "yes"}, "sweep field 'trtllm.calibrate_on_prompts'"),
    ],
)
def test_trtllm_numbers_and_choices_have_their_range(over, message):
    with pytest.raises(TrtsweepError) as err:
        expand(trt(**over))
    assert message in str(err.value)


def with_data(tmp_path, text: str | bytes, name: str = "prompts.jsonl"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return sweep(**bench(input_data=name))


GOOD = '{"input": "hi", "output": "hello"}\n'


@pytest.mark.parametrize(
    ("content", "where", "problem"),
    [
        (GOOD + "not json\n", ":2: ", "invalid JSON"),
        (GOOD + "\n" + '{"prompt": "hi"}\n', ":3: ", "record has neither 'input' nor 'messages'"),
        (GOOD + '{"messages": [{"role": "user"}]}\n', ":2: ", "'messages' must be a non-empty list"),
        (GOOD + '["input"]\n', ":2: ", "expected a JSON object"),
        (GOOD + '{"input": "x", "max_tokens": 0}\n', ":2: ", "'max_tokens' must be a positive integer"),
        (b'{"input": "\xff"}\n', ":1: ", "not UTF-8"),
        ("", ": ", "no records (empty file)"),
        ("\n  \n", ": ", "no records (empty file)"),
    ],
)
def test_malformed_input_data_fails_the_plan_with_file_and_line(tmp_path, content, where, problem):
    with pytest.raises(TrtsweepError) as err:
        expand(with_data(tmp_path, content), base_dir=tmp_path)
    message = str(err.value)
    assert message.startswith("sweep field 'benchmark.input_data': ")
    assert f"{tmp_path / 'prompts.jsonl'}{where}" in message and problem in message
    assert "\n" not in message


def test_missing_or_unreadable_input_data_fails_the_plan(tmp_path):
    with pytest.raises(TrtsweepError, match=r"benchmark.input_data': .*absent.jsonl: cannot read input data: No such"):
        expand(sweep(**bench(input_data="absent.jsonl")), base_dir=tmp_path)
    (tmp_path / "adir.jsonl").mkdir()
    with pytest.raises(TrtsweepError, match=r"adir.jsonl: cannot read input data: Is a directory"):
        expand(sweep(**bench(input_data="adir.jsonl")), base_dir=tmp_path)
    with pytest.raises(TrtsweepError, match=r"benchmark.input_data': 'data/\\tprompts.jsonl' contains the control"):
        expand(sweep(**bench(input_data="data/\tprompts.jsonl")), base_dir=tmp_path)


def test_input_data_relative_to_base_dir_absolute_as_given_default_the_checkout(tmp_path, monkeypatch):
    chat = '{"messages": [{"role": "user", "content": "hi"}], "output": "hello"}\n'
    assert expand(with_data(tmp_path, GOOD + chat), base_dir=tmp_path)  # seed records and chat records
    absolute = sweep(**bench(input_data=str(tmp_path / "prompts.jsonl")))
    assert expand(absolute, base_dir=tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)  # the default is the checkout holding sweep.yml, not the current directory
    assert expand(sweep())[0]["benchmark"]["input_data"] == "data/prompts.jsonl"
    with pytest.raises(TrtsweepError, match=r"prompts\.jsonl: cannot read input data"):
        expand(sweep(), base_dir=tmp_path)


def test_trtsweep_plan_and_make_plan_check_input_data(tmp_path, capsys):
    from trtsweep import cli
    from trtsweep.fleet import runplan

    bad = with_data(tmp_path, GOOD + "{oops\n")
    gpu = {"index": 0, "name": "declared", "memory_mb": 0}
    with pytest.raises(TrtsweepError, match=r"prompts.jsonl:2: invalid JSON"):
        runplan.make_plan(bad, {"a": {"gpus": [gpu], "problems": []}}, tmp_path / "results", base_dir=tmp_path)
    (tmp_path / "sweep.yml").write_text(json.dumps({"trtsweep_sweep": bench_file(tmp_path)}))
    assert cli.main(["plan", str(tmp_path / "sweep.yml")]) == 2
    err = capsys.readouterr().err.strip()
    sweep_file = tmp_path / "sweep.yml"  # the file and the field's line (JSON is YAML: one line), then the field
    assert err.startswith(f"trtsweep: error: {sweep_file}:1: sweep field 'benchmark.input_data': ")
    assert "broken.jsonl:1: " in err
    assert len(err.splitlines()) == 1


def bench_file(tmp_path):
    (tmp_path / "broken.jsonl").write_text('{"output": "no input"}\n')
    return sweep(**bench(input_data=str(tmp_path / "broken.jsonl")))


def test_the_plan_module_resolves_input_data_against_base_dir(tmp_path):
    """sweep.yml's plan play passes base_dir: "{{ playbook_dir }}" to trtsweep_plan (on the controller)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "p.jsonl").write_text(GOOD + "{bad\n")
    args = {"sweep": sweep(**bench(input_data="p.jsonl")), "hosts": {}, "results_dir": str(tmp_path / "results"),
            "base_dir": str(tmp_path)}  # fmt: skip
    bindir = Path(sys.executable).parent
    proc = subprocess.run([str(bindir / "ansible"), "localhost", "-m", "trtsweep_plan", "-a", json.dumps(args)],
                          capture_output=True, text=True, cwd=root, check=False,
                          env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})  # fmt: skip
    assert proc.returncode != 0
    assert f"{tmp_path / 'p.jsonl'}:2: invalid JSON" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("make", "triton", "message"),
    [
        (
            "trt",
            {"enable_kv_cache_resue": True},
            "sweep field 'triton': unknown triton repository parameter(s): enable_kv_cache_resue "
            "(did you mean 'enable_kv_cache_reuse'?)",
        ),
        (
            "trt",
            {"extra_parameters": {"gpu_device_id": "0"}},
            "sweep field 'triton': extra_parameters: 'gpu_device_id' is not a tensorrt_llm parameter of "
            "TensorRT-LLM 0.11 (TB@v0.11.0); did you mean 'gpu_device_ids'?",
        ),
        ("trt", {"extra_parameters": {"lora_prefetch_dir": "/l"}}, "(it is one in TensorRT-LLM 0.19, 0.20, 1.2)"),
        (
            "trt",
            {"extra_parameters": {"gpt_model_path": "/e"}},
            "key 'gpt_model_path' is set by the parameter 'engine_dir'",
        ),
        ("hf", {"extra_parameter": {}}, "(did you mean 'extra_parameters'?)"),
        ("hf", {"extra_parameters": {"multi_block_mod": True}}, "did you mean 'multi_block_mode'?"),
    ],
)
def test_triton_keys_are_checked_at_plan_time_with_the_closest_name(make, triton, message):
    with pytest.raises(TrtsweepError) as err:
        expand((trt() if make == "trt" else sweep()) | {"triton": triton})
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    # keys of the version's tensorrt_llm model (and its fixed values) pass; so do plain parameters
    ok = {
        "max_queue_delay_microseconds": 100,
        "extra_parameters": {"gpu_device_ids": "0", "executor_worker_path": "/w"},
    }
    assert expand(trt() | {"triton": ok})[0]["triton"] == ok


def test_a_tensorrtllm_version_the_repository_step_cannot_serve_fails_the_plan():
    # 0.21 builds (flags/0.21.json) but trtsweep.triton.versions has no facts for it: the point would quantize and
    # build, then fail at the repository stage
    with pytest.raises(TrtsweepError, match=r"sweep field 'trtllm.version': the Triton repository step cannot serve"):
        expand(trt(version="0.21.0"))
    assert expand(trt(version="0.21.0") | {"triton": {"trtllm_version": "0.20"}})  # served by another table


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (trt(dir="/app/tensorrt_llm\n"), r"sweep field 'trtllm.dir': '/app/tensorrt_llm\n' contains the control"),
        (trt(python="python3\t-u"), r"sweep field 'trtllm.python': 'python3\t-u' contains the control character"),
        (sweep(models=[{"repo_id": "Org/M\r", "name": "m"}]), r"sweep field 'models[0].repo_id': 'Org/M\r' contains"),
        (sweep(triton={"hf_device": "cpu\x00"}), r"sweep field 'triton': hf_device: 'cpu\x00' contains the control"),
    ],
)
def test_control_characters_in_paths_fail_the_plan_naming_the_field(over, message):
    with pytest.raises(TrtsweepError) as err:
        expand(over)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert expand(sweep(triton={"hf_device": "cpu", "hf_dtype": "float32"}))  # printable values pass


@pytest.mark.parametrize(
    ("make", "triton", "message"),
    [
        ("hf", {"max_queue_delay_microseconds": -1}, "max_queue_delay_microseconds must be an integer >= 0, got -1"),
        ("hf", {"preprocessing_instance_count": 0}, "preprocessing_instance_count must be an integer >= 1, got 0"),
        ("trt", {"kv_cache_free_gpu_mem_fraction": 2}, "kv_cache_free_gpu_mem_fraction must be a number in (0, 1]"),
        ("trt", {"max_tokens_in_paged_kv_cache": 0}, "max_tokens_in_paged_kv_cache must be an integer >= 1, got 0"),
        ("trt", {"max_queue_size": 8}, "max_queue_size is not in the tensorrt_llm config of TensorRT-LLM 0.11"),
        ("trt", {"max_beam_width": 2}, "max_beam_width > 1 with streaming needs TensorRT-LLM 0.13+, not 0.11"),
    ],
)
def test_triton_numbers_and_version_rules_fail_the_plan(make, triton, message):
    # before: resolved only by the triton_repo role, after the checkpoint and the engine were built
    with pytest.raises(TrtsweepError) as err:
        expand((trt() if make == "trt" else sweep()) | {"triton": triton})
    text = str(err.value)
    assert text.startswith("sweep field 'triton': ") and message in text and "(point smol_" in text
    assert expand(trt() | {"streaming": [False], "triton": {"max_beam_width": 2}})  # no streaming: served


# -- request inputs per point (issue 10: the full request interface, set per point) ------------------------------


def test_a_model_entry_sets_request_inputs_for_its_points_over_the_sweeps():
    models = [
        {"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "plain"},
        {"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "penalized",
         "extra_inputs": {"repetition_penalty": 1.3, "top_k": 4}},
    ]  # fmt: skip
    bench = {"concurrency": [1], "input_data": "data/prompts.jsonl", "extra_inputs": {"top_k": 1}}
    points = expand(sweep(models=models, benchmark=bench, precisions=["float32"], max_batch_sizes=[4]))
    extra = {p["model"]["name"]: p["benchmark"]["extra_inputs"] for p in points}
    assert extra == {"plain": {"top_k": 1}, "penalized": {"top_k": 4, "repetition_penalty": 1.3}}
    assert "extra_inputs" not in points[0]["model"]  # a model without them keeps its settings hash


@pytest.mark.parametrize(
    ("where", "inputs", "message"),
    [
        ("benchmark", {"repetiton_penalty": 1.2}, "sweep field 'benchmark.extra_inputs.repetiton_penalty': the "
         "ensemble of TensorRT-LLM 0.19 has no input 'repetiton_penalty'; did you mean 'repetition_penalty'?"),
        ("model", {"seed": 3}, "sweep field 'models[0].extra_inputs.seed': the ensemble of TensorRT-LLM 0.19 has "
         "no input 'seed'; did you mean 'random_seed'?"),
        ("benchmark", {"return_log_probs": 1}, "sweep field 'benchmark.extra_inputs.return_log_probs': "
         "return_log_probs is TYPE_BOOL: expected true or false, got 1"),
        ("model", {"top_k": 1.5}, "sweep field 'models[0].extra_inputs.top_k': top_k is TYPE_INT32: expected an "
         "integer, got 1.5"),
        ("benchmark", {"top_k": [1, 2]}, "sweep field 'benchmark.extra_inputs.top_k': top_k takes one value "
         "(dims [1]), got the list [1, 2]"),
        ("benchmark", {"embedding_bias_weights": ["x"]}, "sweep field 'benchmark.extra_inputs.embedding_bias_weights': "
         "embedding_bias_weights is TYPE_FP32: expected a number, got ['x']"),
        ("benchmark", {"stop_words": []}, "sweep field 'benchmark.extra_inputs.stop_words': expected a number, "
         "boolean or non-empty string, or a non-empty list of one of them, got []"),
    ],
)  # fmt: skip
def test_a_request_input_the_served_ensemble_lacks_fails_the_plan(where, inputs, message):
    bench = {"concurrency": [1], "input_data": "data/prompts.jsonl"}
    model = {"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}
    if where == "benchmark":
        bench["extra_inputs"] = inputs
    else:
        model["extra_inputs"] = inputs
    with pytest.raises(TrtsweepError) as err:
        expand(sweep(models=[model], benchmark=bench))
    assert str(err.value) == message


def test_list_valued_request_inputs_pass_the_plan():
    extra = {"stop_words": [" France", "."], "embedding_bias_words": ["Paris"], "embedding_bias_weights": [-5.0]}
    bench = {"concurrency": [1], "input_data": "data/prompts.jsonl", "extra_inputs": extra}
    assert expand(sweep(benchmark=bench))[0]["benchmark"]["extra_inputs"] == extra


def test_request_inputs_follow_the_points_tensorrt_llm_version():
    bench = {"concurrency": [1], "input_data": "data/prompts.jsonl", "extra_inputs": {"seed": 3, "min_tokens": 2}}
    assert expand(trt(version="1.2.0") | {"benchmark": bench})
    with pytest.raises(TrtsweepError, match=r"TensorRT-LLM 0\.17 has no input 'seed'; did you mean 'random_seed'"):
        expand(trt(version="0.17.0") | {"benchmark": bench})
