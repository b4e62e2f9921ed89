"""trtsweep.runtime.pyxis against the real Slurm cluster the tests start, pyxis's srun options registered by the
SPANK double (tests/slurm/pyxis_double.c): a tool's step beside a lane's step that holds GPUs, on the lane's GPUs,
found by its name and cancelled by it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.fleet.slurm import GRANTED
from trtsweep.runtime import pyxis

pytestmark = [pytest.mark.slurm]
IMAGE = "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3"


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def test_a_tools_step_runs_beside_its_lanes_step_on_its_gpus_and_is_cancelled_by_name(
    slurm_cluster, tmp_path, monkeypatch
):
    granted = slurm_cluster.run("salloc", "--no-shell", "--nodes=1", "--ntasks-per-node=2", "--gres=gpu:4",
                                "--time=5", "--job-name=pyxis-steps")  # fmt: skip
    job = GRANTED.search(granted.stderr).group(1)
    env = slurm_cluster.env()
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])  # squeue and scancel of the module reach this cluster
    node = slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
    lanes = []
    try:
        # two "lanes" holding two GPUs each, as a sweep's lane steps do (srun --exact --gres)
        for _ in range(2):
            lanes.append(subprocess.Popen(["srun", f"--jobid={job}", "--exact", f"--nodelist={node}", "-N1", "-n1",
                                           "--gres=gpu:2", "sleep", "120"], env=env))  # fmt: skip
        lane = {"SLURM_JOB_ID": job, "SLURMD_NODENAME": node, "SLURM_STEP_ID": "1",
                "SLURM_CPUS_PER_TASK": "2"}  # as inside the second lane, given two CPUs  # fmt: skip
        name = "trtsweep-point-a/b 1"  # made a name Slurm keeps
        monkeypatch.chdir(tmp_path)  # the step works where its builder does
        argv = pyxis.srun_argv(IMAGE, name, [tmp_path], "2,3", ["sleep", "120"], environ=lane)
        assert argv[:3] == ["srun", f"--jobid={job}", "--overlap"] and "--gres" not in " ".join(argv)
        tool = subprocess.Popen(argv, env=env)
        deadline = time.monotonic() + 30
        while (root := pyxis.step_root(job, name)) is None:
            assert tool.poll() is None and time.monotonic() < deadline, "the tool's step ran no task"
            time.sleep(0.2)
        seen = environ_of(root)
        assert seen["CUDA_VISIBLE_DEVICES"] == "2,3"  # the lane's, though Slurm gave the step every GPU of the job
        assert seen["SLURM_STEP_GPUS"] == "0,1,2,3" and seen["SLURM_JOB_NAME"] == "trtsweep-point-a-b-1"
        assert seen["SLURM_CPUS_PER_TASK"] == "2"  # the lane's share, overlapping it
        assert Path(os.readlink(f"/proc/{root}/cwd")) == tmp_path  # --container-workdir
        (step,) = pyxis.steps_named(job, name)
        recorded = [line.split("\t") for line in (slurm_cluster.root / "pyxis.log").read_text().splitlines()]
        assert [job, step.split(".")[1], IMAGE, f"{tmp_path}:{tmp_path}", str(tmp_path), "0"] in [
            r[:6] for r in recorded
        ]
        pyxis.end(job, name)
        assert tool.wait(timeout=30) != 0 and pyxis.steps_named(job, name) == []
        assert all(lane.poll() is None for lane in lanes)  # the lanes' steps run on
    finally:
        for proc in lanes:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        slurm_cluster.run("scancel", job)


def test_outside_a_lanes_step_the_pyxis_runtime_is_refused_in_one_line(tmp_path):
    with pytest.raises(TrtsweepError, match="runtime pyxis runs inside a lane's Slurm step"):
        pyxis.srun_argv(IMAGE, "x", [tmp_path], None, ["true"], environ={})
    with pytest.raises(TrtsweepError, match="cannot mount /a,b"):
        pyxis.mounts_flag(["/a,b"])
