"""Test double of NVML (`pynvml`, from nvidia-ml-py; tests only: the test machines have no GPU driver).

Put this folder first on PYTHONPATH. FAKE_GPU_COUNT GPUs (as the nvidia-smi double lists them). A GPU's compute
processes are what the driver would report: every process on this machine whose environment gives it that GPU,
through NVIDIA_VISIBLE_DEVICES (what docker's --gpus sets inside a container: the container's processes, as the host
sees their pids) or CUDA_VISIBLE_DEVICES (a process started natively), when it IS a server (its program is
tritonserver, a python-backend stub or trtllm-serve, or it runs python -m trtsweep.serve.hf_openai: not a launcher
such as `docker run ... tritonserver` that names one): read from /proc, so a process tree walked from the wrong root
misses them as it would on a GPU host. Telemetry reads return fixed plausible values.

Tests run side by side on one machine, each its own "GPU host": where the caller's environment sets
FAKE_GPU_OWNER, a native process (CUDA_VISIBLE_DEVICES) counts only if its environment has the same owner (another
test's server is on another machine's GPUs); a container's processes (NVIDIA_VISIBLE_DEVICES) count as before.

On the Slurm test cluster (tests/slurm/cluster.py) the GPUs are device nodes: FAKE_GPU_DEVICES names their folder
(`{node}` is replaced by SLURMD_NODENAME) and the driver shows this process those it may open (its Slurm step's
cgroup denies the others with EPERM), counted from 0 in their order, each with a UUID from its device number;
`cuda_selects` is what CUDA in a process with a given CUDA_VISIBLE_DEVICES would run on there.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NamedTuple

NVML_CLOCK_SM = 1
SERVERS = ("tritonserver", "triton_python_backend_stub", "trtllm-serve")  # programs holding CUDA contexts
MODULES = ("trtsweep.serve.hf_openai",)  # python -m <module> servers


class NVMLError(Exception):
    """NVML's error type."""


class _Process(NamedTuple):
    pid: int
    usedGpuMemory: int


class _Utilization(NamedTuple):
    gpu: int
    memory: int


class _Memory(NamedTuple):
    total: int
    used: int
    free: int


def _devices() -> list[Path] | None:
    """The device nodes this process may open (FAKE_GPU_DEVICES), None when the GPUs are counted (FAKE_GPU_COUNT)."""
    folder = os.environ.get("FAKE_GPU_DEVICES")
    if not folder:
        return None
    found = []
    for node in sorted(Path(folder.replace("{node}", os.environ.get("SLURMD_NODENAME", ""))).glob("nvidia*")):
        try:
            os.close(os.open(node, os.O_RDONLY))
        except OSError as exc:
            if exc.errno == errno.EPERM:  # the cgroup's word: not this process's GPU
                continue
        found.append(node)  # opened, or ENXIO: allowed, no driver behind it
    return found


def _count() -> int:
    devices = _devices()
    return len(devices) if devices is not None else int(os.environ.get("FAKE_GPU_COUNT", "0"))


def cuda_selects(visible: str) -> list[str]:
    """The device nodes CUDA would run on with CUDA_VISIBLE_DEVICES=`visible` in this process (indices count the GPUs
    the driver shows it; UUIDs name them wherever they are counted); an entry it cannot resolve ends the list there,
    as CUDA's does (no GPU from it on)."""
    devices = _devices() or []
    uuids = [nvmlDeviceGetUUID(i) for i in range(len(devices))]
    chosen = []
    for entry in (e.strip() for e in visible.split(",") if e.strip()):
        index = int(entry) if entry.isdigit() else (uuids.index(entry) if entry in uuids else len(devices))
        if index >= len(devices):
            break
        chosen.append(str(devices[index]))
    return chosen


def nvmlInit() -> None:
    if _count() == 0:
        raise NVMLError("NVML double: FAKE_GPU_COUNT is 0 (no driver)")


def nvmlShutdown() -> None:
    return None


def nvmlDeviceGetCount() -> int:
    return _count()


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if not 0 <= index < _count():
        raise NVMLError(f"NVML double: no GPU {index}")
    return index


def nvmlDeviceGetUUID(handle: int) -> str:
    devices = _devices()
    if devices is not None:  # from the device number: the same GPU has the same UUID wherever it is counted
        number = devices[handle].stat().st_rdev
        return f"GPU-{os.major(number):08x}-{os.minor(number):04x}-0000-0000-000000000000"
    return f"GPU-0000000{handle}"


def nvmlDeviceGetHandleByUUID(uuid: str) -> int:
    found = [i for i in range(_count()) if nvmlDeviceGetUUID(i) == uuid]
    if not found:
        raise NVMLError(f"NVML double: no GPU {uuid}")
    return found[0]


def nvmlDeviceGetName(handle: int) -> str:
    return "NVIDIA H100 80GB HBM3"


def _given(pid: str) -> tuple[set[str], list[str]]:
    """(the GPU indices a process's environment gives it on the caller's "host", its argv)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return set(), []
    variables = dict(entry.decode(errors="replace").partition("=")[::2] for entry in environ if entry)
    owner = os.environ.get("FAKE_GPU_OWNER")
    native = "NVIDIA_VISIBLE_DEVICES" not in variables
    if owner and native and variables.get("FAKE_GPU_OWNER") != owner:
        return set(), argv  # another test's process: another machine's GPUs
    found: set[str] = set()
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        found |= {v.strip() for v in variables.get(name, "").split(",") if v.strip()}
    return found, argv


def _is_server(argv: list[str]) -> bool:
    if not argv:
        return False
    if Path(argv[0]).name in SERVERS:
        return True
    # `python -m <server module>` itself, not a launcher (a supervisor, `docker run`) whose argv names one
    return Path(argv[0]).name.startswith("python") and argv[1:2] == ["-m"] and argv[2:3] != [] and argv[2] in MODULES


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[_Process]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            given, argv = _given(entry.name)
            if {str(handle), nvmlDeviceGetUUID(handle)} & given and _is_server(argv):  # by index or by UUID
                out.append(_Process(int(entry.name), 512 * 2**20))
    return out


def nvmlDeviceGetUtilizationRates(handle: int) -> _Utilization:
    return _Utilization(50, 20)


def nvmlDeviceGetMemoryInfo(handle: int) -> _Memory:
    return _Memory(80 * 2**30, 2**30, 79 * 2**30)


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    return 300_000


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    return 1_000_000


def nvmlDeviceGetClockInfo(handle: int, clock: int) -> int:
    return 1980
