#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Documentation of the action plugin action_plugins/trtsweep_sweep.py (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_sweep
short_description: Read the sweep definition as data (never rendered as a template)
description:
  - Reads the sweep variable's raw value (as loaded by C(-e @sweeps/<name>.yml) or group_vars) without rendering it,
    so C({{ lookup('pipe', ...) }}) in a shared sweep file never runs. A string with Jinja markup fails the task in
    one line naming the field, unless O(templates=true).
  - Returns the sweep as plain data, which Ansible never renders again; the plays read RV(sweep), not the variable.
  - An action plugin that runs on the controller; nothing runs on a host.
options:
  var: {type: str, default: trtsweep_sweep, description: "Name of the variable holding the sweep."}
  templates:
    type: bool
    default: false
    description:
      - Render Jinja in the sweep before reading it (an explicit opt-in;
        C(-e trtsweep_sweep_templates=true) in sweep.yml).
  sweep_dir:
    type: path
    description:
      - Where the sweep's relative paths start (prompts, conversations, trace, search.model_dirs). Default the
        directory of the C(-e @FILE) that gives the sweep variable, else (a sweep given inline) the playbook's.
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: Load the sweep (as data)
  trtsweep_sweep:
    templates: "{{ trtsweep_sweep_templates | default(false) | bool }}"
    sweep_dir: "{{ trtsweep_sweep_dir | default(omit) }}"
  register: trtsweep_loaded
"""

RETURN = r"""
sweep: {description: The sweep definition as plain data., returned: success, type: dict}
name: {description: The sweep's name., returned: success, type: str}
backend: {description: "The sweep's backend (hf or tensorrtllm).", returned: success, type: str}
trtllm_version: {description: The TensorRT-LLM version the sweep asks for (null for hf)., returned: success, type: str}
trtllm_image: {description: "The sweep's TensorRT-LLM image (trtllm.container_image).", returned: success, type: str}
servers:
  description: "The servers its points use: triton for the engine flow, the pytorch flow's servers (default triton)."
  returned: success
  type: list
  elements: str
sweep_file: {description: "The C(-e @FILE) that gave the sweep (null: given inline).", returned: success, type: str}
base_dir: {description: "Where the sweep's relative paths start (absolute).", returned: success, type: str}
"""
