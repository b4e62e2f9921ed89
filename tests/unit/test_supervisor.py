"""The server supervisor (serve/supervisor.py) with real processes: a server with a child of its own (as
tritonserver has its python-backend stubs) lives only while its lease is renewed (its counter advanced, whatever
the file's mtime says), and its end is recorded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.unit.test_lease_watch import beat, shift_mtime
from trtsweep.common.procs import running, start_ticks
from trtsweep.serve import supervisor
from trtsweep.serve.server import gone
from trtsweep.serve.spec import ServerState

# a "server" that starts a "stub" and both sleep: the stub's pid goes to argv[1]
SERVER = (
    "import subprocess, sys, time, pathlib;"
    "stub = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
    "pathlib.Path(sys.argv[1]).write_text(str(stub.pid));"
    "time.sleep(600)"
)


def supervise(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start the supervisor; return it, the server's pid and the stub's pid."""
    state = tmp_path / "server.json"
    stub_file = tmp_path / "stub.pid"
    sup = subprocess.Popen([sys.executable, "-m", "trtsweep.serve.supervisor", "--state", str(state), *args, "--",
                            sys.executable, "-c", SERVER, str(stub_file)], start_new_session=True)  # fmt: skip
    wait_for(lambda: supervisor.server_file(state).exists() and stub_file.exists() and stub_file.read_text(), 20)
    server = json.loads(supervisor.server_file(state).read_text())
    assert server["start_ticks"] == start_ticks(server["pid"])
    return sup, server["pid"], int(stub_file.read_text())


def exit_record(tmp_path: Path) -> dict:
    path = supervisor.exit_file(tmp_path / "server.json")
    wait_for(path.exists, 10)
    return json.loads(path.read_text())


@pytest.mark.fault(
    "the lease's file times step an hour back while renewed, then forward once renewals stop",
    "the server lives while the counter advances; stopped TTL (+ grace) after it stops",
)
def test_an_unrenewed_lease_stops_the_server_and_its_children(tmp_path):
    lease = tmp_path / "server.lease"
    beat(lease, 1)
    sup, server, stub = supervise(tmp_path, "--lease", str(lease), "--ttl", "2", "--grace", "3")
    for counter in range(2, 6):  # renewed: it lives past its ttl, though an NTP step puts its mtime an hour back
        time.sleep(1)
        beat(lease, counter)
        shift_mtime(lease, -3600)
    assert running(server) and running(stub)
    shift_mtime(lease, 3600)  # the run went away (no more renewals) and the clock stepped ahead
    took = wait_for(lambda: not running(server) and not running(stub), 15)
    assert 2 - 1 < took < 2 + 3 + 2
    assert exit_record(tmp_path)["reason"] == "lease expired"
    assert sup.wait(timeout=10) == 0


def test_a_lease_not_written_yet_has_the_ttl_from_the_supervisors_start(tmp_path):
    lease = tmp_path / "server.lease"  # the heartbeat's first line has not reached the host yet
    sup, server, stub = supervise(tmp_path, "--lease", str(lease), "--ttl", "3", "--grace", "3")
    time.sleep(1.5)
    assert running(server) and running(stub)
    wait_for(lambda: not running(server) and not running(stub), 3 + 3 + 2)
    assert exit_record(tmp_path)["reason"] == "lease expired"
    assert sup.wait(timeout=10) == 0


def test_a_removed_lease_stops_the_server_at_once(tmp_path):
    lease = tmp_path / "server.lease"
    beat(lease, 1)
    sup, server, stub = supervise(tmp_path, "--lease", str(lease), "--ttl", "60", "--grace", "3")
    time.sleep(1)  # seen by the supervisor
    lease.unlink()  # the heartbeat's `end`: the run is over
    wait_for(lambda: not running(server) and not running(stub), 3)
    assert exit_record(tmp_path)["reason"] == "lease expired"
    assert sup.wait(timeout=10) == 0


def test_a_server_that_dies_leaves_its_exit_signal(tmp_path):
    sup, server, stub = supervise(tmp_path)
    os.kill(server, signal.SIGKILL)
    record = exit_record(tmp_path)
    assert (record["signal"], record["reason"]) == (9, "exited")
    assert supervisor.describe_exit(record) == "killed by signal 9 (SIGKILL)"
    assert sup.wait(timeout=10) == 0
    wait_for(lambda: not running(stub), 5)  # what the dead server left goes with it


def test_a_signalled_supervisor_stops_its_server_first(tmp_path):
    sup, server, stub = supervise(tmp_path, "--grace", "3")
    sup.send_signal(signal.SIGTERM)
    wait_for(lambda: not running(server) and not running(stub), 10)
    record = exit_record(tmp_path)
    assert record["reason"] == "supervisor signalled"
    assert (
        supervisor.describe_exit(record)
        == "killed by signal 15 (SIGTERM): stopped by its supervisor (supervisor signalled)"
    )


def _state(tmp_path: Path) -> ServerState:
    state_file = tmp_path / "server.json"
    record = json.loads(supervisor.server_file(state_file).read_text())
    return ServerState(pid=record["pid"], start_ticks=record["start_ticks"], argv=[], ports={},
                       bind_address="127.0.0.1", health_url="", log_file=str(tmp_path / "server.log"),
                       state_file=str(state_file), supervisor=record["supervisor"])  # fmt: skip


def test_a_server_dies_with_its_killed_supervisor_and_the_run_is_told(tmp_path):
    """The OOM killer or kill -9 takes the supervisor: no clean-up of its own runs, the kernel ends the server
    (PR_SET_PDEATHSIG); Triton's stubs watch their parent and follow it (the e2e test checks the real ones)."""
    sup, server, stub = supervise(tmp_path, "--ttl", "60")
    state = _state(tmp_path)
    assert gone(state) is None  # served, and supervised
    try:
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
        wait_for(lambda: not running(server), 5)
        why = gone(state)
        assert why is not None and f"its supervisor (pid {sup.pid}) is gone" in why, why
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stub, signal.SIGKILL)  # this stand-in's stub does not watch its parent


def test_a_dead_server_is_told_by_its_exit_record_not_by_its_ended_supervisor(tmp_path):
    sup, server, _ = supervise(tmp_path)
    state = _state(tmp_path)
    os.kill(server, signal.SIGKILL)
    assert sup.wait(timeout=10) == 0  # the supervisor records the end and ends too
    why = gone(state)
    assert why is not None and "killed by signal 9 (SIGKILL)" in why, why
