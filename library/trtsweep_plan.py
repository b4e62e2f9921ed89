#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module (controller): plan a sweep run over the fleet: resume, placement, plan.json."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_plan
short_description: Plan one run of a sweep over the fleet (resume, GPU placement, ports, order)
description:
  - Expands the sweep, keeps the points an earlier run completed with the same settings hash, places the rest
    on the hosts that passed preflight (exclusive or packed lanes, GPUs, port blocks) and writes
    C(results/<sweep>/plan.json). Fails, naming the points, when no host of the inventory can take some.
  - Runs on the controller.
options:
  sweep: {type: dict, required: true, description: "The sweep definition (trtsweep_sweep)."}
  hosts: {type: dict, required: true, description: "Host name -> {gpus, busy_gpus, ports, port_stride, problems}."}
  results_dir: {type: path, required: true, description: "Results root on the controller (results/)."}
  force: {type: bool, default: false, description: "Rerun every point, complete or not."}
  only: {type: str, description: "Comma-separated point-id globs to run; the others are left as they are."}
  base_dir:
    type: path
    description:
      - Directory a relative C(benchmark.input_data) is relative to (the playbook directory); the prompts file is
        read on the controller while planning, and a missing, unreadable or malformed one fails the plan with
        its file and line.
      - Default the trtsweep checkout holding C(sweep.yml), else the current directory.
  search_round:
    type: int
    default: 1
    description:
      - The round of the sweep's C(search) to plan (1 the run's first plan). A later round is decided from the
        results of the rounds before it (trtsweep.search), and closes the round before (its unfinished points lost).
  run_id: {type: str, description: "The run's id (from its first round's plan): a later round keeps it."}
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: Plan
  trtsweep_plan:
    sweep: "{{ trtsweep_sweep }}"
    hosts: {gpu-01: {gpus: [{index: 0, name: H100, memory_mb: 81559}], problems: []}}
    results_dir: "{{ playbook_dir }}/results"
    base_dir: "{{ playbook_dir }}"
  delegate_to: localhost
"""

RETURN = r"""
run_id: {description: This run's id (stamped into every status record)., returned: success, type: str}
points: {description: "Placed points: host, lane, gpus, visible_devices, ports, order, colocated.", returned: success,
  type: list, elements: dict}
lanes: {description: "Lanes: name, host, index, gpus, ports, points.", returned: success, type: list, elements: dict}
kept: {description: Points complete from an earlier run (not rerun)., returned: success, type: list, elements: str}
collect: {description: "Points an earlier run started on a host and never recorded as ended, with the same settings:
  kept on that host, whose collector takes the point's archive from that run if it ended ok there (else runs it).",
  returned: success, type: list, elements: dict}
left_out: {description: Points not matched by O(only)., returned: success, type: list, elements: str}
unplaced: {description: "Points failed at preflight: point, cause.", returned: success, type: list, elements: dict}
table: {description: The placement as text., returned: success, type: str}
search: {description: "The round: strategy, round, points, more (a next round is to be planned), dropped (config,
  round, why).", returned: success, type: dict}
results_dir: {description: "results/<sweep> on the controller.", returned: success, type: str}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "sweep": {"type": "dict", "required": True},
            "hosts": {"type": "dict", "required": True},
            "results_dir": {"type": "path", "required": True},
            "force": {"type": "bool", "default": False},
            "only": {"type": "str"},
            "base_dir": {"type": "path"},
            "search_round": {"type": "int", "default": 1},
            "run_id": {"type": "str"},
        },
        supports_check_mode=True,
    )
    require_trtsweep(module)
    from trtsweep.fleet import runplan

    p = module.params
    plan = run_or_fail(
        module, runplan.make_plan, p["sweep"], p["hosts"], Path(p["results_dir"]), p["force"], p["only"],
        write=not module.check_mode, base_dir=Path(p["base_dir"]) if p["base_dir"] else None,
        search_round=p["search_round"], run_id=p["run_id"],
    )  # fmt: skip
    plan.pop("hosts")
    module.exit_json(changed=bool(plan["points"] or plan["unplaced"]), table=runplan.plan_text(plan), **plan)


if __name__ == "__main__":
    main()
