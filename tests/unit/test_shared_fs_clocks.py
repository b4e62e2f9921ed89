"""Clocks and errors of shared filesystems, injected for real: runner.pid's modification time set by a file server
whose clock is 200 s behind does not make a registering runner look overdue (its age is read from this host's
clock: the process's start), and a lease file that cannot be read (a stale NFS handle, EIO: here a directory where
the file was, which a read refuses with an OSError that is not FileNotFoundError) is no news until the TTL passes,
never a reader's crash."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from trtsweep.common.lease import LeaseWatch
from trtsweep.lane import journal


@pytest.mark.fault(
    "runner.pid's mtime 200 s in the past (a file server's clock behind the host's)",
    "a runner that is still registering is left alone: alive, not SIGTERMed",
)
def test_a_runner_pid_file_dated_by_a_skewed_file_server_does_not_end_a_registering_runner(tmp_path):
    spec = tmp_path / journal.SPEC_FILE
    spec.write_text("{}")
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(spec)])
    try:
        wait_for(lambda: str(spec).encode() in Path(f"/proc/{runner.pid}/cmdline").read_bytes(), 10)  # it exec'd
        pid_file = tmp_path / journal.RUNNER_PID
        pid_file.write_text(str(runner.pid))
        past = time.time() - 200
        os.utime(pid_file, (past, past))
        assert journal.runner_state(tmp_path, register_s=60) == (True, "")
        assert runner.poll() is None  # not SIGTERMed
    finally:
        runner.kill()
        runner.wait()


@pytest.mark.fault(
    "the lease file unreadable (a directory in its place: an OSError, as EIO or a stale NFS handle)",
    "no news until the TTL passes, then lapsed naming why; never an exception in the reader",
)
def test_a_lease_that_cannot_be_read_is_no_news_until_the_ttl_passes(tmp_path):
    lease = tmp_path / "run.lease"
    lease.write_text("1")
    watch = LeaseWatch(lease, ttl_s=1.0)
    assert watch.lapsed() is None
    lease.unlink()
    lease.mkdir()  # read_bytes: IsADirectoryError
    assert watch.lapsed() is None
    time.sleep(1.2)
    why = watch.lapsed()
    assert why is not None and why.startswith(f"the run's lease {lease} could not be read for 1 s ("), why
