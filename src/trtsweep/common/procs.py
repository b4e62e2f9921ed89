"""Process identity on Linux: a pid plus its start time names one process, never a later one reusing the pid."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PR_SET_PDEATHSIG = 1


@dataclass
class Started:
    """A process already started, its standard output and error going to these files."""

    proc: subprocess.Popen[bytes]
    out: IO[bytes]
    err: IO[bytes]


def start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (/proc/<pid>/stat field 22), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def parent_pid(pid: int | str, proc: Path = Path("/proc")) -> int | None:
    """The process's parent pid (/proc/<pid>/stat field 4), None if gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def age_s(pid: int) -> float | None:
    """Seconds since process `pid` started, on this host's clock since boot (never a file's time, which a file
    server's clock sets on a shared filesystem); None if it is gone."""
    ticks = start_ticks(pid)
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return None if ticks is None else uptime - ticks / os.sysconf("SC_CLK_TCK")


def running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, reaped or not, does not)."""
    return start_ticks(pid) is not None


def alive(pid: int, ticks: int | None) -> bool:
    """Whether process `pid` still runs and, when `ticks` is given, is the same process that had them."""
    now = start_ticks(pid)
    return now is not None and (ticks is None or now == ticks)


def bound_child() -> dict[str, Any]:
    """`subprocess.Popen` keyword arguments for a child in a session of its own (its process group: one killpg ends
    it and what it started) that dies with this process, however this one ends (`die_with_parent`)."""
    return {"start_new_session": True, "preexec_fn": functools.partial(die_with_parent, os.getpid())}


def die_with_parent(parent_pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent ends (prctl PR_SET_PDEATHSIG).

    For `subprocess.Popen(preexec_fn=...)` in the child: it dies with the process that started it, even one
    killed with SIGKILL (which runs no clean-up of its own). A parent that ended before the request was made
    (the child was already reparented) ends the child at once.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os._exit(1)
