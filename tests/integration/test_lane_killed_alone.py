"""A lane killed alone (the OOM killer, kill -9) while its point benchmarks, its host's other lane going on: the
runner sees how the lane ended, stops the server its point left at once (not when the run's lease ends, which its
supervisor waits for), and the point is lost with that cause; the other lane's point is measured.

Two packed lanes on this machine (`ansible_connection: local`), each point served by the sleep-bound stand-in
(benchmarks/standin_tritonserver.py). Fails on a runner that only waits for its lanes: the killed lane's server idled
on its GPU until the run's end, and its point was lost as "the lane runner ... ended before its lanes did"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
import yaml

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import all_gone, playbook_argv, playbook_env, procs, records, write_run

TTL_S = 60  # far beyond the bound below: the server must not wait for the lease


def lane_points(tmp_path) -> dict[str, str]:
    """Lane name -> the point it runs now (its journal's last start)."""
    found = {}
    for path in (tmp_path / "work").glob("lanekill/.runs/*/*.jsonl"):
        starts = [json.loads(line) for line in path.read_text().splitlines() if '"start"' in line]
        if starts:
            found[path.stem] = starts[-1]["point"]
    return found


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.fault(
    "a lane process killed -9 mid-benchmark, its host's other lane going on",
    "its server stopped within seconds; its point lost naming SIGKILL; the other point ok",
)
def test_a_lane_killed_alone_stops_its_server_at_once_and_loses_its_point_with_the_signal(tmp_path):
    extravars = write_run(tmp_path, "lanekill", 0.5, TTL_S, token_ms=100, points=2)  # benchmarks of ~15 s
    values = yaml.safe_load(extravars.read_text())
    values["trtsweep_sweep"]["placement"] = {"mode": "pack", "gpus_per_point": 1}  # a lane per GPU
    values["trtsweep_gpus"] = 2
    extravars.write_text(yaml.safe_dump(values))
    run = subprocess.Popen(playbook_argv(extravars), cwd=ROOT, env=playbook_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    marker = str(tmp_path)
    try:
        wait_for(lambda: len(lane_points(tmp_path)) == 2 and len(
            [p for p in procs(marker).values() if "standin_tritonserver" in p]) == 2, 180)  # fmt: skip
        time.sleep(3)  # benchmarking
        lane, point = sorted(lane_points(tmp_path).items())[0]
        (victim,) = [pid for pid, line in procs(marker).items() if line.rstrip().endswith(f"--lane {lane}")]
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        all_gone(marker, 8, what=point)  # its server (its command line names the point's repository), not at the end
        print(f"the killed lane's server gone {time.monotonic() - killed:.1f} s after the kill")
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode != 0, out[-3000:]
    found = records(tmp_path, "lanekill")
    assert found[point]["status"] == "lost", found[point]
    assert f"lane {lane}'s process was killed (SIGKILL) before the lane ended" in found[point]["cause"]
    (other,) = [r for pid, r in found.items() if pid != point]
    assert other["status"] == "ok", other
