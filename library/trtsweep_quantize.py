#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: make (or reuse) a TensorRT-LLM checkpoint of an HF model in a given precision."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_quantize
short_description: Convert or quantize an HF model into a TensorRT-LLM checkpoint (cached, resumable)
description:
  - Picks the tool for the precision, model family and TensorRT-LLM release (convert_checkpoint.py for
    fp16, bf16, int8_wo, int4_wo, int8_sq and INT8 KV cache; examples/quantization/quantize.py for fp8,
    int4_awq, w4a8_awq and FP8 KV cache), validates every flag against the release's accepted flags and
    fails with one line on an unsupported combination before anything runs.
  - The checkpoint goes to C(<cache_dir>/checkpoints/<family>-<precision>-tp<T>pp<P>-<hash>/), keyed by the
    content of every input (model and revision, precision, TP/PP, calibration data, tool options, tool
    version). A directory with the completion marker is reused (C(changed=false)); a half one left by a
    crash is removed and made again.
  - C(calib_data) (a prompts jsonl, C({"input", "output"}) per line) becomes a local calibration dataset the
    tool reads with C(--calib_dataset); without it the tool's default dataset is used.
  - The tool's output goes to a log file in the checkpoint directory. The Hugging Face token travels only
    by environment (C(hf_token) or the host's HF_TOKEN; C(-e HF_TOKEN) for a container) and is scrubbed
    from the log.
  - Check mode returns the command that would run and C(changed) from the marker.
options:
  family: {type: str, required: true, choices: [llama, qwen], description: "Model family (convert script)."}
  precision:
    type: str
    required: true
    choices: [fp16, bf16, fp8, int8_wo, int4_wo, int4_awq, int8_sq, w4a8_awq]
    description: Checkpoint precision.
  kv_cache_dtype: {type: str, choices: [int8, fp8], description: "Quantized KV cache (null keeps the dtype)."}
  dtype: {type: str, choices: [float16, bfloat16], default: float16, description: "Unquantized parts' dtype."}
  model_dir: {type: path, required: true, description: "HF model directory."}
  model_id: {type: str, description: "Model name for the cache key (e.g. the repo id); default the directory."}
  model_revision: {type: str, description: "Model revision for the cache key."}
  tp: {type: int, default: 1, description: "Tensor parallel size baked into the checkpoint."}
  pp: {type: int, default: 1, description: "Pipeline parallel size baked into the checkpoint."}
  trtllm_version: {type: str, required: true, description: "TensorRT-LLM release of the tools, e.g. 0.11.0."}
  calib_data: {type: path, description: "Prompts jsonl to calibrate on (default the tool's dataset)."}
  calib_size: {type: int, description: "Calibration samples (default the tool's)."}
  smoothquant_alpha: {type: float, default: 0.5, description: "SmoothQuant alpha for int8_sq."}
  awq_block_size: {type: int, default: 128, description: "AWQ block size for int4_awq / w4a8_awq."}
  extra_flags: {type: dict, default: {}, description: "More tool flags (flag -> value, true for a switch)."}
  hf_token: {type: str, no_log: true, description: "Hugging Face token (Vault); else HF_TOKEN of the host."}
  python: {type: str, default: python3, description: "Python that runs the example scripts."}
  trtllm_dir:
    type: str
    required: true
    description: TensorRT-LLM checkout holding examples/ (as the tools see it, e.g. inside the container).
  timeout: {type: float, description: "Seconds before the tool is killed (default none)."}
  results_dir: {type: path, description: "Point results directory: checkpoint.json and checkpoint.log go there."}
extends_documentation_fragment: [trtsweep_runtime]
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
"""

EXAMPLES = r"""
- name: FP8 checkpoint of Qwen2-7B for TP 2, calibrated on our prompts
  trtsweep_quantize:
    family: qwen
    precision: fp8
    kv_cache_dtype: fp8
    model_dir: /models/Qwen2-7B
    model_id: Qwen/Qwen2-7B
    tp: 2
    trtllm_version: 0.11.0
    trtllm_dir: /opt/tensorrtllm_backend/tensorrt_llm
    calib_data: /srv/data/prompts.jsonl
    runtime: container
    container_image: nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3
"""

RETURN = r"""
checkpoint_dir: {description: The checkpoint directory., returned: always, type: str}
command: {description: The command (argv) that ran or would run., returned: always, type: list, elements: str}
reused: {description: The checkpoint was complete already., returned: always, type: bool}
removed_partial: {description: A half checkpoint from an earlier crash was removed., returned: always, type: bool}
log_file: {description: The tool's log., returned: always, type: str}
duration_s: {description: Seconds the tool took (when it ran or from the marker)., returned: always, type: float}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_build_args import RUNTIME_ARGS, cache_dir, runtime
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "family": {"type": "str", "required": True, "choices": ["llama", "qwen"]},
            "precision": {
                "type": "str",
                "required": True,
                "choices": ["fp16", "bf16", "fp8", "int8_wo", "int4_wo", "int4_awq", "int8_sq", "w4a8_awq"],
            },
            "kv_cache_dtype": {"type": "str", "choices": ["int8", "fp8"]},
            "dtype": {"type": "str", "choices": ["float16", "bfloat16"], "default": "float16"},
            "model_dir": {"type": "path", "required": True},
            "model_id": {"type": "str"},
            "model_revision": {"type": "str"},
            "tp": {"type": "int", "default": 1},
            "pp": {"type": "int", "default": 1},
            "trtllm_version": {"type": "str", "required": True},
            "calib_data": {"type": "path"},
            "calib_size": {"type": "int"},
            "smoothquant_alpha": {"type": "float", "default": 0.5},
            "awq_block_size": {"type": "int", "default": 128},
            "extra_flags": {"type": "dict", "default": {}},
            "hf_token": {"type": "str", "no_log": True},
            "python": {"type": "str", "default": "python3"},
            "trtllm_dir": {"type": "str", "required": True},
            **RUNTIME_ARGS,
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.toolchain.commands import CheckpointSpec
    from trtsweep.toolchain.pipeline import prepare_checkpoint

    p = module.params
    spec = CheckpointSpec(
        family=p["family"],
        precision=p["precision"],
        version=p["trtllm_version"],
        model_dir=p["model_dir"],
        tp=p["tp"],
        pp=p["pp"],
        kv_cache_dtype=p["kv_cache_dtype"],
        dtype=p["dtype"],
        model_id=p["model_id"],
        model_revision=p["model_revision"],
        calib_data=p["calib_data"],
        calib_size=p["calib_size"],
        smoothquant_alpha=p["smoothquant_alpha"],
        awq_block_size=p["awq_block_size"],
        extra_flags=p["extra_flags"],
    )
    outcome = run_or_fail(
        module,
        prepare_checkpoint,
        spec,
        cache_dir(p),
        runtime(p, python=p["python"], trtllm_dir=p["trtllm_dir"]),
        results_dir=p["results_dir"],
        hf_token=p["hf_token"],
        check_mode=module.check_mode,
    )
    module.exit_json(
        changed=outcome.changed,
        checkpoint_dir=outcome.path,
        command=outcome.command,
        reused=outcome.reused,
        removed_partial=outcome.removed_partial,
        log_file=outcome.log_file,
        duration_s=outcome.entry.get("duration_s"),
    )


if __name__ == "__main__":
    main()
