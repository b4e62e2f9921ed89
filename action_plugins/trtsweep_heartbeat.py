# Copyright: trtsweep contributors
# Apache-2.0
"""Action plugin (controller): start the run's heartbeat for one host (see src/trtsweep/fleet/heartbeat.py).

Builds the channel to the host the way this task's connection reaches it - for SSH, the very ssh command line
Ansible uses (ControlMaster, keys, known hosts, keep-alives, user, port) - and starts
`python -m trtsweep.fleet.heartbeat` on the controller, detached, tied to this ansible-playbook process. One
heartbeat per run and host: a second call for the same host and run finds it running (changed=false).
Documentation: library/trtsweep_heartbeat.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("lease_file", "state_dir", "every"))

    def _channel(self, lease_file: str) -> list[str]:
        from trtsweep.fleet.heartbeat import remote_command, renew_loop

        transport = self._connection.transport
        if transport == "local":
            return ["/bin/sh", "-c", renew_loop(lease_file)]
        if transport not in ("ssh", "ansible.builtin.ssh"):
            raise ValueError(f"connection {transport} is not supported by the run's heartbeat (ssh or local)")
        if self._connection.get_option("password") or self._play_context.password:
            raise ValueError("password authentication is not supported by the run's heartbeat: use an SSH key")
        host = self._connection.get_option("host") or self._play_context.remote_addr
        ssh = self._connection.get_option("ssh_executable")
        argv = self._connection._build_command(ssh, "ssh", host, remote_command(lease_file))
        return [arg.decode() if isinstance(arg, bytes) else arg for arg in argv]

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        missing = [name for name in ("lease_file", "state_dir") if not args.get(name)]
        if missing:
            return {**result, "failed": True, "msg": f"trtsweep_heartbeat needs {', '.join(missing)}"}
        try:
            from trtsweep.common.procs import alive, start_ticks
        except ImportError as exc:
            return {**result, "failed": True, "msg": f"trtsweep is not importable on the controller: {exc}"}
        name = task_vars.get("inventory_hostname", "host") if task_vars else "host"
        state_dir = Path(args["state_dir"])
        record_file = state_dir / f"heartbeat-{name}.json"
        controller = os.getppid()  # the worker's parent: the ansible-playbook process
        controller_ticks = start_ticks(controller)
        try:
            record = json.loads(record_file.read_text())
        except (OSError, ValueError):
            record = None
        if record and record["controller"] == [controller, controller_ticks] and alive(*record["heartbeat"]):
            return {**result, "changed": False, "pid": record["heartbeat"][0], "log": record["log"]}
        try:
            channel = self._channel(str(args["lease_file"]))
        except ValueError as exc:
            return {**result, "failed": True, "msg": f"{name}: {exc}"}
        if self._play_context.check_mode:
            return {**result, "changed": True, "channel": channel}
        state_dir.mkdir(parents=True, exist_ok=True)
        log = state_dir / f"heartbeat-{name}.log"
        argv = [sys.executable, "-m", "trtsweep.fleet.heartbeat", "--controller-pid", str(controller),
                "--log", str(log), "--every", str(args.get("every", 2))]  # fmt: skip
        if controller_ticks is not None:
            argv += ["--controller-ticks", str(controller_ticks)]
        proc = subprocess.Popen([*argv, "--", *channel], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log.open("ab"), start_new_session=True, close_fds=True)  # fmt: skip
        record = {"heartbeat": [proc.pid, start_ticks(proc.pid)], "controller": [controller, controller_ticks],
                  "log": str(log), "lease_file": str(args["lease_file"])}  # fmt: skip
        tmp_file = record_file.with_name(f".{record_file.name}.tmp")
        tmp_file.write_text(json.dumps(record))
        tmp_file.replace(record_file)
        return {**result, "changed": True, "pid": proc.pid, "log": str(log)}
