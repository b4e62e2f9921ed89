"""`ansible-playbook sweep.yml` end to end on this machine, twice: the embedded default sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_ports

NOT_CHANGED_ON_RERUN = (
    "Seed the bundled demo model into the offline cache",
    "Resolve HuggingFaceTB/SmolLM2-135M-Instruct",
    "Generate the Triton model repository",
    "record the point",
)


def run_sweep(tmp_path: Path, ports: list[int] | None = None, json_output: bool = True):
    """Run the embedded sweep with private results/work directories and free ports."""
    http, grpc, metrics = ports or free_ports(3)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if json_output:
        env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.json"
    overrides = {
        "trtsweep_results_dir": str(tmp_path / "results"),
        "trtsweep_work_dir": str(tmp_path / "work"),
        "trtsweep_triton_http_port": http,
        "trtsweep_triton_grpc_port": grpc,
        "trtsweep_triton_metrics_port": metrics,
    }
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "sweep.yml", "-e", json.dumps(overrides)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500, check=False)


def run_ok(tmp_path: Path) -> dict:
    proc = run_sweep(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout)


def task_changes(report: dict) -> dict[str, bool]:
    out = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host in task["hosts"].values():
                out[task["task"]["name"]] = out.get(task["task"]["name"], False) or bool(host.get("changed"))
    return out


@pytest.mark.e2e
def test_embedded_sweep_runs_end_to_end_and_reruns_without_changes(tmp_path):
    first = run_ok(tmp_path)
    assert first["stats"]["localhost"]["failures"] == 0
    point = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
    results = tmp_path / "results" / "smollm2-cpu-demo"
    files = {p.name for p in (results / point).iterdir()}
    assert {"llm_perf.json", "llm_perf.csv", "llm_perf.summary.json", "point.json", "triton_server.log"} <= files
    summary = json.loads((results / point / "llm_perf.summary.json").read_text())
    assert [lvl["concurrency"] for lvl in summary["levels"]] == [1, 2, 4]
    for level in summary["levels"]:
        s = level["summary"]
        assert s["failed"] == 0 and s["succeeded"] == 16
        assert s["ttft_ms"]["p50"] > 0 and s["output_token_throughput"] > 0 and s["input_token_throughput"] > 0
        assert 0.0 <= s["accuracy"]["rougeL"] <= 1.0
    profile = json.loads((results / point / "llm_perf.json").read_text())
    assert len(profile["levels"][0]["requests"]) == 17  # 16 measured + 1 warm-up, every one recorded
    assert (results / "report.md").is_file() and (results / "report.csv").is_file()
    assert not (tmp_path / "work" / "smollm2-cpu-demo" / point / "triton_server.json").exists()  # stopped

    second = run_ok(tmp_path)
    changes = task_changes(second)
    for name, changed in changes.items():
        if any(marker in name for marker in NOT_CHANGED_ON_RERUN):
            assert changed is False, f"task {name!r} changed on the second run"
    assert any("Generate the Triton model repository" in n for n in changes)
    assert second["stats"]["localhost"]["failures"] == 0


@pytest.mark.e2e
def test_a_busy_port_fails_the_point_with_one_line_and_leaves_no_server(tmp_path):
    import socket

    ports = free_ports(3)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[1]))
        busy.listen()
        proc = run_sweep(tmp_path, ports=ports, json_output=False)
    assert proc.returncode != 0
    assert f"grpc port {ports[1]} on 127.0.0.1 already in use" in proc.stdout
    assert list((tmp_path / "work").rglob("triton_server.json")) == []
