"""Waits with an end: a tool step without a configured timeout is bounded by the model's size, and a process waiting
for an artifact that another process holds (a lock file taken by a real process that never lets go) fails after
the step's bound naming the holder, instead of waiting forever."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import wait_for
from trtsweep.errors import TrtsweepError
from trtsweep.toolchain import artifacts
from trtsweep.toolchain.runner import default_timeout_s

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, b"pid %d on builder-7 since 2026-11-29T00:00:00+00:00" % os.getpid(), 0)
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.fault(
    "an artifact's lock held by a process that never lets go (a hung build on the host)",
    "the waiter fails after the step's bound, naming the holder",
)
def test_a_lock_held_past_the_steps_bound_fails_the_waiter_naming_the_holder(tmp_path):
    out = tmp_path / "engines" / "e-123"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out.with_name(out.name + ".lock"))],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        wait_for(lambda: holder.stdout is not None and holder.stdout.readline().strip() == "held", 10)
        started = time.monotonic()
        with pytest.raises(TrtsweepError) as caught, artifacts.lock(out, wait_s=1.0):
            pass
        assert time.monotonic() - started < 5
        assert str(caught.value).startswith(f"{out}: waited 1 s for pid {holder.pid} on builder-7 since ")
    finally:
        holder.kill()
        holder.wait()
    with artifacts.lock(out, wait_s=1.0) as held:  # the holder gone: the lock is free at once
        assert held.waited_for is None


def test_a_tool_steps_default_bound_grows_with_the_model(tmp_path):
    assert default_timeout_s(None) == 3600.0
    model = tmp_path / "model"
    model.mkdir()
    with open(model / "model.safetensors", "wb") as weights:  # 5 GB, sparse
        weights.truncate(5 * 10**9)
    os.symlink(model / "model.safetensors", model / "linked.safetensors")  # a hub snapshot's link counts its blob
    assert default_timeout_s(str(model)) == pytest.approx(3600 + 2 * 120 * 5)
