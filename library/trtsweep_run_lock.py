#!/usr/bin/python
# Copyright: trtsweep contributors
# Apache-2.0
"""Documentation of the action plugin action_plugins/trtsweep_run_lock.py (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: trtsweep_run_lock
short_description: Hold a sweep's results directory for one run at a time
description:
  - O(state=held) takes C(<results_dir>/.run.lock) for this ansible-playbook process (pid, start ticks, host, start
    time, and O(run_id) once known; calling it again updates the record). When another live run holds it, the
    task fails in one line naming that run (run id, pid, host, start time) before anything is written. A holder
    whose process is gone is taken over, with a warning saying so.
  - O(state=released) removes the lock if this process holds it.
  - An action plugin that runs on the controller; nothing runs on a host.
options:
  results_dir: {type: path, required: true, description: "The sweep's results directory (results/<sweep>)."}
  state: {type: str, choices: [held, released], default: held, description: "Take or update the lock, or release it."}
  run_id: {type: str, description: "The run id to record, once the plan made it."}
attributes:
  check_mode: {support: full}
"""

EXAMPLES = r"""
- name: This run holds the sweep's results
  trtsweep_run_lock:
    results_dir: "{{ trtsweep_results_dir }}/{{ trtsweep_loaded.name }}"
"""

RETURN = r"""
lock: {description: The lock file., returned: when held, type: str}
taken_over: {description: "What a stale holder was (null when there was none).", returned: when held, type: str}
"""
