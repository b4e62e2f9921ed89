"""A lane's GPUs on a Slurm cluster that constrains devices (the test cluster's cgroup.conf: ConstrainDevices=yes, as
most GPU sites): in its step Slurm counts them from 0 in CUDA_VISIBLE_DEVICES, and an overlapping step (a pyxis
server's) counts all of the job's. Each "lane" below is a real step of trtsweep's command line on the bed's device
nodes; where CUDA would run is the NVML double's `cuda_selects` (tests/doubles/nvml: the device nodes this process may
open, which the step's cgroup decides). Fails on GPUs given by the node's indices (SLURM_STEP_GPUS): the second lane's
server then finds no GPU in its step, and a pyxis server's step would run on the first lane's GPUs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from trtsweep.fleet.slurm import GRANTED
from trtsweep.lane.step import step_argv

pytestmark = [pytest.mark.slurm]
DOUBLE = ROOT / "tests" / "doubles" / "nvml"
# inside a lane's step: the lane's GPUs as trtsweep names them without NVML and with it, and where CUDA would run
# with each name, natively in the step and in a pyxis step beside it (trtsweep.runtime's command line, run for real)
PROBE = f"""
import json, os, subprocess, sys
sys.path.insert(0, {str(DOUBLE)!r})
import pynvml
from trtsweep.lane.step import step_devices
from trtsweep.runtime import Launch, of

def in_pyxis_step(names):
    where = of("pyxis", image="nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3")
    inner = [sys.executable, "-c", "import os, sys; sys.path.insert(0, {str(DOUBLE)!r}); import pynvml; "
             "print(','.join(pynvml.cuda_selects(os.environ['CUDA_VISIBLE_DEVICES'])))"]
    argv = where.command(Launch(inner, "trtsweep-probe-" + os.environ["SLURM_STEP_ID"], (os.getcwd(),), names))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip().split(",")

plain = step_devices(uuids=lambda indices: None)
named = step_devices()
print(json.dumps({{
    "step": os.environ["SLURM_STEP_GPUS"], "cuda": os.environ["CUDA_VISIBLE_DEVICES"],
    "plain": list(plain.values()), "named": list(named.values()),
    "native": {{way: pynvml.cuda_selects(",".join(names)) for way, names in
               (("node", os.environ["SLURM_STEP_GPUS"].split(",")), ("plain", plain.values()),
                ("named", named.values()))}},
    "pyxis": {{way: in_pyxis_step(",".join(names)) for way, names in
              (("plain", plain.values()), ("named", named.values()))}},
}}))
"""


def test_a_lanes_gpus_are_named_so_that_its_servers_run_on_them_natively_and_in_a_pyxis_step(slurm_cluster, tmp_path):
    granted = slurm_cluster.run("salloc", "--no-shell", "--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=2",
                                "--gres=gpu:4", "--time=5", "--job-name=step-gpus")  # fmt: skip
    job = GRANTED.search(granted.stderr).group(1)
    node = slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
    devices = slurm_cluster.root / "dev" / node
    env = {**slurm_cluster.env(), "FAKE_GPU_DEVICES": str(slurm_cluster.root / "dev" / "{node}")}
    try:
        lanes = [subprocess.Popen(step_argv(job, node, 2, f"step-gpus-{k}", [sys.executable, "-c", PROBE], 2),
                                  env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for k in range(2)]  # fmt: skip
        seen = []
        for lane in lanes:
            out, err = lane.communicate(timeout=120)
            assert lane.returncode == 0, err[-3000:]
            seen.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        slurm_cluster.run("scancel", job)
    second = next(s for s in seen if s["step"] == "2,3")  # the lane Slurm bound the node's GPUs 2 and 3
    own = [str(devices / "nvidia2"), str(devices / "nvidia3")]
    print(json.dumps(second, indent=1))
    assert second["cuda"] == "0,1"  # Slurm counts the constrained step's GPUs from 0
    assert second["native"]["node"] == []  # the node's indices: CUDA in the step finds no GPU 2
    assert second["plain"] == ["0", "1"] and second["native"]["plain"] == own  # Slurm's own names, natively
    assert all(name.startswith("GPU-") for name in second["named"]) and second["native"]["named"] == own
    assert second["pyxis"]["plain"] == [str(devices / "nvidia0"), str(devices / "nvidia1")]  # the other lane's GPUs
    assert second["pyxis"]["named"] == own  # a UUID holds in the overlapping step too
    first = next(s for s in seen if s["step"] == "0,1")
    assert first["native"]["named"] == first["pyxis"]["named"] == [str(devices / "nvidia0"), str(devices / "nvidia1")]
