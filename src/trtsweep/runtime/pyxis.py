"""The pyxis runtime: a server or build tool in its image as a step of the run's Slurm job, through pyxis's srun
flags (`--container-image`, `--container-mounts`, ...), as the Slurm harnesses run TensorRT-LLM's containers.

It runs only inside a lane's step (a sweep on `trtsweep_slurm`): the lane's step holds the lane's GPUs
(`srun --exact --gres=gpu:K`); the tool's step overlaps it on the same node (`--overlap`, no `--gres`: Slurm then
gives it every GPU the job has on the node, as seen on Slurm 22.05) and the tool is told the lane's own GPUs by
`env CUDA_VISIBLE_DEVICES=...` as its command inside the image (Slurm sets CUDA_VISIBLE_DEVICES in every step with
GPUs, and the image's value takes precedence over an exported one in pyxis: the command's own `env` is what holds).

- `srun_argv`: the step's command line: the job and node the lane's step runs in (`SLURM_JOB_ID`, `SLURMD_NODENAME`),
  one task, a name of its own (`squeue -s` and accounting show it), the paths mounted at the same place
  (`--container-mounts=SRC:DST[:ro],...`, with what their links need: `common.mounts`), the working directory, the
  image's entrypoint off (`--no-container-entrypoint`: the tool is the command, as with `docker run --entrypoint`).
- Processes: the step's tasks are slurmstepd's children, not the srun client's; `step_root` finds the task by its
  step environment (`SLURM_JOB_ID` and the step's name, `SLURM_JOB_NAME`): where the GPU check's walk starts.
- `end`: the step ended by Slurm (`scancel JOB.STEP` of the step of that name), what `docker rm -f` is to the
  container runtime: every stop path ends with it (a killed srun client may leave its step running).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from trtsweep.common.mounts import closure
from trtsweep.common.procs import parent_pid
from trtsweep.errors import TrtsweepError
from trtsweep.runtime.base import Launch

KIND = "pyxis"
NOT_IN_STEP = ("runtime pyxis runs inside a lane's Slurm step (a sweep on an allocation: trtsweep_slurm in the "
               "inventory); this process is in none")  # fmt: skip


def here(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(job id, node) of the Slurm step this process runs in; refused in one line outside one."""
    env = os.environ if environ is None else environ
    job, node = env.get("SLURM_JOB_ID"), env.get("SLURMD_NODENAME")
    if not job or not node or "SLURM_STEP_ID" not in env:
        raise TrtsweepError(NOT_IN_STEP)
    return job, node


def step_name(name: str) -> str:
    """A step's name as Slurm keeps it (letters, digits and `_.-`; squeue shows it)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


def mounts_flag(paths: Iterable[str | Path]) -> str:
    """`--container-mounts=` of `paths` at the same place, and read-only what their links need; a path pyxis cannot
    take (its separators `,` and `:`) refused in one line."""
    given, extra = closure(paths)
    for path in [*given, *extra]:
        if "," in path or ":" in path:
            raise TrtsweepError(f"runtime pyxis: cannot mount {path}: pyxis's --container-mounts separates entries "
                                "with ',' and fields with ':'")  # fmt: skip
    return "--container-mounts=" + ",".join([*(f"{p}:{p}" for p in given), *(f"{p}:{p}:ro" for p in extra)])


def srun_argv(image: str, name: str, paths: Iterable[str | Path], visible_devices: str | None,
              inner: list[str], environ: Mapping[str, str] | None = None) -> list[str]:  # fmt: skip
    """`srun` of `inner` in `image` as a step of the lane's job on its node, named `name`, `paths` mounted at the same
    place, working in the current directory, on `visible_devices` (None: every GPU the job has there)."""
    if not image:
        raise TrtsweepError("runtime pyxis needs a container image (trtsweep_triton_container_image)")
    job, node = here(environ)
    devices = ["env", f"CUDA_VISIBLE_DEVICES={visible_devices}"] if visible_devices is not None else []
    cpus = (os.environ if environ is None else environ).get("SLURM_CPUS_PER_TASK")  # the lane's share, overlapped
    return [
        "srun", f"--jobid={job}", "--overlap", f"--nodelist={node}", "--nodes=1", "--ntasks=1",
        *([f"--cpus-per-task={cpus}"] if cpus else []),
        f"--job-name={step_name(name)}", "--export=ALL", f"--container-image={image}", mounts_flag(paths),
        f"--container-workdir={os.getcwd()}", "--no-container-entrypoint", *devices, *inner,
    ]  # fmt: skip


def _environ(pid: str, proc: Path) -> dict[str, str]:
    try:
        raw = (proc / pid / "environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def step_root(job: str, name: str, proc: Path = Path("/proc")) -> int | None:
    """The pid of the task of the step named `name` of job `job` on this node (its processes whose parent is not one
    of them), None when it runs none here."""
    name = step_name(name)
    ours = {int(e.name) for e in proc.iterdir() if e.name.isdigit()
            and (env := _environ(e.name, proc)).get("SLURM_JOB_ID") == job and env.get("SLURM_JOB_NAME") == name
            and "SLURM_STEP_ID" in env}  # fmt: skip
    roots = sorted(pid for pid in ours if parent_pid(pid, proc) not in ours)
    return roots[0] if roots else None


def steps_named(job: str, name: str) -> list[str]:
    """The ids (`JOB.STEP`) of the job's steps named `name` that Slurm still runs."""
    try:
        out = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"], capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    name = step_name(name)
    return [line.split()[0] for line in out.stdout.splitlines() if line.split()[1:] == [name]]


def root(job: str, name: str) -> int:
    """Where the step's processes start (its task on this node); TrtsweepError when it runs none here."""
    pid = step_root(job, name)
    if pid is None:
        raise TrtsweepError(f"the Slurm step {step_name(name)} (job {job}) runs no task here")
    return pid


def preflight(docker: str = "") -> str | None:
    """What this host lacks for the runtime (a step of the run's job through pyxis's srun flags: srun, no docker)."""
    if shutil.which("srun") is None:
        return "runtime pyxis: srun not found on PATH (pyxis runs the image as a step of the run's Slurm job)"
    return None


def end(job: str, name: str) -> None:
    """The job's steps named `name` ended by Slurm (`scancel`); nothing when none runs."""
    for step in steps_named(job, name):
        subprocess.run(["scancel", step], capture_output=True, timeout=60, check=False)


@dataclass
class Pyxis:
    """`image` as a step of the lane's job beside the lane's own step; a command given no GPUs gets the point's, as the
    lane gave them to this process (CUDA_VISIBLE_DEVICES: UUIDs, or Slurm's names in the lane's step)."""

    image: str | None
    kind: ClassVar[str] = KIND
    in_image: ClassVar[bool] = True

    def prepare(self) -> list[str]:
        return []

    def command(self, launch: Launch) -> list[str]:
        devices = launch.devices if launch.devices is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
        return srun_argv(self.image or "", launch.name, launch.paths, devices, list(launch.argv))

    def held(self, name: str) -> list[str] | None:
        return [KIND, here()[0], name]

    def record(self) -> dict[str, object]:
        """The Slurm job its steps ran in (the limits are Slurm's, not ours)."""
        return {"slurm_job": here()[0]}
