# Copyright: trtsweep contributors
# Apache-2.0
"""Action plugin (controller): the Slurm allocation a sweep runs on, made or found, and released at the end; an
allocation the run made is tied to the ansible-playbook process (a detached watcher cancels it once that process is
gone: Ctrl-C, kill -9). Documentation: library/trtsweep_slurm.py."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "slurm", "name", "job_id", "made", "keep"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        try:
            from trtsweep.common.procs import start_ticks
            from trtsweep.errors import TrtsweepError
            from trtsweep.fleet import slurm
        except ImportError as exc:
            return {**result, "failed": True, "msg": f"trtsweep is not importable on the controller: {exc}"}
        args = self._task.args
        check = bool(self._play_context.check_mode)
        try:
            if args.get("state", "present") == "absent":
                release = bool(args.get("made")) and not bool(args.get("keep")) and not check
                if release:
                    slurm.release(str(args["job_id"]))
                return {**result, "changed": release, "job_id": args.get("job_id")}
            found = slurm.acquire(args.get("slurm"), str(args.get("name") or "trtsweep"), check)
        except (TrtsweepError, KeyError) as exc:
            return {**result, "failed": True, "msg": str(exc)}
        if found.made and not check and not (args.get("slurm") or {}).get("keep"):
            controller = os.getppid()  # the worker's parent: the ansible-playbook process
            argv = [sys.executable, "-m", "trtsweep.fleet.slurm", "--release-when-gone", found.job_id,
                    "--controller-pid", str(controller)]  # fmt: skip
            ticks = start_ticks(controller)
            if ticks is not None:
                argv += ["--controller-ticks", str(ticks)]
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, close_fds=True)  # fmt: skip
        return {**result, "changed": found.made, "job_id": found.job_id, "made": found.made, "state": found.state,
                "nodes": [{"name": n.name, "gpus": list(n.gpus), "cpus": n.cpus} for n in found.nodes]}  # fmt: skip
