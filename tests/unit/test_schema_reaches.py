"""Every field of the sweep schema reaches what it configures: no key is parsed and then silently dropped.

The point flow is not re-implemented here: the YAML of `playbooks/tasks/run_point.yml` and of the llm_perf role
is evaluated with Ansible's own templating (role variables as the include_role tasks map them from the point,
then the llm_perf role's module arguments), the module's argument spec and `command()` turn those into the
llm-perf command line, and llm-perf's own parser reads it. Placement keys are followed into the plan.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from trtsweep.fleet import runplan
from trtsweep.perf.cli import parser as llm_perf_parser
from trtsweep.report import sizing, verdict
from trtsweep.sweep import planning, slo

ROOT = Path(__file__).resolve().parents[2]
RUN_POINT = ROOT / "playbooks" / "tasks" / "run_point.yml"
LLM_PERF_ROLE = ROOT / "roles" / "llm_perf"
LLM_PERF_MODULE = ROOT / "library" / "trtsweep_llm_perf.py"

# what the play and the earlier roles give run_point.yml (inventory variables, facts set by the roles)
CONTEXT: dict[str, Any] = {
    "playbook_dir": str(ROOT),
    "trtsweep_work_dir": "/work",
    "trtsweep_results_dir": "/results",
    "trtsweep_run_id": "run-1",
    "trtsweep_cache_dir": "/cache",
    "trtsweep_hf_cache_dir": "/hf",
    "trtsweep_hf_offline": False,
    "trtsweep_triton_runtime": "native",
    "trtsweep_triton_bind_address": "0.0.0.0",
    "trtsweep_server_lease_ttl": 20,
    "hf_download_model_dir": "/hf/model",
    "hf_download_revision_resolved": "0123abc",
    "quantize_checkpoint_dir": "/cache/checkpoints/c",
    "quantize_output_dir": "/cache/q",
    "quantize_hf_dtype": "float32",
    "trtllm_build_engine_dir": "/cache/engines/e",
    "triton_serve_server_id": "trtsweep-0001",
}
PLACED = {"host": "h", "lane": "h--lane0", "gpus": [0, 1, 2, 3], "visible_devices": "0,1,2,3",
          "ports": {"http": 8000, "grpc": 8001, "metrics": 8002}}  # fmt: skip


# Ansible is imported only when this test runs, never at collection: importing it patches sys.intern, which breaks
# torch._dynamo for every test of the session that loads a model in-process (see pyproject's pytest addopts).
@functools.cache
def _ansible() -> Any:
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    return ArgumentSpecValidator, Templar(loader=DataLoader()), trust_as_template


def trust_as_template(value: str) -> Any:
    return _ansible()[2](value)


def _trusted(value: Any) -> Any:
    """YAML read here is trusted as templates, as Ansible trusts its playbook files."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def _template(value: Any, variables: dict[str, Any]) -> Any:
    templar = _ansible()[1]
    templar.available_variables = variables
    return templar.template(value)


@functools.cache
def _yaml(path: Path) -> Any:
    """A playbook / role file, its strings trusted as templates (read once: Ansible caches compiled templates)."""
    return _trusted(yaml.safe_load(path.read_text()))


def _tasks(tasks: list[dict[str, Any]], scope: dict[str, Any]) -> Any:
    """Every task, blocks flattened and task files included (include_tasks beside run_point.yml), with the
    variables of the blocks around it."""
    for task in tasks:
        if "block" in task:
            inner = {**scope, **(task.get("vars") or {})}
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key) or [], inner)
        elif "ansible.builtin.include_tasks" in task:
            yield from _tasks(_yaml(RUN_POINT.parent / str(task["ansible.builtin.include_tasks"])), scope)
        else:
            yield task, scope


def role_variables(point: dict[str, Any], only: str | None = None) -> dict[str, dict[str, Any]]:
    """role -> the role variables run_point.yml's include_role task sets for this point (tasks whose `when` is
    false are left out, as Ansible would), evaluating its set_fact tasks on the way; `only`: that role's."""
    context = {**CONTEXT, "trtsweep_point": {**point, **PLACED}}
    roles: dict[str, dict[str, Any]] = {}
    for task, scope in _tasks(_yaml(RUN_POINT), {}):
        variables = {**context, **scope}
        if "ansible.builtin.set_fact" in task:
            context.update(_template(task["ansible.builtin.set_fact"], variables))
        include = task.get("ansible.builtin.include_role")
        if include is None or include.get("tasks_from") == "stop":
            continue
        name = include["name"] + (f":{include['tasks_from']}" if include.get("tasks_from") else "")
        if only not in (None, name):
            continue
        when = task.get("when")
        if when is not None and not _template(trust_as_template("{{ " + str(when) + " }}"), variables):
            continue
        rendered = _template(task.get("vars") or {}, variables)
        roles[name] = {**roles.get(name, {}), **rendered}
    return roles


def _module(path: Path) -> ModuleType:
    if "ansible.module_utils.trtsweep_common" not in sys.modules:
        common = importlib.util.spec_from_file_location(
            "ansible.module_utils.trtsweep_common", ROOT / "module_utils" / "trtsweep_common.py"
        )
        assert common is not None and common.loader is not None
        sys.modules[common.name] = importlib.util.module_from_spec(common)
        common.loader.exec_module(sys.modules[common.name])
    spec = importlib.util.spec_from_file_location(f"_under_test_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _argument_spec(path: Path) -> dict[str, Any]:
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "AnsibleModule":
            return ast.literal_eval(next(k.value for k in node.keywords if k.arg == "argument_spec"))
    raise AssertionError(f"{path}: no AnsibleModule(argument_spec=...)")


def llm_perf_argv(point: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The llm_perf role for this point: its copy task's arguments, and the llm-perf command line the module runs."""
    include = role_variables(point, only="llm_perf")["llm_perf"]
    defaults, tasks = _yaml(LLM_PERF_ROLE / "defaults" / "main.yml"), _yaml(LLM_PERF_ROLE / "tasks" / "main.yml")
    variables = {**defaults, **include}  # include_role vars win over role defaults
    copy = _template(next(t for t in tasks if "ansible.builtin.copy" in t)["ansible.builtin.copy"], variables)
    args = _template(next(t for t in tasks if "trtsweep_llm_perf" in t)["trtsweep_llm_perf"], variables)
    checked = _ansible()[0](_argument_spec(LLM_PERF_MODULE)).validate(args)
    assert not checked.error_messages, checked.error_messages
    argv = _module(LLM_PERF_MODULE).command(checked.validated_parameters)
    assert argv[1:3] == ["-m", "trtsweep.perf.cli"]
    return copy, argv[3:]


def llm_perf(point: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The llm_perf role for this point: its copy task's arguments, and llm-perf's parsed command line."""
    copy, argv = llm_perf_argv(point)
    return copy, llm_perf_parser().parse_args(argv)


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
    }
    # sweep field -> (overrides of the base sweep, {role: {role variable: value run_point.yml must give it}})
    top: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {
        "name": ({"name": "renamed"}, {"triton_repo": {"triton_repo_dest": f"/work/renamed/{point_id}/triton_repo"}}),
        "backend": (hf_sweep(precisions=["float32"]), {"quantize": {"quantize_backend": "hf"}}),
        "models": ({"models": [{"repo_id": "Org/Other-1B", "name": "qwen"}]},
                   {"hf_download": {"hf_download_repo_id": "Org/Other-1B"}}),
        "precisions": ({"precisions": ["int8_wo"]}, {"quantize": {"quantize_precision": "int8_wo"}}),
        "parallelism": ({"parallelism": [{"tp": 2, "pp": 2}]},
                        {"quantize": {"quantize_tp": 2, "quantize_pp": 2},
                         "trtllm_build": {"trtllm_build_tp": 2, "trtllm_build_pp": 2},
                         "triton_serve": {"triton_serve_world_size": 4}}),
        "max_batch_sizes": ({"max_batch_sizes": [16]},
                            {"trtllm_build": {"trtllm_build_max_batch_size": 16},
                             "triton_repo": {"triton_repo_max_batch_size": 16}}),
        "lengths": ({"lengths": [{"input": 300, "output": 40}]},
                    {"trtllm_build": {"trtllm_build_max_input_len": 300, "trtllm_build_max_output_len": 40}}),
        "streaming": ({"streaming": [False]},
                      {"triton_repo": {"triton_repo_decoupled_mode": False, "triton_repo_streaming": False},
                       "llm_perf": {"llm_perf_streaming": False}}),
        "triton": ({"triton": {"max_queue_delay_microseconds": 100}},
                   {"triton_repo": {"triton_repo_overrides": {"max_queue_delay_microseconds": 100}}}),
        "flow": ({**pytorch_flow, "servers": ["triton"]},
                 {"quantize": {"quantize_flow": "pytorch"}, "triton_repo": {"triton_repo_layout": "llmapi"},
                  "llm_perf": {"llm_perf_model": "tensorrt_llm"}}),
        "servers": ({**pytorch_flow, "servers": ["trtllm-serve"]},
                    {"llm_perf": {"llm_perf_protocol": "openai", "llm_perf_model": "trtsweep-0001"}}),
        "pytorch": ({**pytorch_flow, "pytorch": {"enable_chunked_prefill": True, "enable_iter_perf_stats": False}},
                    {"trtllm_build:llm_api_options": {"trtllm_build_llm_api_options": {
                        **pytorch_options, "enable_chunked_prefill": True, "enable_iter_perf_stats": False}}}),
        "llm_api": ({**pytorch_flow, "llm_api": {"iter_stats_max_iterations": 5000}},
                    {"trtllm_build:llm_api_options": {"trtllm_build_llm_api_options": {
                        **pytorch_options, "iter_stats_max_iterations": 5000}}}),
    }  # fmt: skip
    trtllm: dict[str, tuple[Any, dict[str, dict[str, Any]]]] = {
        "version": ("0.12.0", {"quantize": {"quantize_trtllm_version": "0.12.0"},
                               "trtllm_build": {"trtllm_build_trtllm_version": "0.12.0"},
                               "triton_repo": {"triton_repo_trtllm_version": "0.12.0"}}),
        "family": ("llama", {"quantize": {"quantize_family": "llama"}}),
        "dir": ("/opt/trtllm", {"quantize": {"quantize_trtllm_dir": "/opt/trtllm"}}),
        "python": ("/usr/bin/python3.10", {"quantize": {"quantize_python": "/usr/bin/python3.10"}}),
        "runtime": ("container", {"quantize": {"quantize_runtime": "container"},
                                  "trtllm_build": {"trtllm_build_runtime": "container"}}),
        "container_image": ("nvcr.io/x/trt:1", {"quantize": {"quantize_container_image": "nvcr.io/x/trt:1"},
                                                "trtllm_build": {"trtllm_build_container_image": "nvcr.io/x/trt:1"},
                                                "triton_serve": {"triton_serve_container_image": "nvcr.io/x/trt:1"}}),
        "kv_cache_dtype": ("fp8", {"quantize": {"quantize_kv_cache_dtype": "fp8"}}),
        "calib_size": (64, {"quantize": {"quantize_calib_size": 64}}),
        "modelopt_dir": ("/opt/modelopt", {"quantize": {"quantize_modelopt_dir": "/opt/modelopt"}}),
        "calibrate_on_prompts": (True, {"quantize": {
            "quantize_calib_data": f"/work/walk/{point_id}/prompts.jsonl"}}),
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

    walked = {"benchmark": {*benchmark, "load"}, "trtllm": set(trtllm), "placement": set(placement)}
    assert set(planning.BENCHMARK_KEYS) == walked["benchmark"], "walk every benchmark key"
    assert set(planning.TRTLLM_KEYS) == walked["trtllm"], "walk every trtllm key"
    assert set(planning.PLACEMENT_KEYS) == walked["placement"], "walk every placement key"
    assert set(planning.KNOWN) == {*top, "benchmark", "trtllm", "placement", "slo"}, "walk every top-level field"

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
    _, argv = llm_perf_argv(planning.expand(searching)[0])
    _, base_argv = llm_perf_argv(planning.expand(trt_sweep())[0])
    flags = dict(zip(argv, [*argv[1:], None], strict=True))
    want = {"--search": "slo", "--search-variable": "concurrency", "--search-max": "12",
            "--search-max-levels": "8", "--search-slo": "ttft_p99_ms=1000,min_success_rate=0.99",
            "--num-requests": "50"}  # fmt: skip
    assert {flag: flags.get(flag) for flag in want} == want, argv
    assert "--concurrency" not in argv and "--concurrency" in base_argv and "--search" not in base_argv

    dropped: list[str] = []
    base_point = planning.expand(trt_sweep())[0]
    base_copy, base_args = llm_perf(base_point)
    for key, (value, attribute, expected) in benchmark.items():
        copy, args = llm_perf(planning.expand(trt_sweep(benchmark={key: value}))[0])
        if getattr(args, attribute) != expected or getattr(base_args, attribute) == expected:
            dropped.append(f"benchmark.{key}: llm-perf got {getattr(args, attribute)!r}, want {expected!r}")
        if key == "protocol" and args.url != "127.0.0.1:8000":  # http: the point's http port, not grpc's
            dropped.append(f"benchmark.protocol: llm-perf url {args.url}")
        if key == "input_data" and copy["src"] != str(other):
            dropped.append(f"benchmark.input_data: the role copies {copy['src']} (base: {base_copy['src']})")

    base = role_variables(base_point)

    def compare(field: str, sweep: dict[str, Any], expected: dict[str, dict[str, Any]]) -> None:
        got = role_variables(planning.expand(sweep)[0])
        for role, values in expected.items():
            for var, want in values.items():
                now, before = got.get(role, {}).get(var, "<role not included>"), base.get(role, {}).get(var)
                if now != want or before == want:
                    dropped.append(f"{field}: {role} gets {var}={now!r} (base {before!r}), want {want!r}")

    for key, (over, expected) in top.items():
        compare(key, over if key == "backend" else trt_sweep(**over), expected)
    for key, (value, expected) in trtllm.items():
        compare(f"trtllm.{key}", trt_sweep(trtllm={key: value}), expected)

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
