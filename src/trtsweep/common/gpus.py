"""A GPU as trtsweep names it to a command: its index on the host (NVML's and nvidia-smi's count, PCI order) or its
UUID (`GPU-<hex>`: the same name wherever it is counted; inside a Slurm step that constrains devices the step's GPUs
are counted from 0 again, and a container or an overlapping step counts its own).
"""

from __future__ import annotations

from typing import Any

from trtsweep.errors import TrtsweepError

Gpu = int | str  # an index, or a UUID


def parse(text: str, what: str) -> list[Gpu]:
    """Comma-separated distinct GPU indices (>= 0) or UUIDs ("0,1", "GPU-8c3e...,GPU-1f0a..."); refused in one line
    naming `what` otherwise."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    gpus: list[Gpu] = [int(part) if part.isdigit() else part for part in parts]
    if not gpus or len(set(gpus)) != len(gpus) or any(isinstance(g, str) and not g.startswith("GPU-") for g in gpus):
        raise TrtsweepError(f"{what}: expected distinct GPU indices like 0,1 or UUIDs like GPU-8c3e...; got {text!r}")
    return gpus


def handle(nvml: Any, gpu: Gpu) -> Any:
    """The NVML handle of `gpu` (by UUID or by index) in an initialised NVML session."""
    return nvml.nvmlDeviceGetHandleByUUID(gpu) if isinstance(gpu, str) else nvml.nvmlDeviceGetHandleByIndex(gpu)
