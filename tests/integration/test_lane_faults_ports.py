"""A lane whose ports are still held when it starts (a rerun started while an interrupted run's server drains): it waits
for them up to the lease's TTL plus the supervisor's stop grace, then runs its points; ports held past that fail every
point at preflight, saying how long the lane waited. A lane of its own (`python -m trtsweep.lane SPEC --lane L`) under a
real heartbeat, a real socket held on a loopback port.

Also the helpers of the other lane fault tests (tests/integration/test_lane_faults_*.py): a host spec, a heartbeat
with its stand-in controller, a lane's journal.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from trtsweep.common.procs import start_ticks
from trtsweep.fleet.heartbeat import renew_loop
from trtsweep.serve.supervisor import STOP_GRACE_S

LANE = "h--lane0"
OUTCOME_FREED = "the lane waits and runs its point"
OUTCOME_HELD = "every point fails at preflight, saying how long the lane waited (TTL + stop grace)"


def point(point_id: str, ports: dict[str, int]) -> dict[str, Any]:
    """A placed point that gets past preflight and fails at download (it names no model): enough for a lane's
    bookkeeping."""
    return {"id": point_id, "sweep": "s", "host": "h", "lane": LANE, "gpus": [], "visible_devices": "",
            "ports": ports, "benchmark": {"input_data": "p.jsonl"}}  # fmt: skip


def write_spec(tmp_path: Path, lanes: list[dict[str, Any]], ttl_s: float) -> Path:
    """The host spec (trtsweep.lane.spec.HostSpec) of `lanes`; the run's lease is `tmp_path/run.lease`."""
    (tmp_path / "journal").mkdir(exist_ok=True)
    spec = {
        "run_id": "run-1", "sweep": "s", "journal_dir": str(tmp_path / "journal"),
        "lease_file": str(tmp_path / "run.lease"), "inputs": {}, "lanes": lanes,
        "settings": {"trtsweep_work_dir": str(tmp_path / "work"), "trtsweep_triton_bind_address": "127.0.0.1",
                     "trtsweep_server_lease_ttl": ttl_s},
    }  # fmt: skip
    path = tmp_path / "host.json"
    path.write_text(json.dumps(spec))
    return path


def journal(tmp_path: Path, lane: str = LANE) -> list[dict[str, Any]]:
    path = tmp_path / "journal" / f"{lane}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@contextlib.contextmanager
def heartbeat(
    tmp_path: Path, every_s: float = 0.3
) -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """The run's heartbeat for `tmp_path/run.lease` (its channel the host's renew_loop), tied to a stand-in controller;
    yields (controller, heartbeat) once the lease is written; both are killed at the end."""
    lease = tmp_path / "run.lease"
    controller = subprocess.Popen(["sleep", "600"])
    argv = [sys.executable, "-m", "trtsweep.fleet.heartbeat", "--controller-pid", str(controller.pid),
            "--controller-ticks", str(start_ticks(controller.pid)), "--log", str(tmp_path / "heartbeat.log"),
            "--every", str(every_s), "--", "sh", "-c", renew_loop(str(lease))]  # fmt: skip
    beat = subprocess.Popen(argv)
    try:
        wait_for(lease.exists, 10)
        yield controller, beat
    finally:
        for proc in (beat, controller):
            proc.kill()
            proc.wait()


def start_lane(spec: Path, *python: str) -> subprocess.Popen[bytes]:
    """`python -m trtsweep.lane SPEC --lane LANE` (or `python` given: that program with the same arguments)."""
    program = list(python) or ["-m", "trtsweep.lane"]
    return subprocess.Popen([sys.executable, *program, str(spec), "--lane", LANE], start_new_session=True)


@contextlib.contextmanager
def held_port() -> Iterator[socket.socket]:
    """A loopback port another process's server still holds (listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


@pytest.mark.timeout(120)
@pytest.mark.fault("the lane's port held for 2 s when it starts", OUTCOME_FREED)
def test_a_port_freed_within_the_wait_lets_the_lane_run_its_point(tmp_path):
    with held_port() as held, heartbeat(tmp_path):
        port = held.getsockname()[1]
        spec = write_spec(tmp_path, [{"name": LANE, "host": "h", "ports": {"http": port},
                                      "points": [point("a", {"http": port})]}], ttl_s=4)  # fmt: skip
        lane = start_lane(spec)
        try:
            time.sleep(2)
            held.close()  # the interrupted run's server is gone
            assert lane.wait(timeout=30) == 0
        finally:
            lane.kill()
            lane.wait()
    events = journal(tmp_path)
    assert [e["event"] for e in events] == ["start", "stage", "end", "lane_end"]
    assert (events[2]["point"], events[2]["stage"]) == ("a", "download")  # past preflight: the point ran
    assert "in use" not in json.dumps(events[2]["failure"])


@pytest.mark.timeout(120)
@pytest.mark.fault("the lane's port held past TTL + stop grace", OUTCOME_HELD)
def test_a_port_held_past_the_wait_fails_every_point_saying_how_long_the_lane_waited(tmp_path):
    ttl_s = 1
    with held_port() as held, heartbeat(tmp_path):
        port = held.getsockname()[1]
        ports = {"http": port}
        spec = write_spec(tmp_path, [{"name": LANE, "host": "h", "ports": ports,
                                      "points": [point("a", ports), point("b", ports)]}], ttl_s=ttl_s)  # fmt: skip
        started = time.monotonic()
        lane = start_lane(spec)
        try:
            assert lane.wait(timeout=30) == 0
            assert time.monotonic() - started >= ttl_s + STOP_GRACE_S
        finally:
            lane.kill()
            lane.wait()
    events = journal(tmp_path)
    assert [e["event"] for e in events] == ["start", "end", "start", "end", "lane_end"]
    for end in (events[1], events[3]):
        assert (end["status"], end["stage"], end["archive"]) == ("failed", "preflight", None)
        assert end["failure"]["msg"] == (
            f"http port {port} on 127.0.0.1 still in use after waiting {ttl_s + STOP_GRACE_S:.0f} s (the lease's TTL "
            "and the servers' stop grace; host h): stop that server or change trtsweep_triton_*_port"
        )
