"""Which GPUs a started server runs on, as the driver sees it: the check that a point's server holds exactly the GPUs
it was given.

A server is given its GPUs through CUDA_VISIBLE_DEVICES (serve/command.py); a process that ignores it, a launcher
that resets it, or a stale server on the point's GPUs would measure other GPUs than the plan says. Once the server
is ready, `seen(pid)` asks NVML for the compute processes of every GPU and keeps those of the server's process tree
(Triton's python-backend stubs, trtllm-serve's MPI ranks: the processes that hold the CUDA contexts), with each GPU's
index, UUID, name and the memory the tree holds there. `mismatch(given, found)` says in one line what differs.
`others_on(given, pid)` finds the compute processes on the given GPUs that are not the server's (another user's
job, another controller's server): `foreign_line` names them, and the point is not measured on shared GPUs.
Without NVML (a CPU host) there is nothing to check: `seen` returns None, `others_on` {}.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from trtsweep.common.gpus import Gpu, handle
from trtsweep.common.procs import parent_pid

MIB = 2**20


def tree(root: int, proc: Path = Path("/proc")) -> set[int]:
    """The PID and every descendant's (from /proc/<pid>/stat's parent PIDs)."""
    parents: dict[int, int] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (parent := parent_pid(entry.name, proc)) is not None:
            parents[int(entry.name)] = parent
    found = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextlib.contextmanager
def _session(nvml: Any | None) -> Iterator[Any | None]:
    """NVML initialised for the block (`nvml`, else pynvml), or None where there is none (no package, no driver)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            yield None
            return
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError: no driver here
        yield None
        return
    try:
        yield nvml
    finally:
        nvml.nvmlShutdown()


def seen(root: int, nvml: Any | None = None, pids: Callable[[int], set[int]] = tree) -> list[dict[str, Any]] | None:
    """GPUs whose compute processes include the tree of `root`: [{index, uuid, name, pids, memory_mb}], by index;
    None without NVML."""
    with _session(nvml) as session:
        if session is None:
            return None
        ours = pids(root)
        found = []
        for index in range(session.nvmlDeviceGetCount()):
            handle = session.nvmlDeviceGetHandleByIndex(index)
            procs = [p for p in session.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid in ours]
            if procs:
                held = [p.usedGpuMemory for p in procs if isinstance(p.usedGpuMemory, int)]
                found.append({
                    "index": index, "uuid": _text(session.nvmlDeviceGetUUID(handle)),
                    "name": _text(session.nvmlDeviceGetName(handle)), "pids": sorted(p.pid for p in procs),
                    "memory_mb": round(sum(held) / MIB) if held else None,
                })  # fmt: skip
        return found


def others_on(given: Iterable[Gpu], root: int, nvml: Any | None = None,
              pids: Callable[[int], set[int]] = tree) -> dict[Gpu, list[int]]:  # fmt: skip
    """GPU (index or UUID) -> the compute processes on it that are not the server's tree of `root` (another user's
    job, another controller's server), for the GPUs `given`; {} without NVML or when there are none."""
    with _session(nvml) as session:
        if session is None:
            return {}
        gpus = sorted(set(given), key=str)
        return foreign(session, gpus, [handle(session, g) for g in gpus], pids(root))


def foreign(session: Any, gpus: Iterable[Gpu], handles: Iterable[Any], ours: set[int]) -> dict[Gpu, list[int]]:
    """GPU -> its compute processes not in `ours`, over NVML handles of an initialised `session`."""
    out = {}
    for gpu, found in zip(gpus, handles, strict=True):
        if others := sorted(p.pid for p in session.nvmlDeviceGetComputeRunningProcesses(found) if p.pid not in ours):
            out[gpu] = others
    return out


def uuids(indices: Iterable[int], nvml: Any | None = None) -> list[str] | None:
    """The UUIDs of the GPUs NVML counts as `indices` here, in their order; None without NVML."""
    with _session(nvml) as session:
        if session is None:
            return None
        return [_text(session.nvmlDeviceGetUUID(session.nvmlDeviceGetHandleByIndex(i))) for i in indices]


def foreign_line(others: dict[Gpu, list[int]], proc: Path = Path("/proc")) -> str | None:
    """One line naming what else runs on the point's GPUs (None when nothing does)."""
    if not others:
        return None

    def named(pid: int) -> str:
        try:
            argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
            return f"pid {pid} ({Path(argv[0].decode(errors='replace')).name})"
        except (OSError, IndexError):
            return f"pid {pid} (not on this host's /proc: another container or user)"

    used = "; ".join(f"GPU {index} by {', '.join(named(pid) for pid in pids)}" for index, pids in others.items())
    return f"the point's GPUs are also in use: {used}; a measurement on shared GPUs is not the configuration's"


def mismatch(given: Iterable[Gpu], found: list[dict[str, Any]]) -> str | None:
    """One line when the server's GPUs are not exactly the given ones, by index or by UUID as given (None when they
    are)."""
    want = sorted(set(given), key=str)
    key = "uuid" if any(isinstance(g, str) for g in want) else "index"
    if set(want) == {g[key] for g in found}:
        return None
    where = ", ".join(f"{g['index']} ({g['uuid']})" for g in found) or "none"
    return f"its server runs on GPU(s) {where}; it was given GPU(s) {', '.join(map(str, want)) or 'none'}"
