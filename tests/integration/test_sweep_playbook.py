"""`ansible-playbook sweep.yml` end to end on this machine, twice: the embedded default sweep."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ansible_runner
import pytest

from tests.conftest import ROOT, free_ports
from tests.integration.report_browser import check_report_page

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
@pytest.mark.timeout(2400)  # the embedded sweep twice (plus a resume) on 2 CPU cores
def test_embedded_sweep_runs_end_to_end_and_reruns_without_changes(tmp_path):
    first = run_ok(tmp_path)
    results = tmp_path / "results" / "smollm2-cpu-demo"
    # the answer under the embedded sweep's SLOs: int8 is faster here but far less accurate than float32
    text = stdout(first)
    assert "best under the SLOs: smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream" in text, text[-4000:]
    assert "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream: misses rougeL" in text
    assert f"report: {results / 'report.html'}" in text
    print(f"report screenshot: {check_report_page(results, tmp_path)}")
    for precision in ("float32", "int8"):  # the embedded sweep compares precisions
        point = f"smollm2-135m_{precision}_tp1pp1_bs4_isl1024osl128_stream"
        files = {p.name for p in (results / point).iterdir()}
        assert {"llm_perf.json", "llm_perf.csv", "llm_perf.summary.json", "point.json", "triton_server.log",
                "status.json"} <= files  # fmt: skip
        record = json.loads((results / point / "status.json").read_text())
        assert record["status"] == "ok" and record["host"] == "localhost" and record["stage"] == "benchmark"
        assert set(record["stages"]) == {"preflight", "download", "quantize", "build", "repository", "serve",
                                         "benchmark"}  # fmt: skip
        summary = json.loads((results / point / "llm_perf.summary.json").read_text())
        assert [lvl["concurrency"] for lvl in summary["levels"]] == [1, 2, 4]
        for level in summary["levels"]:
            s = level["summary"]
            assert s["failed"] == 0 and s["succeeded"] == 16
            assert s["ttft_ms"]["p50"] > 0 and s["output_token_throughput"] > 0 and s["input_token_throughput"] > 0
            assert 0.0 <= s["accuracy"]["rougeL"] <= 1.0
            assert s["server_metrics"]["per_model"]["ensemble"]["requests"] >= 16
        profile = json.loads((results / point / "llm_perf.json").read_text())
        assert len(profile["levels"][0]["requests"]) == 17  # 16 measured + 1 warm-up, every one recorded
    assert list((tmp_path / "work").rglob("triton_server.json")) == []  # every server stopped
    report = (results / "report.md").read_text()
    assert "smollm2-135m_int8" in report and "smollm2-135m_float32" in report
    assert (results / "report.csv").is_file()

    resumed = run_ok(tmp_path)  # every point complete with the same settings: nothing runs again
    assert "kept (complete from an earlier run with the same settings)" in stdout(resumed)
    assert not any(name.startswith(LANE_TASKS) for name in task_changes(resumed))  # no lane started
    assert json.loads((results / point / "status.json").read_text())["run_id"] == record["run_id"]

    # forced: every point runs again, on what the first run made (the demo model and the repository as they are)
    repository = tmp_path / "work" / "smollm2-cpu-demo" / point / "triton_repo"
    before = {f: f.stat().st_mtime_ns for f in repository.rglob("*") if f.is_file()}
    second = run_ok(tmp_path, trtsweep_force=True)
    assert {f: f.stat().st_mtime_ns for f in repository.rglob("*") if f.is_file()} == before, "repository rewritten"
    assert json.loads((results / point / "status.json").read_text())["run_id"] != record["run_id"]
    assert all(task_changes(second)[name] for name in task_changes(second) if name.startswith(LANE_TASKS))
    assert second.stats["failures"] == {}


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
