"""The controller's machine dies mid-run (power, network, a laptop that sleeps): ansible-playbook, its workers and
its heartbeat are killed together (-9), so no `end` reaches the host and only the lease's age can stop its work.

For a point in each stage (its server loading the model, its benchmark running), on this machine with the stand-in
server: the server is gone within the lease's TTL plus the supervisor's grace, the lane runner and its lane soon
after, nothing of the run is left running, and a rerun measures the point. Fails on a lane that renews the run's
lease itself while its server loads: the server lived on until its ready timeout (300 s by default).
"""

from __future__ import annotations

import subprocess
import time

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
SERVER_GRACE_S = 15  # the supervisor's TERM grace and polls
RUNNER_GRACE_S = 60  # the runner's margin and its lanes' stop grace
OUTCOME = "server gone within TTL + 15 s, runner and lane within TTL + 60 s; a rerun measures the point"


def controller(marker: str) -> list[int]:
    """The controller's processes of this test's run: ansible-playbook (and its workers) and the heartbeat."""
    return [pid for pid, line in procs(marker).items() if "ansible-playbook" in line or "fleet.heartbeat" in line]


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.parametrize("stage", [
    pytest.param("serve", marks=pytest.mark.fault(
        "controller and heartbeat killed -9 during the model load", OUTCOME)),
    pytest.param("benchmark", marks=pytest.mark.fault(
        "controller and heartbeat killed -9 during the benchmark", OUTCOME)),
])  # fmt: skip
def test_a_controller_killed_with_its_heartbeat_stops_the_hosts_work_within_the_ttl_and_a_rerun_measures(
    tmp_path, stage
):
    marker = str(tmp_path)
    # serve: a model load far longer than the test; benchmark: 8 requests of 16 tokens at 0.4 s a token
    load_s, token_ms = (240, 5) if stage == "serve" else (1, 400)
    extravars = write_run(tmp_path, "death", load_s, TTL_S, token_ms)
    run = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: stage in journal_stages(tmp_path / "work"), 300)
        time.sleep(4)  # well into the stage
        kill_all(controller(marker))
        run.wait(timeout=30)
        killed = time.monotonic()
        all_gone(marker, TTL_S + SERVER_GRACE_S, what="standin_tritonserver")
        all_gone(marker, TTL_S + RUNNER_GRACE_S)
        print(f"{stage}: everything gone {time.monotonic() - killed:.1f} s after the controller died")
    finally:
        kill_all(list(procs(marker)))
    rerun = subprocess.run(playbook_argv(write_run(tmp_path, "death", 1, TTL_S)), cwd=ROOT, env=playbook_env(),
                           capture_output=True, text=True, timeout=400)  # fmt: skip
    assert rerun.returncode == 0, rerun.stdout[-4000:]
    assert [r["status"] for r in records(tmp_path, "death").values()] == ["ok"]
    all_gone(marker, 10)  # the rerun's heartbeat ends within a beat of its playbook
