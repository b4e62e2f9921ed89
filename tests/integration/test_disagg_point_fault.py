"""A disaggregated point whose generation worker is killed mid-benchmark, in its lane (lane/point.py's PointRun with
the hf stand-ins for real): the point fails naming that worker, the rest of its group is stopped, its record names
every member and no member's process is left."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import free_ports
from trtsweep.common.procs import running
from trtsweep.lane.point import PointRun, StepFailed
from trtsweep.lane.spec import HostSpec

LANE = "h--lane0"


def _run(tmp_path: Path, model_dir: Path) -> PointRun:
    http, grpc, metrics, *workers = free_ports(6)
    placed = {"id": "p_disagg-c1x1-g2x1_pytorch-serve", "sweep": "s", "host": "h", "lane": LANE, "gpus": [],
              "visible_devices": "", "backend": "hf", "flow": "pytorch", "server": "trtllm-serve", "tp": 1, "pp": 1,
              "llm_api_release": "1.2", "streaming": True,
              "llm_api": {"max_batch_size": 2, "max_seq_len": 256, "enable_iter_perf_stats": True},
              "disaggregated": {"name": "c1x1-g2x1", "context": {"tp": 1, "pp": 1, "instances": 1},
                                "generation": {"tp": 1, "pp": 1, "instances": 2},
                                "transceiver": {"backend": "DEFAULT"}},
              "ports": {"http": http, "grpc": grpc, "metrics": metrics,
                        **{f"worker{i}": port for i, port in enumerate(workers)}},
              "benchmark": {"input_data": "p.jsonl", "protocol": "openai", "warmup_requests": 0, "chat_template": False,
                            "seed": 0, "request_timeout": 60, "stall_timeout": 60, "connect_timeout": 10}}  # fmt: skip
    settings = {"trtsweep_work_dir": str(tmp_path / "work"), "trtsweep_cache_dir": str(tmp_path / "cache"),
                "trtsweep_triton_bind_address": "127.0.0.1", "trtsweep_triton_runtime": "local",
                "trtsweep_server_lease_ttl": 600, "triton_serve_ready_timeout": 180,
                "triton_serve_tritonserver": "tritonserver", "triton_serve_mpirun": "mpirun",
                "triton_serve_container_gpus": "all",
                "triton_serve_log_verbose": 0}  # fmt: skip
    spec = HostSpec("run-1", "s", tmp_path / "journal", tmp_path / "run.lease", settings, {},
                    [{"name": LANE, "ports": placed["ports"], "points": [placed]}])  # fmt: skip
    spec.journal_dir.mkdir()
    run = PointRun(spec, placed, spec.journal(LANE), "h")
    run.paths.results.mkdir(parents=True)
    run.made.output_dir = run.made.model_dir = str(model_dir)
    return run


@pytest.mark.timeout(300)
def test_a_worker_killed_mid_benchmark_fails_the_point_naming_it_and_stops_the_rest(tmp_path, demo_model, monkeypatch):
    run = _run(tmp_path, demo_model.hf_dir)
    # the benchmark: a client that would run a minute, while a generation worker is killed under it
    monkeypatch.setattr("trtsweep.perf.argv.command", lambda _: [sys.executable, "-c", "import time; time.sleep(60)"])
    killed: list[int] = []

    def kill_when_measuring() -> None:
        deadline = time.monotonic() + 240
        while "benchmark" not in run.made.times and time.monotonic() < deadline:
            time.sleep(0.2)
        members = json.loads(run.group_file.read_text())["members"]
        state = json.loads(Path(next(m for m in members if m["name"] == "generation1")["state_file"]).read_text())
        os.kill(state["pid"], signal.SIGKILL)
        killed.append(state["pid"])

    killer = threading.Thread(target=kill_when_measuring, daemon=True)
    killer.start()
    started = time.monotonic()
    with pytest.raises(StepFailed) as failed:
        run._serve_group_and_benchmark()
    killer.join(5)
    assert killed and time.monotonic() - started < 200
    record = json.loads((run.paths.results / "disaggregated.json").read_text())
    members = {m["name"]: m for m in record["members"]}
    port = members["generation1"]["port"]
    assert str(failed.value).startswith(f"benchmark stopped: generation worker generation1 (port {port}): "
                                        f"trtllm-serve (pid {killed[0]}")  # fmt: skip
    assert "signal 9" in str(failed.value) or "SIGKILL" in str(failed.value), failed.value
    assert list(members) == ["context0", "generation0", "generation1", "proxy"]
    pids = [pid for m in record["members"] for pid in (m["pid"], m["supervisor_pid"])]
    deadline = time.monotonic() + 10  # a supervisor whose server was killed ends by itself, just after
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [(m["name"], pid) for m in record["members"] for pid in (m["pid"], m["supervisor_pid"]) if running(pid)]
    assert not run.group_file.exists() and not list(run.paths.run_dir.glob("disagg_group.*.json"))
