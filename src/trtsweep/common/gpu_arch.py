"""GPU architectures a point may need (`resources.gpu_arch`), known by the names nvidia-smi gives their GPUs: the
planner asks for one (a MoE backend whose kernels are Blackwell's: trtsweep.sweep.pytorch_axes), placement gives such
a point only hosts whose GPUs are of it (trtsweep.fleet.placement)."""

from __future__ import annotations

import re

ARCHS = {"sm100": re.compile(r"\bG?B(?:100|200|300)\b", re.IGNORECASE)}  # Blackwell (SM100 / SM103)
ARCH_NAMES = {"sm100": "B100, B200, GB200, B300, GB300"}


def has_arch(gpu_name: str, arch: str) -> bool:
    """Whether a GPU of this name (or a sweep's gpu_type) is of the architecture."""
    return bool(ARCHS[arch].search(gpu_name))
