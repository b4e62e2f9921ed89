"""`ansible-playbook sweep.yml` on this machine with a port taken, and the helpers other sweep tests run sweeps with.
The embedded sweep's own run end to end (its answer, records, report page, resume and a forced point) is the
README's `make sweep`: tests/integration/test_readme_commands.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ansible_runner
import pytest

from tests.conftest import ROOT, free_ports

LANE_TASKS = ("The host's lanes start", "The host's points are collected")


def run_sweep(tmp_path: Path, ports: list[int] | None = None, **extra: object) -> ansible_runner.Runner:
    """Run the embedded sweep through ansible-runner with private results/work directories and free ports."""
    http, grpc, metrics = ports or free_ports(3)
    overrides = {
        "trtsweep_results_dir": str(tmp_path / "results"),
        "trtsweep_work_dir": str(tmp_path / "work"),
        "trtsweep_triton_http_port": http,
        "trtsweep_triton_grpc_port": grpc,
        "trtsweep_triton_metrics_port": metrics,
        "trtsweep_sweep_dir": str(ROOT),  # the sweeps of these tests name the checkout's prompts
        **extra,
    }
    private = tmp_path / f"runner-{len(list(tmp_path.glob('runner-*')))}"
    private.mkdir()
    return ansible_runner.run(
        private_data_dir=str(private), project_dir=str(ROOT), playbook="sweep.yml", extravars=overrides,
        envvars={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}, quiet=True,
        timeout=1500,
    )  # fmt: skip


def stdout(runner: ansible_runner.Runner) -> str:
    return runner.stdout.read()


def run_ok(tmp_path: Path, **extra: object) -> ansible_runner.Runner:
    runner = run_sweep(tmp_path, **extra)
    assert runner.rc == 0, stdout(runner)[-6000:]
    return runner


def task_changes(runner: ansible_runner.Runner) -> dict[str, bool]:
    """Task name -> whether it reported a change (any host, any loop item)."""
    out: dict[str, bool] = {}
    for event in runner.events:
        if event["event"] in ("runner_on_ok", "runner_item_on_ok"):
            data = event["event_data"]
            name = data["task"]
            out[name] = out.get(name, False) or bool(data["res"].get("changed"))
    return out


@pytest.mark.e2e
def test_a_busy_port_fails_the_point_with_one_line_and_leaves_no_server(tmp_path):
    import socket

    ports = free_ports(3)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[1]))
        busy.listen()
        runner = run_sweep(tmp_path, ports=ports)
    assert runner.rc != 0
    busy_line = f"grpc port {ports[1]} on 127.0.0.1 still in use after waiting"  # the lease's TTL and stop grace
    assert busy_line in stdout(runner)
    assert list((tmp_path / "work").rglob("triton_server.json")) == []
    # the lane's ports are checked before its first point: every point failed at preflight, was recorded with
    # its cause, and the report was still written
    records = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("status.json")]
    assert len(records) == 2 and all(r["status"] == "failed" and r["stage"] == "preflight" for r in records)
    assert all(busy_line in r["cause"] for r in records)
    assert (tmp_path / "results" / "smollm2-cpu-demo" / "report.md").is_file()
