#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: build the sweep report from the per-point results fetched to the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_report
short_description: Write report.csv / report.md for a results/<sweep> directory and return the table
description:
  - Collects every point's C(llm_perf.summary.json) under C(results_dir) into one table.
options:
  results_dir: {type: path, required: true, description: "results/<sweep> directory on the controller."}
attributes:
  check_mode: {support: none}
"""

EXAMPLES = r"""
- name: Report
  trtsweep_report:
    results_dir: "{{ playbook_dir }}/results/smollm2-cpu-demo"
  delegate_to: localhost
"""

RETURN = r"""
table: {description: The console table., returned: success, type: str}
rows: {description: One row per point and concurrency level., returned: success, type: list, elements: dict}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(argument_spec={"results_dir": {"type": "path", "required": True}})
    require_trtsweep(module)
    from trtsweep.report import write

    text, rows = run_or_fail(module, write, Path(module.params["results_dir"]))
    module.exit_json(changed=True, table=text, rows=rows)


if __name__ == "__main__":
    main()
