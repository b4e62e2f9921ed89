"""What the tests' beds share (the container bed's dockerd, the Slurm cluster): fail or skip when a bed cannot run,
stop a bed when the session is told to end before its fixture's teardown, and the process helpers that stop a bed
by PID (never by name)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

import pytest


def require(reason: str | None, bed: str) -> None:
    """Nothing when `reason` is None; else skip saying why, or fail under CI (a missing package must not pass)."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the {bed} test bed cannot run here: {reason}", pytrace=False)
    pytest.skip(f"the {bed} test bed cannot run here: {reason}")


@contextlib.contextmanager
def stopped_on_exit(stop: Callable[[], None]) -> Iterator[None]:
    """Call `stop` when the process exits or is told to (SIGTERM, SIGHUP) before the fixture's own teardown."""
    previous: dict[int, object] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    atexit.register(stop)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, on_signal)
    try:
        yield
    finally:
        atexit.unregister(stop)
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def names_bed(pid: int, root: Path) -> bool:
    """Whether the process's command line names the bed's directory."""
    cmdline = read(Path(f"/proc/{pid}/cmdline")).replace("\0", " ")
    return f"{root}/" in cmdline


def terminate(pids: Sequence[int], grace: float) -> None:
    """SIGTERM to each, SIGKILL to those still alive after `grace` seconds; waits until they are gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(pid) for pid in pids):
            time.sleep(0.05)
        if not any(alive(pid) for pid in pids):
            return


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    stat = read(Path(f"/proc/{pid}/stat"))
    return bool(stat) and stat.rsplit(")", 1)[-1].split()[0] != "Z"


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid from the recorded process)."""
    stat = read(Path(f"/proc/{pid}/stat"))
    return stat.rsplit(")", 1)[-1].split()[19] if stat else None


def read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return ""


def stale_beds(beds: Path) -> list[Path]:
    """The beds under `beds` whose owner process is gone (or was never recorded in their owner.json)."""
    stale = []
    for root in sorted(beds.glob("bed-*")):
        try:
            owner = json.loads((root / "owner.json").read_text())
        except (OSError, ValueError):
            stale.append(root)
            continue
        if start_time(int(owner["pid"])) != owner.get("start"):
            stale.append(root)
    return stale


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing) for the block's duration."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
