"""The controller goes away after a point ended on its host and before it collected it: nothing measured may be lost.
On this machine (one host, `ansible_connection: local`, the stand-in server, the real `ansible-playbook sweep.yml`):
the host's journal polls hang once the point benchmarks (its Python sleeps on them, as over a link that stalls), the
point ends on the host, then the controller (ansible-playbook, its workers and its heartbeat) is killed -9. The next
run of the sweep must say in its plan that it collects the point from the host, collect the archive the first run
left there instead of running the point again, and record the point ok.

Fails on a rerun that ran every point the controller had not recorded as ended, whatever its host had measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, wait_for
from tests.integration.standin_run import all_gone, kill_all, playbook_argv, playbook_env, procs, records, write_run


def stalling_python(tmp_path: Path, flag: Path) -> str:
    """A Python whose journal polls hang once `flag` exists, and that runs the venv's Python for everything else."""
    wrapper = tmp_path / "python-stalling"
    wrapper.write_text(f"""#!/bin/sh
if [ -e "{flag}" ]; then
  for arg in "$@"; do
    if [ "$arg" = trtsweep.lane.journal ]; then exec "{sys.executable}" -c "import time; time.sleep(600)" "{flag}"; fi
  done
fi
exec "{sys.executable}" "$@"
""")
    wrapper.chmod(0o755)
    return str(wrapper)


def events(work: Path) -> list[tuple[str, str, str]]:
    """(run folder, event, point) of every start and end line of the host's journals so far."""
    out = []
    for path in sorted(work.glob("*/.runs/*/*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["event"] in ("start", "end", "stage"):
                out.append((path.parent.name, event["event"], event.get("stage") or event["point"]))
    return out


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.fault(
    "the controller is killed -9 after a point ended on its host, before it collected it",
    "the next run says so in its plan, collects the host's archive and does not rerun the point",
)
def test_a_point_ended_on_its_host_after_the_controller_went_away_is_collected_by_the_next_run(tmp_path):
    marker, flag = str(tmp_path), tmp_path / "stall-polls"
    inventory = tmp_path / "inventory.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": stalling_python(tmp_path, flag),
            "fleet_prepare_install": False}  # fmt: skip
    inventory.write_text(yaml.safe_dump({"all": {"children": {"trtsweep_hosts": {"hosts": {"hx": host}}}}}))
    # a benchmark of about 20 s: longer than a poll's wait, so the poll after the flag is one that hangs
    argv = [*playbook_argv(write_run(tmp_path, "kept", 1, 10, token_ms=150)), "-i", str(inventory)]
    run = subprocess.Popen(argv, cwd=ROOT, env=playbook_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: any(e[1:] == ("stage", "benchmark") for e in events(tmp_path / "work")), 300)
        flag.touch()
        wait_for(lambda: any(e[1] == "end" for e in events(tmp_path / "work")), 120)
        kill_all([pid for pid, line in procs(marker).items() if "ansible-playbook" in line or "heartbeat" in line])
        run.wait(timeout=30)
        kill_all(list(procs(marker)))  # the poll that hangs
        all_gone(marker, 60)
    finally:
        if run.poll() is None:
            run.kill()
        kill_all(list(procs(marker)))
    (point, record), = records(tmp_path, "kept").items()  # fmt: skip
    first = record["run_id"]
    assert record["status"] == "running"  # the controller never recorded its end
    archive = tmp_path / "work" / "kept" / point / "runs" / first / "results.tar.gz"
    assert archive.is_file()
    flag.unlink()
    rerun = subprocess.run(argv, cwd=ROOT, env=playbook_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-4000:]
    assert f"collected from hx if run {first} ended it ok there" in rerun.stdout, rerun.stdout[-4000:]
    record = records(tmp_path, "kept")[point]
    assert (record["status"], record["collected_from"]) == ("ok", first) and record["run_id"] != first
    assert (tmp_path / "results" / "kept" / point / "llm_perf.summary.json").is_file()
    assert [e for e in events(tmp_path / "work") if e[1] == "start"] == [(f"{first}-hx", "start", point)]
    all_gone(marker, 30)  # the rerun's heartbeat ends once it sees its controller gone
