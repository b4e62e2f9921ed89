"""`ansible-playbook sweep.yml` on the real Slurm cluster the tests start: the inventory names no host, only
`trtsweep_slurm.allocate`; the run makes the allocation (salloc), its three nodes become the hosts with the job's
GPUs there, each lane runs as a step of the job (srun --exact) on the GPUs Slurm bound to it, every point's record
names its job, step, node and GPUs, and the allocation is released at the end. The points are served by the
sleep-bound stand-in server (benchmarks/standin_tritonserver.py): what is tested is where they run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, free_block
from tests.integration.standin_run import playbook_argv, playbook_env, write_run

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.timeout(600)]
GPUS_PER_NODE = 2  # of each node's 4: the job's GRES


def slurm_inventory(tmp_path: Path, cluster) -> Path:
    """The nodes' connection and ports (all three run on this machine: each its own ports); no trtsweep_hosts."""
    nodes, block = {}, free_block(3 * len(cluster.nodes))
    for number, name in enumerate(cluster.nodes):
        base = block + 3 * number
        nodes[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "trtsweep_triton_http_port": base, "trtsweep_triton_grpc_port": base + 1,
                       "trtsweep_triton_metrics_port": base + 2}  # fmt: skip
    inventory = tmp_path / "slurm.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"trtsweep_slurm": {"allocate": {"nodes": len(cluster.nodes), "gpus_per_node": GPUS_PER_NODE,
                                                 "time": "10"}}},
        "children": {"trtsweep_slurm_nodes": {"hosts": nodes}}}}))  # fmt: skip
    return inventory


def test_a_sweep_on_its_own_allocation_runs_each_lane_as_a_step_on_the_gpus_slurm_bound(tmp_path, slurm_cluster):
    extravars = write_run(tmp_path, "slurm", 0.5, 20, points=3)
    values = yaml.safe_load(extravars.read_text())
    for key in ("trtsweep_triton_http_port", "trtsweep_triton_grpc_port", "trtsweep_triton_metrics_port"):
        del values[key]  # each node's own (the inventory's): extra vars would give all three the same
    values["trtsweep_gpus"] = slurm_cluster.gpus_per_node  # each node's GPUs; the job has GPUS_PER_NODE of them
    extravars.write_text(yaml.safe_dump(values))
    done = subprocess.run([*playbook_argv(extravars), "-i", str(slurm_inventory(tmp_path, slurm_cluster))], cwd=ROOT,
                          env={**playbook_env(), **slurm_cluster.env()}, capture_output=True, text=True,
                          timeout=500)  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    results = tmp_path / "results" / "slurm"
    records = [json.loads(p.read_text()) for p in sorted(results.glob("*/status.json"))]
    assert [r["status"] for r in records] == ["ok"] * 3
    jobs = {r["slurm"]["job_id"] for r in records}
    assert len(jobs) == 1  # one allocation, a step per lane
    assert sorted(r["host"] for r in records) == sorted(slurm_cluster.nodes)  # a point on each node
    assert {r["slurm"]["node"] for r in records} == set(slurm_cluster.nodes)
    assert len({(r["slurm"]["node"], r["slurm"]["step_id"]) for r in records}) == 3
    for record in records:
        assert len(record["gpus"]) == 1 and record["gpus"][0] in range(GPUS_PER_NODE), record  # the job's (IDX 0-1)
    assert slurm_cluster.jobs() == []  # the run's allocation released at its end
