"""The run's heartbeat killed alone (-9; as an exception, a full disk under its log or the OOM killer would end it)
while the controller lives: the collection sees it after its next poll and starts it again before the host's lease
lapses, so the running point and the next are measured. Two stand-in points in one lane on this machine
(`ansible_connection: local`). Fails on a collection that never looks at the heartbeat: the running point was
"stopped by its supervisor (lease expired)", the next "host localhost stopped running the sweep"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import journal_stages, playbook_argv, playbook_env, records, write_run

TTL_S = 30  # longer than a poll's wait (15 s): the restart comes within it


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.fault("the run's heartbeat killed -9 mid-benchmark, the controller alive",
                   "started again within a poll; both points measured")  # fmt: skip
def test_a_heartbeat_killed_alone_is_started_again_and_every_point_is_measured(tmp_path):
    extravars = write_run(tmp_path, "beat", 0.5, TTL_S, token_ms=150, points=2)  # benchmarks of ~20 s, one lane
    run = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)  # fmt: skip
    record_file = tmp_path / "results" / "beat" / ".run" / "heartbeat-localhost.json"
    try:
        wait_for(lambda: "benchmark" in journal_stages(tmp_path / "work"), 180)
        first = json.loads(record_file.read_text())["heartbeat"][0]
        os.kill(first, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: json.loads(record_file.read_text())["heartbeat"][0] != first, TTL_S)
        print(f"a new heartbeat {time.monotonic() - killed:.1f} s after the kill")
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out[-3000:]
    assert "the run's heartbeat had died; started again" in out
    assert {r["status"] for r in records(tmp_path, "beat").values()} == {"ok"}
