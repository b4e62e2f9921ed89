"""The PyTorch flow in the plan, the llmapi repository, the trtllm-serve server and the report.

Every generated model.yaml and trtllm-serve command is checked against the argument tables of the release it
targets (src/trtsweep/toolchain/llmapi/args/<release>.json: the LLM API fields and trtllm-serve's click options read
from the TensorRT-LLM sources of 1.0, 1.1 and 1.2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.perf import argv
from trtsweep.report import page
from trtsweep.serve import openai_server
from trtsweep.serve.command import build_command
from trtsweep.serve.identity import adoption_differences, served_hash
from trtsweep.serve.openai_server import OpenAIServe
from trtsweep.serve.spec import ContainerSpec, ServerSpec, ServerState
from trtsweep.sweep.planning import expand
from trtsweep.toolchain.llmapi import args
from trtsweep.triton import llmapi, repository

RELEASES = list(args.releases())


def sweep(**over):
    base = {
        "name": "flows",
        "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": ["float32"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "benchmark": {"concurrency": [1], "input_data": "data/prompts.jsonl", "extra_inputs": {"top_k": 1}},
    }
    return {**base, **over}


def trt(version: str = "1.2.0", **over):
    base = {
        "backend": "tensorrtllm",
        "precisions": ["fp16"],
        "parallelism": [{"tp": 2, "pp": 1}],
        "trtllm": {"version": version, "family": "qwen", "dir": "/app/tensorrt_llm"},
    }
    return sweep(**{**base, **over})


# -- the plan ---------------------------------------------------------------------------------------------------
def test_both_flows_and_both_servers_make_one_point_each_sharing_the_configuration():
    points = expand(sweep(flow=["engine", "pytorch"], servers=["triton", "trtllm-serve"]))
    stem = "smol_float32_tp1pp1_bs4_isl512osl64_stream"
    assert [(p["id"], p["flow"], p["server"]) for p in points] == [
        (stem, "engine", "triton"),
        (f"{stem}_pytorch-triton", "pytorch", "triton"),
        (f"{stem}_pytorch-serve", "pytorch", "trtllm-serve"),
    ]
    assert {p["config"] for p in points} == {stem}
    engine, on_triton, on_serve = points
    assert "llm_api" not in engine and engine["benchmark"]["extra_inputs"] == {"top_k": 1}
    # the hf backend's options are checked against the newest table; dtype is the precision
    assert on_triton["llm_api_release"] == "1.2" and on_triton["llm_api"] == {
        "max_batch_size": 4, "max_input_len": 512, "max_seq_len": 576, "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1, "dtype": "float32", "enable_iter_perf_stats": True}  # fmt: skip
    # the sweep's request inputs under each server's names
    # the llmapi model answers the prompt too unless told not to (the ensemble answers the output only)
    assert on_triton["benchmark"]["extra_inputs"] == {"sampling_param_top_k": 1,
                                                      "sampling_param_exclude_input_from_output": True}  # fmt: skip
    assert on_serve["benchmark"]["extra_inputs"] == {"top_k": 1}


def test_a_model_entry_flow_overrides_the_sweeps():
    models = [{"repo_id": "A/a", "name": "a"}, {"repo_id": "B/b", "name": "b", "flow": "pytorch"}]
    assert [(p["model"]["name"], p["flow"]) for p in expand(sweep(models=models))] == [
        ("a", "engine"),
        ("b", "pytorch"),
    ]


@pytest.mark.parametrize(
    ("sweep_", "message"),
    [
        (trt("1.3.0rc5"), "'trtllm.version': TensorRT-LLM 1.3.0rc5 has no engine flow (trtllm-build): that flow is "
         "0.8 .. 1.2; use flow: pytorch"),
        (trt("0.19.0", flow="pytorch"), "'trtllm.version': TensorRT-LLM 0.19.0 has no PyTorch flow trtsweep has a "
         "table of (LLM API tables: 1.0, 1.1, 1.2); use flow: engine for releases before 1.0"),
        (sweep(flow="torch"), "'flow': expected one of 'engine', 'pytorch' or a non-empty list"),
        (sweep(models=[{"repo_id": "A/a", "flow": ["pytorch", "pytorch"]}]), "'models[0].flow': expected a list "
         "without repeats, got ['pytorch', 'pytorch']"),
        (sweep(servers=["trtllm-serve"]), "'flow': the engine flow is served by Triton only: add triton to servers"),
        (sweep(servers=["vllm"]), "'servers[0]': expected one of 'triton', 'trtllm-serve', got 'vllm'"),
        (trt(flow="pytorch", precisions=["int8_wo"]), "'precisions': 'int8_wo' has no PyTorch-flow counterpart"),
        (trt(precisions=["nvfp4"]), "'precisions': 'nvfp4' is not supported by backend tensorrtllm"),
        (trt(flow=["engine", "pytorch"], precisions=["nvfp4"]), "'precisions': 'nvfp4' has no engine-flow recipe"),
        (sweep(flow="pytorch", pytorch={"cuda_graphs": True}), "'pytorch': unknown key(s) ['cuda_graphs']"),
        (sweep(flow="pytorch", llm_api={"max_num_token": 8}), "llm_api.max_num_token: TensorRT-LLM 1.2's LLM API "
         "has no such option; did you mean 'max_num_tokens'?"),
        (sweep(flow="pytorch", llm_api={"max_batch_size": 8}), "llm_api.max_batch_size: set by the sweep matrix"),
        (sweep(flow="pytorch", llm_api={"dtype": "float16"}), "'llm_api.dtype': set by the point's precision"),
        (sweep(flow="pytorch", pytorch={"enable_block_reuse": "yes"}), "'pytorch.enable_block_reuse': "
         "expected true or false, got 'yes'"),
        (sweep(flow="pytorch", triton={"bls": True}), "'triton': only for the engine flow's repository"),
        (sweep(flow="pytorch", benchmark={"concurrency": [1], "input_data": "data/prompts.jsonl",
                                          "extra_inputs": {"end_id": 2}}),
         "'benchmark.extra_inputs.end_id': the llmapi model (TensorRT-LLM 1.2) has no input 'end_id' or "
         "'sampling_param_end_id'"),
    ],
)  # fmt: skip
def test_what_a_flow_cannot_do_fails_the_plan_in_one_line(sweep_, message):
    with pytest.raises(TrtsweepError) as err:
        expand(sweep_)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("release", ["1.0.0", "1.1.0", "1.2.0"])
def test_tensorrtllm_pytorch_points_of_each_release(release):
    # the Triton repository step serves engines of 1.2 (and 0.8 .. 0.20), not of 1.0 / 1.1
    flows = ["engine", "pytorch"] if release == "1.2.0" else ["pytorch"]
    sweep_ = trt(release, flow=flows, servers=["triton", "trtllm-serve"],
                 pytorch={"kv_cache_free_gpu_memory_fraction": 0.9, "cuda_graph_batch_sizes": [1, 4]})  # fmt: skip
    *engine, on_triton, on_serve = expand(sweep_)
    assert [p["flow"] for p in engine] == flows[:-1] and all("llm_api" not in p for p in engine)
    for point in (on_triton, on_serve):
        assert point["llm_api_release"] == release[:3] and point["resources"]["gpus"] == 2
        assert point["llm_api"]["tensor_parallel_size"] == 2 and point["llm_api"]["dtype"] == "float16"
        assert point["llm_api"]["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9}
        args.check_options(release[:3], point["llm_api"])  # what the options file holds is the release's


# -- the llmapi repository -------------------------------------------------------------------------------------
def release_tree(tmp_path: Path, release: str) -> Path:
    """A stand-in for a TensorRT-LLM source tree's all_models/llmapi/tensorrt_llm (its files are copied as they
    are; their content does not matter here, only which file goes where)."""
    source = tmp_path / release / "tensorrt_llm"
    (source / "1").mkdir(parents=True)
    (source / "1" / "model.py").write_text(f"# model.py of {release}\n")
    (source / "1" / "helpers.py").write_text(f"# helpers.py of {release}\n")
    config = ['name: "tensorrt_llm"', 'backend: "python"', "max_batch_size: 0",
              'input [ { name: "text_input" data_type: TYPE_STRING dims: [ -1 ] } ]',
              'output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]']  # fmt: skip
    (source / "config.pbtxt").write_text("\n".join(config) + "\n")
    return source


@pytest.mark.parametrize("release", RELEASES)
def test_the_llmapi_repository_of_each_release(tmp_path, release):
    point = next(p for p in expand(trt(f"{release}.0", flow="pytorch")))
    spec = llmapi.LlmapiRepo(
        backend="tensorrtllm",
        release=release,
        model="/models/qwen",
        options=point["llm_api"],
        decoupled=True,
        source_dir=str(release_tree(tmp_path, release)),
    )
    files = llmapi.render(spec)
    assert sorted(files) == ["tensorrt_llm/1/helpers.py", "tensorrt_llm/1/model.py", "tensorrt_llm/1/model.yaml",
                             "tensorrt_llm/config.pbtxt"]  # fmt: skip
    assert files["tensorrt_llm/1/model.py"] == f"# model.py of {release}\n"
    model_yaml = yaml.safe_load(files["tensorrt_llm/1/model.yaml"])
    assert model_yaml.pop("triton_config") == {"max_batch_size": 0, "decoupled": True}  # the LLM API batches
    assert model_yaml.pop("backend") == "pytorch" and model_yaml.pop("model") == "/models/qwen"
    assert model_yaml == point["llm_api"]
    args.check_options(release, model_yaml)
    config = repository._parse("config.pbtxt", files["tensorrt_llm/config.pbtxt"])
    assert config.max_batch_size == 0 and config.model_transaction_policy.decoupled
    names = [t.name for t in config.input]
    recorded = llmapi.recorded_inputs(release)
    if recorded:  # generated from the record: every recorded tensor, as recorded
        assert names == [t["name"] for t in recorded]
        assert "sampling_param_max_tokens" in names and "streaming" in names
    else:  # the release's own config.pbtxt, its batch size and policy set from model.yaml
        assert names == ["text_input"]


def test_the_hf_llmapi_repository_serves_the_recorded_tensors():
    spec = llmapi.LlmapiRepo(backend="hf", release="1.2", model="/models/smol", options={"max_batch_size": 4},
                             decoupled=False, hf={"device": "cpu"})  # fmt: skip
    files = llmapi.render(spec)
    assert "TritonPythonModel" in files["tensorrt_llm/1/model.py"]
    assert yaml.safe_load(files["tensorrt_llm/1/model.yaml"])["trtsweep_hf"] == {"device": "cpu"}
    config = repository._parse("config.pbtxt", files["tensorrt_llm/config.pbtxt"])
    assert [t.name for t in config.output] == [t["name"] for t in args.table("1.2")["llmapi_model"]["outputs"]]
    assert not config.model_transaction_policy.decoupled


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"options": {"max_batch_sizes": 4}}, "model.yaml.max_batch_sizes: TensorRT-LLM 1.2's LLM API has no such "
         "option; did you mean 'max_batch_size'?"),
        ({"backend": "tensorrtllm", "source_dir": None}, "the llmapi model of TensorRT-LLM 1.2 comes from its source "
         "tree: set trtllm.dir"),
        ({"backend": "tensorrtllm", "source_dir": "/nonexistent/llmapi"}, "/nonexistent/llmapi/1/model.py: not found"),
    ],
)  # fmt: skip
def test_a_bad_llmapi_repository_is_refused_in_one_line(over, message):
    base = {"backend": "hf", "release": "1.2", "model": "/m", "options": {}, "decoupled": True}
    with pytest.raises(TrtsweepError) as err:
        llmapi.render(llmapi.from_params({**base, **over}))
    assert message in str(err.value)


# -- trtllm-serve ----------------------------------------------------------------------------------------------
def openai(tmp_path: Path, backend: str = "tensorrtllm", release: str = "1.2") -> ServerSpec:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    (tmp_path / "options.yml").write_text("max_batch_size: 4\n")
    serve = OpenAIServe(backend=backend, release=release, model=model, options_file=tmp_path / "options.yml",
                               served_dir=tmp_path / "served", tp=2, pp=1)  # fmt: skip
    return ServerSpec(model_repository=model, log_file=tmp_path / "serve.log", runtime="native",
                             http_port=18000, openai=serve)  # fmt: skip


@pytest.mark.parametrize("release", RELEASES)
def test_the_trtllm_serve_command_of_each_release(tmp_path, release):
    spec = openai(tmp_path, release=release)
    argv, _ = build_command(spec, "trtsweep-00ff")
    assert argv[:2] == ["trtllm-serve", str(tmp_path / "served" / "trtsweep-00ff")]
    flags = [a for a in argv[2:] if a.startswith("--")]
    assert set(flags) <= set(args.table(release)["serve"]["options"])
    # 1.0/1.1: the options' max_batch_size as trtllm-serve's own flag too (its build_config wins over the file's)
    build_config = {} if release == "1.2" else {"--max_batch_size": "4"}
    assert dict(zip(argv[2::2], argv[3::2], strict=True)) == {
        "--backend": "pytorch", "--host": "127.0.0.1", "--port": "18000", "--tp_size": "2", "--pp_size": "1",
        "--extra_llm_api_options": str(tmp_path / "options.yml"), **build_config}  # fmt: skip
    assert spec.ports() == {"http": 18000} and spec.health_url() == "http://127.0.0.1:18000/health"


def test_the_hf_backend_runs_trtsweeps_counterpart_with_the_same_arguments(tmp_path):
    argv, _ = build_command(openai(tmp_path, backend="hf"), "trtsweep-1")
    assert argv[:4] == [sys.executable, "-m", "trtsweep.serve.hf_openai", str(tmp_path / "served" / "trtsweep-1")]
    assert "--extra_llm_api_options" in argv


def test_each_start_serves_through_a_link_of_its_own_and_adoption_ignores_it(tmp_path):
    spec = openai(tmp_path)
    first = openai_server.link(spec.openai, "trtsweep-aa")
    assert first.is_symlink() and first.resolve() == spec.openai.model.resolve() and first.name == "trtsweep-aa"
    argv, _ = build_command(spec, "trtsweep-aa")
    assert argv[1] == str(first)
    old = ServerState(pid=1, start_ticks=1, argv=argv, ports=spec.ports(), bind_address="127.0.0.1",
                             health_url=spec.health_url(), log_file="l", server_id="trtsweep-aa",
                             repository_hash=served_hash(spec), kind="openai")  # fmt: skip
    differences = adoption_differences(old, spec)
    assert all(not d.startswith(("command line", "model repository")) for d in differences), differences
    (tmp_path / "options.yml").write_text("max_batch_size: 8\n")
    assert any(d.startswith("model repository") for d in adoption_differences(old, spec))


def test_the_container_runtime_mounts_the_checkpoint_options_and_links(tmp_path):
    spec = openai(tmp_path)
    spec.runtime = "container"
    spec.container = ContainerSpec(image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0", name="serve-1")
    argv, _ = build_command(spec, "trtsweep-1")
    volumes = [argv[i + 1] for i, a in enumerate(argv) if a in ("-v", "--volume")]
    for path in (spec.openai.model, tmp_path, tmp_path / "served"):
        assert any(v.split(":")[0] == str(path.resolve()) for v in volumes), (path, volumes)
    assert argv[argv.index("nvcr.io/nvidia/tensorrt-llm/release:1.2.0") + 1] == "trtllm-serve"


# -- the report ------------------------------------------------------------------------------------------------
def test_the_report_puts_each_configurations_flows_and_servers_side_by_side():
    def row(point: str, flow: str, srv: str, tok_s: float) -> dict[str, object]:
        return {"point": point, "config": "c1", "flow": flow, "server": srv, "concurrency": 1,
                "output_token_throughput": tok_s, "ttft_p99_ms": 10.0, "tpot_p50_ms": 2.0, "success_rate": 1.0,
                "rougeL": 0.5}  # fmt: skip

    rows = [row("c1", "engine", "triton", 100.0), row("c1_pytorch-triton", "pytorch", "triton", 90.0),
            row("c1_pytorch-serve", "pytorch", "trtllm-serve", 95.0), {**row("c2", "engine", "triton", 1.0),
                                                                       "config": "c2"}]  # fmt: skip
    groups = page.flows_compared(rows)
    assert list(groups) == ["c1"] and list(groups["c1"]) == ["engine / triton", "pytorch / triton",
                                                              "pytorch / trtllm-serve"]  # fmt: skip
    ((_config, table),) = page.flow_tables(rows)
    html = page.environment().get_template("_report.html.j2").module.side_by_side("flows", table)
    for point, value in (("c1", "100.0"), ("c1_pytorch-triton", "90.0"), ("c1_pytorch-serve", "95.0")):
        assert f'data-point="{point}" data-concurrency="1" data-column="output_token_throughput"' in html
        assert f">{value}</td>" in html
    assert "c2" not in html


def test_charts_name_each_flow_of_one_configuration():
    stem = "smol_float32_tp1pp1_bs4_isl512osl64_stream"
    label, common = page.labels([stem, f"{stem}_pytorch-triton", f"{stem}_pytorch-serve"])
    assert list(label.values()) == ["engine", "pytorch-triton", "pytorch-serve"]
    assert common == "smol float32 tp1pp1 bs4 isl512osl64 stream"


def test_the_lane_hands_trtllm_serve_its_point(tmp_path):
    """What the lane (trtsweep.lane.point.PointRun) gives trtllm-serve for its point: no Triton repository, the
    checkpoint, the options file, the release, TP/PP, and the trtllm-serve beside the install's python."""
    from tests.unit.test_schema_reaches import MADE, point_run

    sweep_ = trt(flow="pytorch", servers=["trtllm-serve"])
    sweep_["trtllm"]["python"] = "/opt/venv/bin/python3"
    (point,) = expand(sweep_)
    work = tmp_path / "work"
    run = point_run(point, tmp_path, trtsweep_work_dir=str(work))
    run.journal_file.parent.mkdir()
    run._preflight()
    run._build()  # the PyTorch flow's build: the LLM API options file, no engine
    run._repository()
    point_dir = work / "flows" / point["id"]
    assert not (point_dir / "triton_repo").exists()  # no Triton repository for trtllm-serve
    assert yaml.safe_load((point_dir / "llm_api_options.yml").read_text()) == point["llm_api"]
    recorded = json.loads((run.paths.results / "repository.json").read_text())
    assert recorded["repository"] is None
    assert recorded["params"] == {"llm_api": point["llm_api"], "model": MADE["output_dir"]}
    assert run.server_params()["openai"] == {
        "backend": "tensorrtllm", "release": "1.2", "model": MADE["output_dir"],
        "options_file": f"{point_dir}/llm_api_options.yml", "served_dir": f"{point_dir}/runs/run-1/served",
        "tp": 2, "pp": 1, "ep": None, "executable": "/opt/venv/bin/trtllm-serve",
    }  # fmt: skip
    # llm-perf asks trtllm-serve for the served id, and reads its iteration stats at /metrics on the port of its API
    perf = run.benchmark_params()
    assert perf["protocol"] == "openai" and perf["url"] == "127.0.0.1:8000" and perf["model"] == MADE["server_id"]
    assert perf["server_metrics_url"] == "http://127.0.0.1:8000/metrics"
    # the point's GPUs are sampled during each level, on the host that runs it
    assert perf["gpu_telemetry"] == run.p["gpus"] and "--gpu-telemetry" in argv.command(perf)


def test_the_lane_starts_one_process_for_the_pytorch_flow_and_one_per_rank_for_the_engine_flow(tmp_path):
    """TP 2: the engine flow's Triton runs a tritonserver per rank under mpirun; the llmapi model's Triton is one
    process (its LLM API starts the ranks, as upstream's launch of the llmapi repository with world size 1)."""
    from tests.unit.test_schema_reaches import point_run

    engine, pytorch = expand(trt(flow=["engine", "pytorch"]))
    assert (engine["flow"], pytorch["flow"]) == ("engine", "pytorch") and engine["world_size"] == 2
    assert point_run(engine, tmp_path).server_params()["world_size"] == 2
    assert point_run(pytorch, tmp_path).server_params()["world_size"] == 1
