"""A disaggregated point (`point["disaggregated"]`) in its lane: its server group instead of one server.

The point's workers come from toolchain.llmapi.disagg (the point's LLM API options, its GPUs and the lane's worker
ports, `worker0`...: fleet/placement.py): each one's options file (`llm_api_options_<worker>.yml`) beside the point's,
its command checked against the release, its GPUs (CUDA_VISIBLE_DEVICES: context workers first), its port, its log
(`<worker>.log` in the results); the proxy's config (`disagg_proxy.yml`) names them and the proxy listens on the
lane's http port. The hf backend's stand-ins run instead of trtllm-serve (serve/hf_openai.py) and of the proxy
(serve/disagg_proxy.py), from the same files. serve/group.py starts the workers, waits for them, starts the proxy,
waits for it, watches the group during the benchmark and stops it; the point's record (`disaggregated.json` in its
results) names every member (role, GPUs, port, pid, its supervisor's pid, log, command), the proxy's config and what
moves the KV cache between the workers.

The benchmark (llm-perf, OpenAI protocol) talks to the proxy with the group's model id. trtllm-serve disaggregated has
no GET /v1/models in 1.0-1.2 (only later releases forward it to a worker), so llm-perf checks no server id there: the
group is checked ours when it becomes ready (every worker answers with the group's id on its own port, the proxy's port
was free before it started and its /health answers once its workers do) and watched during every level (a member
that exits stops the benchmark and fails the point, naming it). The proxy has no iteration stats: llm-perf reads the
first generation worker's /metrics (drafted and accepted tokens are counted where tokens are decoded).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trtsweep.errors import TrtsweepError
from trtsweep.serve import group as server_group
from trtsweep.serve.command import held, in_runtime, runtime_of
from trtsweep.serve.spec import from_params
from trtsweep.toolchain.llmapi import disagg

PROXY_STANDIN = ("-m", "trtsweep.serve.disagg_proxy")
GROUP_FILE = "disagg_group.json"
PROXY_CONFIG = "disagg_proxy.yml"
RECORD = "disaggregated.json"
# what carries a context worker's KV cache to a generation worker
STANDIN_TRANSFER = ("none: the hf backend's stand-in workers have no KV cache transfer; a generation worker recomputes "
                    "the prompt's prefill from the context worker's first token (serve/hf_openai.py)")  # fmt: skip


@dataclass
class Layout:
    """What a disaggregated point starts: its shape, its workers and the proxy's config."""

    shape: disagg.Shape
    workers: list[disagg.Worker]
    proxy: dict[str, Any]


def worker_ports(point: dict[str, Any], shape: disagg.Shape) -> list[int]:
    """The lane's worker ports the point's workers take (fleet/placement.py gives every lane of its host enough)."""
    ports = point.get("ports") or {}
    found = [ports[f"worker{i}"] for i in range(shape.instances()) if f"worker{i}" in ports]
    if len(found) != shape.instances():
        raise TrtsweepError(f"disaggregated point {point['id']}: {shape.instances()} workers, its lane has "
                            f"{len(found)} worker ports (worker0..)")  # fmt: skip
    return found


def layout(point: dict[str, Any], options: dict[str, Any], host: str) -> Layout:
    shape = disagg.Shape.from_point(point["disaggregated"])
    release = point["llm_api_release"]
    workers = disagg.workers(shape, release, options, list(point.get("gpus") or []), host, worker_ports(point, shape))
    return Layout(shape, workers, disagg.proxy_config(shape, workers, host, int(point["ports"]["http"])))


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=True, indent=2, default_flow_style=False)


def starts(
    plan: Layout, base: dict[str, Any], point_dir: Path, run_dir: Path, results: Path,
    names: Mapping[int, Any] | None = None,
) -> tuple[list[server_group.WorkerStart], server_group.ProxyStart]:  # fmt: skip
    """Every member's start from the point's server parameters (`base`: PointRun.server_params), with the files
    they read written to `point_dir` (and copied to `results`); a worker's GPUs given by their `names` (the node's
    index -> the name that holds where the point runs: lane/step.py), else by index."""
    out = []
    for worker in plan.workers:
        options = point_dir / f"llm_api_options_{worker.name}.yml"
        options.write_text(_yaml(worker.options))
        (results / options.name).write_text(_yaml(worker.options))
        openai = {**base["openai"], "options_file": str(options), "served_dir": str(run_dir / "served" / worker.name),
                  "tp": worker.tp, "pp": worker.pp, "ep": None, "flags": worker.flags}  # fmt: skip
        name = f"{base['container_name']}-{worker.name}" if base.get("container_name") else None
        params = {**base, "container_name": name, "http_port": worker.port,
                  "visible_devices": ",".join(str((names or {}).get(g, g)) for g in worker.gpus) or None,
                  "log_file": str(results / f"{worker.name}.log"), "openai": openai}  # fmt: skip
        out.append(server_group.WorkerStart(worker.name, worker.role, list(worker.gpus), from_params(params)))
    config = point_dir / PROXY_CONFIG
    config.write_text(_yaml(plan.proxy))
    (results / PROXY_CONFIG).write_text(_yaml(plan.proxy))
    release, o = base["openai"]["release"], base["openai"]
    proxy_spec = from_params({**base, "openai": None, "model_repository": str(point_dir), "visible_devices": None,
                              "log_file": str(results / "proxy.log")})  # fmt: skip
    argv = disagg.proxy_argv(release, config, o["executable"])
    if o["backend"] == "hf":
        argv = [sys.executable, *PROXY_STANDIN, *argv[1:]]
    elif proxy_spec.container is not None:  # the release image's trtllm-serve, as the workers run it
        runtime_of(proxy_spec).prepare()  # as the workers' (their logs say what their runtime adapted)
        argv = in_runtime(proxy_spec, argv, [point_dir])
        return out, server_group.ProxyStart(argv, proxy_spec, held(proxy_spec))
    return out, server_group.ProxyStart(argv, proxy_spec)


# the environment that steers the KV-cache transfer between workers (UCX's and NIXL's own variables, TensorRT-LLM's
# TRTLLM_USE_UCX_KVCACHE / TRTLLM_USE_NIXL_KVCACHE and the like): part of what a disaggregated point measured
TRANSFER_ENV = ("UCX_", "NIXL_", "TRTLLM_")


def record(plan: Layout, state: server_group.GroupState, backend: str, release: str,
           container: bool = False) -> dict[str, Any]:  # fmt: skip
    """The point's `disaggregated.json`: its workers, the proxy's config, how the KV cache moved between them and the
    transfer environment the workers ran with (the lane's, which native workers inherit; a container's is its
    image's: none of the host's is passed in)."""
    transfer = STANDIN_TRANSFER if backend == "hf" else f"cache_transceiver_config {plan.shape.transceiver}"
    env = {} if container else {k: v for k, v in sorted(os.environ.items()) if k.startswith(TRANSFER_ENV)}
    return {"name": plan.shape.name, "label": plan.shape.label(), "release": release, "model_id": state.model_id,
            "members": server_group.record(state), "proxy_config": plan.proxy, "kv_cache_transfer": transfer,
            "transfer_environment": env, "transfer_environment_from": "the image" if container else "the lane",
            "iteration_stats_from": metrics_worker(plan).name}  # fmt: skip


def metrics_worker(plan: Layout) -> disagg.Worker:
    """The worker whose /metrics llm-perf reads: the first generation worker."""
    return next(w for w in plan.workers if w.role == "generation")


def metrics_port(point: dict[str, Any]) -> int:
    """The port of the point's first generation worker (the context workers take the first worker ports)."""
    shape = disagg.Shape.from_point(point["disaggregated"])
    return worker_ports(point, shape)[shape.context.instances]
