#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: the PyTorch flow's checkpoint of an HF model (as it is, pre-quantized, or ModelOpt-quantized)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_modelopt
short_description: The HF checkpoint a PyTorch-flow point serves, quantized with ModelOpt when needed (cached)
description:
  - bf16 / fp16 serve the downloaded model as it is. A model that already carries the ModelOpt quantization the
    point asks for (C(hf_quant_config.json), e.g. a pre-quantized FP8 checkpoint from the hub) is served as it is;
    one that carries another fails in one line naming both.
  - Otherwise ModelOpt's C(examples/llm_ptq/hf_ptq.py) of the release's ModelOpt exports an HF checkpoint
    (fp8, nvfp4, int4_awq, w4a8_awq; fp8 KV cache) into C(<cache_dir>/checkpoints/modelopt-<precision>-<hash>/),
    keyed by every input (model and revision, precision, KV cache, calibration data, options, releases); a
    complete one is reused, a half one removed and made again. Every flag is checked against the recorded
    argument definitions (C(trtsweep.toolchain.llmapi.modelopt), C(llmapi/modelopt/<release>.json)).
  - C(calib_data) (the benchmark's prompts) becomes the calibration dataset; without it ModelOpt's default is used.
  - The Hugging Face token travels only by environment and is scrubbed from the log. Check mode returns the command.
options:
  precision:
    type: str
    required: true
    choices: [bf16, fp16, fp8, nvfp4, int4_awq, w4a8_awq]
    description: Precision of the served checkpoint.
  kv_cache_dtype: {type: str, choices: [fp8], description: "FP8 KV cache (null keeps the dtype)."}
  model_dir: {type: path, required: true, description: "HF model directory."}
  model_id: {type: str, description: "Model name for the cache key (e.g. the repo id); default the directory."}
  model_revision: {type: str, description: "Model revision for the cache key."}
  trtllm_version: {type: str, required: true, description: "TensorRT-LLM release, e.g. 1.2.0 (picks ModelOpt's)."}
  modelopt_dir: {type: str, description: "ModelOpt checkout holding examples/llm_ptq (needed to quantize)."}
  python: {type: str, default: python3, description: "Python with modelopt installed."}
  calib_data: {type: path, description: "Prompts jsonl to calibrate on (default ModelOpt's dataset)."}
  calib_size: {type: int, description: "Calibration samples."}
  extra_flags: {type: dict, default: {}, description: "More hf_ptq.py flags (flag -> value, true for a switch)."}
  hf_token: {type: str, no_log: true, description: "Hugging Face token (Vault); else HF_TOKEN of the host."}
  timeout: {type: float, description: "Seconds before the tool is killed (default none)."}
  results_dir: {type: path, description: "Point results directory: checkpoint.json and checkpoint.log go there."}
extends_documentation_fragment: [trtsweep_runtime]
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
"""

EXAMPLES = r"""
- name: NVFP4 checkpoint of Qwen2-7B for TensorRT-LLM 1.2, calibrated on our prompts
  trtsweep_modelopt:
    precision: nvfp4
    model_dir: /models/Qwen2-7B-Instruct
    model_id: Qwen/Qwen2-7B-Instruct
    trtllm_version: 1.2.0
    modelopt_dir: /opt/Model-Optimizer
    calib_data: /srv/data/prompts.jsonl
    runtime: container
    container_image: nvcr.io/nvidia/tensorrt-llm/release:1.2.0
"""

RETURN = r"""
checkpoint_dir:
  description: The checkpoint to serve (the model directory itself when nothing is made).
  returned: always
  type: str
command:
  description: The command (argv) that ran or would run (empty when nothing runs).
  returned: always
  type: list
  elements: str
reused: {description: Nothing was made (complete already, or served as downloaded)., returned: always, type: bool}
log_file: {description: The tool's log., returned: always, type: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_build_args import RUNTIME_ARGS, cache_dir, runtime
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "precision": {
                "type": "str",
                "required": True,
                "choices": ["bf16", "fp16", "fp8", "nvfp4", "int4_awq", "w4a8_awq"],
            },
            "kv_cache_dtype": {"type": "str", "choices": ["fp8"]},
            "model_dir": {"type": "path", "required": True},
            "model_id": {"type": "str"},
            "model_revision": {"type": "str"},
            "trtllm_version": {"type": "str", "required": True},
            "modelopt_dir": {"type": "str"},
            "python": {"type": "str", "default": "python3"},
            "calib_data": {"type": "path"},
            "calib_size": {"type": "int"},
            "extra_flags": {"type": "dict", "default": {}},
            "hf_token": {"type": "str", "no_log": True},
            **RUNTIME_ARGS,
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.sweep.flows import release_key
    from trtsweep.toolchain.pipeline import ModeloptSpec, prepare_modelopt_checkpoint

    p = module.params
    major, minor = run_or_fail(module, release_key, p["trtllm_version"])
    spec = ModeloptSpec(
        release=f"{major}.{minor}", precision=p["precision"], model_dir=p["model_dir"],
        modelopt_dir=p["modelopt_dir"] or "", kv_cache_dtype=p["kv_cache_dtype"], model_id=p["model_id"],
        model_revision=p["model_revision"], calib_data=p["calib_data"], calib_size=p["calib_size"],
        extra_flags=p["extra_flags"],
    )  # fmt: skip
    where = runtime(p, python=p["python"])
    outcome = run_or_fail(
        module, prepare_modelopt_checkpoint, spec, cache_dir(p), where,
        results_dir=p["results_dir"], hf_token=p["hf_token"], check_mode=module.check_mode,
    )  # fmt: skip
    module.exit_json(changed=outcome.changed, checkpoint_dir=outcome.path, command=outcome.command,
                     reused=outcome.reused, log_file=outcome.log_file)  # fmt: skip


if __name__ == "__main__":
    main()
