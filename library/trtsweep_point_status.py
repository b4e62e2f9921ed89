#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible module (controller): a point's status record: running when it starts, ok or failed when it ends."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_point_status
short_description: Write a sweep point's status record on the controller
description:
  - O(state=running) clears the point's controller results directory (nothing of an earlier run may pass as
    this run's) and records the point as running with this run's id and the point's settings hash.
  - O(state=finished) completes that record with ok or failed, the stage, the cause in one line, the log tail,
    the seconds per stage and C(model_commit), the commit the model revision resolved to on the host (from the
    fetched C(repository.json)); resume reruns the point when its moving revision names another commit later.
    Refuses a record started by another run.
  - Runs on the controller (delegate_to localhost).
options:
  state: {type: str, choices: [running, finished], required: true, description: "Start or end the record."}
  results_dir: {type: path, required: true, description: "results/<sweep> on the controller."}
  point: {type: dict, required: true, description: "The placed point."}
  run_id: {type: str, required: true, description: "The run's id (trtsweep_plan)."}
  status: {type: str, choices: [ok, failed], description: "Outcome (state=finished)."}
  stage: {type: str, description: "Stage reached, or the stage that failed."}
  failure: {type: raw, description: "The failed task's result (ansible_failed_result): message and log tail."}
  failed_task: {type: str, description: "Name of the task that failed."}
  stage_times: {type: dict, default: {}, description: "Stage -> epoch seconds when it began, plus 'end'."}
  archive:
    type: path
    description:
      - O(state=finished) - the point's results as one fetched tar archive (its host results directory), extracted
        into C(<results_dir>/<point>/) before the record is completed, then removed. One fetch per point instead
        of one per file.
attributes:
  check_mode: {support: none}
"""

EXAMPLES = r"""
- name: Point failed
  trtsweep_point_status:
    state: finished
    results_dir: "{{ trtsweep_results_dir }}/{{ trtsweep_point.sweep }}"
    point: "{{ trtsweep_point }}"
    run_id: "{{ trtsweep_run_id }}"
    status: failed
    stage: serve
    failure: "{{ ansible_failed_result }}"
  delegate_to: localhost
"""

RETURN = r"""
record: {description: The status record as written., returned: success, type: dict}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.trtsweep_common import require_trtsweep, run_or_fail


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["running", "finished"], "required": True},
            "results_dir": {"type": "path", "required": True},
            "point": {"type": "dict", "required": True},
            "run_id": {"type": "str", "required": True},
            "status": {"type": "str", "choices": ["ok", "failed"]},
            "stage": {"type": "str"},
            "failure": {"type": "raw"},
            "failed_task": {"type": "str"},
            "stage_times": {"type": "dict", "default": {}},
            "archive": {"type": "path"},
        },
        required_if=[("state", "finished", ["status", "stage"])],
    )
    require_trtsweep(module)
    from trtsweep.fleet import runplan, status

    p = module.params
    results = Path(p["results_dir"])
    if p["state"] == "running":
        record = run_or_fail(module, status.begin, results, p["point"], p["run_id"], runplan.now())
    else:
        record = run_or_fail(
            module, status.record_finished, results, p["point"]["id"], p["run_id"], p["status"], p["stage"],
            failure=p["failure"], failed_task=p["failed_task"], stage_times=p["stage_times"],
            archive=Path(p["archive"]) if p["archive"] else None,
        )  # fmt: skip
    module.exit_json(changed=True, record=record)


if __name__ == "__main__":
    main()
