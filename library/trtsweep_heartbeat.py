#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Documentation of the action plugin action_plugins/trtsweep_heartbeat.py (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_heartbeat
short_description: Keep a run's servers alive on one host with one heartbeat (not one renewal task per lane)
description:
  - Starts C(python -m trtsweep.fleet.heartbeat) on the controller, detached and tied to this ansible-playbook process,
    which renews O(lease_file) on the host every O(every) seconds over one long-lived channel. For an SSH host the
    channel is the ssh command line Ansible itself uses for the host (ControlMaster, keys, known hosts,
    keep-alives); for the local connection a local shell. Each line is the next counter, which the host writes into
    the lease whole; the host's readers age it on their own monotonic clock (src/trtsweep/common/lease.py), so a
    clock step on either machine changes nothing.
  - SIGTERM to the heartbeat ends it as a dead controller does - the host removes the lease and its servers and
    lanes stop at once (how the controller stops one host it gave up on).
  - Every server the run starts on the host is supervised against that lease (the C(lease_file) of
    trtsweep_triton_server). When the heartbeat stops (the run ended, Ctrl-C, SIGTERM, a dead controller) or
    cannot reach the host (a cut link) for the lease's TTL, the host's servers are stopped. A channel that ends is
    restarted after a second, so a transient SSH failure loses nothing.
  - The heartbeat's cost is one process and one channel per host, whatever the number of lanes and forks.
  - One heartbeat per run and host; a second call finds it running (C(changed=false)). Password authentication
    is not supported (use an SSH key).
  - An action plugin that runs on the controller; on the host only a shell loop runs.
options:
  lease_file: {type: path, required: true, description: "The run's lease file on the host."}
  state_dir:
    type: path
    required: true
    description: "Controller directory for the heartbeat's record (C(heartbeat-<host>.json)) and log (C(.log))."
  every: {type: float, default: 2, description: "Seconds between renewals (well below the lease's TTL)."}
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: The run's heartbeat on this host
  trtsweep_heartbeat:
    lease_file: "{{ trtsweep_run_lease_file }}"  # <work>/.leases/<run>-<host>.lease
    state_dir: "{{ trtsweep_results_dir }}/{{ sweep_name }}/.run"
"""

RETURN = r"""
pid: {description: The heartbeat process on the controller., returned: success, type: int}
log: {description: "The heartbeat's log on the controller (channel starts and ends).", returned: success, type: str}
"""
