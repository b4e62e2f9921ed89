"""Triton server lifecycle: build the command line, refuse busy ports, start, wait for readiness, stop.

A started server is described by a small JSON state file (pid, process start time, ports, command, server
id, repository hash) so that a different process (a later Ansible task, a handler, a test's teardown) can
stop exactly that server by PID, and never a process that happened to reuse the PID.

Every start gets a random server id (`--id=trtsweep-<hex>`, which Triton returns as `name` in its server
metadata). Ready means: the process we started is alive, and the HTTP and gRPC ports answer with *that*
id. A port answered by another server (another sweep's Triton that holds it while ours failed to bind) is
an error, never a ready server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trtsweep.common.fileio import atomic_write_text
from trtsweep.common.mounts import container_volumes, repository_paths
from trtsweep.common.procs import alive, die_with_parent, start_ticks
from trtsweep.errors import TrtsweepError
from trtsweep.serve import openai_server, supervisor
from trtsweep.serve.local_runtime import LocalRuntime
from trtsweep.serve.openai_server import OpenAIServe

RUNTIMES = ("local", "native", "container")
LOG_TAIL_LINES = 25
SERVER_ID_PREFIX = "trtsweep-"
# Left by an SSH session: with SSH_CLIENT (or SSH2_CLIENT) set and SHLVL < 2, bash reads ~/.bashrc even when
# not interactive, and Triton's python backend starts every stub through bash: a conda/pyenv init there puts
# another python3 first on PATH and the stub loses the virtualenv. BASH_ENV names a file every bash sources.
SSH_SESSION_VARS = ("SSH_CLIENT", "SSH2_CLIENT", "SSH_CONNECTION", "SSH_TTY", "BASH_ENV")


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


SHM_PREFIX = re.compile(r"^(--backend-config=python,shm-region-prefix-name=trtsweep)([0-9a-f]+)(r\d+_)$")


def _shm_tag(spec: ServerSpec, server_id: str | None) -> str:
    """Python-backend shared-memory regions are named per start: /dev/shm is one per machine, so a server that
    loses the port race (or one on another test host of the same machine) must never touch this one's."""
    return server_id.removeprefix(SERVER_ID_PREFIX) if server_id else str(spec.http_port)


def strip_server_id(argv: list[str]) -> list[str]:
    """The command line without what is per start (`--id=`, the shared-memory tag): what two starts of one
    setting share."""
    port = next((a.split("=", 1)[1] for a in argv if a.startswith("--http-port=")), "")
    return [SHM_PREFIX.sub(rf"\g<1>{port}\g<3>", arg) for arg in argv if not arg.startswith("--id=")]


def rank_args(spec: ServerSpec, rank: int, server_id: str | None) -> list[str]:
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
        # every rank, and every server start on the machine, needs its own python-backend shared-memory regions
        f"--backend-config=python,shm-region-prefix-name=trtsweep{_shm_tag(spec, server_id)}r{rank}_",
        f"--log-verbose={spec.log_verbose}",
        f"--exit-timeout-secs={spec.exit_timeout_s}",
    ]
    if rank == 0 and server_id:  # the serving rank answers server metadata with this id
        args.append(f"--id={server_id}")
    if rank > 0:  # followers load only the TRT-LLM model(s) and block in its initialization
        args += ["--model-control-mode=explicit", *(f"--load-model={name}" for name in spec.leader_models)]
    return args + spec.extra_args


def launch_argv(
    spec: ServerSpec, binary: str, server_id: str | None = None, extra: list[str] | None = None
) -> list[str]:
    """tritonserver for one rank, or one per rank under mpirun (TP x PP > 1)."""
    if spec.world_size == 1:
        return [binary, *rank_args(spec, 0, server_id), *(extra or [])]
    argv = [spec.mpirun, "--allow-run-as-root"]
    for rank in range(spec.world_size):
        argv += ["-n", "1", binary, *rank_args(spec, rank, server_id), ":"]
    return argv


def _check_spec(spec: ServerSpec) -> None:
    if spec.runtime not in RUNTIMES:
        raise TrtsweepError(f"triton runtime {spec.runtime!r} is not supported; expected one of {RUNTIMES}")
    if spec.world_size < 1:
        raise TrtsweepError(f"world_size must be >= 1, got {spec.world_size}")
    if spec.runtime == "local" and spec.world_size > 1:
        raise TrtsweepError("the local runtime serves one rank; multi-GPU needs the native or container runtime")
    if any(arg.startswith("--id=") or arg == "--id" for arg in spec.extra_args):
        raise TrtsweepError("extra_args must not set --id: every start gets its own server id")
    devices(spec.visible_devices)


def devices(visible: str | None) -> list[str] | None:
    """The device ids or UUIDs of `visible_devices` ("0,1"), None when not set."""
    if visible is None:
        return None
    ids = [d.strip() for d in visible.split(",")]
    if not all(ids) or any(" " in d or '"' in d for d in ids):
        raise TrtsweepError(f"visible_devices must be comma-separated GPU indices or UUIDs, got {visible!r}")
    return ids


def server_environment(spec: ServerSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: `base` (default os.environ) without what an SSH session leaves behind
    (SSH_SESSION_VARS), and CUDA_VISIBLE_DEVICES when the spec names its GPUs (not for the container
    runtime: docker's --gpus picks them there)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in SSH_SESSION_VARS}
    ids = devices(spec.visible_devices)
    if ids is not None and spec.runtime != "container":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
    return env


def build_command(spec: ServerSpec, server_id: str | None = None) -> tuple[list[str], dict[str, str]]:
    """Return (argv, environment) for the server; argv is a list, never a shell string.

    `server_id` goes to the serving rank as `--id=` (`start` passes a fresh one every time).
    """
    _check_spec(spec)
    env = server_environment(spec)
    if spec.openai is not None:
        argv = openai_server.argv(spec.openai, spec.bind_address, spec.http_port, server_id)
        if spec.runtime == "container":
            o = spec.openai
            argv = _in_container(spec, argv, [o.model, o.options_file.parent, o.served_dir])
        return argv, env
    binary, extra = spec.tritonserver, []
    if spec.runtime == "local":
        runtime = LocalRuntime.discover()
        binary, env = str(runtime.binary), runtime.environment(env)
        extra = [f"--backend-directory={runtime.backend_directory(spec.cache_dir)}"]
    argv = launch_argv(spec, binary, server_id, extra)
    if spec.runtime == "container":
        argv = _in_container(spec, argv)
    return argv, env


def _in_container(spec: ServerSpec, inner: list[str], paths: list[Path] | None = None) -> list[str]:
    c = spec.container
    if c is None:
        raise TrtsweepError("the container runtime needs a container image (triton_serve_container_image)")
    # the repository, what its config.pbtxt files point at (tokenizer, engine) and what their links need
    served = paths if paths is not None else [spec.model_repository, *repository_paths(spec.model_repository)]
    volumes = container_volumes([*served, *c.mounts])
    return docker_run(c, spec.visible_devices, volumes, inner)


def docker_run(c: ContainerSpec, visible_devices: str | None, volumes: list[str], inner: list[str]) -> list[str]:
    """`docker run` of the Triton image: host network and IPC, the GPUs, the volumes, then `inner`."""
    ids = devices(visible_devices)
    # docker reads --gpus as one CSV record: the quotes keep "device=0,1" one field (docker run --gpus '"device=0,1"')
    gpus = c.gpus if ids is None else f'"device={",".join(ids)}"'
    return [
        c.docker, "run", "--rm", "--init", "--name", c.name, "--gpus", gpus, "--network", "host", "--ipc", "host",
        f"--shm-size={c.shm_size}", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", *volumes, c.image, *inner,
    ]  # fmt: skip


def gpu_count(visible: str | None = None) -> int | None:
    """GPUs the server may use: `visible` (its visible_devices) if given, else CUDA_VISIBLE_DEVICES if set, else
    `nvidia-smi -L`; None when unknown."""
    visible = visible if visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
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
        gpus = gpu_count(spec.visible_devices)
        if gpus is not None and gpus < spec.world_size:
            where = f"visible_devices {spec.visible_devices!r} has" if spec.visible_devices else "this host has"
            raise TrtsweepError(f"world_size {spec.world_size} needs {spec.world_size} GPUs; {where} {gpus}")


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
    if len(set(spec.ports().values())) != len(spec.ports()):
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


def repository_hash(repository: Path) -> str:
    """sha256 over every file under the model repository (relative path and bytes), in path order.

    `__pycache__` directories are left out: the python backend writes them into the repository when it
    imports a model.py, and they say nothing about what is served.
    """
    digest = hashlib.sha256()
    files = sorted(
        (path.relative_to(repository).as_posix(), path)
        for path in repository.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(repository).parts
    )
    for relative, path in files:
        name = relative.encode()
        digest.update(len(name).to_bytes(8, "little") + name)
        digest.update(path.stat().st_size.to_bytes(8, "little"))
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


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
    container: list[str] | None = None  # [docker, name] for the container runtime
    server_id: str = ""  # the per-start --id; "" in state files written before ids existed
    repository_hash: str = ""  # repository_hash() of the model repository when it was started
    visible_devices: str | None = None
    lease_file: str | None = None  # the run's lease (serve/supervisor.py); None: runs until stopped
    state_file: str = ""  # where this state is saved (the supervisor's exit record lies beside it)
    kind: str = "triton"  # triton | openai (trtllm-serve: its id is the model id of GET /v1/models)
    supervisor: dict[str, int | None] | None = None  # {pid, start_ticks} of its supervisor (serve/supervisor.py)

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ServerState:
        return cls(**json.loads(path.read_text()))

    @property
    def host(self) -> str:
        """Where a client on this host reaches the server."""
        return probe_host(self.bind_address)


def probe_host(bind_address: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(bind_address, bind_address)


def is_running(state: ServerState) -> bool:
    """True while the very process that was started is alive (a reaped zombie or a reused PID is not)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(state.pid, os.WNOHANG)  # reap it if it is our exited child
    return start_ticks(state.pid) == state.start_ticks


def supervisor_gone(state: ServerState) -> str | None:
    """Why the server's supervisor no longer watches it (killed: the server goes with it), or None."""
    keeper = state.supervisor
    if keeper is None or keeper.get("pid") is None or alive(int(keeper["pid"]), keeper.get("start_ticks")):
        return None
    return f"its supervisor (pid {keeper['pid']}) is gone, and with it the server (it dies with its supervisor)"


def start(spec: ServerSpec, state_file: Path) -> ServerState:
    """Start the server in its own process group; return at once (see `wait_ready`)."""
    if not spec.model_repository.is_dir():
        raise TrtsweepError(f"model repository {spec.model_repository} does not exist")
    _check_ports(spec)
    server_id = new_server_id()
    if spec.openai is not None:  # its identity: the model id it answers with, the name of a link of its own
        openai_server.link(spec.openai, server_id)
    argv, env = build_command(spec, server_id)
    repo_hash = served_hash(spec)
    spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    pid, ticks, keeper = _supervised(spec, argv, env, state_file)
    state = ServerState(
        pid=pid,
        start_ticks=ticks,
        argv=argv,
        ports=spec.ports(),
        bind_address=spec.bind_address,
        health_url=spec.health_url(),
        log_file=str(spec.log_file),
        container=[spec.container.docker, spec.container.name]
        if spec.runtime == "container" and spec.container
        else None,
        server_id=server_id,
        repository_hash=repo_hash,
        visible_devices=spec.visible_devices,
        lease_file=str(spec.lease_file) if spec.lease_file else None,
        state_file=str(state_file),
        kind=spec.kind,
        supervisor=keeper,
    )
    state.save(state_file)
    return state


def _supervised(
    spec: ServerSpec, argv: list[str], env: dict[str, str], state_file: Path
) -> tuple[int, int, dict[str, int | None]]:
    """Start `argv` under its supervisor (serve/supervisor.py); return the server's pid and start ticks, and the
    supervisor's {pid, start_ticks}."""
    command = [sys.executable, "-m", "trtsweep.serve.supervisor", "--state", str(state_file)]
    if spec.lease_file is not None:
        supervisor.renew(spec.lease_file)
        command += ["--lease", str(spec.lease_file), "--ttl", str(spec.lease_ttl_s)]
    if spec.runtime == "container" and spec.container:
        command += ["--container", spec.container.docker, spec.container.name]
    for stale in (supervisor.server_file(state_file), supervisor.exit_file(state_file)):
        stale.unlink(missing_ok=True)
    own_env = {**server_environment(spec, None), supervisor.ENV_VAR: json.dumps(env)}
    with open(spec.log_file, "ab") as log:
        try:
            proc = subprocess.Popen([*command, "--", *argv], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=own_env, start_new_session=True)  # fmt: skip
        except OSError as exc:
            raise TrtsweepError(f"cannot start {argv[0]}: {exc.strerror}") from exc
    started = supervisor.server_file(state_file)
    deadline = time.monotonic() + 30
    while not started.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise TrtsweepError(f"the server's supervisor did not start {argv[0]}: {failure_cause(spec.log_file)}")
        time.sleep(0.05)
    record = json.loads(started.read_text())
    ticks = record["start_ticks"] if record["start_ticks"] is not None else -1
    return record["pid"], ticks, record["supervisor"]


def exit_record(state_file: Path, wait_s: float = 3.0) -> dict[str, object] | None:
    """What the supervisor recorded when the server ended (see serve/supervisor.py), waiting up to `wait_s`."""
    path, deadline = supervisor.exit_file(state_file), time.monotonic() + wait_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def gone(state: ServerState) -> str | None:
    """Why a started server no longer serves, in one line (its exit as its supervisor recorded it and the log's
    most telling line, or its supervisor's death), or None while it runs under its supervisor."""
    name = f"{'trtllm-serve' if state.kind == 'openai' else 'Triton'} (pid {state.pid}, id {state.server_id})"
    keeper = supervisor_gone(state)
    if is_running(state):
        return f"{name}: {keeper}" if keeper else None
    record = exit_record(Path(state.state_file)) if state.state_file else None
    if record is None and keeper:  # killed with its supervisor: nobody recorded the server's end
        return f"{name}: {keeper}"
    how = supervisor.describe_exit(record) if record else "is gone (no exit record)"
    return f"{name} {how}: {failure_cause(Path(state.log_file))}"


@dataclass
class Watched:
    """A command run while a server serves (`run_while_served`)."""

    returncode: int
    stdout: str
    stderr: str
    server_gone: str | None  # why the command was stopped: the server it talks to went away; None if it ended


def run_while_served(argv: list[str], state_file: Path, poll_s: float = 1.0) -> Watched:
    """Run `argv` (a client of the server that `state_file` names) to its end, or stop it (TERM, then KILL) as
    soon as the server is gone: stopped by its supervisor because the run's lease lapsed (an interrupted run, a
    dead controller, a cut link), crashed, or its supervisor killed. The command dies with this process too, so
    no client outlives the task that started it."""
    state = ServerState.load(state_file)
    me = os.getpid()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                preexec_fn=lambda: die_with_parent(me))  # fmt: skip
        why = None
        while why is None:
            try:
                proc.wait(timeout=poll_s)
                break
            except subprocess.TimeoutExpired:
                why = gone(state)
        if why is not None:
            for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait_s)
                    break
        out.seek(0)
        err.seek(0)
        return Watched(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), why)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _accepting(address: str, port: int) -> bool:
    try:
        with socket.create_connection((probe_host(address), port), timeout=2):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class Answer:
    """Who answered server metadata on one port: a Triton server id, or None for a server without one."""

    protocol: str
    port: int
    server_id: str | None

    def describe(self) -> str:
        return f"id {self.server_id!r}" if self.server_id is not None else "no Triton server id"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def http_answer(host: str, port: int, timeout_s: float = 2.0) -> Answer | None:
    """Who answers `GET /v2` (server metadata) on host:port; None when nothing answers."""
    url = f"http://{_url_host(host)}:{port}/v2"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read(1 << 16)
    except urllib.error.HTTPError:  # something answered, but not with Triton server metadata
        return Answer("http", port, None)
    except (urllib.error.URLError, OSError):
        return None
    try:
        name = json.loads(body).get("name")
    except (ValueError, AttributeError):
        name = None
    return Answer("http", port, name if isinstance(name, str) else None)


def grpc_answer(host: str, port: int, timeout_s: float = 2.0) -> Answer | None:
    """Who answers gRPC ServerMetadata on host:port; None when nothing answers."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(f"{_url_host(host)}:{port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            reply = stub.ServerMetadata(service_pb2.ServerMetadataRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return None
            return Answer("grpc", port, None)
    return Answer("grpc", port, reply.name)


def _foreign(answer: Answer | None, state: ServerState) -> bool:
    return answer is not None and answer.server_id != state.server_id


def served_hash(spec: ServerSpec) -> str:
    """What a start serves: the model repository's files (Triton), the checkpoint and options (openai)."""
    return repository_hash(spec.model_repository) if spec.openai is None else openai_server.content_hash(spec.openai)


def _identity(state: ServerState) -> tuple[bool, Answer | None]:
    """(True, None) when both the HTTP and gRPC ports answer with our id; (False, answer) when another server
    answers one of them; (False, None) while they do not answer (yet)."""
    if state.kind == "openai":
        answered, model = openai_server.model_id(state.host, state.ports["http"])
        answer = Answer("http", state.ports["http"], model) if answered else None
        return (True, None) if model == state.server_id else (False, answer if model is not None else None)
    http = http_answer(state.host, state.ports["http"])
    if http is None or _foreign(http, state):
        return False, http
    grpc_port = state.ports.get("grpc")
    if grpc_port is None:
        return True, None
    answer = grpc_answer(state.host, grpc_port)
    if _foreign(answer, state):
        return False, answer
    return answer is not None, None


def identity_problem(state: ServerState) -> str | None:
    """Why the server answering on this state's ports is not the one it describes (None: it is)."""
    if not state.server_id:
        return "its state file records no server id"
    ours, answer = _identity(state)
    if ours:
        return None
    if answer is None:
        return f"it does not answer server metadata on {state.host} (http port {state.ports['http']})"
    return f"{answer.protocol} port {answer.port} answers with {answer.describe()}, not {state.server_id!r}"


def wait_ready(state: ServerState, timeout_s: float) -> float:
    """Block until the process we started is alive, its HTTP and gRPC ports answer server metadata with the
    id this start gave it, /v2/health/ready says ready, and every port it was given accepts connections.

    Triton answers /v2/health/ready before its metrics endpoint listens, so health alone is not enough
    for a client that scrapes metrics right away. On failure stop it and raise with the log tail; a port
    answered by another server fails at once, in one line. The lease is renewed while we wait: this task
    is the run, alive.
    """
    started = time.monotonic()
    while True:
        if state.lease_file:
            supervisor.renew(Path(state.lease_file))
        ours, other = _identity(state)
        if other is not None:
            _fail_foreign(state, other)
        if (
            ours
            and _ready(state.health_url)
            and all(_accepting(state.bind_address, p) for p in state.ports.values())
            and is_running(state)
        ):
            return time.monotonic() - started
        if not is_running(state):
            record = exit_record(Path(state.state_file)) if state.state_file else None
            reason = "exited before becoming ready" + (f" ({supervisor.describe_exit(record)})" if record else "")
            break
        if time.monotonic() - started > timeout_s:
            reason = f"not ready after {timeout_s:g} s"
            break
        time.sleep(0.25)
    stop(state)
    tail = log_tail(Path(state.log_file))
    name = "triton" if state.kind == "triton" else "trtllm-serve"
    raise TrtsweepError(
        f"{name} server {reason}: {failure_cause(Path(state.log_file))} (log: {state.log_file})\n{tail}"
    )


def _fail_foreign(state: ServerState, other: Answer) -> None:
    alive = is_running(state)
    stop(state, wait_ports=False)  # the ports are the other server's: never wait for them
    ours = "it was still starting, stopped" if alive else "it exited"
    raise TrtsweepError(
        f"port {other.port} on {state.host} is answered by another server ({other.describe()}), not the one this "
        f"run started (id {state.server_id!r}, pid {state.pid}): {ours}; last log line: "
        f"{failure_cause(Path(state.log_file))} (log: {state.log_file})"
    )


def adoption_differences(old: ServerState, spec: ServerSpec) -> list[str]:
    """Why the running server `old` cannot stand in for a start of `spec` (empty: it can be adopted).

    Adopted only when its command line (less the per-start --id), the model repository's contents and the
    GPUs it was given are the same, and it still answers with its own id.
    """
    differences = []
    argv, _ = build_command(spec)
    was, now = strip_server_id(old.argv), strip_server_id(argv)
    if spec.openai is not None:  # its per-start part is the served model link
        served = str(openai_server.served_path(spec.openai, old.server_id))
        was = [str(spec.openai.model) if a == served else a for a in was]
    if was != now:
        gone, added = [a for a in was if a not in now], [a for a in now if a not in was]
        differences.append(f"command line (was {gone}, now {added})" if gone or added else "command line order")
    if old.repository_hash != served_hash(spec):
        differences.append(f"model repository contents ({spec.model_repository})")
    if old.visible_devices != spec.visible_devices:
        differences.append(f"visible_devices (was {old.visible_devices!r}, now {spec.visible_devices!r})")
    problem = identity_problem(old)
    if problem:
        differences.append(f"server identity: {problem}")
    return differences


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


def stop(state: ServerState, grace_s: float = 15.0, wait_ports: bool = True) -> bool:
    """Stop the server's process group (TERM, then KILL after `grace_s`); True if it was running.

    Returns only once the process is gone and (with `wait_ports`) its ports can be bound again.
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
    if wait_ports:
        _wait_ports_free(state)
    return True


def _wait_ports_free(state: ServerState, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while busy := busy_ports(state.bind_address, state.ports):
        if time.monotonic() > deadline:
            raise TrtsweepError(f"server pid {state.pid} stopped but ports {busy} are still in use")
        time.sleep(0.2)
