"""A host whose Python refuses to run the lane runner (a broken install: it cannot import trtsweep.lane), so the
runner dies before it registers. On this machine, the real `ansible-playbook sweep.yml`, the host's
`ansible_python_interpreter` a wrapper that exits 1 with a message for `-m trtsweep.lane` and runs the venv's Python
for everything else (the modules, the journal polls). The run must end within a bounded time with the host's points
lost and their cause naming the message, and leave nothing running.

Fails on a poll that only knew a registered runner: it said "not started yet" forever and the run hung.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.standin_run import all_gone, kill_all, playbook_argv, playbook_env, procs, records, write_run

MESSAGE = "this python cannot run trtsweep.lane (a broken install)"
BOUND_S = 90


def refusing_python(tmp_path: Path) -> Path:
    wrapper = tmp_path / "python-without-lanes"
    wrapper.write_text(f"""#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = trtsweep.lane ]; then echo "{MESSAGE}" >&2; exit 1; fi
done
exec "{sys.executable}" "$@"
""")
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.fault("the host's Python cannot run the lane runner (it dies before it registers)",
                   f"the run ends within {BOUND_S} s, the points lost naming the runner's last words")  # fmt: skip
def test_a_runner_that_dies_before_it_registers_ends_the_run_in_bounded_time_with_its_points_lost(tmp_path):
    marker = str(tmp_path)
    inventory = tmp_path / "inventory.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": str(refusing_python(tmp_path)),
            "fleet_prepare_install": False}  # fmt: skip
    inventory.write_text(yaml.safe_dump({"all": {"children": {"trtsweep_hosts": {"hosts": {"hx": host}}}}}))
    argv = [*playbook_argv(write_run(tmp_path, "unregistered", 1, 10, points=2)), "-i", str(inventory)]
    run = subprocess.Popen(argv, cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)  # fmt: skip
    try:
        out, _ = run.communicate(timeout=BOUND_S)
        all_gone(marker, 10)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        out, _ = run.communicate()
        pytest.fail(f"the run did not end within {BOUND_S} s: {out[-3000:]}")
    finally:
        kill_all(list(procs(marker)))
    found = records(tmp_path, "unregistered")
    assert len(found) == 2 and [r["status"] for r in found.values()] == ["lost", "lost"], out[-4000:]
    for record in found.values():
        assert record["cause"].startswith("the lane runner on hx (pid ") and MESSAGE in record["cause"], record
    assert run.returncode != 0
