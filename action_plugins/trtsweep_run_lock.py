# Copyright: trtsweep contributors
# Apache-2.0
"""Action plugin (controller): hold a sweep's results directory for this run (see src/trtsweep/fleet/runlock.py).

The holder is this ansible-playbook process (the worker's parent). Documentation: library/trtsweep_run_lock.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("results_dir", "state", "run_id"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        state = args.get("state", "held")
        if not args.get("results_dir") or state not in ("held", "released"):
            return {**result, "failed": True, "msg": "trtsweep_run_lock needs results_dir and state held or released"}
        try:
            from trtsweep.errors import TrtsweepError
            from trtsweep.fleet import runlock
        except ImportError as exc:
            return {**result, "failed": True, "msg": f"trtsweep is not importable on the controller: {exc}"}
        results_dir, controller = Path(args["results_dir"]), os.getppid()
        if state == "released":
            return {**result, "changed": runlock.release(results_dir, controller)}
        try:
            taken_over = runlock.acquire(results_dir, controller, args.get("run_id"))
        except TrtsweepError as exc:
            return {**result, "failed": True, "msg": str(exc)}
        if taken_over:
            result["warnings"] = [taken_over]
        return {**result, "changed": False, "lock": str(runlock.lock_path(results_dir)), "taken_over": taken_over}
