#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: generate a Triton model repository (inflight_batcher_llm layout, or the llmapi layout)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_triton_repo
short_description: Generate and check a Triton TensorRT-LLM style model repository
description:
  - Renders C(preprocessing), C(tensorrt_llm), C(postprocessing), C(ensemble) and optionally
    C(tensorrt_llm_bls) from trtsweep's own templates, writes only files whose content changed, and checks
    the result (no placeholder left, every config.pbtxt parses with Triton's ModelConfig schema, ensemble
    steps wired to existing tensors).
  - Backend C(hf) serves an HF model with transformers in Triton's python backend; backend C(tensorrtllm)
    serves a trtllm-build engine with the TensorRT-LLM C++ backend, its config following C(trtllm_version).
  - With C(params.layout=llmapi) (the PyTorch flow) it writes the C(llmapi) layout instead, one python model
    C(tensorrt_llm) with C(1/model.yaml) (the LLM API arguments, checked against the release's LLM API, and
    C(triton_config)); parameters as C(trtsweep.triton.llmapi.LlmapiRepo).
options:
  dest:
    description: Directory of the model repository.
    type: path
    required: true
  params:
    description: Repository parameters (documented in C(trtsweep.triton.repository); defaults in
      C(trtsweep.triton.repository.DEFAULTS)); C(engine_dir) and C(tokenizer_dir) are required, and
      C(trtllm_version) for backend C(tensorrtllm). Cross-field rules (streaming, beams, engine limits from
      C(<engine_dir>/config.json)) fail the task with a one-line message naming the field.
    type: dict
    required: true
attributes:
  check_mode: {support: full}
  diff_mode: {support: full}
  idempotent: {support: full}
"""

EXAMPLES = r"""
- name: Generate the repository
  trtsweep_triton_repo:
    dest: /srv/trtsweep/points/p1/triton_repo
    params:
      backend: hf
      engine_dir: /models/SmolLM2-135M-Instruct
      tokenizer_dir: /models/SmolLM2-135M-Instruct
      triton_max_batch_size: 4
      decoupled_mode: true

- name: Generate the repository of a TensorRT-LLM 0.14 engine, with the BLS model
  trtsweep_triton_repo:
    dest: /srv/trtsweep/points/p2/triton_repo
    params:
      backend: tensorrtllm
      trtllm_version: 0.14.0
      engine_dir: /engines/Qwen2-14B-Instruct-Int4/2-gpu
      tokenizer_dir: /models/Qwen2-14B-Instruct
      triton_max_batch_size: 64
      decoupled_mode: true
      kv_cache_free_gpu_mem_fraction: 0.5
      bls: true
      accumulate_tokens: true

- name: The llmapi repository of a PyTorch-flow point (TensorRT-LLM 1.2)
  trtsweep_triton_repo:
    dest: /srv/trtsweep/points/p3/triton_repo
    params:
      layout: llmapi
      backend: tensorrtllm
      release: "1.2"
      model: /models/Qwen2-7B-Instruct-FP8
      options: {max_batch_size: 64, max_seq_len: 4096, tensor_parallel_size: 1, pipeline_parallel_size: 1}
      decoupled: true
      source_dir: /app/tensorrt_llm/triton_backend/all_models/llmapi/tensorrt_llm
"""

RETURN = r"""
changed_files:
  description: Files (relative to dest) written or, in check mode, that would be written.
  returned: always
  type: list
  elements: str
  sample: [tensorrt_llm/config.pbtxt]
params:
  description: The resolved parameters (defaults applied).
  returned: always
  type: dict
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={"dest": {"type": "path", "required": True}, "params": {"type": "dict", "required": True}},
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.triton import llmapi, repository

    params = module.params["params"]
    if params.get("layout") == "llmapi":  # the pytorch flow: one llmapi model, its LLM API options in model.yaml
        files = run_or_fail(module, lambda p: llmapi.render(llmapi.from_params(p)), params)
        resolved = params
    else:
        files = run_or_fail(module, repository.render, params)
        resolved = repository.resolve(params)
    result = repository.write(files, Path(module.params["dest"]), check_mode=module.check_mode)
    out = {
        "changed": bool(result.changed),
        "changed_files": result.changed,
        "params": resolved,
        "dest": module.params["dest"],
    }
    if module._diff and result.diffs:
        out["diff"] = result.diffs
    module.exit_json(**out)


if __name__ == "__main__":
    main()
