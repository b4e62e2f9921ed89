"""A second controller (another machine, another checkout: its own results and run lock) running the same sweep
against the same host while the first runs: the host's runner finds the sweep claimed by a live run
(trtsweep.lane.claim) and starts no lane; the second run's point is lost naming the first run, in seconds, and the
first run measures on untouched. Both controllers are on this machine (`ansible_connection: local`); the point is
the sleep-bound stand-in server."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import pytest
import yaml

from tests.conftest import ROOT, free_block
from tests.integration.standin_run import all_gone, playbook_argv, playbook_env, records, write_run


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.fault(
    "a second controller runs the same sweep against the same host while the first one measures",
    "the second run's points are lost naming the first run within seconds; the first run's point is measured ok",
)
def test_a_second_controllers_run_of_the_sweep_on_a_claimed_host_is_refused_and_the_first_measures(tmp_path):
    extravars = write_run(tmp_path, "claimed", 0.5, 20, token_ms=150)  # a benchmark of about 20 s
    first = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    other = yaml.safe_load(extravars.read_text())
    base = free_block(3)
    other |= {"trtsweep_results_dir": str(tmp_path / "results-2"), "trtsweep_triton_http_port": base,
              "trtsweep_triton_grpc_port": base + 1, "trtsweep_triton_metrics_port": base + 2}  # fmt: skip
    second_vars = tmp_path / "second.yml"
    second_vars.write_text(yaml.safe_dump(other))
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "work").glob("claimed/*/runs/*/results/triton_server.log")):
            assert first.poll() is None and time.monotonic() < deadline, "the first run never served"
            time.sleep(0.3)
        started = time.monotonic()
        second = subprocess.run(playbook_argv(second_vars), cwd=ROOT, env=playbook_env(), capture_output=True,
                                text=True, timeout=180)  # fmt: skip
        took = time.monotonic() - started
        out, _ = first.communicate(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
    assert second.returncode != 0, second.stdout[-3000:]
    plan = json.loads((tmp_path / "results-2" / "claimed" / "plan.json").read_text())
    (lost,) = (json.loads((tmp_path / "results-2" / "claimed" / p["id"] / "status.json").read_text())
               for p in plan["points"])  # fmt: skip
    assert lost["status"] == "lost" and lost["cause"].startswith("another run of sweep claimed holds "), lost
    assert ", its lease renewed by its controller: a live run" in lost["cause"], lost
    print(f"the second run ended {took:.1f} s after its start")
    assert first.returncode == 0, out[-3000:]
    assert [r["status"] for r in records(tmp_path, "claimed").values()] == ["ok"]
    all_gone(str(tmp_path), 30)
