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
      - The sweep's C(slo) mapping (see src/trtsweep/report/verdict.py); kept in C(results_dir)/slo.json for later
        reports. Without it, an earlier run's slo.json is used.
  min_interval_s:
    type: float
    default: 0
    description:
      - Leave the report as it is (RV(refreshed=false), nothing returned but C(html)) when its page was written
        less than this many seconds ago - the refresh a lane does after each of its points, so that at fleet size
        the controller rebuilds the report every so often instead of once per point. The run's final report
        always uses 0.
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
refreshed: {description: Whether the report was written (see O(min_interval_s))., returned: success, type: bool}
"""

import time
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "plan": {"type": "dict"},
            "slo": {"type": "dict"},
            "min_interval_s": {"type": "float", "default": 0.0},
        }
    )
    require_trtsweep(module)
    from trtsweep.fleet.status import close_run
    from trtsweep.report.writer import HTML_FILE, write

    params = module.params
    page = Path(params["results_dir"]) / HTML_FILE
    if params["min_interval_s"] > 0 and page.exists() and time.time() - page.stat().st_mtime < params["min_interval_s"]:
        module.exit_json(changed=False, refreshed=False, html=str(page))
    if params["plan"] is not None:  # the run ended: its unfinished points are lost (the fleet's records)
        run_or_fail(module, close_run, Path(params["results_dir"]), params["plan"])
    report = run_or_fail(module, write, Path(params["results_dir"]), params["slo"])
    module.exit_json(changed=True, refreshed=True, table=report.text, rows=report.rows, not_ok=report.not_ok,
                     verdict=report.verdict, html=str(report.html))  # fmt: skip


if __name__ == "__main__":
    main()
