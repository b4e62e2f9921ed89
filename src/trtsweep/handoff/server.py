"""The bundle's server: Triton (the engine flow's inflight_batcher_llm or the pytorch flow's llmapi repository) or
trtllm-serve, as the point ran it; its command lines on the host and in the container, ports and health paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.handoff.paths import DRAFT_VARIABLE, REPOSITORY_VARIABLE, STORE, STORE_LAYOUT, sentinel
from trtsweep.serve.command import launch_argv
from trtsweep.serve.openai_server import HF_SERVER
from trtsweep.serve.spec import ServerSpec
from trtsweep.toolchain.llmapi import serve as llmapi_serve

PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
OPENAI_PORTS = {"http": 8000}  # trtllm-serve: the OpenAI API, /health and /metrics on one port
OPTIONS_FILE = "llm_api_options.yml"
# with a draft model: OPTIONS_FILE holds ${TRTSWEEP_DRAFT_DIR}, rendered on the host before the server starts
# (RENDERED_OPTIONS); STORE_OPTIONS has the draft at the model store's draft/ (container, Kubernetes)
RENDERED_OPTIONS = f"rendered/{OPTIONS_FILE}"
STORE_OPTIONS = "llm_api_options.store.yml"
RENDER = "render_repository.py"
CONFIG_DIR = "/config"  # the LLM API options inside trtllm-serve's container and pod


@dataclass(frozen=True)
class Serving:
    """How the bundle's server runs. Command lines hold ${TRTSWEEP_*} sentinels (paths.sentinel)."""

    kind: str  # triton | trtllm-serve
    native: list[str]  # on the host
    inner: list[str]  # inside the container / pod, the model store at STORE
    volumes: list[str]  # docker run's -v arguments
    ports: dict[str, int]
    ready: str  # health paths
    live: str
    native_needs: dict[str, str]  # variable -> what to set it to, for launch/native.sh and the systemd unit
    container_needs: dict[str, str]
    scrape: bool  # Prometheus metrics (Triton's metrics port)
    native_prepare: tuple[str, ...] = ()  # a command run before the server on the host (the options rendered)


def _triton_argv(world_size: int, repository: str) -> list[str]:
    spec = ServerSpec(
        model_repository=Path(repository),
        log_file=Path("/dev/null"),
        runtime="native",
        http_port=PORTS["http"],
        grpc_port=PORTS["grpc"],
        metrics_port=PORTS["metrics"],
        bind_address="0.0.0.0",
        world_size=world_size,
    )
    return launch_argv(spec, "tritonserver")


def _openai_argv(point: dict[str, Any], model: str, options_file: str) -> list[str]:
    """trtllm-serve as the point ran it (checked against the release's options), on all addresses; the hf backend's
    counterpart for a point of the CPU test bed."""
    spec = llmapi_serve.ServeSpec(
        model=model, options_file=options_file, port=OPENAI_PORTS["http"], host="0.0.0.0", tp=int(point["tp"]),
        pp=int(point["pp"]), ep=(point.get("llm_api") or {}).get("moe_expert_parallel_size"),
    )  # fmt: skip
    argv = llmapi_serve.argv(point["llm_api_release"], spec)
    # as the lane runs it: 1.0/1.1's build_config flags (serve/openai_server.py), from the point's options
    argv += llmapi_serve.build_config_flags(point["llm_api_release"], point.get("llm_api") or {})
    return ["python3", *HF_SERVER, *argv[1:]] if point["backend"] == "hf" else argv


def render_argv(src: str, out: str, variables: dict[str, str]) -> list[str]:
    """The bundle's render_repository.py filling `variables` (name -> sentinel or path) into `src`, written to `out`."""
    bundle = sentinel("TRTSWEEP_BUNDLE")
    return ["python3", f"{bundle}/{RENDER}", src, out, *(f"{k}={v}" for k, v in variables.items())]


def serving(point: dict[str, Any], draft: bool = False) -> Serving:
    """How the point's server runs from the bundle; `draft`: the point has a draft model (DRAFT_VARIABLE)."""
    if point.get("server", "triton") == "trtllm-serve":
        bundle = sentinel("TRTSWEEP_BUNDLE")
        options = f"{bundle}/{RENDERED_OPTIONS if draft else OPTIONS_FILE}"
        mounted = f"{bundle}/{STORE_OPTIONS if draft else OPTIONS_FILE}"
        needs = {"TRTSWEEP_MODEL_DIR": "the model checkpoint directory"}
        if draft:
            needs[DRAFT_VARIABLE] = "the draft model directory"
        prepare = render_argv(f"{bundle}/{OPTIONS_FILE}", options, {DRAFT_VARIABLE: sentinel(DRAFT_VARIABLE)})
        return Serving(
            kind="trtllm-serve",
            native=_openai_argv(point, sentinel("TRTSWEEP_MODEL_DIR"), options),
            inner=_openai_argv(point, STORE_LAYOUT["TRTSWEEP_MODEL_DIR"], f"{CONFIG_DIR}/{OPTIONS_FILE}"),
            volumes=[
                "-v",
                f"{sentinel('TRTSWEEP_MODEL_STORE')}:{STORE}:ro",
                "-v",
                f"{mounted}:{CONFIG_DIR}/{OPTIONS_FILE}:ro",
            ],
            ports=OPENAI_PORTS,
            ready="/health",
            live="/health",
            native_needs=needs,
            container_needs={"TRTSWEEP_MODEL_STORE": f"the model store (model/{', draft/' if draft else ''})"},
            scrape=False,
            native_prepare=tuple(prepare) if draft else (),
        )
    # the pytorch flow's Triton is one process: its LLM API starts the TP x PP ranks
    pytorch = point.get("flow", "engine") == "pytorch"
    world = 1 if pytorch else int(point.get("world_size") or 1)
    return Serving(
        kind="triton",
        native=_triton_argv(world, sentinel(REPOSITORY_VARIABLE)),
        inner=_triton_argv(world, STORE_LAYOUT[REPOSITORY_VARIABLE]),
        volumes=["-v", f"{sentinel('TRTSWEEP_MODEL_STORE')}:{STORE}:ro"],
        ports=PORTS,
        ready="/v2/health/ready",
        live="/v2/health/live",
        native_needs={REPOSITORY_VARIABLE: "the rendered model repository"},
        container_needs={
            "TRTSWEEP_MODEL_STORE": "the model store (triton_repo/, "
            f"{('model/, draft/' if draft else 'model/') if pytorch else 'engine/, tokenizer/'})"
        },
        scrape=True,
    )


def gpu_count(point: dict[str, Any]) -> int:
    """The GPUs the point's server takes where it is deployed (its world size; none for a CPU point of the hf
    backend): Kubernetes' nvidia.com/gpu limit, the sbatch script's GRES."""
    return int(point.get("world_size") or 1) if point.get("gpus") or point.get("backend") == "tensorrtllm" else 0
