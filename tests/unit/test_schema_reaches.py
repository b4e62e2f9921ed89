"""Every field of the sweep schema reaches what it configures: no key is parsed and then silently dropped.

The point flow is not re-implemented here: the lane's own mapping (trtsweep.lane.point.PointRun, what a host runs
for each point) is asked what each stage is given for a placed point, with the host's settings as the controller
hands them (every role's defaults plus the trtsweep_* settings) and fixed stand-ins for what earlier stages made;
its benchmark parameters become llm-perf's command line (trtsweep.perf.argv.command), which llm-perf's own parser
reads. Placement keys are followed into the plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trtsweep.fleet import runplan
from trtsweep.lane import disagg as lane_disagg
from trtsweep.lane.point import PointRun
from trtsweep.lane.spec import ROLES, TRTSWEEP_SETTINGS, HostSpec
from trtsweep.perf.argv import command
from trtsweep.perf.cli import parser as llm_perf_parser
from trtsweep.perf.dataset import parse_lengths
from trtsweep.report import sizing, verdict
from trtsweep.sweep import planning, slo

ROOT = Path(__file__).resolve().parents[2]

# the trtsweep_* settings the controller hands a host (inventory variables)
CONTEXT: dict[str, Any] = {
    "trtsweep_work_dir": "/work",
    "trtsweep_cache_dir": "/cache",
    "trtsweep_hf_cache_dir": "/hf",
    "trtsweep_hf_offline": False,
    "trtsweep_triton_runtime": "native",
    "trtsweep_triton_bind_address": "0.0.0.0",
    "trtsweep_triton_container_image": None,
    "trtsweep_server_lease_ttl": 20,
    "trtsweep_gpus": None,
    "trtsweep_slurm_job": None,
    "trtsweep_slurm_cpus": None,
}
# what the earlier stages made (download, quantize, build, serve), as the later stages read it
MADE: dict[str, Any] = {
    "model_dir": "/hf/model",
    "revision": "0123abc",
    "output_dir": "/cache/q",
    "hf_dtype": "float32",
    "checkpoint_dir": "/cache/checkpoints/c",
    "engine_dir": "/cache/engines/e",
    "server_id": "trtsweep-0001",
}
PLACED = {"host": "h", "lane": "h--lane0", "gpus": [0, 1, 2, 3], "visible_devices": "0,1,2,3",
          "ports": {"http": 8000, "grpc": 8001, "metrics": 8002, "worker0": 8003, "worker1": 8004,
                    "worker2": 8005}}  # fmt: skip


def settings(**over: Any) -> dict[str, Any]:
    """The host's settings as the controller resolves them: each role's defaults, then the trtsweep_* ones."""
    assert set(CONTEXT) == set(TRTSWEEP_SETTINGS), "give every trtsweep_* setting the lane reads"
    found: dict[str, Any] = {}
    for role in ROLES:
        found.update(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {})
    return {**found, **CONTEXT, **over}


def point_run(point: dict[str, Any], where: Path, **over: Any) -> PointRun:
    """The lane's run of `point` placed on host h (PLACED), with MADE as what its earlier stages made; `where`
    holds the run's journal and lease; `over`: settings the inventory sets."""
    placed = {**point, **PLACED}
    spec = HostSpec(run_id="run-1", sweep=point["sweep"], journal_dir=where / "journal", lease_file=where / "lease",
                    settings=settings(**over), inputs={point["benchmark"]["input_data"]: "/inputs/0-prompts.jsonl"},
                    lanes=[{"name": PLACED["lane"], "ports": PLACED["ports"], "points": [placed]}])  # fmt: skip
    run = PointRun(spec, placed, where / "journal" / f"{PLACED['lane']}.jsonl", "h")
    for name, value in MADE.items():
        setattr(run.made, name, value)
    return run


def stages(run: PointRun) -> dict[str, Any]:
    """stage -> what the lane gives it for the point; a stage the point does not run is absent (as run_point.yml's
    roles were skipped: the engine flow's checkpoint and engine for the tensorrtllm backend, the PyTorch flow's
    ModelOpt checkpoint and LLM API options, a Triton repository unless trtllm-serve serves)."""
    given: dict[str, Any] = {"paths": run.paths, "download": run.download_params(), "server": run.server_params(),
                             "benchmark": run.benchmark_params()}  # fmt: skip
    if run.p["backend"] == "tensorrtllm" and not run.pytorch:
        given["checkpoint"], given["checkpoint_runtime"] = run.checkpoint_spec()
        given["engine"], given["engine_runtime"] = run.engine_spec()
    if run.p["backend"] == "tensorrtllm" and run.pytorch:
        given["modelopt"], given["modelopt_runtime"] = run.modelopt_spec()
    if run.pytorch:
        given["llm_api_options"] = yaml.safe_load(run.llm_api_options())
    if not run.openai:
        given["repository"] = run.repository_params()
    if run.p.get("disaggregated"):  # its workers and the proxy's config (lane/disagg.py)
        given["disagg"] = lane_disagg.layout(run.p, given["llm_api_options"], "h")
    return given


class _Missing:
    def __repr__(self) -> str:
        return "<not given>"


MISSING = _Missing()


def lookup(given: dict[str, Any], path: str) -> Any:
    """`stage.name.name...` of stages(): a key of a mapping or an attribute of a spec."""
    value: Any = given
    for name in path.split("."):
        value = value.get(name, MISSING) if isinstance(value, dict) else getattr(value, name, MISSING)
    return value


def llm_perf_argv(point: dict[str, Any], where: Path) -> list[str]:
    """The llm-perf command line the lane runs for this point (its arguments, after `python -m trtsweep.perf.cli`)."""
    argv = command(point_run(point, where).benchmark_params())
    assert argv[1:3] == ["-m", "trtsweep.perf.cli"]
    return argv[3:]


def llm_perf(point: dict[str, Any], where: Path) -> Any:
    """llm-perf's parsed command line for this point."""
    return llm_perf_parser().parse_args(llm_perf_argv(point, where))


def trt_sweep(**over: Any) -> dict[str, Any]:
    base = {
        "name": "walk",
        "backend": "tensorrtllm",
        "trtllm": {"version": "0.11.0", "family": "qwen", "dir": "/app/tensorrt_llm"},
        "models": [{"repo_id": "Qwen/Qwen2-0.5B", "name": "qwen"}],
        "precisions": ["fp16"],
        "parallelism": [{"tp": 1, "pp": 1}],
        "max_batch_sizes": [4],
        "lengths": [{"input": 512, "output": 64}],
        "streaming": [True],
        "triton": {},
        "benchmark": {"concurrency": [1], "input_data": "data/prompts.jsonl"},
    }
    for key, value in over.items():
        base[key] = {**base[key], **value} if key in ("trtllm", "benchmark") else value
    return base


def hf_sweep(**over: Any) -> dict[str, Any]:
    return {**trt_sweep(), "backend": "hf", "trtllm": {}, "precisions": ["float32", "bfloat16"], **over}


def test_every_sweep_field_reaches_what_it_configures(tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text('{"input": "hi", "output": "hello"}\n')
    talks = tmp_path / "talks.jsonl"
    talks.write_text('{"conversation": [{"user": "hi", "reference": "hello"}, {"user": "and?"}]}\n')
    point_id = "qwen_fp16_tp1pp1_bs4_isl512osl64_stream"  # of trt_sweep()
    pytorch_flow = {"flow": "pytorch", "trtllm": {"version": "1.2.0"}}
    pytorch_options = {"max_batch_size": 4, "max_input_len": 512, "max_seq_len": 576, "tensor_parallel_size": 1,
                       "pipeline_parallel_size": 1, "dtype": "float16", "enable_iter_perf_stats": True}  # fmt: skip
    # benchmark key: (value in the sweep, attribute of llm-perf's parsed command line, what llm-perf must get)
    benchmark: dict[str, tuple[Any, str, Any]] = {
        "protocol": ("http", "protocol", "http"),
        "concurrency": ([3, 5], "concurrency", [3, 5]),
        "input_data": (str(other), "input_data", Path(f"/work/walk/{point_id}/other.jsonl")),  # the host's copy
        "num_requests": (7, "num_requests", 7),
        "warmup_requests": (3, "warmup_requests", 3),
        "max_tokens": (33, "max_tokens", 33),
        "chat_template": (True, "chat_template", True),
        "seed": (42, "seed", 42),
        "extra_inputs": ({"top_k": 2, "temperature": 0.5}, "extra_inputs_json", {"top_k": 2, "temperature": 0.5}),
        "request_timeout": (123.5, "request_timeout", 123.5),
        "stall_timeout": (0, "stall_timeout", 0.0),  # 0 turns the check off; it must not become the default
        "connect_timeout": (4, "connect_timeout", 4.0),
        "shared_prefix": ({"count": 3, "tokens": 40}, "shared_prefix_count", 3),  # its tokens: below
        "conversations": ({"path": str(talks)}, "conversations", talks),  # its history and think time: below
    }
    # sweep field -> (overrides of the base sweep, {stage.what: value the lane must give that stage}; see stages())
    top: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "name": ({"name": "renamed"}, {"paths.point_dir": Path(f"/work/renamed/{point_id}"),
                                       "server.model_repository": f"/work/renamed/{point_id}/triton_repo",
                                       "benchmark.export_file": f"/work/renamed/{point_id}/runs/run-1/results/"
                                                                "llm_perf.json"}),
        "backend": (hf_sweep(precisions=["float32"]), {"repository.backend": "hf",
                                                       "repository.engine_dir": MADE["output_dir"],
                                                       "server.engine_dir": None}),
        "models": ({"models": [{"repo_id": "Org/Other-1B", "name": "qwen"}]},
                   {"download.repo_id": "Org/Other-1B", "checkpoint.model_id": "Org/Other-1B"}),
        "precisions": ({"precisions": ["int8_wo"]}, {"checkpoint.precision": "int8_wo"}),
        "parallelism": ({"parallelism": [{"tp": 2, "pp": 2}]},
                        {"checkpoint.tp": 2, "checkpoint.pp": 2, "engine.tp": 2, "engine.pp": 2,
                         "server.world_size": 4}),
        "max_batch_sizes": ({"max_batch_sizes": [16]},
                            {"engine.options.max_batch_size": 16, "repository.triton_max_batch_size": 16}),
        "lengths": ({"lengths": [{"input": 300, "output": 40}]},
                    {"engine.options.max_input_len": 300, "engine.options.max_output_len": 40}),
        "streaming": ({"streaming": [False]},
                      {"repository.decoupled_mode": False, "repository.streaming": False,
                       "benchmark.streaming": False}),
        "triton": ({"triton": {"max_queue_delay_microseconds": 100}},
                   {"repository.max_queue_delay_microseconds": 100}),
        "flow": ({**pytorch_flow, "servers": ["triton"]},
                 {"modelopt.release": "1.2", "repository.layout": "llmapi", "benchmark.model": "tensorrt_llm"}),
        "servers": ({**pytorch_flow, "servers": ["trtllm-serve"]},
                    {"benchmark.protocol": "openai", "benchmark.model": MADE["server_id"],
                     "server.openai.options_file": f"/work/walk/{point_id}_pytorch-serve/llm_api_options.yml"}),
        "pytorch": ({**pytorch_flow, "pytorch": {"enable_chunked_prefill": True, "enable_iter_perf_stats": False}},
                    {"llm_api_options": {**pytorch_options, "enable_chunked_prefill": True,
                                         "enable_iter_perf_stats": False},
                     "repository.options": {**pytorch_options, "enable_chunked_prefill": True,
                                            "enable_iter_perf_stats": False}}),
        "llm_api": ({**pytorch_flow, "llm_api": {"iter_stats_max_iterations": 5000}},
                    {"llm_api_options": {**pytorch_options, "iter_stats_max_iterations": 5000},
                     "repository.options": {**pytorch_options, "iter_stats_max_iterations": 5000}}),
        "speculative": ({**pytorch_flow, "speculative": [{"name": "ng", "decoding_type": "NGram", "max_draft_len": 2,
                                                          "options": {"max_matching_ngram_size": 2}}]},
                        {"llm_api_options.speculative_config": {"decoding_type": "NGram", "max_draft_len": 2,
                                                                "max_matching_ngram_size": 2}}),
        "attention_dp": ({**pytorch_flow, "parallelism": [{"tp": 2}], "attention_dp": [True]},
                         {"llm_api_options.enable_attention_dp": True}),
        "disaggregated": ({**pytorch_flow, "servers": ["trtllm-serve"],
                           "disaggregated": [{"context": {"tp": 2}, "generation": {"tp": 1, "instances": 2}}]},
                          {"disagg.proxy.generation_servers.num_instances": 2, "benchmark.expect_server_id": None}),
        "moe": ({**pytorch_flow, "servers": ["trtllm-serve"], "parallelism": [{"tp": 2}], "moe": [{"ep": 2}],
                 "models": [{"repo_id": "Org/Moe-2x", "name": "qwen"}]},  # not in a hub cache: no dense-model check
                {"llm_api_options.moe_expert_parallel_size": 2, "llm_api_options.moe_tensor_parallel_size": 1,
                 "server.openai.ep": 2}),
    }  # fmt: skip
    # trtllm key -> (value, {stage.what: value}, the base sweep when not trt_sweep())
    modelopt_base = trt_sweep(**pytorch_flow)
    trtllm: dict[str, tuple[Any, dict[str, Any], dict[str, Any] | None]] = {
        "version": ("0.12.0", {"checkpoint.version": "0.12.0", "engine.version": "0.12.0",
                               "repository.trtllm_version": "0.12.0"}, None),
        "family": ("llama", {"checkpoint.family": "llama"}, None),
        "dir": ("/opt/trtllm", {"checkpoint_runtime.trtllm_dir": "/opt/trtllm"}, None),
        "python": ("/usr/bin/python3.10", {"checkpoint_runtime.python": "/usr/bin/python3.10"}, None),
        "runtime": ("container", {"checkpoint_runtime.kind": "container", "engine_runtime.kind": "container"}, None),
        "container_image": ("nvcr.io/x/trt:1", {"checkpoint_runtime.image": "nvcr.io/x/trt:1",
                                                "engine_runtime.image": "nvcr.io/x/trt:1",
                                                "server.container_image": "nvcr.io/x/trt:1"}, None),
        "kv_cache_dtype": ("fp8", {"checkpoint.kv_cache_dtype": "fp8"}, None),
        "calib_size": (64, {"checkpoint.calib_size": 64}, None),
        # the PyTorch flow's ModelOpt checkpoint is the one that reads it
        "modelopt_dir": ("/opt/modelopt", {"modelopt.modelopt_dir": "/opt/modelopt"}, modelopt_base),
        "calibrate_on_prompts": (True, {"checkpoint.calib_data": f"/work/walk/{point_id}/prompts.jsonl"}, None),
    }  # fmt: skip
    # placement key -> (placement of an hf sweep without, with the key set, over hosts a (2 x 40 GiB A100) and
    #                   b (2 x 80 GiB H100) or b only, what of the plan it changes)
    pack = {"mode": "pack", "gpus_per_point": 1}

    def lanes(plan: dict[str, Any]) -> Any:
        return [lane["points"] for lane in plan["lanes"]]

    def gpus(plan: dict[str, Any]) -> Any:
        return [p["gpus"] for p in plan["points"]]

    def hosts_of(plan: dict[str, Any]) -> Any:
        return sorted(p["host"] for p in plan["points"])

    placement: dict[str, tuple[dict[str, Any], dict[str, Any], str, Any]] = {
        "mode": (pack, {**pack, "mode": "exclusive"}, "b", lanes),
        "gpus_per_point": (pack, {**pack, "gpus_per_point": 2}, "ab", gpus),
        "gpu_type": (pack, {**pack, "gpu_type": "H100"}, "ab", hosts_of),
        "min_gpu_memory_gb": (pack, {**pack, "min_gpu_memory_gb": 60}, "ab", hosts_of),
        "weights": ({}, {"weights": {"*float32*": 10}}, "b", lanes),
    }

    walked = {
        "benchmark": {*benchmark, "load", "trace", "synthetic"},
        "trtllm": set(trtllm),
        "placement": set(placement),
    }
    assert set(planning.BENCHMARK_KEYS) == walked["benchmark"], "walk every benchmark key"
    assert set(planning.TRTLLM_KEYS) == walked["trtllm"], "walk every trtllm key"
    assert set(planning.PLACEMENT_KEYS) == walked["placement"], "walk every placement key"
    # search: its keys are walked into the rounds by tests/unit/test_search_strategy.py (every search key ...)
    assert set(planning.KNOWN) == {*top, "benchmark", "trtllm", "placement", "slo", "search"}, (
        "walk every top-level field"
    )

    # slo: the report play hands the sweep's to the report, and each key alone can fail a row that meets the rest
    report_play = next(p for p in yaml.safe_load((ROOT / "sweep.yml").read_text()) if p["name"] == "Report")
    report_task = next(t for t in report_play["tasks"] if "trtsweep_report" in t)
    assert "trtsweep_loaded.sweep.slo" in report_task["trtsweep_report"]["slo"]
    measured = {"point": "p", "model": "m", "precision": "int8", "concurrency": 1, "gpus": 1, "rougeL": 0.2,
                "rouge1": 0.45, "output_tok_s_per_gpu": 10.0, "ttft_p99_ms": 500.0, "tpot_p99_ms": 50.0,
                "e2e_p99_ms": 5000.0, "success_rate": 0.9}  # fmt: skip
    reference = {**measured, "point": "ref", "precision": "float16", "rougeL": 0.5, "rouge1": 0.5}
    # key -> (an SLO with it the row misses, the same SLO the row meets without it)
    slo_walk = {"ttft_p99_ms": ({"ttft_p99_ms": 100}, {}), "tpot_p99_ms": ({"tpot_p99_ms": 10}, {}),
                "e2e_p99_ms": ({"e2e_p99_ms": 1000}, {}), "min_success_rate": ({"min_success_rate": 0.99}, {}),
                "max_accuracy_drop": ({"max_accuracy_drop": 0.1}, {}), "min_accuracy": ({"min_accuracy": 0.3}, {}),
                "accuracy_metric": ({"min_accuracy": 0.3},
                                    {"min_accuracy": 0.3, "accuracy_metric": "rouge1"})}  # fmt: skip
    assert set(slo_walk) | {"target_request_rate"} == slo.KEYS, "walk every slo key"
    for key, (missing, meeting) in slo_walk.items():
        rows = [measured, reference]
        assert verdict.judge(rows, missing)["rows"][("p", 1)], f"slo.{key}: the verdict ignored it"
        assert not verdict.judge(rows, meeting)["rows"][("p", 1)], f"slo.{key}: the verdict ignored it"
    # target_request_rate is no row's limit: it sizes the configurations with a capacity (the report's sizing lines)
    searched = {**measured, "point_status": "ok", "capacity_rps": 10.0, "capacity_bound": "tight"}
    assert sizing.lines([searched], 30)[0].endswith("p needs 3 replicas, 3 GPUs (fewest)")
    assert not sizing.lines([searched], None)

    # benchmark.load: a capacity search instead of the concurrency list, judged by the sweep's SLO limits (read from
    # the command line)
    searching = trt_sweep(slo={"ttft_p99_ms": 1000, "min_success_rate": 0.99, "min_accuracy": 0.2})
    searching["benchmark"] = {"input_data": "data/prompts.jsonl", "num_requests": 50,
                              "load": {"search": "slo", "variable": "concurrency", "max": 12}}  # fmt: skip
    argv = llm_perf_argv(planning.expand(searching)[0], tmp_path)
    base_argv = llm_perf_argv(planning.expand(trt_sweep())[0], tmp_path)
    flags = dict(zip(argv, [*argv[1:], None], strict=True))
    want = {"--search": "slo", "--search-variable": "concurrency", "--search-max": "12",
            "--search-max-levels": "8", "--search-slo": "ttft_p99_ms=1000,min_success_rate=0.99",
            "--num-requests": "50"}  # fmt: skip
    assert {flag: flags.get(flag) for flag in want} == want, argv
    assert "--concurrency" not in argv and "--concurrency" in base_argv and "--search" not in base_argv

    # benchmark.shared_prefix: both numbers; benchmark.trace: a replay instead of the concurrency list and prompts file
    prefix_sweep = trt_sweep(benchmark={"shared_prefix": {"count": 3, "tokens": 40}})
    prefixed = llm_perf(planning.expand(prefix_sweep)[0], tmp_path)
    assert (prefixed.shared_prefix_count, prefixed.shared_prefix_tokens) == (3, 40)
    trace = tmp_path / "tuesday.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 70, "output_length": 5, "hash_ids": [0, 1]}\n')
    replaying = trt_sweep()
    replay_trace = {"path": str(trace), "format": "mooncake", "speed": [1, 2.5], "block_size": 64}
    replaying["benchmark"] = {"input_data": "data/prompts.jsonl", "trace": replay_trace}
    replay = llm_perf(planning.expand(replaying)[0], tmp_path)
    got = (replay.trace, replay.trace_format, replay.replay_speed, replay.trace_block_size, replay.input_data)
    got += (replay.concurrency,)
    assert got == (trace, "mooncake", [1.0, 2.5], 64, None, None), got
    # benchmark.conversations: the file instead of the prompts, its history and think time; the concurrency stays
    talk = {"path": str(talks), "history": "recorded", "think_time_ms": 250, "think_time_std_ms": 40}
    talking = trt_sweep(benchmark={"concurrency": [2], "conversations": talk})
    talked = llm_perf(planning.expand(talking)[0], tmp_path)
    got = (talked.conversations, talked.history, talked.think_time_ms, talked.input_data, talked.concurrency)
    assert got == (talks, "recorded", (250.0, 40.0), None, [2]), got
    # benchmark.synthetic: prompts of drawn token lengths instead of the prompts file, or a data set's lengths (the
    # host's copy of its file, which the controller sends like the prompts)
    drawn = {"input": "lognormal:300,0.5", "output": "fixed:16", "count": 40}
    made = llm_perf(planning.expand(trt_sweep(benchmark={"synthetic": drawn}))[0], tmp_path)
    got = (made.synthetic_input_tokens, made.synthetic_output_tokens, made.num_prompts, made.input_data)
    assert got == (parse_lengths("lognormal:300,0.5"), parse_lengths("fixed:16"), 40, None), got
    from_data = trt_sweep(benchmark={"synthetic": {"lengths_from": str(other)}})
    made = llm_perf(planning.expand(from_data)[0], tmp_path)
    assert (made.synthetic_lengths_from, made.input_data) == (other, None), made

    dropped: list[str] = []
    base_point = planning.expand(trt_sweep())[0]
    base_args = llm_perf(base_point, tmp_path)
    assert (base_args.shared_prefix_count, base_args.trace, base_args.replay_speed) == (None, None, None)
    assert (base_args.conversations, base_args.history, base_args.think_time_ms) == (None, None, None)
    for key, (value, attribute, expected) in benchmark.items():
        point = planning.expand(trt_sweep(benchmark={key: value}))[0]
        args = llm_perf(point, tmp_path)
        if getattr(args, attribute) != expected or getattr(base_args, attribute) == expected:
            dropped.append(f"benchmark.{key}: llm-perf got {getattr(args, attribute)!r}, want {expected!r}")
        if key == "protocol" and args.url != "127.0.0.1:8000":  # http: the point's http port, not grpc's
            dropped.append(f"benchmark.protocol: llm-perf url {args.url}")
        # the controller sends the file the point names to the host, and the lane copies it to llm-perf's path
        if key == "input_data" and point["benchmark"]["input_data"] != str(other):
            dropped.append(f"benchmark.input_data: the point names {point['benchmark']['input_data']}")

    def compare(field: str, sweep: dict[str, Any], expected: dict[str, Any], base_sweep: dict[str, Any]) -> None:
        got = stages(point_run(planning.expand(sweep)[0], tmp_path))
        base = stages(point_run(planning.expand(base_sweep)[0], tmp_path))
        for path, want in expected.items():
            now, before = lookup(got, path), lookup(base, path)
            if now != want or before == want:
                dropped.append(f"{field}: the lane gives {path}={now!r} (base {before!r}), want {want!r}")

    for key, (over, expected) in top.items():
        compare(key, over if key == "backend" else trt_sweep(**over), expected, trt_sweep())
    for key, (value, expected, base_sweep) in trtllm.items():
        sweep = trt_sweep(trtllm={key: value}) if base_sweep is None else {
            **base_sweep, "trtllm": {**base_sweep["trtllm"], key: value}}  # fmt: skip
        compare(f"trtllm.{key}", sweep, expected, base_sweep or trt_sweep())

    gpu = {"a": ("NVIDIA A100-SXM4-40GB", 40960), "b": ("NVIDIA H100 80GB HBM3", 81559)}
    hosts = {h: {"gpus": [{"index": i, "name": n, "memory_mb": m} for i in range(2)], "problems": []}
             for h, (n, m) in gpu.items()}  # fmt: skip

    def plan(over: dict[str, Any], where: str) -> dict[str, Any]:
        sweep = hf_sweep(placement=over)
        return runplan.make_plan(sweep, {h: hosts[h] for h in where}, tmp_path / "results", write=False)

    for key, (without, with_key, where, seen) in placement.items():
        before, after = seen(plan(without, where)), seen(plan(with_key, where))
        if before == after:
            dropped.append(f"placement.{key}: {with_key} changes nothing in the plan ({after!r})")

    assert not dropped, "sweep fields that do not reach what they configure:\n" + "\n".join(dropped)
