#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: build (or reuse) a TensorRT-LLM engine from a checkpoint with trtllm-build."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_trtllm_build
short_description: Build a TensorRT-LLM engine with trtllm-build (version-aware, cached, resumable)
description:
  - Assembles the trtllm-build command for the TensorRT-LLM release (C(--max_seq_len) from 0.11, else
    C(--max_output_len); C(--kv_cache_type paged) from 0.13, else C(--paged_kv_cache enable); plugin C(auto)
    from 0.11, else the dtype), validates every flag, including C(extra_flags), against the release's
    accepted flags and choices, and fails with one line naming a bad flag before anything runs.
  - The engine goes to C(<cache_dir>/engines/<checkpoint>-bs<B>-isl<I>-seq<S>-<hash>/), keyed by the
    checkpoint and every build option; a complete one is reused (C(changed=false)), a half one removed and
    built again. The engine's config.json is checked against the request (TP/PP, batch size, lengths).
  - The tool's output goes to a log file in the engine directory; with C(results_dir) the command, build
    time, engine size and the log are recorded there (C(trtllm_build.json), C(trtllm_build.log)).
  - Check mode returns the command that would run and C(changed) from the marker.
options:
  checkpoint_dir: {type: path, required: true, description: "Checkpoint made by trtsweep_quantize."}
  trtllm_version: {type: str, required: true, description: "TensorRT-LLM release of trtllm-build, e.g. 0.11.0."}
  tp: {type: int, default: 1, description: "Tensor parallel size of the checkpoint (checked in the engine)."}
  pp: {type: int, default: 1, description: "Pipeline parallel size of the checkpoint (checked in the engine)."}
  dtype: {type: str, choices: [float16, bfloat16], default: float16, description: "Checkpoint dtype (plugin auto)."}
  max_batch_size: {type: int, required: true, description: "--max_batch_size."}
  max_input_len: {type: int, required: true, description: "--max_input_len."}
  max_output_len: {type: int, required: true, description: "Output tokens; max_seq_len = input + output."}
  max_seq_len: {type: int, description: "--max_seq_len (default max_input_len + max_output_len)."}
  max_num_tokens: {type: int, description: "--max_num_tokens (default the tool's)."}
  gemm_plugin: {type: str, default: auto, description: "--gemm_plugin (dtype, auto or disable)."}
  gpt_attention_plugin: {type: str, default: auto, description: "--gpt_attention_plugin (dtype, auto, disable)."}
  paged_kv_cache: {type: bool, default: true, description: "Paged KV cache (else continuous)."}
  remove_input_padding: {type: bool, default: true, description: "--remove_input_padding."}
  context_fmha: {type: bool, default: true, description: "--context_fmha."}
  use_fp8_context_fmha: {type: bool, description: "--use_fp8_context_fmha (default the tool's)."}
  multiple_profiles: {type: bool, description: "--multiple_profiles (0.10+; default the tool's)."}
  workers: {type: int, default: 1, description: "--workers (ranks built in parallel)."}
  extra_flags: {type: dict, default: {}, description: "More trtllm-build flags (flag -> value, true for a switch)."}
  trtllm_build: {type: str, default: trtllm-build, description: "trtllm-build command."}
  timeout: {type: float, description: "Seconds before trtllm-build is killed (default none)."}
  results_dir: {type: path, description: "Point results directory for trtllm_build.json and trtllm_build.log."}
extends_documentation_fragment: [trtsweep_runtime]
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
"""

EXAMPLES = r"""
- name: Engine for batch 64, 2048 in / 1024 out
  trtsweep_trtllm_build:
    checkpoint_dir: "{{ quantize_checkpoint_dir }}"
    trtllm_version: 0.11.0
    tp: 2
    max_batch_size: 64
    max_input_len: 2048
    max_output_len: 1024
    use_fp8_context_fmha: true
    results_dir: /srv/results/p1
"""

RETURN = r"""
engine_dir: {description: The engine directory., returned: always, type: str}
command: {description: The trtllm-build argv that ran or would run., returned: always, type: list, elements: str}
reused: {description: The engine was complete already., returned: always, type: bool}
removed_partial: {description: A half engine from an earlier crash was removed., returned: always, type: bool}
log_file: {description: trtllm-build's log., returned: always, type: str}
duration_s: {description: Build seconds (when it ran or from the marker)., returned: always, type: float}
engine_size_bytes: {description: Total size of the *.engine files., returned: unless check mode, type: int}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_build_args import RUNTIME_ARGS, cache_dir, runtime
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail

OPTIONS = (
    "max_batch_size", "max_input_len", "max_output_len", "max_seq_len", "max_num_tokens", "gemm_plugin",
    "gpt_attention_plugin", "paged_kv_cache", "remove_input_padding", "context_fmha", "use_fp8_context_fmha",
    "multiple_profiles", "workers", "extra_flags",
)  # fmt: skip


def main():
    module = AnsibleModule(
        argument_spec={
            "checkpoint_dir": {"type": "path", "required": True},
            "trtllm_version": {"type": "str", "required": True},
            "tp": {"type": "int", "default": 1},
            "pp": {"type": "int", "default": 1},
            "dtype": {"type": "str", "choices": ["float16", "bfloat16"], "default": "float16"},
            "max_batch_size": {"type": "int", "required": True},
            "max_input_len": {"type": "int", "required": True},
            "max_output_len": {"type": "int", "required": True},
            "max_seq_len": {"type": "int"},
            "max_num_tokens": {"type": "int"},
            "gemm_plugin": {"type": "str", "default": "auto"},
            "gpt_attention_plugin": {"type": "str", "default": "auto"},
            "paged_kv_cache": {"type": "bool", "default": True},
            "remove_input_padding": {"type": "bool", "default": True},
            "context_fmha": {"type": "bool", "default": True},
            "use_fp8_context_fmha": {"type": "bool"},
            "multiple_profiles": {"type": "bool"},
            "workers": {"type": "int", "default": 1},
            "extra_flags": {"type": "dict", "default": {}},
            "trtllm_build": {"type": "str", "default": "trtllm-build"},
            **RUNTIME_ARGS,
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.toolchain.commands import BuildOptions
    from trtsweep.toolchain.pipeline import EngineSpec, build_engine

    p = module.params
    spec = EngineSpec(
        checkpoint_dir=p["checkpoint_dir"],
        version=p["trtllm_version"],
        options=BuildOptions(**{name: p[name] for name in OPTIONS}),
        tp=p["tp"],
        pp=p["pp"],
        dtype=p["dtype"],
    )
    outcome = run_or_fail(
        module,
        build_engine,
        spec,
        cache_dir(p),
        runtime(p, trtllm_build=p["trtllm_build"]),
        results_dir=p["results_dir"],
        check_mode=module.check_mode,
    )
    module.exit_json(
        changed=outcome.changed,
        engine_dir=outcome.path,
        command=outcome.command,
        reused=outcome.reused,
        removed_partial=outcome.removed_partial,
        log_file=outcome.log_file,
        duration_s=outcome.entry.get("duration_s"),
        engine_size_bytes=outcome.entry.get("engine_size_bytes"),
    )


if __name__ == "__main__":
    main()
