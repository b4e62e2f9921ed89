"""A sweep's results directory belongs to one run at a time: `results/<sweep>/.run.lock`.

The first play of sweep.yml takes the lock before anything is written under `results/<sweep>/` (the plan, the
events, point records); a second run of the same sweep is refused at once, in one line naming the holder (run
id, pid, host, start time), and writes nothing. A holder whose process is gone (a run killed with -9, a crashed
controller) is stale: the next run takes the lock over and says so. The run releases it at its end.

The holder is the ansible-playbook process, named by pid and start ticks (a pid reused by another process is
not the holder) on this controller's host name; a lock held from another host cannot be checked for liveness
and is refused, naming the file to remove once that run is known to be gone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.common.procs import alive, start_ticks
from trtsweep.errors import TrtsweepError

LOCK_FILE = ".run.lock"


def lock_path(results_dir: Path) -> Path:
    return results_dir / LOCK_FILE


@contextlib.contextmanager
def _guarded(results_dir: Path) -> Iterator[None]:
    """Serialise lock changes between runs starting at the same moment."""
    results_dir.mkdir(parents=True, exist_ok=True)
    with (results_dir / f"{LOCK_FILE}.guard").open("a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        yield


def holder(results_dir: Path) -> dict[str, Any] | None:
    """The lock's record, or None when nobody holds it (an unreadable record counts as none)."""
    try:
        record = json.loads(lock_path(results_dir).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def describe(record: dict[str, Any]) -> str:
    run = f"run {record['run_id']}" if record.get("run_id") else "a run still planning"
    return f"{run} (pid {record.get('pid')} on host {record.get('host')}, started {record.get('started_at')})"


def _is_mine(record: dict[str, Any], pid: int) -> bool:
    return (
        record.get("host") == socket.gethostname()
        and record.get("pid") == pid
        and (record.get("ticks") == start_ticks(pid))
    )


def _is_live(record: dict[str, Any]) -> bool:
    if record.get("host") != socket.gethostname():
        return True  # another controller's process cannot be checked from here
    return isinstance(record.get("pid"), int) and alive(record["pid"], record.get("ticks"))


def acquire(results_dir: Path, pid: int, run_id: str | None = None) -> str | None:
    """Take (or update, for the process that holds it) the lock for process `pid`; return a sentence when a stale
    holder was taken over, None otherwise. TrtsweepError, in one line, when a live run holds it."""
    with _guarded(results_dir):
        record = holder(results_dir)
        taken_over = None
        if record is not None and not _is_mine(record, pid):
            if _is_live(record):
                raise TrtsweepError(
                    f"{results_dir} is in use by {describe(record)}: one run per sweep at a time; this run wrote "
                    f"nothing (wait for that run to end or stop it; if it is gone, remove {lock_path(results_dir)})"
                )
            taken_over = f"took over {lock_path(results_dir)} from {describe(record)}, whose process is gone"
        mine = record if record is not None and _is_mine(record, pid) else None
        started = mine["started_at"] if mine else dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        new = {"pid": pid, "ticks": start_ticks(pid), "host": socket.gethostname(), "started_at": started,
               "run_id": run_id or (mine or {}).get("run_id")}  # fmt: skip
        atomic_write_text(lock_path(results_dir), json.dumps(new, indent=1) + "\n")
        return taken_over


def release(results_dir: Path, pid: int) -> bool:
    """Remove the lock if process `pid` holds it; True if it was removed."""
    with _guarded(results_dir):
        record = holder(results_dir)
        if record is None or not _is_mine(record, pid):
            return False
        lock_path(results_dir).unlink()
        return True
