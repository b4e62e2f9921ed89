#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Documentation of the action plugin action_plugins/trtsweep_lanes.py (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_lanes
short_description: Run a sweep's lanes on one host (one runner there) and collect each point as it ends
description:
  - O(state=started) hands the host its lanes of O(plan) in one file, with the prompts. The file holds the
    placed points and the host's settings - every C(hf_download_*), C(quantize_*), C(trtllm_build_*),
    C(triton_repo_*), C(triton_serve_*) and C(llm_perf_*) variable (its role default unless the inventory sets it)
    and the C(trtsweep_*) settings - in the host's own run folder (C(<work>/<sweep>/.runs/<run>-<host>), so that
    hosts which share one home directory get one each). Then it starts C(python -m trtsweep.lane) there, detached,
    and records its pid there (returned as RV(runner_pid)). The runner runs every lane of the host side by side,
    each lane's points one after the other, every stage of a point in one process (src/trtsweep/lane/point.py), and
    writes a journal line per point started, stage entered and point ended. Before that, a point the plan collects
    from an earlier run (that run's controller went away before collecting it; the plan's C(collect)) is collected
    from that run's journal and archive on the host when that run ended it ok, and is not run again
    (RV(points_collected)).
  - O(state=collected) follows the journals over the host's connection (one call waits up to 15 s on the host
    for a new line) - a point that starts is recorded running on the controller, each stage it enters is written
    into its record, a point that ends has its one results archive fetched and unpacked and its record completed.
    The report is rewritten every O(report_refresh_s) while points end. Returns when every lane has ended, and
    removes the host spec (it may hold a hub token).
  - A journal line that is not an event (a writer killed mid-line, a disk that filled mid-write) is skipped and
    returned as a warning (also in the run's progress file and in the record of the point its lane was running);
    the collection goes on. A results archive that cannot be fetched or unpacked fails its point with a one-line
    cause, not the host.
  - The controller's cost per point is one fetch and a few record writes, whatever the number of stages; a
    host's benchmarks hold no Ansible fork of their own (one per host, while collecting).
  - The runner is tied to the run's lease (O(lease_file), renewed by trtsweep_heartbeat) - when it lapses (the run
    ended or was interrupted, the controller died, the link is cut) the servers' supervisors stop the servers, no
    lane starts another point, and the runner ends its lanes.
  - A host that has not answered for O(unreachable_after_s) since its last answer (a call on a dead link counts)
    and was asked again at least once is given up; a link that stays down makes the host unreachable, and its
    unfinished points are lost with that cause. A runner that died (before it registered
    too, as it is judged by the pid its start recorded; one that has not registered within 120 s is ended) is said
    in one line from its log, and its unfinished points are lost with it.
  - A collection that ends before the host's lanes did (the runner died, the controller could not record what the
    host sent, as when its disk is full, or the host failed to answer) stops the host - its heartbeat is ended
    and, when the host still answers, its lease removed - so that its servers and lanes stop instead of running
    points nobody collects. The task fails with the cause, except for a dead runner (its points are lost).
  - An action plugin; on the host only the trtsweep package runs (at C(ansible_python_interpreter)).
options:
  state: {type: str, choices: [started, collected], default: started, description: "Start the lanes, or collect."}
  plan: {type: dict, required: true, description: "This run's plan (result of trtsweep_plan)."}
  results_dir: {type: path, required: true, description: "results/<sweep> on the controller."}
  lease_file: {type: path, required: true, description: "The run's lease file on the host."}
  input_base: {type: path, required: true, description: "Where the points' relative input_data paths are."}
  slo: {type: dict, description: "The sweep's slo mapping, for the report's refreshes."}
  report_refresh_s: {type: float, default: 30, description: "Seconds between refreshes of the report."}
  unreachable_after_s:
    type: float
    default: 30
    description: "How long a host may not answer since its last answer (each call bounded by ssh keep-alives)."
attributes:
  check_mode: {support: partial, details: "Nothing is sent or started; the lanes are returned."}
"""

EXAMPLES = r"""
- name: The host's lanes start
  trtsweep_lanes:
    state: started
    plan: "{{ hostvars['localhost'].trtsweep_plan }}"
    results_dir: "{{ trtsweep_results_dir }}/{{ sweep_name }}"
    lease_file: "{{ trtsweep_run_lease_file }}"
    input_base: "{{ playbook_dir }}"
"""

RETURN = r"""
lanes: {description: "The host's lanes (state=started).", returned: success, type: list, elements: str}
runner_pid: {description: "The pid of the host's lane runner (state=started).", returned: success, type: int}
points_collected:
  description: "Points collected from an earlier run's archive on the host instead of run (state=started)."
  returned: success
  type: list
  elements: str
points_ok: {description: "Points that ended ok (state=collected).", returned: success, type: list, elements: str}
points_failed: {description: "Points that failed (state=collected).", returned: success, type: list, elements: str}
points_unfinished: {description: "Points that never ended (state=collected): lost.", returned: success, type: list,
  elements: str}
"""
