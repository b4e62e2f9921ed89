"""The host side of a run: one process per host starts a child per lane and ends them when the run's lease lapses.

    python -m trtsweep.lane HOST_SPEC              the host's runner (started once per run and host, detached)
    python -m trtsweep.lane HOST_SPEC --lane NAME  one lane (started by the runner)

The runner writes its pid to the journal folder (`journal.RUNNER_FILE`), so the controller can tell a runner that
died from one that is busy. The run's lease (renewed by the controller's heartbeat for this host) is its tie to the
controller: when the lease is older than its TTL or gone (the run ended, was interrupted, or the link is cut), the
servers' supervisors stop the servers, a lane starts no further point, and the runner stops its lanes soon after
(TERM: each stops its server and its benchmark) and exits; a point it never started is left to the controller, which
records it lost. A lane dies with the runner (parent-death signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from trtsweep.common.fileio import atomic_write_text
from trtsweep.common.procs import die_with_parent, start_ticks
from trtsweep.lane import journal
from trtsweep.lane.point import PointRun
from trtsweep.lane.spec import HostSpec

POLL_S = 0.5
STOP_GRACE_S = 40.0  # a lane stopping its server (15 s TERM grace) and its benchmark
# the servers' supervisors stop them when the lease lapses (their record says "lease expired"); the runner ends
# its lanes this much later, a backstop for a lane that is not serving (a build, a download)
LANE_MARGIN_S = 10.0


def lease_lapsed(lease: Path, ttl_s: float, since: float) -> str | None:
    """Why the run's lease no longer holds (None while it does); a lease not written yet has `ttl_s` from `since`."""
    try:
        age = time.time() - lease.stat().st_mtime
    except FileNotFoundError:
        return f"the run's lease {lease} is gone" if time.time() - since > ttl_s else None
    return f"the run's lease {lease} was not renewed for {age:.0f} s" if age > ttl_s else None


def busy_message(spec: HostSpec, lane: dict, host: str) -> str | None:
    """The lane's Triton ports that are in use on its host, as the points' preflight cause (None: all free)."""
    from trtsweep.serve.probes import busy_ports

    address = str(spec.settings["trtsweep_triton_bind_address"])
    busy = busy_ports(address.replace("0.0.0.0", "127.0.0.1"), {k: int(v) for k, v in lane["ports"].items()})
    if not busy:
        return None
    ports = ", ".join(f"{role} port {port}" for role, port in busy.items())
    return (f"{ports} on {address} already in use (host {host}); "
            "stop that server or change trtsweep_triton_*_port")  # fmt: skip


def run_lane(spec: HostSpec, name: str) -> int:
    """Run the lane's points one after the other, journaling each; stop when the lease lapses."""
    lane = spec.lane(name)
    path = spec.journal(name)
    host = lane.get("host") or socket.gethostname()
    ttl = float(spec.settings["trtsweep_server_lease_ttl"])
    since = time.time()
    busy = busy_message(spec, lane, host)
    for point in lane["points"]:
        if lease_lapsed(spec.lease_file, ttl, since):
            break
        journal.append(path, {"event": "start", "point": point["id"]})
        if busy:
            now = time.time()
            end = {"event": "end", "point": point["id"], "status": "failed", "stage": "preflight",
                   "failure": {"msg": busy}, "failed_task": None, "stage_times": {"preflight": now, "end": now},
                   "archive": None}  # fmt: skip
        else:
            end = PointRun(spec, point, path, host).run()
        journal.append(path, end)
    journal.append(path, {"event": "lane_end"})
    return 0


def _terminate(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _start_lane(spec_file: Path, name: str, parent: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "trtsweep.lane", str(spec_file), "--lane", name]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=lambda: die_with_parent(parent, signal.SIGTERM))


def run_host(spec_file: Path) -> int:
    """Start every lane of the host spec, wait for them, end them if the lease lapses."""
    spec = HostSpec.load(spec_file)
    me = os.getpid()
    atomic_write_text(spec.journal_dir / journal.RUNNER_FILE, json.dumps({"pid": me, "ticks": start_ticks(me)}))
    ttl = float(spec.settings["trtsweep_server_lease_ttl"])
    since = time.time()
    children = [_start_lane(spec_file, lane["name"], me) for lane in spec.lanes]
    try:
        while any(child.poll() is None for child in children):
            why = lease_lapsed(spec.lease_file, ttl + LANE_MARGIN_S, since)
            if why:
                print(f"{why}: stopping the lanes", flush=True)
                break
            time.sleep(POLL_S)
    finally:
        _terminate(children)
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds: the point's server is stopped, its benchmark ends with this process


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m trtsweep.lane")
    parser.add_argument("host_spec", type=Path)
    parser.add_argument("--lane")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    if args.lane:
        return run_lane(HostSpec.load(args.host_spec), args.lane)
    return run_host(args.host_spec)
