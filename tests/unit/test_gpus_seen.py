"""The ready server's GPUs as NVML sees its process tree (serve/gpus_seen.py): the check that a point's server runs
on exactly the GPUs it was given."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from trtsweep.serve import gpus_seen

UUIDS = [f"GPU-{i}1e2f3a4-0000-0000-0000-00000000000{i}" for i in range(4)]  # the shape of a real H100's UUID


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int | None


class FakeNvml:
    """NVML's calls gpus_seen makes, over a table of compute processes per GPU index."""

    def __init__(self, procs: dict[int, list[Proc]]) -> None:
        self.procs = procs
        self.shut = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return 4

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Proc]:
        return self.procs.get(handle, [])

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return UUIDS[handle]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return UUIDS.index(uuid)

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"


def test_the_tree_holds_a_servers_children_and_grandchildren():
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
        "print(p.pid, flush=True); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        found = gpus_seen.tree(os.getpid())
        assert {os.getpid(), child.pid, grandchild} <= found
        assert os.getppid() not in found
    finally:
        os.kill(grandchild, 9)
        child.kill()
        child.wait()


def test_a_server_on_its_own_gpus_is_recorded_with_uuid_name_and_memory():
    nvml = FakeNvml({1: [Proc(101, 3 * 2**30), Proc(999, 2**30)], 2: [Proc(102, None)], 3: [Proc(999, 2**30)]})
    found = gpus_seen.seen(100, nvml=nvml, pids=lambda root: {root, 101, 102})
    assert found == [
        {"index": 1, "uuid": UUIDS[1], "name": "NVIDIA H100 80GB HBM3", "pids": [101], "memory_mb": 3072},
        {"index": 2, "uuid": UUIDS[2], "name": "NVIDIA H100 80GB HBM3", "pids": [102], "memory_mb": None},
    ]
    assert nvml.shut
    assert gpus_seen.mismatch([1, 2], found) is None


def test_a_server_on_other_gpus_than_given_is_said_in_one_line():
    # CUDA's default device order (fastest first) is not nvidia-smi's: the server took GPU 0 where it was given 2
    found = gpus_seen.seen(100, nvml=FakeNvml({0: [Proc(101, 2**30)]}), pids=lambda root: {root, 101})
    assert gpus_seen.mismatch([2], found) == f"its server runs on GPU(s) 0 ({UUIDS[0]}); it was given GPU(s) 2"
    assert gpus_seen.mismatch([2], []) == "its server runs on GPU(s) none; it was given GPU(s) 2"


def test_gpus_given_by_uuid_are_checked_by_uuid_wherever_they_are_counted():
    # a Slurm step that constrains devices counts its GPUs from 0: the lane gave the server its GPUs by UUID
    nvml = FakeNvml({1: [Proc(101, 2**30)], 2: [Proc(102, 2**30), Proc(999, 2**30)]})
    found = gpus_seen.seen(100, nvml=nvml, pids=lambda root: {root, 101, 102})
    assert gpus_seen.mismatch([UUIDS[2], UUIDS[1]], found) is None
    assert gpus_seen.mismatch([UUIDS[1]], found) == (f"its server runs on GPU(s) 1 ({UUIDS[1]}), 2 ({UUIDS[2]}); it "
                                                     f"was given GPU(s) {UUIDS[1]}")  # fmt: skip
    assert gpus_seen.others_on([UUIDS[2], UUIDS[1]], 100, nvml=nvml, pids=lambda root: {root, 101, 102}) == {
        UUIDS[2]: [999]}  # fmt: skip
    assert gpus_seen.uuids([2, 0], nvml=nvml) == [UUIDS[2], UUIDS[0]]


def test_without_nvml_there_is_nothing_to_check():
    class NoDriver(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    assert gpus_seen.seen(100, nvml=NoDriver({})) is None


class EightGpus(FakeNvml):
    """An 8-GPU H100 host."""

    def nvmlDeviceGetCount(self) -> int:
        return 8

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}1e2f3a4-0000-0000-0000-00000000000{handle}"


def test_a_tp1_server_on_an_exclusive_8_gpu_host_holds_exactly_the_gpu_its_point_was_given():
    """The default placement (exclusive: one lane of all eight GPUs) gives a tp1 point GPU 0 alone; NVML's answer for
    its server (one compute process on GPU 0, as a tp1 trtllm-serve holds) passes the lane's check. It failed when
    every point of the lane was given all eight."""
    from trtsweep.fleet.placement import host_from_facts, place
    from trtsweep.sweep.planning import expand

    sweep = {"name": "s", "backend": "tensorrtllm", "flow": "pytorch", "servers": ["trtllm-serve"],
             "trtllm": {"version": "1.2.0", "family": "qwen"},
             "models": [{"repo_id": "Qwen/Qwen2.5-7B-Instruct", "name": "q"}],
             "precisions": ["bf16"], "parallelism": [{"tp": 1, "pp": 1}], "max_batch_sizes": [8],
             "lengths": [{"input": 512, "output": 64}], "streaming": [True],
             "benchmark": {"input_data": "data/prompts.jsonl"}}  # fmt: skip
    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559, "used_mb": 0}
    host = host_from_facts("gpu1", {"gpus": [{"index": i, **h100} for i in range(8)], "busy_gpus": []})
    point = place(expand(sweep), [host])["points"][0]
    assert point["gpus"] == [0]
    nvml = EightGpus({0: [Proc(101, 70 * 2**30)]})  # recorded: a tp1 server's one process on GPU 0
    found = gpus_seen.seen(100, nvml=nvml, pids=lambda root: {root, 101})
    assert gpus_seen.mismatch(point["gpus"], found) is None
    assert "it was given GPU(s) 0, 1, 2, 3, 4, 5, 6, 7" in gpus_seen.mismatch(range(8), found)  # the old giving
