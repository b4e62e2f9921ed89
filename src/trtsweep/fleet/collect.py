"""The controller's side of a host's lanes: what the host is handed, and what its journal lines become.

The action plugin `trtsweep_lanes` moves the bytes (host spec and prompts out, journal lines and archives in) over
the host's connection; this module decides what they mean, on the controller:

- `start`: the point's record is begun (running, this run's id; its controller directory cleared);
- `stage`: the running record names the stage (a lost point's cause says where it was);
- `end`: the point's archive is fetched and unpacked and its record completed (`status.record_finished`);
- the run's live view (`.run/progress-<host>.json`, merged with events.json by `fleet.progress.load`) shows each
  lane's point and stage and each point's state.

What a host writes for the run is named by the host, not only by the run (`host_file_name`): hosts that share one
home directory (NFS homes: one `~/.cache/trtsweep`, one work directory) each get their own run folder
(`<work>/<sweep>/.runs/<run>-<host>`: host spec, runner record and log, journals), as they get their own lease
(group_vars: `<work>/.leases/<run>-<host>.lease`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text
from trtsweep.fleet import status
from trtsweep.lane.journal import RUNNER_LOG

PROGRESS_PREFIX = "progress-"
RUN_FOLDER = ".run"

Fetch = Callable[[str, Path], None]
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")  # group_vars' trtsweep_run_lease_file names the host the same way


def host_file_name(host: str) -> str:
    """An inventory host name as a part of a file name: itself when it is safe (letters, digits, `.`, `_`, `-`),
    else its unsafe characters replaced by `_` and a hash of the name added (two names stay two files)."""
    safe = UNSAFE.sub("_", host)
    return host if safe == host else f"{safe}-{hashlib.sha1(host.encode()).hexdigest()[:8]}"


class Collector:
    def __init__(self, results_dir: Path, plan: dict[str, Any], host: str) -> None:
        self.results_dir, self.plan, self.host = results_dir, plan, host
        self.run_id: str = plan["run_id"]
        self.lanes = [lane for lane in plan["lanes"] if lane["host"] == host]
        by_id = {p["id"]: p for p in plan["points"]}
        self.points = {pid: by_id[pid] for lane in self.lanes for pid in lane["points"]}
        self.ended_lanes: set[str] = set()
        self.finished: dict[str, str] = {}  # point -> ok | failed
        self.progress: dict[str, dict[str, Any]] = {lane["name"]: {} for lane in self.lanes}
        self.states: dict[str, dict[str, Any]] = {}  # point -> its state for the live view

    def host_spec(self, settings: dict[str, Any], lease_file: str) -> dict[str, Any]:
        """The host spec (trtsweep.lane.spec.HostSpec) for this host's lanes; `inputs` is filled by the sender."""
        rounds = self.plan.get("search", {}).get("round", 1)  # a search's later round: a folder of its own
        run = f"{self.run_id}-r{rounds}" if rounds > 1 else self.run_id
        folder = f"{settings['trtsweep_work_dir']}/{self.plan['sweep']}/.runs/{run}-{host_file_name(self.host)}"
        return {
            "run_id": self.run_id, "sweep": self.plan["sweep"], "journal_dir": folder, "lease_file": lease_file,
            "settings": settings, "inputs": {},
            "lanes": [{"name": lane["name"], "host": self.host, "ports": lane["ports"],
                       "points": [self.points[pid] for pid in lane["points"]]} for lane in self.lanes],
        }  # fmt: skip

    def done(self) -> bool:
        return all(lane["name"] in self.ended_lanes for lane in self.lanes)

    def take(self, events: dict[str, list[dict[str, Any]]], fetch: Fetch) -> None:
        """Act on the journal lines read from the host (lane -> its new lines, in order)."""
        for lane, lines in events.items():
            for event in lines:
                self._take(lane, event, fetch)
        self._save_progress()

    def _take(self, lane: str, event: dict[str, Any], fetch: Fetch) -> None:
        kind = event.get("event")
        if kind == "lane_end":
            self.ended_lanes.add(lane)
            self.progress[lane] = {}
            return
        point = self.points.get(str(event.get("point")))
        if point is None or point["id"] in self.finished:  # a line read again after a failed poll: done already
            return
        if kind == "start" and point["id"] not in self.states:
            status.begin(self.results_dir, point, self.run_id, status.now())
            self.progress[lane] = {"point": point["id"], "stage": status.STAGES[0], "since": event["t"]}
            self.states[point["id"]] = {"state": "running", "stage": status.STAGES[0], "lane": lane, "host": self.host}
        elif kind == "stage":
            record = status.read(self.results_dir, point["id"])
            if record is not None and record.get("run_id") == self.run_id:
                status.write(self.results_dir, {**record, "stage": event["stage"]})
            self.progress[lane] = {**self.progress.get(lane, {}), "point": point["id"], "stage": event["stage"]}
            self.states[point["id"]] = {**self.states.get(point["id"], {}), "stage": event["stage"]}
        elif kind == "end":
            archive = None
            if event.get("archive"):
                archive = self.results_dir / ".fetched" / f"{point['id']}.tar.gz"
                fetch(event["archive"], archive)
            record = status.record_finished(
                self.results_dir, point["id"], self.run_id, event["status"], event["stage"],
                failure=event.get("failure"), failed_task=event.get("failed_task"),
                stage_times=event.get("stage_times"), archive=archive,
            )  # fmt: skip
            self.finished[point["id"]] = record["status"]
            self.progress[lane] = {}
            seconds = sum((record.get("stages") or {}).values())
            self.states[point["id"]] = {"state": record["status"], "stage": record.get("stage"), "lane": lane,
                                        "host": self.host, "seconds": seconds}  # fmt: skip

    def take_runner_death(self, log_tail: list[str]) -> None:
        """The host's runner ended before its lanes did: the points it never finished stay unfinished (the run's end
        records them lost); its log's last line goes into the run folder for the cause."""
        last = next((line for line in reversed(log_tail) if line.strip()), "no output")
        why = f"the lane runner on {self.host} ended before its lanes did ({RUNNER_LOG}: {last})"
        folder = self.results_dir / RUN_FOLDER
        record = {"host": self.host, "cause": why, "run_id": self.run_id}
        atomic_write_text(folder / f"runner-{self.host}.json", json.dumps(record))
        self.ended_lanes.update(lane["name"] for lane in self.lanes)

    def fail_unstarted(self, why: str) -> None:
        """The lanes could not be started on the host: every point of them fails at preflight with the cause."""
        for point in self.points.values():
            status.begin(self.results_dir, point, self.run_id, status.now())
            status.record_finished(self.results_dir, point["id"], self.run_id, "failed", status.STAGES[0],
                                   failure={"msg": f"{self.host}: {why}"})  # fmt: skip

    def summary(self) -> dict[str, Any]:
        ok = sorted(p for p, s in self.finished.items() if s == "ok")
        failed = sorted(p for p, s in self.finished.items() if s != "ok")
        # not `failed`: that key fails an Ansible task
        return {"points_ok": ok, "points_failed": failed,
                "points_unfinished": sorted(set(self.points) - set(self.finished))}  # fmt: skip

    def _save_progress(self) -> None:
        folder = self.results_dir / RUN_FOLDER
        data = {"run_id": self.run_id, "host": self.host, "lanes": self.progress, "points": self.states,
                "updated": time.time()}  # fmt: skip
        atomic_write_text(folder / f"{PROGRESS_PREFIX}{self.host}.json", json.dumps(data))
