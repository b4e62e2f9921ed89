"""The host side of a run: one process per host starts a child per lane and ends them when the run's lease lapses.

    python -m trtsweep.lane HOST_SPEC              the host's runner (started once per run and host, detached)
    python -m trtsweep.lane HOST_SPEC --lane NAME  one lane (started by the runner)

The runner writes its pid to the journal folder (`journal.RUNNER_FILE`), so the controller can tell a runner that
died from one that is busy. The run's lease (renewed by the controller's heartbeat for this host and by nothing else,
judged by its counter on this host's monotonic clock: common/lease.py) is its tie to the controller: when it lapses
(at once when the run ended or was stopped; within its TTL for a dead controller or a cut link), the servers'
supervisors stop the servers, a lane starts no further point, and the runner stops its lanes soon after (TERM: each
stops its server and its benchmark, or its build tool and that tool's container) and exits; a point it never started
is left to the controller, which records it lost. Before any lane the runner takes the host's claim on the sweep
(trtsweep.lane.claim): another live run of the sweep there (a second controller) loses this run's points naming it.
A lane dies with the runner (parent-death signal: TERM). When the runner ends, after its lanes, it deletes the host
spec: the lanes read it when they start, and it can hold the Hub token.

A stop signal (TERM, INT, HUP) ends a lane: its point's stage is stopped where it is (the server, the benchmark, the
build tool and its container) and it starts no further point.

A lane's ports may be held when it starts (a rerun started while an interrupted run's server drains: its supervisor
stops it within the lease's TTL plus its stop grace): the lane waits for them that long, then fails every point at
preflight, saying how long it waited.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import FrameType

from trtsweep.common.fileio import atomic_write_text
from trtsweep.common.lease import LeaseWatch
from trtsweep.common.procs import die_with_parent, start_ticks
from trtsweep.lane import claim, journal
from trtsweep.lane.point import PointRun
from trtsweep.lane.spec import HostSpec
from trtsweep.lane.step import lane_argv, lost_cause, on_step_gpus, step_devices, step_record
from trtsweep.serve import supervisor

POLL_S = 0.5
STOP_GRACE_S = 40.0  # a lane stopping its server (15 s TERM grace) and its benchmark
# the servers' supervisors stop them when the lease lapses (their record says "lease expired"); the runner ends
# its lanes this much later, a backstop for a lane that is not serving (a build, a download)
LANE_MARGIN_S = 10.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_signalled: list[int] = []  # the stop signals this process got


def busy_message(spec: HostSpec, lane: dict, host: str) -> str | None:
    """None once the lane's Triton ports are free on its host. While one is in use, wait up to the lease's TTL plus
    the supervisor's stop grace (an interrupted run's server draining), then the cause the points fail with."""
    from trtsweep.serve.probes import busy_ports

    address = str(spec.settings["trtsweep_triton_bind_address"])
    ports = {role: int(port) for role, port in lane["ports"].items()}
    wait_s = float(spec.settings["trtsweep_server_lease_ttl"]) + supervisor.STOP_GRACE_S
    deadline = time.monotonic() + wait_s
    while busy := busy_ports(address.replace("0.0.0.0", "127.0.0.1"), ports):
        if time.monotonic() >= deadline:
            held = ", ".join(f"{role} port {port}" for role, port in busy.items())
            return (f"{held} on {address} still in use after waiting {wait_s:.0f} s (the lease's TTL and the servers' "
                    f"stop grace; host {host}): stop that server or change trtsweep_triton_*_port")  # fmt: skip
        time.sleep(POLL_S)
    return None


def _failed_at_preflight(point: dict, why: str) -> dict:
    now = time.time()
    return {"event": "end", "point": point["id"], "status": "failed", "stage": "preflight", "failure": {"msg": why},
            "failed_task": None, "stage_times": {"preflight": now, "end": now}, "archive": None}  # fmt: skip


def run_lane(spec: HostSpec, name: str) -> int:
    """Run the lane's points one after the other, journaling each; start none once the lease lapsed or a stop signal
    came."""
    lane = on_step_gpus(spec.lane(name), step_devices())
    path = spec.journal(name)
    host = lane.get("host") or socket.gethostname()
    watch = LeaseWatch(spec.lease_file, float(spec.settings["trtsweep_server_lease_ttl"]))
    with watch.followed(POLL_S):  # a point can take hours: the lease is looked at all along
        busy = busy_message(spec, lane, host)
        for point in lane["points"]:
            if _signalled or watch.lapsed():
                break
            journal.append(path, {"event": "start", "point": point["id"], **step_record(point)})
            end = _failed_at_preflight(point, busy) if busy else PointRun(spec, point, path, host).run()
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


def _start_lane(spec: HostSpec, spec_file: Path, lane: dict, parent: int) -> subprocess.Popen[bytes]:
    """The lane's process; on Slurm its step's output (the lane's and srun's, slurmstepd's word on how it ended)
    goes to the lane's step log."""
    argv = lane_argv(spec, spec_file, lane)
    out = step_log(spec, lane["name"]).open("ab") if spec.settings.get("trtsweep_slurm_job") else None
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                preexec_fn=lambda: die_with_parent(parent, signal.SIGTERM))  # fmt: skip
    finally:
        if out is not None:
            out.close()


def step_log(spec: HostSpec, lane: str) -> Path:
    return spec.journal_dir / f"{lane}.step.log"


def _lost_lanes(spec: HostSpec, children: list[subprocess.Popen[bytes]], told: set[str]) -> None:
    """A lane whose process ended before the lane did (killed alone: the OOM killer, -9; an error outside a stage;
    on Slurm its step ended: cancelled, time limit, preemption, node failure, after which srun exits 0, so any
    status counts): the server its running point left is stopped now (not when the run's lease ends), and its
    journal says why, once (`told`), so its points are lost with that cause."""
    job = spec.settings.get("trtsweep_slurm_job")
    for lane, child in zip(spec.lanes, children, strict=True):
        status = child.poll()
        if status is None or lane["name"] in told:
            continue
        events = _journal(spec, lane["name"])
        if any(event.get("event") == "lane_end" for event in events):
            continue
        told.add(lane["name"])
        running = _running_point(lane, events)
        if running is not None:
            with contextlib.suppress(Exception):  # best effort: the lease stops it otherwise
                PointRun(spec, running, spec.journal(lane["name"]), lane.get("host") or socket.gethostname()
                         ).stop_servers()  # fmt: skip
        if job:
            step = next((e["slurm"].get("step_id") for e in reversed(events) if e.get("slurm")), None)
            why = lost_cause(step_log(spec, lane["name"]).read_text(errors="replace"), str(job), status, step)
        else:
            how = f"was killed ({signal.Signals(-status).name})" if status < 0 else f"exited with status {status}"
            last = next((line for line in reversed(journal.log_tail(spec.journal_dir)) if line.strip()), None)
            said = f" ({journal.RUNNER_LOG}: {last.strip()})" if last else ""  # its last words, or a full disk
            why = f"lane {lane['name']}'s process {how} before the lane ended{said}"
        journal.append(spec.journal(lane["name"]), {"event": "lane_lost", "why": why})


def _journal(spec: HostSpec, lane: str) -> list[dict]:
    """The lane's journal events, read as the controller reads them (journal.read_new)."""
    with contextlib.suppress(OSError):
        return journal.read_new(spec.journal_dir, {})[0].get(lane, [])
    return []


def _running_point(lane: dict, events: list[dict]) -> dict | None:
    """The lane's point that started and did not end, from its journal's events."""
    running = None
    for event in events:
        if event.get("event") == "start":
            running = event.get("point")
        elif event.get("event") == "end" and event.get("point") == running:
            running = None
    return next((p for p in lane["points"] if p["id"] == running), None)


def _run_lanes(spec_file: Path) -> None:
    """Start every lane of the host spec, wait for them, end them if the lease lapses."""
    spec = HostSpec.load(spec_file)
    me = os.getpid()
    atomic_write_text(spec.journal_dir / journal.RUNNER_FILE, json.dumps({"pid": me, "ticks": start_ticks(me)}))
    ttl = float(spec.settings["trtsweep_server_lease_ttl"])
    host = socket.gethostname()
    name = next((lane.get("host") for lane in spec.lanes if lane.get("host")), host)  # the inventory's
    held, holder = claim.take(claim.folder(spec.settings["trtsweep_work_dir"], spec.sweep, host), spec.run_id, name,
                              {"pid": me, "host": host, "lease_file": str(spec.lease_file)},
                              ttl + supervisor.STOP_GRACE_S + LANE_MARGIN_S)  # fmt: skip
    if held is None:  # another run of the sweep on this host: no lane starts, each lane's points lost naming it
        why = (f"another run of sweep {spec.sweep} holds {host}: {holder} (one run of a sweep on a host at a "
               "time: a second controller?)")  # fmt: skip
        for lane in spec.lanes:
            journal.append(spec.journal(lane["name"]), {"event": "lane_lost", "why": why})
        return
    watch = LeaseWatch(spec.lease_file, ttl + LANE_MARGIN_S)
    children = [_start_lane(spec, spec_file, lane, me) for lane in spec.lanes]
    told: set[str] = set()
    try:
        while True:
            _lost_lanes(spec, children, told)  # a lane that ended alone (never one this runner stops below)
            if all(child.poll() is not None for child in children):
                break
            why = watch.lapsed()
            if why:
                print(f"{why}: stopping the lanes", flush=True)
                break
            time.sleep(POLL_S)
    finally:
        _terminate(children)


def run_host(spec_file: Path) -> int:
    """Run the host's lanes, then delete the host spec (the lanes read it when they start; it can hold the Hub
    token)."""
    try:
        _run_lanes(spec_file)
    finally:
        spec_file.unlink(missing_ok=True)
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    _signalled.append(signum)
    raise SystemExit(128 + signum)  # unwinds: the point's server is stopped, its benchmark ends with this process


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m trtsweep.lane")
    parser.add_argument("host_spec", type=Path)
    parser.add_argument("--lane")
    args = parser.parse_args(argv)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop)
    if args.lane:
        return run_lane(HostSpec.load(args.host_spec), args.lane)
    return run_host(args.host_spec)
