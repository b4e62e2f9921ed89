"""Where a lane runs on Slurm (trtsweep.lane.step): its command is a step of the run's job on its node asking for
the lane's GPU count, its points move onto the GPUs Slurm bound to the step, and a point's start names the step.
The real thing runs in tests/slurm; these pin the mapping."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.lane.spec import HostSpec
from trtsweep.lane.step import lane_argv, lost_cause, on_step_gpus, step_argv, step_devices, step_gpus

LANE = {"name": "n1-0", "host": "n1", "gpus": [4, 5], "ports": {},
        "points": [{"id": "a", "gpus": [4], "visible_devices": "4"}, {"id": "b", "gpus": [4, 5]}]}  # fmt: skip


def spec(job: str | None, cpus: int | None = None, lanes: int = 1) -> HostSpec:
    return HostSpec(run_id="r", sweep="s", journal_dir=Path("/j"), lease_file=Path("/l"),
                    settings={"trtsweep_slurm_job": job, "trtsweep_slurm_cpus": cpus}, inputs={},
                    lanes=[LANE] * lanes)  # fmt: skip


def test_a_lane_on_slurm_is_a_step_of_the_job_on_its_node_with_its_gpu_count():
    argv = lane_argv(spec("77"), Path("/j/spec.json"), LANE)
    assert argv[:9] == ["srun", "--jobid=77", "--exact", "--nodelist=n1", "--nodes=1", "--ntasks=1",
                        "--job-name=trtsweep-s-n1-0", "--export=ALL", "--gres=gpu:2"]  # fmt: skip
    lane = [sys.executable, "-m", "trtsweep.lane", "/j/spec.json", "--lane", "n1-0"]
    assert argv[9:] == lane
    assert lane_argv(spec(None), Path("/j/spec.json"), LANE) == lane  # off Slurm: the lane itself
    assert not any(arg.startswith("--gres") for arg in step_argv("77", "n1", 0, "x", ["true"]))  # a CPU lane


def test_a_lanes_step_takes_its_share_of_the_cpus_the_job_holds_on_the_node():
    argv = lane_argv(spec("77", cpus=32, lanes=4), Path("/j/spec.json"), LANE)
    assert argv[8:10] == ["--cpus-per-task=8", "--gres=gpu:2"]
    assert "--cpus-per-task" not in " ".join(lane_argv(spec("77", cpus=3, lanes=4), Path("/s"), LANE))  # one each
    assert "--cpus-per-task" not in " ".join(lane_argv(spec("77"), Path("/s"), LANE))  # not known: Slurm's default


def test_a_lanes_points_move_onto_the_gpus_its_step_was_bound_and_are_given_them_by_their_names_there():
    moved = on_step_gpus(LANE, {3: "GPU-d", 2: "GPU-c"})  # bound the node's GPUs 2 and 3
    assert moved["gpus"] == [2, 3]
    assert [(p["gpus"], p["visible_devices"], p["visible_devices"].split(",")) for p in moved["points"]] == [
        ([2], "GPU-c", ["GPU-c"]), ([2, 3], "GPU-c,GPU-d", ["GPU-c", "GPU-d"])]  # fmt: skip
    assert on_step_gpus(LANE, None) is LANE  # not in a step: as planned
    with pytest.raises(TrtsweepError, match=r"^lane n1-0: its step was bound GPU\(s\) \[3\], it needs 2$"):
        on_step_gpus(LANE, {3: "3"})


# Slurm's two lists for a step bound the node's GPUs 2 and 3 (slurm gres_common.c: CUDA_VISIBLE_DEVICES counts from 0
# where cgroup.conf says ConstrainDevices=yes, the step's cgroup holding its GPUs alone)
FREE = {"SLURM_STEP_ID": "1", "SLURM_STEP_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "2,3"}
CONSTRAINED = {**FREE, "CUDA_VISIBLE_DEVICES": "0,1"}


def test_without_nvml_a_steps_gpus_are_named_as_slurm_names_them_to_cuda_in_the_step():
    def no_nvml(indices: list[int]) -> None:
        return None

    assert step_devices(FREE, no_nvml) == {2: "2", 3: "3"}
    assert step_devices(CONSTRAINED, no_nvml) == {2: "0", 3: "1"}  # CUDA in the step counts its two GPUs from 0
    assert step_devices({"CUDA_VISIBLE_DEVICES": "0"}, no_nvml) is None  # not in a step


def test_with_nvml_a_steps_gpus_are_named_by_uuid_which_holds_in_every_runtime():
    asked: list[list[int]] = []

    def nvml(indices: list[int]) -> list[str]:  # NVML in the step counts as CUDA there does
        asked.append(indices)
        return [f"GPU-{i}{i}" for i in indices]

    assert step_devices(CONSTRAINED, nvml) == {2: "GPU-00", 3: "GPU-11"}
    assert step_devices(FREE, nvml) == {2: "GPU-22", 3: "GPU-33"}
    assert asked == [[0, 1], [2, 3]]


def test_the_steps_gpus_are_slurms_inside_a_step_only():
    assert step_gpus({"CUDA_VISIBLE_DEVICES": "0"}) is None
    assert step_gpus({"SLURM_STEP_ID": "3", "SLURM_STEP_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}) == [2, 3]
    assert step_gpus({"SLURM_STEP_ID": "3", "CUDA_VISIBLE_DEVICES": "1"}) == [1]


@pytest.mark.parametrize(("output", "cause"), [
    ("srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
     "slurmstepd: error: *** STEP 12.3 ON n1 CANCELLED AT 2026-11-29T13:40:00 ***\n",
     "Slurm: STEP 12.3 ON n1 CANCELLED AT 2026-11-29T13:40:00"),
    ("slurmstepd: error: *** JOB 12 ON n2 CANCELLED AT 2026-11-29T14:00:00 DUE TO TIME LIMIT ***\n",
     "Slurm: JOB 12 ON n2 CANCELLED AT 2026-11-29T14:00:00 DUE TO TIME LIMIT"),
    ("slurmstepd: error: *** JOB 12 ON n2 CANCELLED AT 2026-11-29T14:00:00 DUE TO PREEMPTION ***\n",
     "Slurm: JOB 12 ON n2 CANCELLED AT 2026-11-29T14:00:00 DUE TO PREEMPTION"),
])  # fmt: skip
def test_a_lost_steps_cause_is_slurms_own_word(output, cause):
    assert lost_cause(output, "12", 143) == cause


def test_a_node_failure_is_named_though_srun_exits_0():
    assert lost_cause("srun: error: Node failure on n2\n", "12", 0).startswith("Slurm: Node failure on n2")
