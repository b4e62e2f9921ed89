"""The server's command line: tritonserver (one per rank under mpirun) or trtllm-serve, as its runtime runs it
(trtsweep.runtime: on the host, `docker run` of its image, a Slurm step through pyxis); and the environment it runs
with."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from trtsweep import runtime
from trtsweep.common.mounts import repository_paths
from trtsweep.errors import TrtsweepError
from trtsweep.runtime import Launch, Runtime, device_ids
from trtsweep.serve import openai_server
from trtsweep.serve.local_runtime import LocalRuntime
from trtsweep.serve.spec import IMAGE_RUNTIMES, RUNTIMES, SERVER_ID_PREFIX, ServerSpec

# Left by an SSH session: with SSH_CLIENT (or SSH2_CLIENT) set and SHLVL < 2, bash reads ~/.bashrc even when
# not interactive, and Triton's python backend starts every stub through bash: a conda/pyenv init there puts
# another python3 first on PATH and the stub loses the virtualenv. BASH_ENV names a file every bash sources.
SSH_SESSION_VARS = ("SSH_CLIENT", "SSH2_CLIENT", "SSH_CONNECTION", "SSH_TTY", "BASH_ENV")


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
    device_ids(spec.visible_devices)


def runtime_of(spec: ServerSpec) -> Runtime:
    """The runtime the server runs in (`local`: on the host, pytriton's tritonserver)."""
    if spec.runtime not in IMAGE_RUNTIMES:
        return runtime.of("native")
    c = spec.container
    if c is None:
        raise TrtsweepError(f"the {spec.runtime} runtime needs a container image (triton_serve_container_image)")
    return runtime.of(spec.runtime, image=c.image, docker_cli=c.docker, gpus=c.gpus, limits=c.limits)


def held(spec: ServerSpec) -> list[str] | None:
    """What the server's runtime leaves beside its process (its container, its Slurm step), for its state file."""
    return runtime_of(spec).held(spec.container.name) if spec.container is not None else None


def server_environment(spec: ServerSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: `base` (default os.environ) without what an SSH session leaves behind
    (SSH_SESSION_VARS), and CUDA_VISIBLE_DEVICES when the spec names its GPUs (not in an image: its runtime's command
    gives them there, docker's --gpus or pyxis's step command)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in SSH_SESSION_VARS}
    ids = device_ids(spec.visible_devices)
    if ids is not None and not runtime_of(spec).in_image:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
    return env


def build_command(spec: ServerSpec, server_id: str | None = None) -> tuple[list[str], dict[str, str]]:
    """Return (argv, environment) for the server; argv is a list, never a shell string.

    `server_id` goes to the serving rank as `--id=` (`start` passes a fresh one every time).
    """
    _check_spec(spec)
    env = server_environment(spec)
    where = runtime_of(spec)
    if spec.openai is not None:
        python = "python3" if where.in_image else sys.executable  # the image's own, in an image
        o = spec.openai
        argv = openai_server.argv(o, spec.bind_address, spec.http_port, server_id, python)
        return in_runtime(spec, argv, [o.model, o.options_file.parent, o.served_dir]), env
    binary, extra = spec.tritonserver, []
    if spec.runtime == "local":
        local = LocalRuntime.discover()
        binary, env = str(local.binary), local.environment(env)
        extra = [f"--backend-directory={local.backend_directory(spec.cache_dir)}"]
    return in_runtime(spec, launch_argv(spec, binary, server_id, extra)), env


def in_runtime(spec: ServerSpec, inner: list[str], paths: list[Path] | None = None) -> list[str]:
    """`inner` as the server's runtime runs it: in an image, `paths` mounted (default: the repository, what its
    config.pbtxt files point at, tokenizer and engine), with the spec's mounts, on its GPUs."""
    where, c = runtime_of(spec), spec.container
    if not where.in_image or c is None:
        return where.command(Launch(inner))
    served = paths if paths is not None else [spec.model_repository, *repository_paths(spec.model_repository)]
    mounted = tuple(str(p) for p in [*served, *c.mounts])
    return where.command(Launch(inner, c.name, mounted, spec.visible_devices, server=True))
