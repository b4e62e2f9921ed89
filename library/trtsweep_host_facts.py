#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: a host's GPUs (nvidia-smi or declared) and its preflight problems, changing nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_host_facts
short_description: Discover a host's GPUs and check what its sweep points need before any point runs
description:
  - GPUs from C(nvidia-smi --query-gpu=index,name,memory.total,memory.used), or from O(declared_gpus) where
    discovery can't run. A GPU with more than O(busy_threshold_mb) in use is reported busy.
  - Preflight gives one line per problem in RV(problems) (the module itself does not fail on them) about the Python
    version, free disk in O(cache_dir), the Triton runtime and the TensorRT-LLM version the points declare.
options:
  declared_gpus: {type: raw, description: "A GPU count or a list of {name, memory_mb}; skips discovery."}
  gpu_indices:
    type: list
    elements: int
    description: >-
      Only these GPUs (by the node's index) are the run's (on Slurm: the job's GRES indices on the node; a session
      adopted into a job whose devices are constrained sees them alone, counted from 0: they are given these indices).
  nvidia_smi: {type: str, default: nvidia-smi, description: "nvidia-smi to run."}
  busy_threshold_mb: {type: int, default: 1024, description: "A GPU using more memory than this is busy."}
  cache_dir: {type: path, required: true, description: "trtsweep cache directory on the host (disk check)."}
  min_free_gb: {type: float, default: 0, description: "Free GiB the host's checkpoints/engines need there."}
  runtime: {type: str, default: local, description: "Triton runtime the points use (local, native, container)."}
  tritonserver: {type: str, default: tritonserver, description: "tritonserver of the native runtime."}
  docker: {type: str, default: docker, description: "docker CLI of the container runtime."}
  container_image: {type: str, description: "Image of the container runtime."}
  trtllm_version: {type: str, description: "TensorRT-LLM version the points declare (checked when set)."}
  trtllm_version_declared:
    type: str
    description: "The host group's declared TensorRT-LLM (inventory trtsweep_trtllm_version): must be the points'."
  trtllm_image: {type: str, description: "The sweep's TensorRT-LLM image; a tag naming a release must be the points'."}
  trtllm_python: {type: str, default: python3, description: "Python of the TensorRT-LLM install."}
  servers:
    type: list
    elements: str
    default: [triton]
    description: "The servers the sweep's points use (triton, trtllm-serve): Triton's binary or image only for Triton."
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: GPUs and preflight
  trtsweep_host_facts:
    cache_dir: ~/.cache/trtsweep
    runtime: native
    min_free_gb: 200
    trtllm_version: "0.11.0"
"""

RETURN = r"""
gpus: {description: "GPUs: index, name, memory_mb, used_mb.", returned: always, type: list, elements: dict}
gpu_source: {description: "nvidia-smi or declared.", returned: always, type: str}
gpu_note: {description: "Why discovery found no GPUs, if so.", returned: always, type: str}
busy_gpus: {description: "Indices of GPUs already in use.", returned: always, type: list, elements: int}
problems: {description: "One line per preflight problem; empty when the host is ready.", returned: always, type: list}
found: {description: "Free bytes, python, TensorRT-LLM version found.", returned: always, type: dict}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import TrtsweepError, require_trtsweep


def main():
    module = AnsibleModule(
        argument_spec={
            "declared_gpus": {"type": "raw"},
            "gpu_indices": {"type": "list", "elements": "int"},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "busy_threshold_mb": {"type": "int", "default": 1024},
            "cache_dir": {"type": "path", "required": True},
            "min_free_gb": {"type": "float", "default": 0.0},
            "runtime": {"type": "str", "default": "local"},
            "tritonserver": {"type": "str", "default": "tritonserver"},
            "docker": {"type": "str", "default": "docker"},
            "container_image": {"type": "str"},
            "trtllm_version": {"type": "str"},
            "trtllm_version_declared": {"type": "str"},
            "trtllm_image": {"type": "str"},
            "trtllm_python": {"type": "str", "default": "python3"},
            "servers": {"type": "list", "elements": "str", "default": ["triton"]},
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.fleet import hostfacts

    p = module.params
    try:
        if p["declared_gpus"] is not None:
            gpus, source, note = hostfacts.declared_gpus(p["declared_gpus"]), "declared", ""
        else:
            gpus, why = hostfacts.discover_gpus(p["nvidia_smi"])
            source, note = "nvidia-smi", why or ""
        if p["gpu_indices"] is not None:  # only these are the run's (on Slurm: the job's GRES indices on the node)
            gpus = hostfacts.job_gpus(gpus, p["gpu_indices"])
    except TrtsweepError as exc:
        module.fail_json(msg=str(exc))
    problems, found = hostfacts.preflight(
        Path(p["cache_dir"]), p["min_free_gb"], p["runtime"], p["tritonserver"], p["docker"],
        p["container_image"], p["trtllm_version"], p["trtllm_python"], p["trtllm_version_declared"], p["trtllm_image"],
        p["servers"],
    )  # fmt: skip
    module.exit_json(
        changed=False,
        gpus=gpus,
        gpu_source=source,
        gpu_note=note,
        busy_gpus=hostfacts.busy(gpus, p["busy_threshold_mb"]),
        problems=problems,
        found=found,
    )


if __name__ == "__main__":
    main()
