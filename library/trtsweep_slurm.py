#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Documentation of the action plugin action_plugins/trtsweep_slurm.py (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_slurm
short_description: The Slurm allocation a sweep runs on (made or found), and its release
description:
  - O(state=present) with O(slurm) (the inventory's C(trtsweep_slurm)) gives the allocation the sweep runs on. With
    C(job_id) (a job id, or C(env) for C(SLURM_JOB_ID) when the run is started inside salloc or sbatch) the job is
    described; one that is not running is refused in one line. With C(allocate) (nodes, gpus_per_node, partition,
    account, time, extra_args) the run makes its own with C(salloc --no-shell), named O(name).
  - Returns the job id and its nodes, each with the job's GPU indices there (GRES), which the play adds as hosts.
  - O(state=absent) releases (C(scancel)) an allocation the run made (O(made)) unless O(keep); one that existed
    before the run is left as it was. An allocation the run made (and does not keep) is also cancelled once the
    ansible-playbook process is gone (a detached watcher, C(python -m trtsweep.fleet.slurm)), so an interrupted or
    killed run leaves none behind.
  - Runs on the controller, which needs the Slurm client (salloc, scontrol, scancel) and the cluster's
    configuration (SLURM_CONF or /etc/slurm).
options:
  state: {type: str, choices: [present, absent], default: present, description: "Acquire, or release."}
  slurm: {type: dict, description: "The inventory's trtsweep_slurm (job_id, or allocate; keep). For present."}
  name: {type: str, default: trtsweep, description: "The job name of an allocation the run makes."}
  job_id: {type: str, description: "The allocation to release (state=absent)."}
  made: {type: bool, default: false, description: "Whether the run made it (state=absent releases only those)."}
  keep: {type: bool, default: false, description: "Leave even an allocation the run made (state=absent)."}
attributes:
  check_mode: {support: partial, details: "An existing allocation is described; none is made or released."}
"""

EXAMPLES = r"""
- name: The Slurm allocation
  trtsweep_slurm:
    slurm: "{{ trtsweep_slurm }}"
    name: "trtsweep-{{ trtsweep_loaded.name }}"
  register: trtsweep_allocation

- name: Release the run's own allocation
  trtsweep_slurm:
    state: absent
    job_id: "{{ trtsweep_allocation.job_id }}"
    made: "{{ trtsweep_allocation.made }}"
    keep: "{{ trtsweep_slurm.keep | default(false) }}"
"""

RETURN = r"""
job_id: {description: The allocation's job id., returned: state=present, type: str}
made: {description: Whether this run made it., returned: state=present, type: bool}
state: {description: "The job's state (RUNNING).", returned: state=present, type: str}
nodes:
  description: "Its nodes: {name, gpus (the job's GRES indices on the node)}."
  returned: state=present
  type: list
  elements: dict
"""
