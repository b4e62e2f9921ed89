# Copyright: trtsweep contributors
# Apache-2.0
"""Shared by trtsweep_quantize and trtsweep_trtllm_build: the options that say where the TRT-LLM tools run
(natively or in the TRT-LLM container) and the Runtime they make."""

from __future__ import annotations

RUNTIME_ARGS = {
    "runtime": {"type": "str", "choices": ["native", "container"], "default": "native"},
    "container_image": {"type": "str"},
    "container_name": {"type": "str"},
    "docker": {"type": "str", "default": "docker"},
    "gpus": {"type": "str", "default": "all"},
    "mounts": {"type": "list", "elements": "path", "default": []},
    "env": {"type": "list", "elements": "str", "default": ["HF_TOKEN"]},
    "timeout": {"type": "float"},
    "cache_dir": {"type": "path"},
    "results_dir": {"type": "path"},
}


def runtime(params, **tools):
    """The trtsweep Runtime for the module's parameters; ``tools`` are python / trtllm_dir / trtllm_build."""
    from trtsweep.toolchain.runner import Runtime

    return Runtime.from_params(params, **tools)


def cache_dir(params):
    """cache_dir, else trtsweep's cache directory of the host."""
    from pathlib import Path

    from trtsweep.common.paths import cache_dir as default

    return Path(params["cache_dir"]) if params["cache_dir"] else default()
