# Copyright: trtsweep contributors
# Apache-2.0
"""Documentation of the options that say where a TensorRT-LLM tool runs (module_utils/trtsweep_build_args.py's
RUNTIME_ARGS), shared by trtsweep_quantize, trtsweep_modelopt and trtsweep_trtllm_build."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  runtime: {type: str, choices: [native, container], default: native, description: "Where the tool runs."}
  container_image: {type: str, description: "TensorRT-LLM image for runtime=container (docker run --rm)."}
  container_name: {type: str, description: "Running container to docker exec into instead of an image."}
  docker: {type: str, default: docker, description: "docker CLI."}
  gpus: {type: str, default: all, description: "docker --gpus value."}
  mounts: {type: list, elements: path, default: [], description: "More host paths mounted at the same path."}
  env: {type: list, elements: str, default: [HF_TOKEN], description: "Environment names passed into the container."}
  cache_dir: {type: path, description: "trtsweep cache directory (default TRTSWEEP_CACHE or ~/.cache/trtsweep)."}
"""
