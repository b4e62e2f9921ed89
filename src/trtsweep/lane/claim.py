"""A host's claim on a sweep: one run of a sweep on a host at a time, whichever controller started it.

The controller's run lock (trtsweep.fleet.runlock) keeps a second run of a sweep off one controller's results; a
second controller (another machine, another checkout) running the same sweep against the same hosts would share each
host's work folders (checkpoints, engines, point folders) and measure on the same GPUs. So the host's runner takes
the claim before it starts a lane: an exclusive lock (flock) on its own run's file in
`<work_dir>/<sweep>/.claims/<machine>/`, held for the runner's life (the kernel lets go however the runner ends, kill
-9 included) and naming it (run, pid, host, start, lease file); then it looks at the other runs' files there whose
lock is held (their runners live).

A claim another runner holds is judged by that run's lease (common/lease.py's counter, renewed every few seconds by
its controller's heartbeat):
- renewed while this runner looks: a live run of another controller: refused at once, naming it;
- not renewed (removed at its run's end, or lapsed): an ended run's runner winding down (a rerun started while an
  interrupted run stops): waited for, up to the bound a lane waits for its ports (the lease's TTL and the servers'
  stop grace), then refused.
A refused runner starts no lane: each lane's points are lost with the holder named, and a rerun once that run has
ended measures them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import read_json

FOLDER = ".claims"
POLL_S = 0.5


def folder(work_dir: str | Path, sweep: str, machine: str) -> Path:
    """The claims on a sweep of one machine (its own name: a work folder on a shared filesystem is many machines')."""
    return Path(work_dir) / sweep / FOLDER / machine


def take(where: Path, run_id: str, host: str, me: dict[str, Any], bound_s: float) -> tuple[int | None, str]:
    """(the held lock's descriptor, "") or (None, why another run holds the sweep on this machine). `host`: the
    inventory's name of this runner's host (runners of one run on one machine, a shared-home bed, do not exclude
    each other)."""
    where.mkdir(parents=True, exist_ok=True)
    mine = where / f"{run_id}--{host}.lock"
    fd = os.open(mine, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # this run's own: held for the runner's life
    except BlockingIOError:
        os.close(fd)
        return None, f"another runner of run {run_id} for {host} (its claim {mine} is held)"
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({**me, "run_id": run_id, "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
                             ).encode(), 0)  # fmt: skip
    deadline, seen = time.monotonic() + bound_s, {}
    while True:
        others = _held(where, run_id)
        if not others:
            return fd, ""
        for other, holder in others.items():
            lease = _lease(holder)
            if other in seen and lease is not None and lease != seen[other]:
                os.close(fd)
                return None, f"{_name(holder)}, its lease renewed by its controller: a live run"
            seen.setdefault(other, lease)
        if time.monotonic() > deadline:
            os.close(fd)
            return None, f"{_name(next(iter(others.values())))}, which did not let go within {bound_s:g} s"
        time.sleep(POLL_S)


def _held(where: Path, run_id: str) -> dict[Path, dict[str, Any]]:
    """Other runs' claims whose runner lives (their lock held), with what each says of its holder; a claim nobody
    holds any more (its runner ended) is removed."""
    out = {}
    for other in where.glob("*.lock"):
        if other.name.startswith(f"{run_id}--"):
            continue
        try:
            fd = os.open(other, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            out[other] = _holder(other)
        else:
            with contextlib.suppress(OSError):
                other.unlink()
        finally:
            os.close(fd)
    return out


def _holder(claim: Path) -> dict[str, Any]:
    found = read_json(claim)
    return found if isinstance(found, dict) else {}


def _lease(holder: dict[str, Any]) -> bytes | None:
    """The holder's lease content now (None: gone or unreadable: its run ended or stops)."""
    with contextlib.suppress(OSError, TypeError, KeyError):
        return Path(holder["lease_file"]).read_bytes()
    return None


def _name(holder: dict[str, Any]) -> str:
    if not holder:
        return "another run (its claim unreadable)"
    return (f"run {holder.get('run_id')} (runner pid {holder.get('pid')} on {holder.get('host')} since "
            f"{holder.get('since')})")  # fmt: skip
