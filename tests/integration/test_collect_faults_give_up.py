"""The controller gives a host up while the host still works: its journal polls keep failing (here: its Python
refuses `trtsweep.lane.journal` once the test says so, while its first point benchmarks) for the collector's retry
window. Two hosts on this machine (`ansible_connection: local`), the stand-in server, the real `ansible-playbook
sweep.yml`; the other host keeps the run going.

Once the collector gives ha up, ha must stop: its heartbeat ended and its lease removed, its server, lanes and
runner gone within seconds while the run goes on (hb still measuring), its second point never started; ha's points
lost naming the cause, hb's ok. Fails on a collector that only returned: ha's heartbeat kept its lease alive and ha
ran its remaining points, uncollected, until the whole run ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import STANDIN, kill_all, playbook_argv, playbook_env, procs, records
from tests.integration.test_lanes_over_forks import free_block
from tests.integration.test_shared_home_local import SWEEP

REFUSED = "journal polls refused by the test"
TOKEN_MS = {"ha": 1000, "hb": 800}  # ha benchmarks a point for about 64 s, hb runs two of about 51 s each
STOP_S = 20  # from the give-up to ha's last process gone


def host_vars(tmp_path: Path, name: str, base: int, python: str) -> dict[str, object]:
    server = tmp_path / f"tritonserver-{name}"
    server.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" --standin-load-s 1 '
                      f'--standin-first-token-ms 20 --standin-token-ms {TOKEN_MS[name]} "$@"\n')  # fmt: skip
    server.chmod(0o755)
    return {"ansible_connection": "local", "ansible_python_interpreter": python, "fleet_prepare_install": False,
            "triton_serve_tritonserver": str(server), "trtsweep_triton_http_port": base,
            "trtsweep_triton_grpc_port": base + 1, "trtsweep_triton_metrics_port": base + 2}  # fmt: skip


def refusing_python(tmp_path: Path, flag: Path) -> str:
    """A Python that answers no journal poll once `flag` exists, and runs the venv's Python for everything else."""
    wrapper = tmp_path / "python-ha"
    wrapper.write_text(f"""#!/bin/sh
if [ -e "{flag}" ]; then
  for arg in "$@"; do
    if [ "$arg" = trtsweep.lane.journal ]; then echo "{REFUSED}" >&2; exit 1; fi
  done
fi
exec "{sys.executable}" "$@"
""")
    wrapper.chmod(0o755)
    return str(wrapper)


def ha_processes(marker: str) -> dict[int, str]:
    """ha's runner and lanes (their host spec is in ha's run folder) and ha's stand-in server."""
    return {pid: line for pid, line in procs(marker).items()
            if "-ha/host.json" in line or f"--standin-token-ms {TOKEN_MS['ha']} " in line}  # fmt: skip


def benchmarking_seen(progress: Path) -> bool:
    """Whether the controller's live view of the host (`.run/progress-<host>.json`) has a lane at its benchmark."""
    try:
        lanes = json.loads(progress.read_text()).get("lanes") or {}
    except (OSError, ValueError):
        return False
    return any(lane.get("stage") == "benchmark" for lane in lanes.values())


def stages(work: Path, host: str) -> list[tuple[str, str]]:
    """(event, point) of every start and stage line of the host's journals so far."""
    out = []
    for path in sorted(work.glob(f"*/.runs/*-{host}/*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["event"] in ("start", "stage"):
                out.append((event["event"], event.get("stage") or event["point"]))
    return out


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.fault("one host's journal polls keep failing while it benchmarks (another host still measures)",
                   f"the host is given up and stopped: its work gone within {STOP_S} s, its next point never started; "
                   "its points lost with the cause")  # fmt: skip
def test_a_host_the_collector_gives_up_stops_its_work_at_once_and_runs_no_further_point(tmp_path):
    marker, flag = str(tmp_path), tmp_path / "refuse-polls"
    base = free_block(6)
    inventory = tmp_path / "inventory.yml"
    hosts = {"ha": host_vars(tmp_path, "ha", base, refusing_python(tmp_path, flag)),
             "hb": host_vars(tmp_path, "hb", base + 3, sys.executable)}  # fmt: skip
    inventory.write_text(yaml.safe_dump({"all": {"children": {"trtsweep_hosts": {"hosts": hosts}}}}))
    sweep = {**SWEEP, "name": "given-up", "benchmark": {**SWEEP["benchmark"], "max_tokens": 16}}
    extravars = tmp_path / "vars.yml"
    extravars.write_text(yaml.safe_dump({
        "trtsweep_sweep": sweep, "trtsweep_sweep_dir": str(ROOT), "trtsweep_results_dir": str(tmp_path / "results"),
        "trtsweep_work_dir": str(tmp_path / "work"), "trtsweep_triton_runtime": "native",
        "trtsweep_server_lease_ttl": 60, "trtsweep_gpus": 1,  # a TTL far beyond the bound: the give-up stops ha
    }))  # fmt: skip
    run = subprocess.Popen([*playbook_argv(extravars), "-i", str(inventory)], cwd=ROOT, env=playbook_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)  # fmt: skip
    gave_up = tmp_path / "results" / "given-up" / ".run" / "runner-ha.json"
    seen = tmp_path / "results" / "given-up" / ".run" / "progress-ha.json"
    try:
        # once the controller has seen ha's first point benchmark (its live view), not merely ha's journal saying so:
        # polls refused in between would leave the controller's last word on that point at "serve"
        wait_for(lambda: ("stage", "benchmark") in stages(tmp_path / "work", "ha") and benchmarking_seen(seen), 180)
        flag.touch()
        wait_for(gave_up.exists, 90)  # the collector's retry window (30 s), then it gives ha up
        since = time.monotonic()
        wait_for(lambda: not ha_processes(marker), STOP_S)
        stopped_s = time.monotonic() - since
        assert run.poll() is None, "the run had ended: what stopped ha was not the give-up"
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
        kill_all(list(procs(marker)))
    print(f"ha's work gone {stopped_s:.1f} s after the collector gave it up")
    found = records(tmp_path, "given-up")
    by_host = {h: sorted(((r["status"], r["stage"]) for r in found.values() if r["host"] == h), key=str)
               for h in ("ha", "hb")}  # fmt: skip
    assert by_host == {"ha": [("lost", "benchmark"), ("lost", None)], "hb": [("ok", "benchmark")] * 2}, out[-4000:]
    for record in (r for r in found.values() if r["host"] == "ha"):
        assert REFUSED in record["cause"], record["cause"]
    ran = [point for point, r in found.items() if r["host"] == "ha" and r["stage"] == "benchmark"]
    assert [e for e in stages(tmp_path / "work", "ha") if e[0] == "start"] == [("start", p) for p in ran]
    assert run.returncode != 0
