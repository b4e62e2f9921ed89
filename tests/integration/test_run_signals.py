"""Stopping `trtsweep run` stops the run it started: ansible-playbook, its heartbeat, the host's lane runner and the
point's server, however `trtsweep run` ends (SIGTERM, or kill -9 as when its terminal's machine dies).

The host is this machine (`ansible_connection: local`); the point's server is the sleep-bound stand-in
(benchmarks/standin_tritonserver.py) with a long model load, so the run is mid-load when it is stopped. Fails on a
`trtsweep run` that starts ansible-playbook with no signal forwarding and no parent-death signal: the playbook, its
heartbeat and the load live on for minutes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, wait_for
from tests.integration.test_lanes_over_forks import free_block

LOAD_S = 240  # the stand-in's model load: far longer than the test waits
TTL_S = 5


def procs(marker: str) -> dict[int, str]:
    """Pid -> command line of every process whose command line names `marker` (this test's own tmp folder)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker in cmdline:
                out[int(entry.name)] = cmdline
    return out


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start_run(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`trtsweep run -- sweep.yml` of one stand-in point on this machine; returns it and the work dir."""
    work = tmp_path / "work"
    wrapper = tmp_path / "tritonserver-standin"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "benchmarks" / "standin_tritonserver.py"}" '
                       f'--standin-load-s {LOAD_S} "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    base = free_block(3)
    sweep = {
        "name": "signals", "backend": "hf",
        "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
        "precisions": ["float32"], "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [2],
        "lengths": [{"input": 256, "output": 16}], "streaming": [True],
        "benchmark": {"input_data": "data/prompts.jsonl", "concurrency": [1], "num_requests": 4, "warmup_requests": 0,
                      "chat_template": True},
    }  # fmt: skip
    extra = tmp_path / "vars.yml"
    extra.write_text(yaml.safe_dump({
        "trtsweep_sweep": sweep, "trtsweep_results_dir": str(tmp_path / "results"), "trtsweep_work_dir": str(work),
        "trtsweep_triton_runtime": "native", "triton_serve_tritonserver": str(wrapper),
        "trtsweep_server_lease_ttl": TTL_S, "trtsweep_triton_http_port": base, "trtsweep_triton_grpc_port": base + 1,
        "trtsweep_triton_metrics_port": base + 2,
    }))  # fmt: skip
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [str(Path(sys.executable).parent / "trtsweep"), "run", "--log", str(tmp_path / "run.log"), "--interval",
            "0.5", "--", "sweep.yml", "-e", f"@{extra}"]  # fmt: skip
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), work


@pytest.mark.e2e
@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_stopping_trtsweep_run_ends_the_playbook_its_lanes_and_the_loading_server(tmp_path, how):
    run, _ = start_run(tmp_path)
    marker = str(tmp_path)
    try:
        # the point's server is loading (the stand-in started under the lane, its supervisor tied to the lease)
        wait_for(lambda: any("standin_tritonserver" in line for line in procs(marker).values()), 240)
        time.sleep(2)
        run.send_signal(how)
        run.wait(timeout=120)
        started = time.monotonic()
        # everything this run started ends: the playbook, its heartbeat, the runner, its lane, the supervisor, the
        # stand-in (the lease's TTL plus the runner's stop grace bound it, far below the stand-in's load)
        wait_for(lambda: not procs(marker), TTL_S + 60)
        assert time.monotonic() - started < LOAD_S / 2
    finally:
        if run.poll() is None:
            run.kill()
        kill_all(list(procs(marker)))
