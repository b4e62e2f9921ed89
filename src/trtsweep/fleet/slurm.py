"""Slurm as the fleet: a sweep on an allocation, each lane a job step. Slurm schedules; trtsweep asks it.

The allocation is the run's own (`salloc --no-shell` with the inventory's nodes, GPUs per node, partition, account
and time limit; released at the run's end unless kept) or one that exists (a job id, or `SLURM_JOB_ID` when the run
is started inside `salloc` / `sbatch`). Its nodes are the hosts (`scontrol show hostnames`), each node's GPUs the
job's GRES indices there (`scontrol show job -d`): placement works within them. A lane runs as a step of the job
(trtsweep.lane.step: `srun --jobid=J --exact -w NODE -N1 -n1 --gres=gpu:K`): Slurm binds its GPUs, accounting sees
it, and `scancel J.S` stops it. An allocation the run makes holds a task per GPU on each node
(`--ntasks-per-node`), so that as many lane steps as it has GPUs run side by side; each lane's step takes an equal
share of the CPUs the job holds on its node (`--cpus-per-task`; the whole node's with `--exclusive` in extra_args).
Results never come from Slurm: the lanes' journals and archives carry them; Slurm is asked only whether the job still
runs and how it ended (`job_state`).

Every command is an argument list; the controller and the nodes need the Slurm client (`srun`, `scontrol`, ...).

    python -m trtsweep.fleet.slurm --release-when-gone JOB --controller-pid P [--controller-ticks T]

cancels the run's own allocation once its controller process is gone (started detached by the action plugin
trtsweep_slurm when it made the allocation): an interrupted or killed run leaves no allocation behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.lane.step import job_state

GRANTED = re.compile(r"Granted job allocation (\d+)")
# `scontrol show job -d -o`: one "Nodes=<hostlist> CPU_IDs=... Mem=... GRES=<gres>" group per node layout
NODE_LAYOUT = re.compile(r"\bNodes=(\S+) CPU_IDs=(\S+) Mem=\S+ GRES=(\S*)")
GPU_INDICES = re.compile(r"gpu(?::[^:(,]+)?:\d+\(IDX:([0-9,\-]+)\)")
TIMEOUT_S = 60.0  # a Slurm client command
ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE")  # fmt: skip


@dataclass(frozen=True)
class Node:
    """A node of the allocation, the job's GPUs on it (GRES indices) and how many of its CPUs the job holds there."""

    name: str
    gpus: tuple[int, ...]
    cpus: int = 0


@dataclass(frozen=True)
class Allocation:
    job_id: str
    state: str
    nodes: tuple[Node, ...]
    made: bool = False  # made by this run: released at its end unless kept


@dataclass(frozen=True)
class Request:
    """An allocation to make: `salloc --no-shell` with these (the inventory's `trtsweep_slurm.allocate`)."""

    nodes: int
    gpus_per_node: int
    partition: str | None = None
    account: str | None = None
    time: str | None = None  # Slurm's time format: minutes, HH:MM:SS, D-HH:MM:SS
    extra: tuple[str, ...] = ()  # more salloc options, as given (e.g. --constraint=h100)

    @staticmethod
    def from_inventory(value: Any) -> Request:
        """From `trtsweep_slurm.allocate`; one line naming the field for anything else."""
        where = "trtsweep_slurm.allocate"
        if not isinstance(value, Mapping):
            raise TrtsweepError(f"{where}: expected a mapping (nodes, gpus_per_node, partition, ...), got {value!r}")
        known = {"nodes", "gpus_per_node", "partition", "account", "time", "extra_args"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise TrtsweepError(f"{where}.{unknown[0]}: unknown; expected one of {', '.join(sorted(known))}")
        counts = {}
        for key in ("nodes", "gpus_per_node"):
            count = value.get(key, 1 if key == "nodes" else None)
            if not isinstance(count, int) or isinstance(count, bool) or count < (1 if key == "nodes" else 0):
                raise TrtsweepError(f"{where}.{key}: expected an integer >= {1 if key == 'nodes' else 0}, "
                                    f"got {count!r}")  # fmt: skip
            counts[key] = count
        extra = value.get("extra_args") or []
        if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
            raise TrtsweepError(f"{where}.extra_args: expected a list of salloc options, got {extra!r}")
        text = {k: value.get(k) for k in ("partition", "account", "time")}
        for key, item in text.items():
            if item is not None and not isinstance(item, str | int):
                raise TrtsweepError(f"{where}.{key}: expected a string, got {item!r}")
        return Request(counts["nodes"], counts["gpus_per_node"], *(None if v is None else str(v) for v in
                       text.values()), tuple(extra))  # fmt: skip


def _slurm(argv: Sequence[str], what: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise TrtsweepError(f"{what}: {argv[0]} not found (the Slurm client must be on PATH)") from exc
    except subprocess.TimeoutExpired as exc:
        raise TrtsweepError(f"{what}: {argv[0]} did not answer within {timeout:g} s") from exc
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise TrtsweepError(f"{what}: {lines[-1] if lines else f'{argv[0]} exited with status {done.returncode}'}")
    return done


def salloc_argv(request: Request, name: str) -> list[str]:
    """`salloc --no-shell` for the request, named `name` (squeue and sacct show it)."""
    argv = [
        "salloc",
        "--no-shell",
        f"--nodes={request.nodes}",
        f"--job-name={name}",
        f"--ntasks-per-node={max(1, request.gpus_per_node)}",
    ]  # a lane step (one CPU) per GPU at once
    if request.gpus_per_node:
        argv.append(f"--gres=gpu:{request.gpus_per_node}")
    for flag, value in (("--partition", request.partition), ("--account", request.account),
                        ("--time", request.time)):  # fmt: skip
        if value:
            argv.append(f"{flag}={value}")
    return [*argv, *request.extra]


def allocate(request: Request, name: str, timeout: float = 600.0) -> Allocation:
    """Make the allocation (waits until Slurm grants it, up to `timeout`; `--immediate` in extra_args to not wait);
    returns it described."""
    done = _slurm(salloc_argv(request, name), "salloc", timeout)
    granted = GRANTED.search(done.stderr + done.stdout)
    if granted is None:
        raise TrtsweepError(f"salloc: no job id in its answer: {(done.stderr or done.stdout).strip()[-200:]}")
    found = describe(granted.group(1))
    return Allocation(found.job_id, found.state, found.nodes, made=True)


def existing_job(value: Any, environ: Mapping[str, str] | None = None) -> str:
    """The job id to use: `trtsweep_slurm.job_id` (an id, or "env" for SLURM_JOB_ID: the run inside salloc /
    sbatch)."""
    env = os.environ if environ is None else environ
    if value == "env":
        if not env.get("SLURM_JOB_ID"):
            raise TrtsweepError("trtsweep_slurm.job_id: env, but SLURM_JOB_ID is not set (run inside salloc or sbatch)")
        return env["SLURM_JOB_ID"]
    if (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit()):
        return str(value)
    raise TrtsweepError(f"trtsweep_slurm.job_id: expected a job id or env, got {value!r}")


def describe(job_id: str) -> Allocation:
    """The job's state, nodes and GPU indices per node (`scontrol show job -d -o`)."""
    out = _slurm(["scontrol", "show", "job", "-d", "-o", job_id], f"job {job_id}").stdout
    state = re.search(r"\bJobState=(\S+)", out)
    nodes: list[Node] = []
    for hostlist, cpu_ids, gres in NODE_LAYOUT.findall(out):
        gpus = tuple(index for match in GPU_INDICES.findall(gres) for index in _indices(match))
        nodes += [Node(name, gpus, len(_indices(cpu_ids))) for name in hostnames(hostlist)]
    if state is None:
        raise TrtsweepError(f"job {job_id}: scontrol gave no JobState: {out.strip()[:200]}")
    return Allocation(job_id, state.group(1), tuple(nodes))


def hostnames(hostlist: str) -> list[str]:
    """The node names of a Slurm hostlist (n[1-3,5]) as `scontrol show hostnames` expands it."""
    if not re.search(r"[\[,]", hostlist):
        return [hostlist]
    return _slurm(["scontrol", "show", "hostnames", hostlist], "scontrol show hostnames").stdout.split()


def _indices(text: str) -> list[int]:
    """0-1,3 -> [0, 1, 3]."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out += list(range(int(first), int(last or first) + 1))
    return out


def release(job_id: str) -> None:
    """End the job (its steps with it)."""
    _slurm(["scancel", job_id], f"scancel {job_id}")


def settings(value: Any) -> dict[str, Any]:
    """The inventory's `trtsweep_slurm`: {job_id: N | env} (an allocation that exists) or {allocate: {...}} (the
    run's own), `keep` (leave the run's own allocation when the run ends); one line naming the field otherwise."""
    if not isinstance(value, Mapping):
        raise TrtsweepError(f"trtsweep_slurm: expected a mapping with job_id or allocate, got {value!r}")
    unknown = sorted(set(value) - {"job_id", "allocate", "keep"})
    if unknown:
        raise TrtsweepError(f"trtsweep_slurm.{unknown[0]}: unknown; expected job_id, allocate or keep")
    if ("job_id" in value) == ("allocate" in value):
        raise TrtsweepError("trtsweep_slurm: give job_id (an allocation that exists, or env) or allocate (the run's "
                            "own), one of them")  # fmt: skip
    if not isinstance(value.get("keep", False), bool):
        raise TrtsweepError(f"trtsweep_slurm.keep: expected true or false, got {value['keep']!r}")
    return dict(value)


def acquire(value: Any, name: str, check_mode: bool = False) -> Allocation:
    """The allocation the inventory names, or the run's own made now (not in check mode: an existing one is
    described, a new one only announced); a job that does not run (pending, ended) is refused in one line."""
    given = settings(value)
    if "allocate" in given:
        request = Request.from_inventory(given["allocate"])
        if check_mode:
            return Allocation("(to be made)", "PLANNED", (), made=True)
        return allocate(request, name)
    job = existing_job(given["job_id"])
    found = describe(job)
    if found.state != "RUNNING":
        raise TrtsweepError(f"job {job} is {found.state}: a sweep runs on a running allocation (squeue -j {job})")
    return found


def release_when_gone(job_id: str, controller: int, ticks: int | None, every_s: float = 1.0) -> int:
    """Keep the run's own allocation only as long as the run: when the controller process (`controller`, with its
    start `ticks`) is gone (the run ended, Ctrl-C, kill -9) and the job still runs, cancel it; return when the job is
    gone either way (the run's end released it)."""
    from trtsweep.common.procs import alive

    while job_state(job_id) not in (*ENDED, "GONE"):
        if not alive(controller, ticks):
            with contextlib.suppress(TrtsweepError):
                release(job_id)
            return 0
        time.sleep(every_s)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m trtsweep.fleet.slurm",
        description="release the run's own allocation when its controller is gone",
    )
    parser.add_argument("--release-when-gone", required=True, metavar="JOB_ID")
    parser.add_argument("--controller-pid", type=int, required=True)
    parser.add_argument("--controller-ticks", type=int)
    args = parser.parse_args(argv)
    return release_when_gone(args.release_when_gone, args.controller_pid, args.controller_ticks)


if __name__ == "__main__":
    sys.exit(main())
