"""The container runtime: the command in its image with the docker CLI (`docker run --rm` of the image, or `docker exec`
into a running container), the limits a host allows, where a container's processes are, and removal by name.

- The command (`Docker.command`): `docker run --rm --name NAME --gpus G --ipc host --ulimit ... -v SRC:SRC ... -e VAR
  IMAGE argv`; a server adds `--init` (its children reaped) and `--network host` (no --shm-size: the host's /dev/shm is
  the container's, and podman refuses the pair). Its GPUs as a device request (`--gpus '"device=0,1"'`: docker reads
  --gpus as one CSV record, the quotes keep the list one field), else the runtime's default (`all`).

- Limits: NVIDIA's images are run with `--ulimit memlock=-1 --ulimit stack=67108864` (pinned host memory, deep
  stacks). Where the daemon may not raise a hard limit (rootless docker, many shared clusters' hosts) every such
  container fails to start ("error setting rlimit type 8: operation not permitted"). `fit_limits` starts a
  throwaway container of the image with the limits asked; when the host refuses them, the container gets the host's
  hard limit instead, checked the same way, and a note says so (the point's record); refused even then: one line.
- Processes: a container's processes are not descendants of the `docker run` CLI (docker: containerd-shim ->
  docker-init -> server; podman: conmon -> podman-init -> server). `root` is the host pid of the container's init,
  where a walk of the server's processes (the GPU check) starts.
- Removal: `end` (`docker rm -f`, a no-op for a container that is gone) ends every stop path: the supervisor's
  (server exited, lease lapsed, signalled), a stop from the lane or a later run, a lane's tool step.
"""

from __future__ import annotations

import os
import resource
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from trtsweep.common.mounts import container_volumes
from trtsweep.errors import TrtsweepError
from trtsweep.runtime.base import Launch, device_ids

KIND = "container"

# what NVIDIA's TensorRT-LLM and Triton containers are documented to run with (-1: unlimited)
LIMITS: dict[str, int] = {"memlock": -1, "stack": 67108864}
_RLIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK}
_MIB = 2**20


def ulimit_args(limits: Mapping[str, int]) -> list[str]:
    """`--ulimit name=value` for each limit."""
    return [arg for name, value in limits.items() for arg in ("--ulimit", f"{name}={value}")]


@dataclass(frozen=True)
class Fitted:
    """The limits a container of the image gets on this host, and one note per limit lowered from what was asked."""

    limits: dict[str, int]
    notes: list[str] = field(default_factory=list)


_fitted: dict[tuple[str, str], Fitted] = {}  # per (docker, image) in this process: a lane checks once


def fit_limits(docker: str, image: str, wanted: Mapping[str, int] = LIMITS) -> Fitted:
    """The limits for containers of `image` on this host (checked once per process and image)."""
    key = (docker, image)
    if key not in _fitted:
        _fitted[key] = _fit(docker, image, dict(wanted))
    return _fitted[key]


def _probe(docker: str, image: str, limits: Mapping[str, int]) -> str | None:
    """None when a container of the (local) image starts with `limits`, else docker's line saying why. The throwaway
    container is named (trtsweep-limits-<pid>-<random>): `docker ps` traces it too."""
    name = f"trtsweep-limits-{os.getpid()}-{secrets.token_hex(3)}"
    argv = [docker, "run", "--rm", "--name", name, "--pull", "never", "--network", "none", *ulimit_args(limits),
            "--entrypoint", "true", image]  # fmt: skip
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if out.returncode == 0:
        return None
    lines = [line.strip() for line in out.stderr.splitlines() if line.strip()]
    # the line that names a limit (docker may add a hint after it), else the last
    return next((line for line in lines if "rlimit" in line), lines[-1] if lines else f"exit status {out.returncode}")


def hard_limit(name: str) -> int:
    """This host's hard limit `name` in docker's terms (-1: unlimited)."""
    hard = resource.getrlimit(_RLIMITS[name])[1]
    return -1 if hard == resource.RLIM_INFINITY else hard


def _within(value: int, allowed: int) -> bool:
    return allowed == -1 or (value != -1 and value <= allowed)


def _show(value: int) -> str:
    return "unlimited" if value == -1 else f"{value / _MIB:g} MiB"


def _fit(docker: str, image: str, wanted: dict[str, int]) -> Fitted:
    why = _probe(docker, image, wanted)
    if why is None or "rlimit" not in why:  # started, or nothing to tell here (say, the image is not pulled yet)
        return Fitted(wanted)
    fitted = {name: value if _within(value, hard_limit(name)) else hard_limit(name) for name, value in wanted.items()}
    again = _probe(docker, image, fitted) if fitted != wanted else why
    if again is not None:
        raise TrtsweepError(f"this host refuses the container's limits {' '.join(ulimit_args(wanted))} ({why}), and "
                            f"its own hard limits {' '.join(ulimit_args(fitted))} too ({again})")  # fmt: skip
    notes = [f"{name}: this host refuses {_show(value)} ({why}); the container runs with the host's hard limit, "
             f"{_show(fitted[name])}" for name, value in wanted.items() if fitted[name] != value]  # fmt: skip
    return Fitted(fitted, notes)


def root(docker: str, name: str) -> int:
    """Where the container's processes start: the host pid of its init (docker-init / podman-init); TrtsweepError when
    it is not running."""
    try:
        out = subprocess.run([docker, "inspect", "-f", "{{.State.Pid}}", name], capture_output=True, text=True,
                             timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        out = None
    pid = out.stdout.strip() if out is not None and out.returncode == 0 else ""
    if not pid.isdigit() or int(pid) == 0:
        raise TrtsweepError(f"the container {name} is not running")
    return int(pid)


def preflight(docker: str) -> str | None:
    """What this host lacks for the runtime, in one line: the CLI, or a `docker` that is podman (or its docker shim:
    podman ignores --gpus, it takes GPUs through CDI, --device nvidia.com/gpu=N); None when nothing."""
    if shutil.which(docker) is None:
        return f"runtime container: {docker} not found on PATH"
    try:
        out = subprocess.run([docker, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # a CLI that does not answer fails the point's start, in docker's own words
    if not out.stdout.lower().startswith("podman"):
        return None
    return (f"runtime container: {docker} is {out.stdout.strip()}; trtsweep runs NVIDIA's images with docker "
            "(podman ignores --gpus: it takes GPUs through CDI, --device nvidia.com/gpu=N)")  # fmt: skip


def end(docker: str, name: str) -> None:
    """The container removed, running or not (`docker rm -f`; nothing when there is none of that name)."""
    subprocess.run([docker, "rm", "-f", name], capture_output=True, timeout=60, check=False)


def run_argv(image: str, name: str, argv: Sequence[str], *, docker: str = "docker", gpus: str = "all",
             limits: Mapping[str, int] = LIMITS, volumes: Sequence[str] = (), env: Sequence[str] = (),
             server: bool = False) -> list[str]:  # fmt: skip
    """`docker run --rm` of `argv` in `image` (the module's doc), `volumes` and `env` as docker arguments."""
    return [
        docker, "run", "--rm", *(["--init"] if server else []), "--name", name, "--gpus", gpus,
        *(["--network", "host"] if server else []), "--ipc", "host", *ulimit_args(limits), *volumes, *env, image,
        *argv,
    ]  # fmt: skip


@dataclass
class Docker:
    """`image` run with the `docker` CLI (`--gpus` defaults to `gpus`), or `exec_into` a running container (its paths
    must match the host's); `limits`: the --ulimit values asked, lowered to what the host allows (`prepare`)."""

    image: str | None
    docker: str = "docker"
    gpus: str = "all"
    exec_into: str | None = None
    limits: dict[str, int] = field(default_factory=lambda: dict(LIMITS))
    kind: ClassVar[str] = KIND
    in_image: ClassVar[bool] = True

    def prepare(self) -> list[str]:
        """The limits this host allows (one throwaway container per process and image); a note per limit lowered."""
        return list(fit_limits(self.docker, self.image, self.limits).notes) if self.image and not self.exec_into else []

    def command(self, launch: Launch) -> list[str]:
        env = [arg for var in launch.env for arg in ("-e", var)]
        if self.exec_into:
            return [self.docker, "exec", *env, self.exec_into, *launch.argv]
        if not self.image:
            raise TrtsweepError("runtime container needs a container image: set container_image (docker run) or "
                                "container_name (docker exec)")  # fmt: skip
        ids = device_ids(launch.devices)
        return run_argv(self.image, launch.name, launch.argv, docker=self.docker,
                        gpus=self.gpus if ids is None else f'"device={",".join(ids)}"',
                        limits=fit_limits(self.docker, self.image, self.limits).limits,
                        volumes=container_volumes(launch.paths), env=env, server=launch.server)  # fmt: skip

    def held(self, name: str) -> list[str] | None:
        return None if self.exec_into or not name else [KIND, self.docker, name]

    def record(self) -> dict[str, object]:
        """The limits its containers get on this host (NVIDIA's, or what the host allows of them)."""
        return {"limits": fit_limits(self.docker, self.image, self.limits).limits} if self.image else {}
