"""The controller's side of a host's lanes: what the host is handed, and what its journal lines become.

The action plugin `trtsweep_lanes` moves the bytes (host spec and prompts out, journal lines and archives in) over
the host's connection; this module decides what they mean, on the controller:

- `start`: the point's record is begun (running, this run's id; its controller directory cleared);
- `stage`: the running record names the stage (a lost point's cause says where it was);
- `end`: the point's archive is fetched and unpacked and its record completed (`status.record_finished`); an
  archive that cannot be fetched or unpacked fails that point with a one-line cause, not the host;
- `broken` (a journal line that was not an event, see `lane.journal`): skipped, and said as a warning in the live
  view, in the task's result, and in the record of the point the lane was running;
- the run's live view (`.run/progress-<host>.json`, merged with events.json by `fleet.progress.load`) shows each
  lane's point and stage and each point's state.

What a host writes for the run is named by the host, not only by the run (`host_file_name`): hosts that share one
home directory (NFS homes: one `~/.cache/trtsweep`, one work directory) each get their own run folder
(`<work>/<sweep>/.runs/<run>-<host>`, `r<round>-<run>-<host>` for a search's later round: host spec, runner
record and log, journals), as they get their own lease
(group_vars: `<work>/.leases/<run>-<host>.lease`).

A point the plan collects from an earlier run (`runplan`'s `collect`: that run's controller went away before
collecting it) is collected before the host's lanes start (`take_earlier`): the end line that run's journal on the
host has for it, its archive fetched and unpacked, its record this run's, with `collected_from` (that run's id); the
host spec then leaves it out. One that did not end ok there, whose archive does not unpack, or whose model's commit
moved (as resume checks records) is run.

A host whose collection ends before its lanes did (its runner died, the controller could not record what it sent,
it did not answer) is stopped (`give_up`): the cause is kept for its unfinished points (which the run's end records
lost), and its heartbeat (`.run/heartbeat-<host>.json`) is ended so that its lease goes and its servers and lanes
stop instead of running points nobody collects.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.common.procs import alive
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status
from trtsweep.lane.journal import RUNNER_LOG

PROGRESS_PREFIX = "progress-"
RUN_FOLDER = ".run"
HEARTBEAT_STOP_S = 10.0  # a heartbeat TERMed this long ago and still running is killed

Fetch = Callable[[str, Path], None]
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")  # group_vars' trtsweep_run_lease_file names the host the same way


class FetchFailed(TrtsweepError):
    """A point's results archive could not be fetched from its host (the link is fine: the file is not)."""


class ControllerFailed(TrtsweepError):
    """What the host sent could not be recorded on the controller (its disk is full, a record is unreadable)."""


def host_file_name(host: str) -> str:
    """An inventory host name as a part of a file name: itself when it is safe (letters, digits, `.`, `_`, `-`),
    else its unsafe characters replaced by `_` and a hash of the name added (two names stay two files)."""
    safe = UNSAFE.sub("_", host)
    return host if safe == host else f"{safe}-{hashlib.sha1(host.encode()).hexdigest()[:8]}"


def stop_process(pid: int, ticks: int | None, grace_s: float = HEARTBEAT_STOP_S) -> None:
    """TERM process `pid` (the one with `ticks`) and wait for it to end; KILL it after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        if alive(pid, ticks):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive(pid, ticks):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.1)


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
        self.warnings: list[str] = []

    def host_spec(self, settings: dict[str, Any], lease_file: str) -> dict[str, Any]:
        """The host spec (trtsweep.lane.spec.HostSpec) for this host's lanes; `inputs` is filled by the sender."""
        # a search's later round: a folder of its own, its round first (a host name never makes one name two)
        rounds = self.plan.get("search", {}).get("round", 1)
        run = f"r{rounds}-{self.run_id}" if rounds > 1 else self.run_id
        folder = f"{settings['trtsweep_work_dir']}/{self.plan['sweep']}/.runs/{run}-{host_file_name(self.host)}"
        return {
            "run_id": self.run_id, "sweep": self.plan["sweep"], "journal_dir": folder, "lease_file": lease_file,
            "settings": settings, "inputs": {},
            "lanes": [{"name": lane["name"], "host": self.host, "ports": lane["ports"],
                       "gpus": lane.get("gpus") or [],
                       "points": [self.points[pid] for pid in lane["points"] if pid not in self.finished]}
                      for lane in self.lanes],
        }  # fmt: skip

    def done(self) -> bool:
        return all(lane["name"] in self.ended_lanes for lane in self.lanes)

    def take(self, events: dict[str, list[dict[str, Any]]], fetch: Fetch) -> None:
        """Act on the journal lines read from the host (lane -> its new lines, in order). A record that cannot be
        written raises ControllerFailed; a connection failure of `fetch` is raised as it is (the poll is retried
        from the same offsets: lines taken already are not taken twice)."""
        with self._recording():
            for lane, lines in events.items():
                for event in lines:
                    self._take(lane, event, fetch)
            self._save_progress()

    @contextlib.contextmanager
    def _recording(self) -> Iterator[None]:
        """A block that records what the host sent: an error writing it ends the host's collection."""
        try:
            yield
        except (TrtsweepError, OSError) as exc:
            why = status.one_line(exc)
            raise ControllerFailed(f"the controller could not record what {self.host} sent: {why}") from exc

    def _take(self, lane: str, event: dict[str, Any], fetch: Fetch) -> None:
        kind = event.get("event")
        if kind == "lane_end":
            self.ended_lanes.add(lane)
            self.progress[lane] = {}
            return
        if kind == "lane_lost":  # its Slurm step ended first: its unfinished points are lost with Slurm's word
            self.ended_lanes.add(lane)
            self.progress[lane] = {}
            record = {"host": self.host, "lane": lane, "cause": str(event.get("why")), "run_id": self.run_id}
            atomic_write_text(self.results_dir / RUN_FOLDER / f"lane-{host_file_name(self.host)}-{lane}.json",
                              json.dumps(record))  # fmt: skip
            return
        if kind == "broken":
            self._warn(lane, f"{self.host}: a broken line of journal {lane} (byte {event.get('offset')}) was "
                             f"skipped: {event.get('text', '')!r}")  # fmt: skip
            return
        point = self.points.get(str(event.get("point")))
        if point is None or point["id"] in self.finished:  # a line read again after a failed poll: done already
            return
        if kind == "start" and point["id"] not in self.states:
            where = {key: event[key] for key in ("gpus", "slurm") if key in event}  # a Slurm step's binding
            status.begin(self.results_dir, point, self.run_id, status.now(), where)
            self.progress[lane] = {"point": point["id"], "stage": status.STAGES[0], "since": event["t"]}
            self.states[point["id"]] = {"state": "running", "stage": status.STAGES[0], "lane": lane, "host": self.host}
        elif kind == "stage":
            record = status.read(self.results_dir, point["id"])
            if record is not None and record.get("run_id") == self.run_id:
                status.write(self.results_dir, {**record, "stage": event["stage"]})
            self.progress[lane] = {**self.progress.get(lane, {}), "point": point["id"], "stage": event["stage"]}
            self.states[point["id"]] = {**self.states.get(point["id"], {}), "stage": event["stage"]}
        elif kind == "end":
            self._end(lane, point, event, fetch)

    def _end(self, lane: str, point: dict[str, Any], event: dict[str, Any], fetch: Fetch) -> None:
        archive, problem = None, None
        if event.get("archive"):
            archive = self.results_dir / ".fetched" / f"{point['id']}.tar.gz"
            try:
                fetch(event["archive"], archive)
            except (TrtsweepError, OSError) as exc:
                why = status.one_line(exc)
                archive, problem = None, f"could not be fetched from {self.host}:{event['archive']} ({why})"
        record = status.record_finished(
            self.results_dir, point["id"], self.run_id, event["status"], event["stage"],
            failure=event.get("failure"), failed_task=event.get("failed_task"),
            stage_times=event.get("stage_times"), archive=archive, archive_problem=problem,
        )  # fmt: skip
        self.finished[point["id"]] = record["status"]
        self.progress[lane] = {}
        seconds = sum((record.get("stages") or {}).values())
        self.states[point["id"]] = {"state": record["status"], "stage": record.get("stage"), "lane": lane,
                                    "host": self.host, "seconds": seconds}  # fmt: skip

    def earlier(self) -> dict[str, str]:
        """Point -> the earlier run's id, for this host's points the plan collects from an earlier run here."""
        return {entry["point"]: entry["run_id"] for entry in self.plan.get("collect", [])
                if entry["host"] == self.host and entry["point"] in self.points}  # fmt: skip

    def take_earlier(self, ends: dict[str, dict[str, Any]], fetch: Fetch) -> list[str]:
        """Collect the points an earlier run ended ok on this host (`ends`: point -> that run's end line) as this
        run's; returns them. A point whose archive does not unpack or whose model's commit moved is left to run."""
        commits = status.commits_now(self.plan.get("hosts", {}))
        earlier, collected = self.earlier(), []
        with self._recording():
            for point_id, event in ends.items():
                point = self.points[point_id]
                status.begin(self.results_dir, point, self.run_id, status.now())
                self._end(point["lane"], point, event, fetch)
                record = status.read(self.results_dir, point_id) or {}
                if record.get("status") == "ok" and not status.model_moved(record, point, commits):
                    status.write(self.results_dir, {**record, "collected_from": earlier[point_id]})
                    collected.append(point_id)
                    continue
                status.begin(self.results_dir, point, self.run_id, status.now())  # it runs after all
                del self.finished[point_id], self.states[point_id]
        return collected

    def take_collected(self) -> None:
        """The points collected from an earlier run when the lanes started (a collection of its own): finished."""
        for point_id in self.earlier():
            record = status.read(self.results_dir, point_id)
            if record is not None and record.get("run_id") == self.run_id and record.get("collected_from"):
                self.finished[point_id] = record["status"]

    def _warn(self, lane: str, message: str) -> None:
        """A warning of the run: in the live view and the task's result, and in the record of the lane's point."""
        self.warnings.append(message)
        current = self.progress.get(lane, {}).get("point")
        if current and current not in self.finished:
            status.add_warning(self.results_dir, current, self.run_id, message)

    def take_runner_death(self, log_tail: list[str], ended: str = "ended before its lanes did") -> None:
        """The host's runner ended (`ended`: how, as the poll said) before its lanes did: the points it never finished
        stay unfinished (the run's end records them lost); its log's last line goes into the cause."""
        last = next((line for line in reversed(log_tail) if line.strip()), "no output")
        self.give_up(f"the lane runner on {self.host} {ended} ({RUNNER_LOG}: {last})")

    def give_up(self, why: str) -> None:
        """Nothing more is collected from the host: `why` is the cause of its unfinished points (kept in the run
        folder for the run's end, when the controller can still write), and its heartbeat is ended, so that the
        host's lease goes and its servers and lanes stop."""
        with contextlib.suppress(TrtsweepError, OSError):  # a full disk: the run's end says the host stopped
            record = {"host": self.host, "cause": why, "run_id": self.run_id}
            atomic_write_text(self.results_dir / RUN_FOLDER / f"runner-{self.host}.json", json.dumps(record))
        self.stop_heartbeat()
        self.ended_lanes.update(lane["name"] for lane in self.lanes)

    def stop_heartbeat(self) -> None:
        """End the host's heartbeat (action plugin trtsweep_heartbeat's record `.run/heartbeat-<host>.json`)."""
        record = read_json(self.results_dir / RUN_FOLDER / f"heartbeat-{self.host}.json")
        beating = record.get("heartbeat") if isinstance(record, dict) else None
        if isinstance(beating, list) and len(beating) == 2:
            stop_process(int(beating[0]), beating[1])

    def fail_unstarted(self, why: str) -> None:
        """The lanes could not be started on the host: every point of them fails at preflight with the cause (but
        those collected from an earlier run)."""
        for point in (p for p in self.points.values() if p["id"] not in self.finished):
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
                "warnings": self.warnings, "updated": time.time()}  # fmt: skip
        atomic_write_text(folder / f"{PROGRESS_PREFIX}{self.host}.json", json.dumps(data))
