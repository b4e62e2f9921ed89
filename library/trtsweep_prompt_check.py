#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: refuse prompts longer than a point's max_input_len, counted with the model's tokenizer."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_prompt_check
short_description: Refuse prompts longer than a point's max_input_len (the model's tokenizer)
description:
  - Counts every prompt of O(input_data) as llm-perf sends it (the chat template applied with
    O(chat_template), special tokens included) with the tokenizer in O(tokenizer_dir), and fails, naming the
    file, the line and the token count, when the longest is over O(max_input_len).
  - The sweep's plan does this on the controller when the model's tokenizer is there; otherwise this module
    does it on the host right after the model was downloaded, before anything is quantized or built.
options:
  input_data: {type: path, required: true, description: "The prompts (JSON lines, as llm-perf reads them)."}
  tokenizer_dir: {type: path, required: true, description: "The model's directory (its tokenizer files)."}
  max_input_len: {type: int, required: true, description: "The point's max_input_len."}
  chat_template: {type: bool, default: false, description: "Prompts are sent with the model's chat template."}
  point: {type: str, default: "", description: "The point's id, for the message."}
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: Prompts fit the engine
  trtsweep_prompt_check:
    input_data: /srv/points/p1/prompts.jsonl
    tokenizer_dir: "{{ hf_download_model_dir }}"
    max_input_len: 2048
    chat_template: true
"""

RETURN = r"""
longest: {description: Token count of the longest prompt., returned: success, type: int}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "input_data": {"type": "path", "required": True},
            "tokenizer_dir": {"type": "path", "required": True},
            "max_input_len": {"type": "int", "required": True},
            "chat_template": {"type": "bool", "default": False},
            "point": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.sweep import promptcheck

    p = module.params
    longest = run_or_fail(module, promptcheck.check, p["input_data"], p["tokenizer_dir"], p["max_input_len"],
                          p["chat_template"], p["point"] or "-")  # fmt: skip
    module.exit_json(changed=False, longest=longest)


if __name__ == "__main__":
    main()
