"""More lanes than Ansible forks (real sweep.yml, real Triton servers, the demo model): three packed lanes on this
machine run with `-f 1`. A lane whose server is ready waits for the one fork while another lane benchmarks; its
server must live on (the run's heartbeat keeps the host's lease, not the lane's tasks), every point ends ok, and a
healthy run prints no FAILED line.

Fails on a lease renewed by each lane's own task: with one fork, the waiting lane's lease (6 s here) lapses long
before the benchmarking lane gives the fork back, and its supervisor stops the server ("lease expired").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ansible_runner
import pytest

from tests.conftest import ROOT, free_block

SWEEP = {
    "name": "forks",
    "backend": "hf",
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smol"}],
    "precisions": ["float32", "int8", "bfloat16"],
    "parallelism": [{"tp": 1, "pp": 1}],
    "max_batch_sizes": [2],
    "lengths": [{"input": 256, "output": 16}],
    "streaming": [True],
    "placement": {"mode": "pack", "gpus_per_point": 1},
    "triton": {"hf_torch_threads": 1},
    "benchmark": {"protocol": "grpc", "concurrency": [1], "input_data": "data/prompts.jsonl", "num_requests": 8,
                  "warmup_requests": 0, "max_tokens": 16, "chat_template": True},
}  # fmt: skip
STRIDE = 10
LANES = 3


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_three_lanes_on_one_fork_all_measure_and_no_failed_line_is_printed(tmp_path):
    base = free_block(STRIDE * LANES)
    extravars = {
        "trtsweep_sweep": SWEEP, "trtsweep_sweep_dir": str(ROOT),
        "trtsweep_gpus": LANES, "trtsweep_port_stride": STRIDE,
        "trtsweep_results_dir": str(tmp_path / "results"), "trtsweep_work_dir": str(tmp_path / "work"),
        "trtsweep_triton_http_port": base, "trtsweep_triton_grpc_port": base + 1,
        "trtsweep_triton_metrics_port": base + 2, "trtsweep_server_lease_ttl": 6,
    }  # fmt: skip
    private = tmp_path / "runner"
    private.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(ROOT), playbook="sweep.yml", extravars=extravars, forks=1,
        envvars={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}, quiet=True, timeout=1400,
    )  # fmt: skip
    text = runner.stdout.read()
    results = tmp_path / "results" / "forks"
    plan = json.loads((results / "plan.json").read_text())
    assert len(plan["lanes"]) == LANES, plan["lanes"]
    records = {p.parent.name: json.loads(p.read_text()) for p in results.glob("*/status.json")}
    assert {k: (r["status"], r.get("cause")) for k, r in records.items()} == {
        p["id"]: ("ok", None) for p in plan["points"]
    }, text[-5000:]
    assert runner.rc == 0, text[-5000:]
    assert "FAILED" not in text, [line for line in text.splitlines() if "FAILED" in line][:5]
    assert "lease expired" not in text
