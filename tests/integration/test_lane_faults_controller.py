"""The controller's machine dies while a point's server loads its model: the controller and its heartbeat are killed
together (-9), so no `end` reaches the host and only the lease's age can stop the server. Only the heartbeat renews
the lease: the server is gone within the lease's TTL plus the supervisor's stop grace, though the lane waiting for it
to be ready lives on (it does not renew the lease), and the lane is told why.

Driven below Ansible: a "lane" process starts the stand-in server (benchmarks/standin_tritonserver.py, a 120 s
model load) under its supervisor and the run's lease and waits for it to be ready, as a point's serve stage does;
the heartbeat writes the lease through the host's renew_loop. Fails on a lane that renews the lease itself while
its server loads: the server lived on until the ready timeout (300 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, free_ports, wait_for
from tests.integration.test_lane_faults_ports import heartbeat
from trtsweep.common.procs import running
from trtsweep.serve.supervisor import STOP_GRACE_S, server_file

STANDIN = ROOT / "benchmarks" / "standin_tritonserver.py"
TTL_S = 5
OUTCOME = "the loading server is gone within TTL + stop grace; the waiting lane says the lease expired"
# a point's serve stage: start the server under the run's lease, wait (up to 300 s) until it is ready
SERVE = """
import json, sys
from pathlib import Path
from trtsweep.serve import server
from trtsweep.serve.spec import ServerSpec
a = json.loads(sys.argv[1])
spec = ServerSpec(model_repository=Path(a["repo"]), log_file=Path(a["log"]), runtime="native",
                  tritonserver=a["tritonserver"], http_port=a["ports"][0], grpc_port=a["ports"][1],
                  metrics_port=a["ports"][2], lease_file=Path(a["lease"]), lease_ttl_s=a["ttl"])
server.wait_ready(server.start(spec, Path(a["state"])), 300)
"""


@pytest.mark.timeout(120)
@pytest.mark.fault("controller and heartbeat killed -9 during the model load", OUTCOME)
def test_a_server_loading_when_the_controller_dies_is_gone_within_the_ttl(tmp_path):
    wrapper = tmp_path / "tritonserver"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" --standin-load-s 120 "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "repo").mkdir()
    state = tmp_path / "server.json"
    args = {"repo": str(tmp_path / "repo"), "log": str(tmp_path / "server.log"), "tritonserver": str(wrapper),
            "ports": free_ports(3), "lease": str(tmp_path / "run.lease"), "ttl": TTL_S,
            "state": str(state)}  # fmt: skip
    pids: list[int] = []
    try:
        with heartbeat(tmp_path, every_s=0.5) as (controller, beat):
            lane = subprocess.Popen([sys.executable, "-c", SERVE, json.dumps(args)], stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)  # fmt: skip
            pids.append(lane.pid)
            wait_for(lambda: server_file(state).exists(), 30)
            record = json.loads(server_file(state).read_text())
            pids += [record["pid"], record["supervisor"]["pid"]]
            time.sleep(3)  # well into the model load
            for proc in (controller, beat):  # the controller's machine dies: no `end` for the host
                os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        assert running(record["pid"])
        took = wait_for(lambda: not running(record["pid"]), TTL_S + STOP_GRACE_S + 3)
        print(f"server gone {took:.1f} s after the controller died (lease ttl {TTL_S} s)")
        assert took > TTL_S - 2  # the lease's TTL, counted from its last renewal
        _, err = lane.communicate(timeout=30)  # the lane's wait for readiness ends, and says why
        assert lane.returncode != 0
        assert "exited before becoming ready" in err and "stopped by its supervisor (lease expired)" in err, err
        assert time.monotonic() - killed < TTL_S + STOP_GRACE_S + 10
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
