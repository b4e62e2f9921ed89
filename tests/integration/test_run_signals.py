"""Stopping `trtsweep run` stops the run it started: ansible-playbook, its heartbeat, the host's lane runner and the
point's server, however `trtsweep run` ends (SIGTERM, or kill -9 as when its terminal's machine dies).

The host is this machine (`ansible_connection: local`); the point's server is the sleep-bound stand-in
(benchmarks/standin_tritonserver.py) with a long model load, so the run is mid-load when it is stopped. Fails on a
`trtsweep run` that starts ansible-playbook with no signal forwarding and no parent-death signal: the playbook, its
heartbeat and the load live on for minutes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import all_gone, kill_all, playbook_env, procs, write_run

LOAD_S = 240  # the stand-in's model load: far longer than the test waits
TTL_S = 5
OUTCOME = "the playbook, heartbeat, runner, lane, supervisor and server all end within TTL + 60 s"


def start_run(tmp_path: Path) -> subprocess.Popen[bytes]:
    """`trtsweep run -- sweep.yml` of one stand-in point on this machine."""
    extravars = write_run(tmp_path, "signals", LOAD_S, TTL_S)
    argv = [str(Path(sys.executable).parent / "trtsweep"), "run", "--log", str(tmp_path / "run.log"), "--interval",
            "0.5", "--", "sweep.yml", "-e", f"@{extravars}"]  # fmt: skip
    (tmp_path / "tmp").mkdir()  # its temporary files (kill -9 leaves the events pointer) in the test's folder
    return subprocess.Popen(argv, cwd=ROOT, env={**playbook_env(), "TMPDIR": str(tmp_path / "tmp")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", [
    pytest.param(signal.SIGTERM, id="sigterm", marks=pytest.mark.fault(
        "`trtsweep run` gets SIGTERM while its point's server loads", OUTCOME)),
    pytest.param(signal.SIGKILL, id="sigkill", marks=pytest.mark.fault(
        "`trtsweep run` killed -9 while its point's server loads", OUTCOME)),
])  # fmt: skip
def test_stopping_trtsweep_run_ends_the_playbook_its_lanes_and_the_loading_server(tmp_path, how):
    run = start_run(tmp_path)
    marker = str(tmp_path)
    try:
        # the point's server is loading (the stand-in started under the lane, its supervisor tied to the lease)
        wait_for(lambda: any("standin_tritonserver" in line for line in procs(marker).values()), 240)
        time.sleep(2)
        run.send_signal(how)
        run.wait(timeout=120)
        started = time.monotonic()
        # everything this run started ends: the playbook, its heartbeat, the runner, its lane, the supervisor, the
        # stand-in (the lease's TTL plus the runner's stop grace bound it, far below the stand-in's load)
        all_gone(marker, TTL_S + 60)
        assert time.monotonic() - started < LOAD_S / 2
    finally:
        if run.poll() is None:
            run.kill()
        kill_all(list(procs(marker)))
