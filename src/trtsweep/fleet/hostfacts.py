"""Host facts and preflight: the GPUs a host offers and what would stop its points before they start.

GPUs come from `nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits`,
or from the inventory (`trtsweep_gpus`) where discovery can't run; a GPU whose memory is already in use
above a threshold is *busy* and left out of placement. Preflight gives one line per problem: Python,
free disk in the cache, the Triton runtime the host's points need, the TensorRT-LLM version.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.runtime import IMAGE_KINDS
from trtsweep.runtime import preflight as runtime_preflight
from trtsweep.toolchain.versions import same_release

NVIDIA_SMI_QUERY = ["--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader,nounits"]
PYTHON_RANGE = ((3, 10), (3, 13))
VERSION_PROBE = "import importlib.metadata as m; print(m.version('tensorrt_llm'))"


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """Rows of the nvidia-smi query above -> [{index, name, memory_mb, used_mb}]."""
    gpus = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4:
            raise TrtsweepError(f"nvidia-smi line {number}: expected 4 fields, got {line!r}")
        try:
            gpus.append(
                {"index": int(fields[0]), "name": fields[1], "memory_mb": int(fields[2]), "used_mb": int(fields[3])}
            )
        except ValueError as exc:
            raise TrtsweepError(f"nvidia-smi line {number}: {line!r} ({exc})") from exc
    return gpus


def discover_gpus(nvidia_smi: str = "nvidia-smi") -> tuple[list[dict[str, Any]], str | None]:
    """(GPUs, None) from nvidia-smi, or ([], why not) on a host without it (a CPU host has 0 GPUs)."""
    if shutil.which(nvidia_smi) is None:
        return [], f"{nvidia_smi} not found: no GPUs"
    try:
        out = subprocess.run([nvidia_smi, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"{nvidia_smi} failed: {exc}"
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        return [], f"{nvidia_smi} exited {out.returncode}: {lines[-1] if lines else ''}"
    return parse_nvidia_smi(out.stdout), None


def job_gpus(found: list[dict[str, Any]], indices: list[int]) -> list[dict[str, Any]]:
    """The GPUs nvidia-smi `found` that are the Slurm job's (`indices`: its GRES indices on the node), by the node's
    index. A session the site adopted into the job (pam_slurm_adopt, with devices constrained by cgroup) sees the
    job's GPUs alone, counted from 0 in the node's order: there each is given the node's index of its place."""
    listed = {gpu["index"] for gpu in found}
    if set(indices) <= listed:
        return [gpu for gpu in found if gpu["index"] in set(indices)]
    if len(found) == len(indices):  # the job's GPUs alone, counted from 0 (a constrained session)
        ordered = sorted(found, key=lambda gpu: gpu["index"])
        return [{**gpu, "index": index} for gpu, index in zip(ordered, sorted(indices), strict=True)]
    raise TrtsweepError(f"nvidia-smi here lists GPU(s) {sorted(listed)}; the Slurm job holds GPU(s) {sorted(indices)} "
                        "on this node: neither every GPU of the node nor the job's alone")  # fmt: skip


def declared_gpus(value: Any) -> list[dict[str, Any]]:
    """The inventory's `trtsweep_gpus`: a count, or a list of {name, memory_mb[, index, used_mb]}."""
    if isinstance(value, bool) or value is None:
        raise TrtsweepError(f"trtsweep_gpus: expected a GPU count or a list of {{name, memory_mb}}, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise TrtsweepError(f"trtsweep_gpus: expected a count >= 0, got {value}")
        return [{"index": i, "name": "declared", "memory_mb": 0, "used_mb": 0} for i in range(value)]
    if not isinstance(value, list):
        raise TrtsweepError(f"trtsweep_gpus: expected a GPU count or a list, got {type(value).__name__}")
    gpus = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise TrtsweepError(f"trtsweep_gpus[{i}]: expected {{name: ..., memory_mb: N}}, got {entry!r}")
        try:
            gpus.append(
                {
                    "index": int(entry.get("index", i)),
                    "name": entry["name"],
                    "memory_mb": int(entry.get("memory_mb", 0)),
                    "used_mb": int(entry.get("used_mb", 0)),
                }
            )
        except (TypeError, ValueError) as exc:
            raise TrtsweepError(f"trtsweep_gpus[{i}]: memory_mb/index/used_mb must be integers ({exc})") from exc
    return gpus


def busy(gpus: list[dict[str, Any]], threshold_mb: int) -> list[int]:
    return [g["index"] for g in gpus if g["used_mb"] > threshold_mb]


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem that holds `path` (or its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def _python_problem() -> str | None:
    (low, high), here = PYTHON_RANGE, sys.version_info[:2]
    if not low <= here <= high:
        return f"python {here[0]}.{here[1]} at {sys.executable}: trtsweep needs {low[0]}.{low[1]}-{high[0]}.{high[1]}"
    return None


def _runtime_problem(runtime: str, tritonserver: str, docker: str, image: str | None,
                     servers: Sequence[str] = ("triton",), trtllm_image: str | None = None) -> str | None:  # fmt: skip
    """What the runtime lacks for the sweep's `servers` (Triton's binary and image only where Triton serves)."""
    triton = "triton" in servers
    if runtime == "local":
        if triton and importlib.util.find_spec("pytriton") is None:
            return "runtime local: nvidia-pytriton is not in the trtsweep venv (fleet_prepare_extras: [local])"
    elif runtime == "native":
        if triton and shutil.which(tritonserver) is None:
            return f"runtime native: {tritonserver} not found on PATH"
    elif runtime in IMAGE_KINDS:  # what the runtime itself needs here (trtsweep.runtime), then the sweep's images
        return runtime_preflight(runtime, docker) or image_problem(runtime, servers, image, trtllm_image)
    else:
        return f"runtime {runtime!r}: expected local, native, container or pyxis"
    return None


def image_problem(runtime: str, servers: Sequence[str], image: str | None, trtllm_image: str | None) -> str | None:
    """The image the container runtime lacks for the sweep's `servers` (a Triton image for Triton points; for
    trtllm-serve points the sweep's TensorRT-LLM image, else the Triton one); None elsewhere. Read from settings
    alone: the run's preflight and `trtsweep plan -i` alike."""
    if runtime not in IMAGE_KINDS:
        return None
    if "triton" in servers and not image:
        return f"runtime {runtime}: no image (trtsweep_triton_container_image) for the sweep's Triton points"
    if not (image or trtllm_image):
        return (f"runtime {runtime}: no image for the sweep's trtllm-serve points (trtllm.container_image, or "
                "trtsweep_triton_container_image)")  # fmt: skip
    return None


def container_images(runtime: str, image: str | None, trtllm_image: str | None) -> list[str]:
    """The images whose tags name a TensorRT-LLM release the run uses (the container and pyxis runtimes' only)."""
    return [i for i in (image, trtllm_image) if i and runtime in IMAGE_KINDS]


def trtllm_version(python: str, timeout_s: float = 120) -> tuple[str | None, str | None]:
    """(version, None) of the tensorrt_llm package installed for `python`, or (None, why not)."""
    try:
        out = subprocess.run([python, "-c", VERSION_PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python}: {exc}"
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"exit {out.returncode}"
    return out.stdout.strip(), None


def image_tag_version(image: str) -> str | None:
    """The TensorRT-LLM release an image's tag names (nvcr.io/nvidia/tensorrt-llm/release:1.2.0 -> 1.2.0), None
    when the tag names none (tritonserver:25.10-trtllm-python-py3 says Triton's release, not TensorRT-LLM's)."""
    from trtsweep.toolchain.versions import VERSION_RE

    name = image.rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name else ""
    return tag.lstrip("v") if tag and VERSION_RE.match(tag) and "." in tag else None


def version_problems(wanted: str | None, declared: str | None, images: list[str]) -> list[str]:
    """The host group's declared TensorRT-LLM (trtsweep_trtllm_version) and the images' tags against the version the
    sweep's points need, compared as releases (`build.versions.same_release`: 1.2 = 1.2.0 = v1.2.0, but a release
    candidate 1.2.0rc8 is not 1.2.0): a host of another release takes none of its points."""
    if not wanted:
        return []
    problems = []
    if declared and not same_release(declared, wanted):
        problems.append(f"this host declares TensorRT-LLM {declared} (trtsweep_trtllm_version); the sweep's points "
                        f"need {wanted}")  # fmt: skip
    for image in images:
        tagged = image_tag_version(image)
        if tagged is not None and not same_release(tagged, wanted):
            problems.append(f"image {image} is TensorRT-LLM {tagged}; the sweep's points need {wanted}")
    return problems


def preflight(
    cache_dir: Path,
    min_free_gb: float,
    runtime: str,
    tritonserver: str = "tritonserver",
    docker: str = "docker",
    container_image: str | None = None,
    trtllm_version_wanted: str | None = None,
    trtllm_python: str = "python3",
    trtllm_version_declared: str | None = None,
    trtllm_image: str | None = None,
    servers: Sequence[str] = ("triton",),
) -> tuple[list[str], dict[str, Any]]:
    """(problems, what was found): one line per problem, nothing changed on the host; `servers`: those the sweep's
    points use (triton, trtllm-serve)."""
    runtime_problem = _runtime_problem(runtime, tritonserver, docker, container_image, servers, trtllm_image)
    problems = [p for p in (_python_problem(), runtime_problem) if p]
    free = free_bytes(cache_dir)
    if free < min_free_gb * 2**30:
        problems.append(
            f"disk: {free / 2**30:.1f} GiB free at {cache_dir}, the planned checkpoints/engines need "
            f"{min_free_gb:g} GiB (trtsweep_min_free_gb)"
        )
    found: dict[str, Any] = {"free_bytes": free, "python": sys.executable, "trtllm_version": None}
    images = container_images(runtime, container_image, trtllm_image)
    problems += version_problems(trtllm_version_wanted, trtllm_version_declared, images)
    if trtllm_version_wanted and runtime not in ("container", "pyxis"):
        version, why = trtllm_version(trtllm_python)
        found["trtllm_version"] = version
        if version is None:
            problems.append(f"tensorrt_llm: not importable by {trtllm_python} ({why}); need {trtllm_version_wanted}")
        elif not same_release(version, trtllm_version_wanted):
            problems.append(f"tensorrt_llm {version} on this host; the sweep's points declare {trtllm_version_wanted}")
    return problems, found
