"""The Slurm test bed itself: what a harness on a Slurm cluster relies on, seen on the real daemons (idle nodes with
their GPUs, an allocation's nodes and GPU indices, steps that share an allocation without sharing GPUs, a step
cancelled alone) and a bed whose owner was killed stopped by the next start."""

from __future__ import annotations

import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.beds import alive, require
from tests.conftest import ROOT, wait_for
from tests.slurm.cluster import Cluster, stale_beds, start, stop_bed, unavailable_reason

pytestmark = pytest.mark.slurm


@contextmanager
def allocation(cluster: Cluster, *args: str) -> Iterator[int]:
    """`salloc --no-shell ARGS...`: yields the job id read from "Granted job allocation N"; cancelled at the end."""
    granted = cluster.run("salloc", "--no-shell", "--time=5", *args)
    match = re.search(r"Granted job allocation (\d+)", granted.stderr)
    assert match, granted.stderr
    job = int(match.group(1))
    try:
        yield job
    finally:
        cluster.run("scancel", str(job), check=False)


def test_every_node_is_idle_with_its_gpus(slurm_cluster: Cluster) -> None:
    """sinfo lists each node idle in the default partition with gpu:4; scontrol shows the same GRES."""
    wait_for(lambda: set(slurm_cluster.node_states().values()) == {"idle"}, 15)  # a test before may end its job
    out = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %P %t %G").stdout
    assert sorted(out.split("\n")[:-1]) == [f"{node} gpu* idle gpu:4" for node in slurm_cluster.nodes]
    shown = slurm_cluster.run("scontrol", "show", "node").stdout
    assert re.findall(r"NodeName=(\S+)|Gres=(\S+)", shown) == [
        pair for node in slurm_cluster.nodes for pair in ((node, ""), ("", "gpu:4"))
    ]


def test_allocation_nodes_gpu_indices_and_disjoint_steps(slurm_cluster: Cluster) -> None:
    """An allocation of 2 nodes x 2 GPUs: its hosts, its GPU indices per node, two steps at once on one node get
    disjoint GPUs (2 tasks per node: a step takes a CPU of the job's, and one per node would serialise them); scancel
    ends the job."""
    with allocation(slurm_cluster, "-N", "2", "--ntasks-per-node=2", "--gres=gpu:2") as job:
        detail = slurm_cluster.run("scontrol", "show", "job", "-d", str(job)).stdout
        node_list = re.search(r"^\s*NodeList=(\S+)", detail, re.MULTILINE)
        assert node_list, detail
        hosts = slurm_cluster.run("scontrol", "show", "hostnames", node_list.group(1)).stdout.split()
        assert len(hosts) == 2 and set(hosts) <= set(slurm_cluster.nodes)
        assert re.search(r"Nodes=\S+ .*GRES=gpu:2\(IDX:0-1\)", detail), detail
        step = ["srun", f"--jobid={job}", "-w", hosts[0], "-N1", "-n1", "--gres=gpu:1", "--exact"]
        script = "echo $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS; sleep 2"  # both hold their GPU while the other starts
        steps = [
            subprocess.Popen([*step, "sh", "-c", script], env=slurm_cluster.env(), stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        seen = [proc.communicate(timeout=60)[0].split() for proc in steps]
        assert [proc.returncode for proc in steps] == [0, 0]
        # one GPU each, the node's 0 and 1 (SLURM_STEP_GPUS); CUDA_VISIBLE_DEVICES counts each constrained step's from 0
        assert sorted(seen) == [["0", "0"], ["0", "1"]]
        assert [j["job_id"] for j in slurm_cluster.jobs(job)] == [job]
        slurm_cluster.run("scancel", str(job))
        wait_for(lambda: not slurm_cluster.jobs(job), 15)


def test_scancel_of_a_step_ends_its_srun_and_keeps_the_job(slurm_cluster: Cluster) -> None:
    """`scancel J.S` of a running step: that step's srun exits non-zero within seconds, the job stays. (Cancelled
    before its task runs, the step ends too, but srun only says "aborted before step completely launched".)"""
    with allocation(slurm_cluster, "-N", "1", "--gres=gpu:1") as job:
        argv = ["srun", f"--jobid={job}", "-N1", "-n1", "--gres=gpu:1", "sh", "-c", "echo running; exec sleep 300"]
        srun = subprocess.Popen(
            argv, env=slurm_cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )  # fmt: skip
        try:
            assert srun.stdout is not None
            assert select.select([srun.stdout], [], [], 30)[0] and srun.stdout.readline() == "running\n"
            steps = slurm_cluster.run("squeue", "-s", "-h", "-j", str(job), "-o", "%i %j").stdout.split("\n")
            assert f"{job}.0 sh" in steps
            began = time.monotonic()
            slurm_cluster.run("scancel", f"{job}.0")
            _, err = srun.communicate(timeout=15)
            assert srun.returncode != 0 and time.monotonic() - began < 15, err  # 137: its task was killed
            assert f"STEP {job}.0 ON " in err and " CANCELLED AT " in err, err
            assert [j["job_state"] for j in slurm_cluster.jobs(job)] == ["RUNNING"]
        finally:
            srun.kill()
            srun.wait()


def test_a_bed_whose_owner_was_killed_is_stopped_by_the_next_start() -> None:
    """A cluster outlives its killed owner (its daemons run in sessions of their own); the next start finds its bed
    by the owner it recorded, stops the daemons by their pids and removes the bed."""
    require(unavailable_reason(), "Slurm")
    beds = Path(tempfile.mkdtemp(prefix="tswslurm-", dir="/tmp"))  # short: munge.socket's path must fit 108 bytes
    script = (
        "import json, sys, time; from pathlib import Path; from tests.slurm.cluster import start; "
        "bed = start(nodes=1, gpus_per_node=1, cpus_per_node=1, beds=Path(sys.argv[1])); "
        "print(bed.root, *json.loads((bed.root / 'pids.json').read_text()).values(), flush=True); time.sleep(600)"
    )
    owner = subprocess.Popen([sys.executable, "-c", script, str(beds)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        root, *pids = owner.stdout.readline().split()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert len(pids) == 5 and all(alive(int(pid)) for pid in pids)  # munged, mariadbd, slurmdbd, slurmctld, slurmd
        assert stale_beds(beds) == [Path(root)]
        bed = start(nodes=1, gpus_per_node=1, cpus_per_node=1, beds=beds)
        try:
            assert not any(alive(int(pid)) for pid in pids) and not Path(root).exists()
        finally:
            bed.stop()
        assert list(beds.glob("bed-*")) == []
    finally:
        owner.kill()
        for left in stale_beds(beds):  # the owner is gone: any bed left is stale
            stop_bed(left)
        shutil.rmtree(beds, ignore_errors=True)
