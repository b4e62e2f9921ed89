"""The seam's one interface: what a runtime is given (`Launch`) and what it answers (`Runtime`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from trtsweep.errors import TrtsweepError


@dataclass(frozen=True)
class Launch:
    """One command to run. `name`: the container's or the Slurm step's (`docker ps`, `squeue -s` and accounting show
    it); `paths`: the host paths it reads and writes (mounted at the same place in an image, with what their links
    need); `devices`: its GPUs, indices or UUIDs ("0,1"; None: what the runtime gives by default); `env`: variables
    passed into an image by name (their values never on a command line); `server`: a server (the host's network, an
    init that reaps its children)."""

    argv: list[str]
    name: str = ""
    paths: tuple[str, ...] = ()
    devices: str | None = None
    env: tuple[str, ...] = ()
    server: bool = False


class Runtime(Protocol):
    """Where a command runs."""

    kind: str
    in_image: bool  # the command runs in an image: its own python3, the host's paths mounted

    def prepare(self) -> list[str]:
        """What this host needs adapted before a command starts, one note per adaptation (checked once per process)."""
        ...

    def command(self, launch: Launch) -> list[str]:
        """The argv that runs `launch` in this runtime."""
        ...

    def held(self, name: str) -> list[str] | None:
        """What a state file keeps of what outlives the command's own process (`[kind, ...]`), None if nothing."""
        ...

    def record(self) -> dict[str, object]:
        """What a point's record says of where its commands ran (the limits a container got, the Slurm job)."""
        ...


def device_ids(visible: str | None) -> list[str] | None:
    """The device indices or UUIDs of `visible` ("0,1"), None when not set; refused in one line when malformed."""
    if visible is None:
        return None
    ids = [d.strip() for d in visible.split(",")]
    if not all(ids) or any(" " in d or '"' in d for d in ids):
        raise TrtsweepError(f"visible_devices must be comma-separated GPU indices or UUIDs, got {visible!r}")
    return ids


def launch_name(point_id: str, port: int) -> str:
    """A server's container or step name: `docker ps` and `squeue` trace it to its point, its port keeps it unique on
    the host."""
    return f"trtsweep-{re.sub(r'[^A-Za-z0-9_.-]', '-', point_id)}-{port}"
