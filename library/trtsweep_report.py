#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module: build the sweep report from the per-point results fetched to the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_report
short_description: Write the sweep report (report.html, results.csv/json, report.md/csv) and return the verdict
description:
  - Collects every point's C(llm_perf.summary.json) under C(results_dir) into one table.
  - Given this run's O(plan), first marks the points it planned but never finished as lost, with the reason
    the run's events recorded. RV(not_ok) lists every point whose status is not ok.
options:
  results_dir: {type: path, required: true, description: "results/<sweep> directory on the controller."}
  plan: {type: dict, description: "This run's plan (result of trtsweep_plan)."}
  slo:
    type: dict
    description:
      - The sweep's C(slo) mapping (see src/trtsweep/verdict.py); kept in C(results_dir)/slo.json for later
        reports. Without it, an earlier run's slo.json is used.
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
not_ok: {description: "One line per failed or lost point: status, host, stage, cause.", returned: success, type: list,
  elements: str}
verdict: {description: "The best configuration under the SLOs, then why each other one is not it.", returned: success,
  type: list, elements: str}
html: {description: The report page (report.html)., returned: success, type: str}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "plan": {"type": "dict"},
            "slo": {"type": "dict"},
        }
    )
    require_trtsweep(module)
    from trtsweep.report import write

    params = module.params
    report = run_or_fail(module, write, Path(params["results_dir"]), params["plan"], params["slo"])
    module.exit_json(changed=True, table=report.text, rows=report.rows, not_ok=report.not_ok,
                     verdict=report.verdict, html=str(report.html))  # fmt: skip


if __name__ == "__main__":
    main()
