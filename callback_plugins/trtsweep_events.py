# Copyright: trtsweep contributors
# Apache-2.0
"""Ansible callback (notification): the sweep run's events and live progress, on the controller.

Writes `results/<sweep>/events.json` while `sweep.yml` runs: the plan's lanes and points, the hosts that became
unreachable and why (the report's cause for lost points), and the run's start and end. Each lane's current point
and stage and each point's state come from the hosts' collectors (`.run/progress-<host>.json`, action plugin
trtsweep_lanes); `trtsweep run` renders both as a compact live view (trtsweep.fleet.progress.load merges them).
A host unreachable before the plan (a changed host key, a host that is down) gets the host variable
`trtsweep_unreachable` (the reason's last line), which the plan names as its points' cause. Plain Ansible output
is untouched. If the report play never ran (every host went away), the report is written here at the end of the
run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: trtsweep_events
type: notification
short_description: Record a trtsweep sweep run's progress and unreachable hosts in results/<sweep>/events.json
description:
  - Enabled in ansible.cfg (callbacks_enabled); does nothing for playbooks other than sweep.yml.
requirements: [trtsweep on the controller]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "trtsweep_events"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._plan: dict | None = None
        self._path: Path | None = None
        self._reported = False
        self._variables = None  # the run's VariableManager (from the play), to tell later plays why a host is gone
        self._events: dict = {"started": time.time(), "lanes": {}, "points": {}, "unreachable": {},
                               "unreachable_at": {}}  # fmt: skip

    def _save(self) -> None:
        if self._path is None:
            return
        self._events["updated"] = time.time()
        tmp = self._path.with_name(f".{self._path.name}.tmp")
        tmp.write_text(json.dumps(self._events, indent=1))
        tmp.replace(self._path)

    def v2_runner_on_ok(self, result) -> None:  # type: ignore[no-untyped-def]
        res = result._result
        if result._task.action in ("trtsweep_plan",) and "run_id" in res and not res.get("skipped"):
            self._plan = res
            self._path = Path(res["results_dir"]) / "events.json"
            self._path.parent.mkdir(parents=True, exist_ok=True)
            pointer = os.environ.get("TRTSWEEP_EVENTS_POINTER")
            if pointer:  # `trtsweep run` waits for this to know which sweep's events to show
                Path(pointer).write_text(str(self._path))
            self._events.update(
                run_id=res["run_id"],
                planned=[p["id"] for p in res["points"]],
                kept=res["kept"],
                lanes={ln["name"]: {"host": ln["host"], "points": ln["points"]} for ln in res["lanes"]},
            )
            for entry in res.get("unplaced", []):
                self._events["points"][entry["point"]] = {"state": "failed", "stage": "preflight"}
            self._save()
        elif result._task.action in ("trtsweep_report",):
            self._reported = True  # the report play's report

    def v2_playbook_on_play_start(self, play) -> None:  # type: ignore[no-untyped-def]
        self._variables = getattr(play, "_variable_manager", None)

    def v2_runner_on_unreachable(self, result) -> None:
        name = result._host.get_name()
        msg = str(result._result.get("msg", "unreachable")).strip().splitlines()
        host = name
        reason = msg[-1].strip() if msg else "unreachable"
        if self._variables is not None and host not in self._events["unreachable"]:
            # the plan (filter trtsweep_fleet_hosts) names the cause for a host lost before it was planned
            self._variables.set_host_variable(host, "trtsweep_unreachable", reason)
        self._events["unreachable_at"].setdefault(host, time.time())
        self._events["unreachable"].setdefault(host, reason)
        for lane in self._events["lanes"].values():  # the host's lanes
            if lane.get("host") == host:
                lane["unreachable"] = True
        self._save()

    def v2_playbook_on_stats(self, stats) -> None:  # type: ignore[no-untyped-def]
        self._events["finished"] = time.time()
        self._save()
        if self._plan is None or self._reported:
            return
        try:  # the report play never ran: every lane went away; write what is known
            from trtsweep.fleet.status import close_run
            from trtsweep.report.writer import write

            close_run(Path(self._plan["results_dir"]), self._plan)
            written = write(Path(self._plan["results_dir"]))
            self._display.warning("the report play did not run; report written by trtsweep_events:\n" + written.text)
        except Exception as exc:  # a callback must never break the run's end
            self._display.warning(f"trtsweep_events: could not write the report: {exc}")
