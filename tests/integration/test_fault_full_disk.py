"""A disk that fills up mid-run, on the host (its work directory) and on the controller (the results directory).

Each disk is a small tmpfs the test mounts (root) and fills with one file while the point benchmarks, as another
job on a shared machine would; the stand-in server serves the point on this machine. What must hold: the run ends
within a bounded time with the point failed or lost and a one-line cause naming the full disk, nothing of the run
is left running, and once the space is back a rerun measures the point.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import (
    all_gone,
    journal_stages,
    kill_all,
    playbook_argv,
    playbook_env,
    procs,
    records,
    write_run,
)

TTL_S = 5
OUTCOME = "the run ends (bounded) naming the full disk, nothing left running; with space back a rerun measures"


@contextlib.contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                             capture_output=True, text=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.fail(f"a full disk needs a tmpfs of the test's own (root, mount): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """Fill the file system holding `folder` to the last byte; returns the file that did it."""
    ballast = folder / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):  # unbuffered: a write that does not fit fails at once, whole
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    with pytest.raises(OSError) as full:
        (folder / "probe").write_bytes(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC
    return ballast


FULL = ("No space left on device", "ENOSPC", " is full (")  # the error itself, or the disk's state said by the poll


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.parametrize("where", [
    pytest.param("host", marks=pytest.mark.fault("the host's disk fills mid-benchmark", OUTCOME)),
    pytest.param("controller", marks=pytest.mark.fault("the controller's disk fills mid-benchmark", OUTCOME)),
])  # fmt: skip
def test_a_disk_that_fills_mid_benchmark_ends_the_run_in_bounded_time_and_a_rerun_measures(tmp_path, where):
    marker = str(tmp_path)
    disk = tmp_path / "work" if where == "host" else tmp_path / "results"
    with tmpfs(disk, 64):
        extravars = write_run(tmp_path, "full", 1, TTL_S, token_ms=150)  # a benchmark of about 20 s
        run = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
        try:
            wait_for(lambda: "benchmark" in journal_stages(tmp_path / "work"), 300)
            ballast = fill(disk)
            started = time.monotonic()
            out, _ = run.communicate(timeout=300)
            print(
                f"{where}: the run ended {time.monotonic() - started:.1f} s after the disk filled (rc {run.returncode})"
            )
            assert run.returncode != 0
            # the cause names the full disk: the error itself, or (a runner that could not log it) the disk's state
            assert any(said in out for said in FULL), out[-4000:]
            if where == "host":  # the point's own record says so (the controller's disk is the one that can hold it)
                (record,) = records(tmp_path, "full").values()
                assert record["status"] in ("failed", "lost") and any(said in record["cause"] for said in FULL), record
            all_gone(marker, TTL_S + 60)
        finally:
            if run.poll() is None:
                run.kill()
            kill_all(list(procs(marker)))
        ballast.unlink()
        os.sync()
        rerun = subprocess.run(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), capture_output=True,
                               text=True, timeout=400)  # fmt: skip
        assert rerun.returncode == 0, rerun.stdout[-4000:]
        assert [r["status"] for r in records(tmp_path, "full").values()] == ["ok"]
        all_gone(marker, 10)
