"""Triton server lifecycle: build the command line, refuse busy ports, start, wait for readiness, stop.

A started server is described by a small JSON state file (pid, process start time, ports, command) so
that a different process (a later Ansible task, a handler, a test's teardown) can stop exactly that
server by PID, and never a process that happened to reuse the PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trtsweep.errors import TrtsweepError
from trtsweep.fileio import atomic_write_text
from trtsweep.serve.local_runtime import LocalRuntime

RUNTIMES = ("local", "native", "container")
LOG_TAIL_LINES = 25


@dataclass
class ContainerSpec:
    """The `container` runtime: the NGC TRT-LLM Triton image run with the docker CLI (host network)."""

    image: str
    name: str
    docker: str = "docker"
    gpus: str = "all"
    shm_size: str = "2g"
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

    def ports(self) -> dict[str, int]:
        return {"http": self.http_port, "grpc": self.grpc_port, "metrics": self.metrics_port}

    def health_url(self) -> str:
        host = "127.0.0.1" if self.bind_address in ("0.0.0.0", "") else self.bind_address
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.http_port}/v2/health/ready"


def _rank_args(spec: ServerSpec, rank: int) -> list[str]:
    """tritonserver arguments of one rank (as TRT-LLM's launch_triton_server.py arranges them)."""
    args = [
        f"--model-repository={spec.model_repository}",
        f"--http-port={spec.http_port}",
        f"--grpc-port={spec.grpc_port}",
        f"--metrics-port={spec.metrics_port}",
        f"--http-address={spec.bind_address}",
        f"--grpc-address={spec.bind_address}",
        f"--metrics-address={spec.bind_address}",
        "--disable-auto-complete-config",
        # every rank, and every server on the host, needs its own python-backend shared-memory regions
        f"--backend-config=python,shm-region-prefix-name=trtsweep{spec.http_port}r{rank}_",
        f"--log-verbose={spec.log_verbose}",
        f"--exit-timeout-secs={spec.exit_timeout_s}",
    ]
    if rank > 0:  # followers load only the TRT-LLM model(s) and block in its initialization
        args += ["--model-control-mode=explicit", *(f"--load-model={name}" for name in spec.leader_models)]
    return args + spec.extra_args


def build_command(spec: ServerSpec) -> tuple[list[str], dict[str, str]]:
    """Return (argv, environment) for the server; argv is a list, never a shell string."""
    if spec.runtime not in RUNTIMES:
        raise TrtsweepError(f"triton runtime {spec.runtime!r} is not supported; expected one of {RUNTIMES}")
    if spec.world_size < 1:
        raise TrtsweepError(f"world_size must be >= 1, got {spec.world_size}")
    env = dict(os.environ)
    binary, extra = spec.tritonserver, []
    if spec.runtime == "local":
        if spec.world_size > 1:
            raise TrtsweepError("the local runtime serves one rank; multi-GPU needs the native or container runtime")
        runtime = LocalRuntime.discover()
        binary, env = str(runtime.binary), runtime.environment()
        extra = [f"--backend-directory={runtime.backend_directory(spec.cache_dir)}"]
    if spec.world_size == 1:
        argv = [binary, *_rank_args(spec, 0), *extra]
    else:
        argv = [spec.mpirun, "--allow-run-as-root"]
        for rank in range(spec.world_size):
            argv += ["-n", "1", binary, *_rank_args(spec, rank), ":"]
    if spec.runtime == "container":
        argv = _in_container(spec, argv)
    return argv, env


def _in_container(spec: ServerSpec, inner: list[str]) -> list[str]:
    c = spec.container
    if c is None:
        raise TrtsweepError("the container runtime needs a container image (triton_serve_container_image)")
    mounts = dict.fromkeys([str(spec.model_repository), *c.mounts])
    volumes = [arg for path in mounts for arg in ("-v", f"{path}:{path}")]
    return [
        c.docker, "run", "--rm", "--init", "--name", c.name, "--gpus", c.gpus, "--network", "host", "--ipc", "host",
        f"--shm-size={c.shm_size}", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", *volumes, c.image, *inner,
    ]  # fmt: skip


def gpu_count() -> int | None:
    """GPUs this host offers (CUDA_VISIBLE_DEVICES if set, else `nvidia-smi -L`), None when unknown."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else None


def engine_world_size(engine_dir: Path) -> int | None:
    """tp x pp of a trtllm-build engine, read from its config.json (None when there is none)."""
    try:
        config = json.loads((engine_dir / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    mapping = config.get("pretrained_config", {}).get("mapping", {})
    if "world_size" in mapping:
        return int(mapping["world_size"])
    if mapping:
        return int(mapping.get("tp_size", 1)) * int(mapping.get("pp_size", 1))
    return None


def check_world_size(spec: ServerSpec, engine_dir: Path | None) -> None:
    """The ranks to launch must equal the engine's tp x pp and fit on this host's GPUs."""
    if engine_dir is not None:
        engine = engine_world_size(engine_dir)
        if engine is not None and engine != spec.world_size:
            raise TrtsweepError(
                f"world_size {spec.world_size} does not match the engine's tp x pp = {engine} "
                f"({engine_dir}/config.json)"
            )
    if spec.world_size > 1 or spec.runtime != "local":
        gpus = gpu_count()
        if gpus is not None and gpus < spec.world_size:
            raise TrtsweepError(f"world_size {spec.world_size} needs {spec.world_size} GPUs; this host has {gpus}")


def busy_ports(address: str, ports: dict[str, int]) -> dict[str, int]:
    """Ports (by role) that cannot be bound on `address` right now."""
    busy = {}
    for role, port in ports.items():
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except OSError:
                busy[role] = port
    return busy


def _check_ports(spec: ServerSpec) -> None:
    if len(set(spec.ports().values())) != 3:
        raise TrtsweepError(f"http, grpc and metrics ports must differ, got {spec.ports()}")
    busy = busy_ports(spec.bind_address, spec.ports())
    if busy:
        which = ", ".join(f"{role} port {port}" for role, port in busy.items())
        raise TrtsweepError(f"{which} on {spec.bind_address} already in use; stop that server or pick free ports")


def log_tail(log_file: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class ServerState:
    """What is needed to find and stop a started server later."""

    pid: int
    start_ticks: int
    argv: list[str]
    ports: dict[str, int]
    bind_address: str
    health_url: str
    log_file: str
    container: list[str] | None = None  # [docker, name] for the container runtime

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ServerState:
        return cls(**json.loads(path.read_text()))


def _start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (/proc/<pid>/stat field 22), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_running(state: ServerState) -> bool:
    """True while the very process that was started is alive (a reaped zombie or a reused PID is not)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(state.pid, os.WNOHANG)  # reap it if it is our exited child
    return _start_ticks(state.pid) == state.start_ticks


def start(spec: ServerSpec, state_file: Path) -> ServerState:
    """Start the server in its own process group; return at once (see `wait_ready`)."""
    if not spec.model_repository.is_dir():
        raise TrtsweepError(f"model repository {spec.model_repository} does not exist")
    _check_ports(spec)
    argv, env = build_command(spec)
    spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(spec.log_file, "ab") as log:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise TrtsweepError(f"cannot start {argv[0]}: {exc.strerror}") from exc
    ticks = _start_ticks(proc.pid)
    state = ServerState(
        pid=proc.pid,
        start_ticks=ticks if ticks is not None else -1,
        argv=argv,
        ports=spec.ports(),
        bind_address=spec.bind_address,
        health_url=spec.health_url(),
        log_file=str(spec.log_file),
        container=[spec.container.docker, spec.container.name]
        if spec.runtime == "container" and spec.container
        else None,
    )
    state.save(state_file)
    return state


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _accepting(address: str, port: int) -> bool:
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def wait_ready(state: ServerState, timeout_s: float) -> float:
    """Block until the server reports ready and every port it was given accepts connections.

    Triton answers /v2/health/ready before its metrics endpoint listens, so health alone is not enough
    for a client that scrapes metrics right away. On failure stop it and raise with the log tail.
    """
    started = time.monotonic()
    while True:
        if _ready(state.health_url) and all(_accepting(state.bind_address, p) for p in state.ports.values()):
            return time.monotonic() - started
        if not is_running(state):
            reason = "exited before becoming ready"
            break
        if time.monotonic() - started > timeout_s:
            reason = f"not ready after {timeout_s:g} s"
            break
        time.sleep(0.25)
    stop(state)
    tail = log_tail(Path(state.log_file))
    raise TrtsweepError(
        f"triton server {reason}: {failure_cause(Path(state.log_file))} (log: {state.log_file})\n{tail}"
    )


MODEL_LOAD_FAILURE = re.compile(r"failed to load '([^']+)' version \d+: (.*?)(?:\\n|\"$|$)")


def failure_cause(log_file: Path) -> str:
    """The most telling line of a failed start: a model's load error if any, else the last log line."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    for line in lines:
        match = MODEL_LOAD_FAILURE.search(line)
        if match:
            return f"model '{match.group(1)}' failed to load: {match.group(2)}"
    return next((line.strip() for line in reversed(lines) if line.strip()), "(empty server log)")


def stop(state: ServerState, grace_s: float = 15.0) -> bool:
    """Stop the server's process group (TERM, then KILL after `grace_s`); True if it was running.

    Returns only once the process is gone and its ports can be bound again.
    """
    if not is_running(state):
        return False
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(state.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and is_running(state):
            time.sleep(0.1)
        if not is_running(state):
            break
    if state.container:  # the docker client is gone; make sure its container is too
        docker, name = state.container
        subprocess.run([docker, "rm", "-f", name], capture_output=True, timeout=60, check=False)
    _wait_ports_free(state)
    return True


def _wait_ports_free(state: ServerState, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while busy := busy_ports(state.bind_address, state.ports):
        if time.monotonic() > deadline:
            raise TrtsweepError(f"server pid {state.pid} stopped but ports {busy} are still in use")
        time.sleep(0.2)
