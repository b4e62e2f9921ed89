"""The container runtime beyond `docker run` itself: the limits a host allows, where a container's processes are,
and removal by name.

- Limits: NVIDIA's images are run with `--ulimit memlock=-1 --ulimit stack=67108864` (pinned host memory, deep
  stacks). Where the daemon may not raise a hard limit (rootless docker, many shared clusters' hosts) every such
  container fails to start ("error setting rlimit type 8: operation not permitted"). `fit_limits` starts a
  throwaway container of the image with the limits asked; when the host refuses them, the container gets the host's
  hard limit instead, checked the same way, and a note says so (the point's record); refused even then: one line.
- Processes: a container's processes are not descendants of the `docker run` CLI (docker: containerd-shim ->
  docker-init -> server; podman: conmon -> podman-init -> server). `init_pid` is the host pid of the container's
  init, where a walk of the server's processes (the GPU check) starts.
- Removal: `remove` (`docker rm -f`, a no-op for a container that is gone) ends every stop path: the supervisor's
  (server exited, lease lapsed, signalled), a stop from the lane or a later run, a lane's tool step.
"""

from __future__ import annotations

import os
import re
import resource
import secrets
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

from trtsweep.errors import TrtsweepError

# what NVIDIA's TensorRT-LLM and Triton containers are documented to run with (-1: unlimited)
LIMITS: dict[str, int] = {"memlock": -1, "stack": 67108864}
_RLIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK}
_MIB = 2**20


def container_name(point_id: str, port: int) -> str:
    """A server container's name: `docker ps` traces it to its point, and its port keeps it unique on the host."""
    return f"trtsweep-{re.sub(r'[^A-Za-z0-9_.-]', '-', point_id)}-{port}"


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


def init_pid(docker: str, name: str) -> int | None:
    """The host pid of the running container's init (docker-init / podman-init), None when it is not running."""
    try:
        out = subprocess.run([docker, "inspect", "-f", "{{.State.Pid}}", name], capture_output=True, text=True,
                             timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    pid = out.stdout.strip()
    return int(pid) if out.returncode == 0 and pid.isdigit() and int(pid) > 0 else None


def remove(docker: str, name: str) -> None:
    """The container removed, running or not (`docker rm -f`; nothing when there is none of that name)."""
    subprocess.run([docker, "rm", "-f", name], capture_output=True, timeout=60, check=False)
