"""The run's heartbeat (trtsweep/fleet/heartbeat.py) with real processes: one channel per host renews the host's lease
(a counter that advances, written whole) while the controller lives, restarts a channel that ends, and stops - the
host's lease removed - when the controller is gone or when it is told to (SIGTERM)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from trtsweep.common.procs import start_ticks
from trtsweep.fleet import heartbeat


@pytest.fixture
def controller(sleeper):
    """A stand-in for the ansible-playbook process: the heartbeat lives as long as it does."""
    return sleeper


def start_beat(controller: subprocess.Popen, log: Path, channel: list[str], every: float = 0.2):
    argv = [sys.executable, "-m", "trtsweep.fleet.heartbeat", "--controller-pid", str(controller.pid),
            "--controller-ticks", str(start_ticks(controller.pid)), "--log", str(log), "--every", str(every),
            "--", *channel]  # fmt: skip
    return subprocess.Popen(argv)


def mtime(path: Path) -> float:
    return path.stat().st_mtime if path.exists() else 0.0


def counters(lease: Path, count: int, timeout_s: float = 10) -> list[int]:
    """The first `count` different counters read from the lease, in the order they were read."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count:
        assert time.monotonic() < deadline, f"counters read: {seen}"
        if lease.exists():
            value = int(lease.read_text())  # whole: never an empty or half-written file
            if value not in seen:
                seen.append(value)
        time.sleep(0.02)
    return seen


def test_the_lease_is_renewed_while_the_controller_lives_and_removed_when_it_is_gone(tmp_path, controller):
    lease = tmp_path / "leases dir" / "run 1's.lease"  # spaces and a quote: the channel's command is quoted
    # the channel as a remote login shell runs it: one command string
    beat = start_beat(controller, tmp_path / "hb.log", ["sh", "-c", heartbeat.remote_command(str(lease))])
    try:
        seen = counters(lease, 4)  # renewed again and again: a counter that advances
        assert seen == sorted(seen), seen
        assert sorted(p.name for p in lease.parent.iterdir()) == [lease.name]  # written whole: no temporary left
        controller.kill()
        controller.wait()
        wait_for(lambda: beat.poll() is not None, 5)  # the heartbeat ends with the controller...
        wait_for(lambda: not lease.exists(), 5)  # ...and tells the host: the lease is gone, its servers stop now
        assert "controller (pid" in (tmp_path / "hb.log").read_text()
    finally:
        beat.kill()
        beat.wait()


def test_a_channel_that_ends_is_restarted_and_the_lease_kept(tmp_path, controller):
    lease = tmp_path / "run.lease"
    # a channel that renews once and drops (a transient SSH failure): the heartbeat opens a new one
    flaky = f"IFS= read -r _ && touch {shlex.quote(str(lease))} && exit 255"
    beat = start_beat(controller, tmp_path / "hb.log", ["sh", "-c", flaky])
    try:
        wait_for(lease.exists, 10)
        first = mtime(lease)
        wait_for(lambda: mtime(lease) > first, 10)
        log = (tmp_path / "hb.log").read_text()
        assert "channel ended (status 255); restarting" in log
        assert log.count("channel started") >= 2
    finally:
        beat.kill()
        beat.wait()


def test_a_dropped_channel_leaves_the_lease_to_lapse(tmp_path):
    lease = tmp_path / "run.lease"
    loop = subprocess.Popen(["sh", "-c", heartbeat.renew_loop(str(lease))], stdin=subprocess.PIPE)
    loop.stdin.write(b".\n")
    loop.stdin.close()  # end of input without `end`: a cut link, a dead ssh client
    assert loop.wait(timeout=10) == 0
    assert lease.exists()  # the supervisor stops the servers only when the TTL is over


def test_a_reused_controller_pid_is_not_the_controller(tmp_path):
    # the pid lives, but its start ticks are another process's: the heartbeat must not run on
    me = os.getpid()
    beat = subprocess.run([sys.executable, "-m", "trtsweep.fleet.heartbeat", "--controller-pid", str(me),
                           "--controller-ticks", str((start_ticks(me) or 0) + 1), "--log", str(tmp_path / "hb.log"),
                           "--every", "0.1", "--", "sh", "-c", heartbeat.renew_loop(str(tmp_path / "l"))],
                          timeout=30, check=False)  # fmt: skip
    assert beat.returncode == 0
    assert not (tmp_path / "l").exists()


def test_a_terminated_heartbeat_ends_the_hosts_lease_as_a_dead_controller_does(tmp_path, controller):
    """The controller stops one host's lanes by terminating that host's heartbeat."""
    lease = tmp_path / "run.lease"
    beat = start_beat(controller, tmp_path / "hb.log", ["sh", "-c", heartbeat.renew_loop(str(lease))], every=2)
    try:
        wait_for(lease.exists, 10)
        beat.send_signal(signal.SIGTERM)
        assert beat.wait(timeout=5) == 0
        wait_for(lambda: not lease.exists(), 2)  # `end` reached the host: its servers stop now, not after the TTL
        assert "stopped by SIGTERM" in (tmp_path / "hb.log").read_text()
        assert controller.poll() is None  # the controller lives on
    finally:
        beat.kill()
        beat.wait()
