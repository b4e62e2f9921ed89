"""trtsweep.fleet.slurm against the real Slurm cluster the tests start (tests/slurm/cluster.py): an allocation made
and released, one that exists described, its nodes and their GRES indices read from Slurm, each lane's step bound to
GPUs of its own, and Slurm's refusals in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import slurm
from trtsweep.lane.step import accounted, step_argv

pytestmark = [pytest.mark.slurm]
PROBE = "import json; from trtsweep.lane.step import step_gpus; print(json.dumps(step_gpus()))"


@pytest.fixture
def slurm_env(slurm_cluster, monkeypatch):
    """The cluster's client environment for this process (the module's commands read os.environ)."""
    for key, value in slurm_cluster.env().items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    return slurm_cluster


def test_an_allocation_made_and_released(slurm_env):
    made = slurm.allocate(slurm.Request(nodes=2, gpus_per_node=2, time="5"), "trtsweep-test-made")
    try:
        assert made.made and made.state == "RUNNING"
        assert len(made.nodes) == 2 and {n.name for n in made.nodes} <= set(slurm_env.nodes)
        assert all(len(node.gpus) == 2 and set(node.gpus) <= set(range(slurm_env.gpus_per_node))
                   for node in made.nodes)  # fmt: skip
        assert slurm.describe(made.job_id).nodes == made.nodes
        assert {node.cpus for node in made.nodes} == {2}  # a task (one CPU) per GPU on each node
    finally:
        slurm.release(made.job_id)
    assert wait_for(lambda: slurm.job_state(made.job_id) in ("CANCELLED", "GONE"), 30)
    # accounting's record, what job_state answers once slurmctld no longer holds the job: named as the run named it
    assert accounted(made.job_id, settle_s=10)[0].startswith("CANCELLED")

    def named() -> list[str]:  # (the record says "allocation", salloc's default, for a few seconds)
        return slurm_env.run("sacct", "-n", "-P", "-X", "-j", made.job_id, "--format=JobName").stdout.split()

    assert wait_for(lambda: named() == ["trtsweep-test-made"], 30), named()


def test_each_lanes_step_gets_gpus_of_its_own_within_an_existing_allocation(slurm_env):
    granted = slurm_env.run(
        "salloc", "--no-shell", "--nodes=1", "--ntasks-per-node=2", "--gres=gpu:3", "--time=5", "--job-name=given"
    )  # a CPU for each of the two steps at once
    job = slurm.existing_job(slurm.GRANTED.search(granted.stderr).group(1))
    try:
        node = slurm.describe(job).nodes[0]
        probe = [
            sys.executable,
            "-c",
            "import json; from trtsweep.lane.step import step_gpus; print(json.dumps(step_gpus()))",
        ]
        steps = [subprocess.Popen(step_argv(job, node.name, gpus, f"lane-{i}", probe), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i, gpus in enumerate((2, 1))]  # fmt: skip
        seen = []
        for step in steps:
            out, err = step.communicate(timeout=60)
            assert step.returncode == 0, err
            seen.append(json.loads(out))
        assert [len(s) for s in seen] == [2, 1]
        assert set(seen[0]).isdisjoint(seen[1]) and set(seen[0]) | set(seen[1]) == set(node.gpus)
    finally:
        slurm.release(job)


def test_slurms_refusals_are_one_line(slurm_env):
    with pytest.raises(TrtsweepError) as too_big:
        slurm.allocate(slurm.Request(nodes=1, gpus_per_node=slurm_env.gpus_per_node + 1, time="5",
                                     extra=("--immediate=5",)), "trtsweep-test-too-big")  # fmt: skip
    assert str(too_big.value).startswith("salloc: ") and "\n" not in str(too_big.value)
    with pytest.raises(TrtsweepError, match=r"^job 999999: "):
        slurm.describe("999999")
    with pytest.raises(TrtsweepError, match="SLURM_JOB_ID is not set"):
        slurm.existing_job("env", {})
    assert slurm.existing_job("env", {"SLURM_JOB_ID": "42"}) == "42"
    with pytest.raises(TrtsweepError, match=r"^trtsweep_slurm.allocate.gpus: unknown"):
        slurm.Request.from_inventory({"nodes": 2, "gpus": 8})


def wait_for(done, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_the_plan_previews_the_nodes_and_gpus_of_an_allocation_that_exists(slurm_env, tmp_path, capsys):
    """`trtsweep plan -i` of an inventory naming a running job: its nodes and the job's GPUs there, from Slurm."""
    from trtsweep import cli

    granted = slurm_env.run("salloc", "--no-shell", "--nodes=2", "--ntasks-per-node=2", "--gres=gpu:2", "--time=5")
    job = slurm.GRANTED.search(granted.stderr).group(1)
    try:
        inventory = tmp_path / "slurm.yml"
        inventory.write_text(f"all:\n  vars:\n    trtsweep_slurm: {{job_id: {job}}}\n")
        code = cli.main(["plan", str(ROOT / "sweeps" / "smollm2_cpu_flows.yml"), "-i", str(inventory)])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert f"note: the hosts are job {job}'s nodes (RUNNING), each with the job's GPUs there" in out.out
        placed = {line.split()[0] for line in out.out.splitlines()[2:] if line.split()[1:2] == ["0"]}
        assert placed and placed <= set(slurm_env.nodes), out.out  # the job's nodes, by Slurm's names
    finally:
        slurm.release(job)
