"""The host's run folder removed mid-benchmark (a node rebooted with the cache on local scratch, a cleanup job): the
poll says the runner is gone, naming the folder, so the controller gives the host up, its heartbeat ends and the
host's servers and lanes stop; the run ends in bounded time with the point lost and its cause, nothing left.

One stand-in point on this machine (`ansible_connection: local`). Fails on a poll that reports the runner's state as
unknown when the folder is missing: the controller polled on while the heartbeat renewed the lease (still running
after 300 s, its processes with it)."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import all_gone, journal_stages, playbook_argv, playbook_env, records, write_run

TTL_S = 30


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.fault("the host's run folder removed mid-benchmark", "the run ends within a minute, the point lost naming "
                   "the folder, no process left")  # fmt: skip
def test_a_removed_run_folder_ends_the_run_in_bounded_time(tmp_path):
    extravars = write_run(tmp_path, "vanished", 0.5, TTL_S, token_ms=200)  # a benchmark of ~30 s
    run = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        wait_for(lambda: "benchmark" in journal_stages(tmp_path / "work"), 180)
        time.sleep(2)
        (folder,) = (tmp_path / "work" / "vanished" / ".runs").iterdir()
        shutil.rmtree(folder)
        removed = time.monotonic()
        out, _ = run.communicate(timeout=120)
        print(f"the run ended {time.monotonic() - removed:.1f} s after its host folder was removed")
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0, out[-3000:]
    (record,) = records(tmp_path, "vanished").values()
    assert record["status"] == "lost" and f"lost its run folder {folder}" in record["cause"], record
    all_gone(str(tmp_path), TTL_S)
