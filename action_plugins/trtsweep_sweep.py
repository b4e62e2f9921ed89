# Copyright: trtsweep contributors
# Apache-2.0
"""Action plugin (controller): read the sweep definition as data, never as a template.

Extra vars from `-e @sweeps/x.yml` are trusted by Ansible and rendered whenever they are used; a sweep file
that holds `{{ lookup('pipe', ...) }}` would run a command on the controller. This reads the variable's raw
value from the task's variables without rendering it, refuses Jinja markup in it (one line naming the
field) unless `templates: true`, and returns it as plain data: Ansible never renders a plain result again,
so the plays use `trtsweep_loaded.sweep` and never the variable itself. Documentation: library/trtsweep_sweep.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from ansible import context
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("var", "templates", "sweep_dir"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        name = self._task.args.get("var", "trtsweep_sweep")
        if name not in task_vars:
            return {**result, "failed": True, "msg": f"{name} is not defined: pass a sweep with -e @sweeps/<name>.yml"}
        try:
            from trtsweep.errors import TrtsweepError
            from trtsweep.sweep import servers
            from trtsweep.sweep.paths import sweep_file
            from trtsweep.sweep.sweepfile import refuse_templates
        except ImportError as exc:
            return {**result, "failed": True, "msg": f"trtsweep is not importable on the controller: {exc}"}
        raw = task_vars[name]
        if self._task.args.get("templates", False):
            raw = self._templar.template(raw)
        # plain data (no trust tags): never rendered again by whoever reads the result
        sweep = json.loads(json.dumps(raw, default=str))
        try:
            refuse_templates(sweep, name)
        except TrtsweepError as exc:
            return {**result, "failed": True, "msg": str(exc)}
        if not isinstance(sweep, dict):
            return {**result, "failed": True, "msg": f"{name} must be a mapping (see src/trtsweep/sweep/planning.py)"}
        trtllm = sweep.get("trtllm") if isinstance(sweep.get("trtllm"), dict) else {}
        # where the sweep's relative paths start: -e trtsweep_sweep_dir, else the -e @FILE that gave the sweep, else
        # (an inline sweep) the checkout
        found = sweep_file(context.CLIARGS.get("extra_vars") or (), name, Path.cwd())
        given = self._task.args.get("sweep_dir")
        base = Path(given) if given else found.parent if found else Path(task_vars.get("playbook_dir") or Path.cwd())
        return {
            **result,
            "changed": False,
            "sweep": sweep,
            "name": sweep.get("name"),
            "backend": sweep.get("backend", "hf"),
            "trtllm_version": trtllm.get("version"),
            "trtllm_image": trtllm.get("container_image"),
            "servers": servers.servers_of(sweep),
            "sweep_file": str(found) if found else None,
            "base_dir": str(base.resolve()),
        }
