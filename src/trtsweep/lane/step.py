"""Where a lane runs on Slurm: a step of the run's job on its node (`srun --jobid=J --exact`), the GPUs Slurm bound to
it, and what a point's record says of it. The host runner starts each lane through `lane_argv`; off Slurm (the host
spec names no job) a lane is the host's own process, as before.

A step asks for the lane's GPU count (`--gres=gpu:K`) and Slurm picks which of the job's GPUs on the node: the lane
moves its points onto them (`on_step_gpus`, the planned GPUs taken in order), so the server is given, and checked
against, what Slurm bound. Slurm names them twice in the step: SLURM_STEP_GPUS by their index on the node, and
CUDA_VISIBLE_DEVICES as CUDA in the step counts them: the same indices, or, where the site constrains devices
(cgroup.conf ConstrainDevices=yes: the step's cgroup holds only its GPUs), 0, 1, ... again. The points keep the node's
indices (their records, placement) and are given their GPUs by a name that holds in every runtime (`step_devices`):
the UUID, where NVML answers in the step, else Slurm's CUDA_VISIBLE_DEVICES entry.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from trtsweep.errors import TrtsweepError
from trtsweep.lane.spec import HostSpec
from trtsweep.serve import gpus_seen

# slurmstepd's word on a step it ended, in the step's output: "*** STEP 12.0 ON n1 CANCELLED AT <time> ***", "*** JOB
# 12 ON n1 CANCELLED AT <time> DUE TO TIME LIMIT ***", "... DUE TO PREEMPTION ***", "... DUE TO NODE FAILURE ..."
SLURM_END = re.compile(r"\*\*\* ((?:STEP|JOB) \S+ ON \S+ CANCELLED AT \S+[^*]*?) \*\*\*")


def step_argv(job_id: str, node: str, gpus: int, name: str, argv: Sequence[str], cpus: int = 0) -> list[str]:
    """`srun` of `argv` as one step of the job on `node` with `gpus` of the job's GPUs there and `cpus` of its CPUs
    (0: Slurm's default, one; `--exact`: only what it asks for, so the node's other lanes run beside it), named
    `name`."""
    out = ["srun", f"--jobid={job_id}", "--exact", f"--nodelist={node}", "--nodes=1", "--ntasks=1",
           f"--job-name={name}", "--export=ALL"]  # fmt: skip
    if cpus > 1:
        out.append(f"--cpus-per-task={cpus}")
    if gpus:
        out.append(f"--gres=gpu:{gpus}")
    return [*out, *argv]


def step_gpus(environ: Mapping[str, str] | None = None) -> list[int] | None:
    """The GPUs Slurm bound to the step this process runs in (SLURM_STEP_GPUS, else CUDA_VISIBLE_DEVICES inside a
    step); None outside a step."""
    env = os.environ if environ is None else environ
    if "SLURM_STEP_ID" not in env:
        return None
    text = env.get("SLURM_STEP_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or ""
    return [int(i) for i in text.split(",") if i.strip().isdigit()]


def lane_argv(spec: HostSpec, spec_file: Path, lane: dict) -> list[str]:
    """The lane's command: on Slurm (the host spec names the job), a step of the job on this node with the lane's
    GPU count (`srun --exact`: Slurm binds which) and an equal share of the CPUs the job holds on the node (the server
    and its benchmark run in the step: one CPU would hold both on a site that binds tasks to cores), else the lane
    itself."""
    argv = [sys.executable, "-m", "trtsweep.lane", str(spec_file), "--lane", lane["name"]]
    job = spec.settings.get("trtsweep_slurm_job")
    if not job:
        return argv
    name = f"trtsweep-{spec.sweep}-{lane['name']}"
    cpus = int(spec.settings.get("trtsweep_slurm_cpus") or 0) // max(1, len(spec.lanes))
    return step_argv(str(job), lane["host"], len(lane.get("gpus") or []), name, argv, cpus)


def step_devices(
    environ: Mapping[str, str] | None = None, uuids: Callable[[list[int]], list[str] | None] = gpus_seen.uuids
) -> dict[int, str] | None:
    """Each GPU Slurm bound to the step this process runs in, by its index on the node (SLURM_STEP_GPUS) -> the name a
    command is given it by: its UUID where NVML answers (`uuids` of CUDA_VISIBLE_DEVICES's entries: in the step NVML
    counts as CUDA does, the step's own GPUs alone where devices are constrained), else Slurm's CUDA_VISIBLE_DEVICES
    entry at the same place (Slurm writes both lists in one pass over the step's GPUs). None outside a step."""
    env = os.environ if environ is None else environ
    bound = step_gpus(env)
    if bound is None:
        return None
    local = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if len(local) != len(bound) or not all(d.isdigit() for d in local):
        local = [str(g) for g in bound]
    named = uuids([int(d) for d in local]) if bound else None
    return dict(zip(bound, named or local, strict=True))


def on_step_gpus(lane: dict, devices: Mapping[int, str] | None) -> dict:
    """The lane with its points' GPUs moved onto those Slurm bound to its step (`devices`: `step_devices`; None: not in
    a step), the lane's planned GPUs taken in the same order: the node's indices in `gpus`, their names for the
    commands in `visible_devices`."""
    planned = sorted(lane.get("gpus") or [])
    if devices is None or not planned:
        return lane
    bound = sorted(devices)
    if len(bound) != len(planned):
        raise TrtsweepError(f"lane {lane['name']}: its step was bound GPU(s) {bound}, it needs {len(planned)}")
    moved = dict(zip(planned, bound, strict=True))

    def on_step(point: dict) -> dict:
        gpus = [moved[g] for g in point.get("gpus") or []]
        return {**point, "gpus": gpus, "visible_devices": ",".join(devices[g] for g in gpus)}

    return {**lane, "gpus": [moved[g] for g in planned], "points": [on_step(p) for p in lane["points"]]}


def step_record(point: dict) -> dict:
    """What a point's start says of its Slurm step (none outside one): the GPUs it was bound and the job, step and
    node, for its record."""
    env = os.environ
    if "SLURM_STEP_ID" not in env:
        return {}
    # (not SLURM_JOB_NAME: in a step it is the step's own name, srun --job-name, not the allocation's)
    names = {"job_id": "SLURM_JOB_ID", "step_id": "SLURM_STEP_ID", "node": "SLURMD_NODENAME",
             "partition": "SLURM_JOB_PARTITION", "account": "SLURM_JOB_ACCOUNT",
             "cpus": "SLURM_CPUS_PER_TASK"}  # fmt: skip
    slurm = {key: env.get(var) for key, var in names.items()}
    # the names its commands were given the GPUs by (UUIDs, or the step's own indices where devices are constrained)
    devices = [d for d in str(point.get("visible_devices") or "").split(",") if d]
    return {"gpus": list(point.get("gpus") or []), "slurm": {**slurm, "devices": devices}}


def job_state(job_id: str) -> str:
    """The job's state as Slurm says it (RUNNING, TIMEOUT, ...): slurmctld's, else (a job it no longer holds, minutes
    after its end) accounting's; GONE where neither knows it."""
    try:
        done = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                              check=False, timeout=60)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return "UNKNOWN"
    found = re.search(r"\bJobState=(\S+)", done.stdout)
    if found:
        return found.group(1)
    booked = accounted(job_id)
    return booked[0].split()[0] if booked else "GONE"  # ("CANCELLED by 1000")


def accounted(ident: str, settle_s: float = 0.0) -> tuple[str, str] | None:
    """(State, ExitCode) as Slurm's accounting records the job or step `ident` ("12", "12.3"): ("CANCELLED", "0:9");
    None where accounting does not run (sacct: "Slurm accounting storage is disabled") or has no record of it. A
    record not there yet or still running is asked again for up to `settle_s` (slurmctld sends what happened to
    slurmdbd within seconds)."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            done = subprocess.run(["sacct", "-n", "-P", "-j", ident, "--format=JobID,State,ExitCode"],
                                  capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        found = next((tuple(f[1:]) for f in (line.split("|") for line in done.stdout.splitlines())
                      if len(f) == 3 and f[0] == ident), None)  # fmt: skip
        settled = found is not None and found[0] not in ("RUNNING", "PENDING", "COMPLETING")
        if settled or time.monotonic() > deadline:
            return found  # type: ignore[return-value]
        time.sleep(0.5)


def lost_cause(step_output: str, job_id: str, status: int, step_id: str | None = None) -> str:
    """Why a lane's step (`step_id` where known) ended before its lane did, in one line: Slurm's own word where the
    step's output has it (slurmstepd's "*** STEP ... CANCELLED ... ***": cancelled, time limit, preemption; srun's
    "Node failure on n2", after which srun exits 0), with the job's state when it no longer runs and the step's as
    accounting recorded it (where it runs), else the step's exit status."""
    said = SLURM_END.findall(step_output)
    if said:
        return f"Slurm: {said[-1]}"
    state = job_state(job_id)
    booked = accounted(f"{job_id}.{step_id}", settle_s=5.0) if step_id is not None else None
    books = f"; sacct: step {job_id}.{step_id} {booked[0]}, exit code {booked[1]}" if booked else ""
    errors = [line.split("srun: error: ", 1)[1] for line in step_output.splitlines() if "srun: error: " in line]
    if errors:
        return f"Slurm: {errors[-1]}" + (f" (job {job_id} {state})" if state != "RUNNING" else "") + books
    if state != "RUNNING":
        return f"Slurm: job {job_id} is {state}{books}"
    if booked:
        return f"Slurm: step {job_id}.{step_id} {booked[0]}, exit code {booked[1]}"
    return f"its Slurm step (job {job_id}) ended with status {status} before its lane did"
