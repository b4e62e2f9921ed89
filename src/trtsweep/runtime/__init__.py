"""How a server or a build tool runs: on the host (`native`), in its image with the docker CLI (`container`), or in
its image as a step of the run's Slurm job through pyxis (`pyxis`). One interface (`base.Runtime`), a module per kind:

- `base.Launch`: what runs (its command line, its name, the host paths it needs, its GPUs, the variables it is given
  by name); a runtime's `command(launch)` is the argv that runs it there (a list, never a shell string), `prepare()`
  what it adapts to the host first (notes for the point's record: the container's limits), `held(name)` what a state
  file keeps of what outlives the command's own process (a container, a Slurm step), so that another process ends it;
- `of(kind, ...)`: the runtime of that kind; `root(held, pid)`: where the command's processes start (the GPU check's
  walk); `end(held)`: what it left, removed (`docker rm -f`, `scancel`), the last act of every stop path.

The serving and build stages ask this seam and nothing else about where their commands run.

May import: trtsweep.errors, trtsweep.common.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from trtsweep.errors import TrtsweepError
from trtsweep.runtime import docker, native, pyxis
from trtsweep.runtime.base import Launch, Runtime, device_ids, launch_name

__all__ = ["IMAGE_KINDS", "KINDS", "Launch", "Runtime", "device_ids", "end", "launch_name", "of", "preflight", "root"]

KINDS = (native.KIND, docker.KIND, pyxis.KIND)
_IMAGES = {docker.KIND: docker, pyxis.KIND: pyxis}  # the image runtimes: what they run leaves something beside it
IMAGE_KINDS = tuple(_IMAGES)


def of(kind: str, *, image: str | None = None, docker_cli: str = "docker", gpus: str = "all",
       exec_into: str | None = None, limits: dict[str, int] | None = None) -> Runtime:  # fmt: skip
    """The runtime of `kind` (KINDS): `image` for the image runtimes; the docker CLI, its default `--gpus`, a running
    container to `docker exec` into instead of `docker run` of the image, and the `--ulimit` values asked (what the
    host allows of them is used) for `container`."""
    if kind == native.KIND:
        return native.Native()
    if kind == docker.KIND:
        return docker.Docker(image, docker_cli, gpus, exec_into, dict(limits or docker.LIMITS))
    if kind == pyxis.KIND:
        return pyxis.Pyxis(image)
    raise TrtsweepError(f"runtime {kind!r}: expected one of {', '.join(KINDS)}")


def _module(kind: str) -> ModuleType:
    if kind not in _IMAGES:
        raise TrtsweepError(f"runtime {kind!r}: expected one of {', '.join(_IMAGES)}")
    return _IMAGES[kind]


def preflight(kind: str, docker_cli: str = "docker") -> str | None:
    """What this host lacks for the image runtime `kind` (its client: docker, srun), in one line; None when nothing."""
    return _module(kind).preflight(docker_cli)


def root(held: Sequence[str] | None, pid: int) -> int:
    """Where the processes of a command started as `pid` are: `pid` itself, unless its runtime runs them elsewhere (a
    container's init, a Slurm step's task); TrtsweepError when that is gone."""
    return pid if not held else _module(held[0]).root(*held[1:])


def end(held: Sequence[str] | None) -> None:
    """What a command left beside its own process removed (nothing when it is gone already)."""
    if held:
        _module(held[0]).end(*held[1:])
