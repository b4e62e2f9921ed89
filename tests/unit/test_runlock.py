"""One run per sweep at a time (trtsweep/fleet/runlock.py): a live holder refuses a second run in one line, a holder
whose process is gone is taken over, only the holder releases."""

from __future__ import annotations

import json
import os
import socket

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet import runlock


@pytest.fixture
def other_run(sleeper):
    """The ansible-playbook process of another run of the sweep."""
    return sleeper


def test_a_live_run_holds_the_results_and_a_second_is_refused_naming_it(tmp_path, other_run):
    runlock.acquire(tmp_path, other_run.pid)
    runlock.acquire(tmp_path, other_run.pid, run_id="20261125T160000Z-abc123")  # the holder updates its record
    with pytest.raises(TrtsweepError) as refused:
        runlock.acquire(tmp_path, os.getpid())
    message = str(refused.value)
    assert "\n" not in message
    record = runlock.holder(tmp_path)
    for part in ("run 20261125T160000Z-abc123", f"pid {other_run.pid}", f"host {socket.gethostname()}",
                 f"started {record['started_at']}", "wrote nothing"):  # fmt: skip
        assert part in message
    assert runlock.holder(tmp_path)["pid"] == other_run.pid  # untouched
    assert not runlock.release(tmp_path, os.getpid())  # only the holder releases
    assert runlock.release(tmp_path, other_run.pid)
    assert runlock.holder(tmp_path) is None


def test_a_holder_whose_process_is_gone_is_taken_over_and_said(tmp_path, other_run):
    runlock.acquire(tmp_path, other_run.pid, run_id="old-run")
    other_run.kill()
    other_run.wait()
    said = runlock.acquire(tmp_path, os.getpid())
    assert said is not None and "old-run" in said and "process is gone" in said
    assert runlock.holder(tmp_path)["pid"] == os.getpid()


def test_a_reused_pid_is_not_the_holder(tmp_path):
    runlock.acquire(tmp_path, os.getpid(), run_id="mine")
    record = json.loads(runlock.lock_path(tmp_path).read_text())
    record["ticks"] += 1  # the same pid, another process
    runlock.lock_path(tmp_path).write_text(json.dumps(record))
    assert "mine" in (runlock.acquire(tmp_path, os.getpid()) or "")


def test_a_lock_from_another_controller_is_refused(tmp_path):
    runlock.lock_path(tmp_path).write_text(json.dumps({"pid": 1, "ticks": 0, "host": "elsewhere",
                                                       "started_at": "then", "run_id": "r"}))  # fmt: skip
    with pytest.raises(TrtsweepError, match="on host elsewhere"):
        runlock.acquire(tmp_path, os.getpid())
