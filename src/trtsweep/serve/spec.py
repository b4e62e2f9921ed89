"""What a server is started from (ServerSpec, ContainerSpec) and what is kept of it once started (ServerState)."""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError
from trtsweep.runtime.docker import LIMITS
from trtsweep.serve.openai_server import OpenAIServe

RUNTIMES = ("local", "native", "container", "pyxis")
IMAGE_RUNTIMES = ("container", "pyxis")  # a server in its image: the docker CLI, or a Slurm step through pyxis
SERVER_ID_PREFIX = "trtsweep-"


@dataclass
class ContainerSpec:
    """A server in its image: the NGC TRT-LLM Triton image run with the docker CLI (host network), or as a Slurm step
    through pyxis (`pyxis`: `name` is the step's; `docker`, `gpus` and `limits` are docker's alone)."""

    image: str
    name: str
    docker: str = "docker"
    gpus: str = "all"
    # --ulimit values asked (runtime/docker.py LIMITS; lowered to what the host allows where the container starts)
    limits: dict[str, int] = field(default_factory=lambda: dict(LIMITS))
    mounts: list[str] = field(default_factory=list)  # host paths, mounted at the same path inside


@dataclass
class ServerSpec:
    """Everything needed to start one Triton server for one model repository."""

    model_repository: Path
    log_file: Path
    runtime: str = "local"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    bind_address: str = "127.0.0.1"
    tritonserver: str = "tritonserver"
    log_verbose: int = 0
    exit_timeout_s: int = 10
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "trtsweep")
    extra_args: list[str] = field(default_factory=list)
    # multi-GPU (TP x PP > 1): one tritonserver per rank under mpirun, rank 0 serving (leader mode)
    world_size: int = 1
    mpirun: str = "mpirun"
    leader_models: list[str] = field(default_factory=lambda: ["tensorrt_llm"])
    container: ContainerSpec | None = None
    # GPUs the server may use ("0,1" or GPU UUIDs): CUDA_VISIBLE_DEVICES (local, native), --gpus (container)
    visible_devices: str | None = None
    # the run's lease (see serve/supervisor.py): the server is stopped when it is not renewed for lease_ttl_s
    lease_file: Path | None = None
    lease_ttl_s: float = 20.0
    # set: not Triton but the PyTorch flow's OpenAI-compatible server (trtllm-serve), on http_port alone
    openai: OpenAIServe | None = None

    @property
    def kind(self) -> str:
        return "triton" if self.openai is None else "openai"

    def ports(self) -> dict[str, int]:
        if self.openai is not None:
            return {"http": self.http_port}
        return {"http": self.http_port, "grpc": self.grpc_port, "metrics": self.metrics_port}

    def health_url(self) -> str:
        host = "127.0.0.1" if self.bind_address in ("0.0.0.0", "") else self.bind_address
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.http_port}" + ("/v2/health/ready" if self.openai is None else "/health")


def new_server_id() -> str:
    """A fresh id for one server start (Triton's `--id`, returned as `name` by GET /v2)."""
    return f"{SERVER_ID_PREFIX}{secrets.token_hex(8)}"


@dataclass
class ServerState:
    """What is needed to find and stop a started server later, and to tell whether it still fits."""

    pid: int
    start_ticks: int
    argv: list[str]
    ports: dict[str, int]
    bind_address: str
    health_url: str
    log_file: str
    # what its runtime leaves beside its process (trtsweep.runtime): [container, docker, name], [pyxis, job, step name]
    held: list[str] | None = None
    server_id: str = ""  # the per-start --id; "" in state files written before ids existed
    repository_hash: str = ""  # repository_hash() of the model repository when it was started
    visible_devices: str | None = None
    lease_file: str | None = None  # the run's lease (serve/supervisor.py); None: runs until stopped
    state_file: str = ""  # where this state is saved (the supervisor's exit record lies beside it)
    kind: str = "triton"  # triton | openai (trtllm-serve: its id is the model id of GET /v1/models) | proxy
    supervisor: dict[str, int | None] | None = None  # {pid, start_ticks} of its supervisor (serve/supervisor.py)
    model_id: str = ""  # the model id GET /v1/models must answer when not server_id (a disaggregated group's)
    notes: list[str] = field(default_factory=list)  # what its start adapted to the host (container limits)

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ServerState:
        """The state saved at `path`; keys this version does not know (a state file of another version) are left."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in json.loads(path.read_text()).items() if k in known})

    @property
    def host(self) -> str:
        """Where a client on this host reaches the server."""
        return probe_host(self.bind_address)


def probe_host(bind_address: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(bind_address, bind_address)


def from_params(p: dict[str, Any]) -> ServerSpec:
    """The ServerSpec for trtsweep_triton_server's parameters (the module's and the lane runner's one mapping).
    TrtsweepError on a combination that cannot start."""
    if not p.get("model_repository") or not p.get("log_file"):
        raise TrtsweepError("state=started needs model_repository and log_file")
    spec = ServerSpec(
        model_repository=Path(p["model_repository"]),
        log_file=Path(p["log_file"]),
        runtime=p["runtime"],
        http_port=int(p["http_port"]),
        grpc_port=int(p["grpc_port"]),
        metrics_port=int(p["metrics_port"]),
        bind_address=p["bind_address"],
        tritonserver=p["tritonserver"],
        log_verbose=int(p["log_verbose"]),
        visible_devices=p.get("visible_devices"),
        lease_file=Path(p["lease_file"]) if p.get("lease_file") else None,
        lease_ttl_s=float(p["lease_ttl"]),
    )
    if p.get("openai"):  # the PyTorch flow's trtllm-serve (or the hf backend's counterpart): it serves a checkpoint
        o = p["openai"]
        spec.model_repository = Path(o["model"])
        spec.openai = OpenAIServe(
            backend=o["backend"], release=o["release"], model=Path(o["model"]), options_file=Path(o["options_file"]),
            served_dir=Path(o["served_dir"]), tp=int(o.get("tp") or 1), pp=int(o.get("pp") or 1), ep=o.get("ep"),
            executable=o.get("executable") or "trtllm-serve", flags=o.get("flags"), model_id=o.get("model_id"),
        )  # fmt: skip
    if p.get("cache_dir"):
        spec.cache_dir = Path(p["cache_dir"])
    spec.world_size, spec.mpirun = int(p["world_size"]), p["mpirun"]
    spec.leader_models = list(p.get("leader_models") or ["tensorrt_llm"])
    if p["runtime"] in IMAGE_RUNTIMES:
        if not p.get("container_image"):
            raise TrtsweepError(f"runtime={p['runtime']} needs container_image")
        spec.container = ContainerSpec(
            image=p["container_image"],
            name=p.get("container_name") or f"trtsweep-{p['http_port']}",
            docker=p["docker"],
            gpus=p["gpus"],
            mounts=[m for m in [p.get("engine_dir"), *p.get("mounts", [])] if m],
        )
    return spec
