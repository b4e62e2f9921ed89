"""A host's lanes (trtsweep.lane) and the controller's collector (trtsweep.fleet.collect): the journal between them,
a lane's lease, what each journal line becomes on the controller, and a runner that died."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from trtsweep.fleet import progress, status
from trtsweep.fleet.collect import Collector
from trtsweep.lane import journal, runner
from trtsweep.lane.runner import run_lane
from trtsweep.lane.spec import HostSpec

RUN = "run-1"
LANE = "h--lane0"


def point(point_id: str, port: int = 8000) -> dict[str, Any]:
    return {"id": point_id, "sweep": "s", "host": "h", "lane": LANE, "gpus": [], "visible_devices": "",
            "ports": {"http": port, "grpc": port + 1, "metrics": port + 2},
            "benchmark": {"input_data": "p.jsonl"}}  # fmt: skip


def host_spec(tmp_path: Path, points: list[dict[str, Any]], ports: dict[str, int]) -> HostSpec:
    folder = tmp_path / "journal"
    folder.mkdir(exist_ok=True)
    settings = {"trtsweep_work_dir": str(tmp_path / "work"), "trtsweep_triton_bind_address": "127.0.0.1",
                "trtsweep_server_lease_ttl": 20}  # fmt: skip
    lanes = [{"name": LANE, "host": "h", "ports": ports, "points": points}]
    return HostSpec(RUN, "s", folder, tmp_path / "run.lease", settings, {}, lanes)


def lines(spec: HostSpec) -> list[dict[str, Any]]:
    return [json.loads(line) for line in spec.journal(LANE).read_text().splitlines()]


def test_the_journal_is_read_in_whole_lines_from_the_offsets_already_read(tmp_path):
    journal.append(tmp_path / "a.jsonl", {"event": "start", "point": "p"})
    with (tmp_path / "b.jsonl").open("w") as handle:
        handle.write('{"event": "start", "point": "q"}\n{"event": "sta')  # a line still being written
    events, offsets = journal.read_new(tmp_path, {})
    assert [e["point"] for e in events["a"]] == ["p"] and [e["point"] for e in events["b"]] == ["q"]
    assert offsets["b"] == len('{"event": "start", "point": "q"}\n')
    again, same = journal.read_new(tmp_path, offsets)
    assert again == {} and same == offsets  # nothing new, and the half line is not taken
    with (tmp_path / "b.jsonl").open("a") as handle:
        handle.write('ge", "point": "q", "stage": "download"}\n')
    events, _ = journal.read_new(tmp_path, offsets)
    assert events == {"b": [{"event": "stage", "point": "q", "stage": "download"}]}


def test_a_poll_says_when_the_hosts_runner_is_gone_with_its_last_words(tmp_path):
    assert journal.poll(tmp_path, {}, wait_s=0)["runner_alive"] is None  # not started yet
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / journal.RUNNER_FILE).write_text(json.dumps({"pid": dead.pid, "ticks": None}))
    (tmp_path / journal.RUNNER_LOG).write_text("Traceback ...\nMemoryError\n")
    polled = journal.poll(tmp_path, {}, wait_s=5)  # a dead runner answers at once, without waiting
    assert polled["runner_alive"] is False and polled["runner_log"][-1] == "MemoryError"
    (tmp_path / journal.RUNNER_FILE).write_text(json.dumps({"pid": os.getpid(), "ticks": None}))
    assert journal.poll(tmp_path, {}, wait_s=0)["runner_alive"] is True


def test_a_lane_starts_no_point_once_the_runs_lease_has_lapsed(tmp_path, monkeypatch):
    spec = host_spec(tmp_path, [point("a"), point("b")], {})
    lease = tmp_path / "run.lease"
    lease.write_text("1\n")

    class EndsTheRun:  # the point during which the controller ended the run: the heartbeat's `end`
        def __init__(self, spec: HostSpec, point: dict[str, Any], path: Path, host: str) -> None:
            self.point = point

        def run(self) -> dict[str, Any]:
            lease.unlink()
            return {"event": "end", "point": self.point["id"], "status": "ok"}

    monkeypatch.setattr(runner, "PointRun", EndsTheRun)
    assert run_lane(spec, LANE) == 0
    assert [(e["event"], e.get("point")) for e in lines(spec)] == [("start", "a"), ("end", "a"), ("lane_end", None)]


def plan(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {"run_id": RUN, "sweep": "s", "points": points,
            "lanes": [{"name": LANE, "host": "h", "ports": {}, "points": [p["id"] for p in points]}]}  # fmt: skip


def test_the_collector_records_each_point_from_its_journal_lines_once(tmp_path):
    results = tmp_path / "results"
    points = [point("a"), point("b")]
    collector = Collector(results, plan(points), "h")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "llm_perf.summary.json").write_text("{}")
    archive = tmp_path / "results.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path / "host"), "."], check=True)
    fetched: list[str] = []

    def fetch(remote: str, local: Path) -> None:
        fetched.append(remote)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(Path(remote).read_bytes())

    start = {"event": "start", "point": "a", "t": 100.0}
    stage = {"event": "stage", "point": "a", "stage": "serve", "t": 101.0}
    collector.take({LANE: [start, stage]}, fetch)
    record = status.read(results, "a")
    assert record is not None and (record["status"], record["stage"], record["run_id"]) == ("running", "serve", RUN)
    # the live view: the run's events (the callback's) with what the collector has seen
    (results / "events.json").write_text(json.dumps({"run_id": RUN, "lanes": {LANE: {"host": "h", "points": ["a"]}}}))
    live = progress.load(results / "events.json")
    assert live["points"] == {"a": {"state": "running", "stage": "serve", "lane": LANE, "host": "h"}}
    assert (live["lanes"][LANE]["point"], live["lanes"][LANE]["stage"]) == ("a", "serve")
    end = {"event": "end", "point": "a", "status": "ok", "stage": "benchmark", "failure": None, "failed_task": None,
           "stage_times": {"preflight": 100.0, "serve": 101.0, "benchmark": 103.0, "end": 110.0},
           "archive": str(archive)}  # fmt: skip
    failed = {"event": "end", "point": "b", "status": "failed", "stage": "download", "failed_task": "model",
              "failure": {"msg": "no such model", "details": "404\nnot found"}, "stage_times": {},
              "archive": None}  # fmt: skip
    collector.take({LANE: [end, {**start, "point": "b"}, failed, {"event": "lane_end"}]}, fetch)
    ok = status.read(results, "a")
    assert (
        ok is not None and ok["status"] == "ok" and ok["stages"] == {"preflight": 1.0, "serve": 2.0, "benchmark": 7.0}
    )
    assert (results / "a" / "llm_perf.summary.json").is_file() and fetched == [str(archive)]
    bad = status.read(results, "b")
    assert bad is not None and (bad["status"], bad["stage"]) == ("failed", "download")
    assert (bad["cause"], bad["log_tail"]) == ("model: no such model", ["404", "not found"])
    assert collector.done()
    assert collector.summary() == {"points_ok": ["a"], "points_failed": ["b"], "points_unfinished": []}
    # the same lines read again (a poll whose fetch failed is retried from the same offsets): nothing changes
    collector.take({LANE: [start, end]}, fetch)
    again = status.read(results, "a")
    assert again == ok and fetched == [str(archive)]


def test_a_runner_that_died_leaves_its_points_lost_with_its_last_words(tmp_path):
    results = tmp_path / "results"
    points = [point("a"), point("b")]
    the_plan = plan(points)
    collector = Collector(results, the_plan, "h")
    started = [{"event": "start", "point": "a", "t": 1.0}, {"event": "stage", "point": "a", "stage": "build", "t": 2.0}]
    collector.take({LANE: started}, lambda remote, local: None)
    collector.take_runner_death(["Traceback (most recent call last):", "MemoryError", ""])
    assert collector.done()
    records = {r["point"]: r for r in status.close_run(results, the_plan)}
    cause = "the lane runner on h ended before its lanes did (runner.log: MemoryError)"
    assert (records["a"]["status"], records["a"]["cause"]) == ("lost", f"{cause} (during stage build)")
    assert (records["b"]["status"], records["b"]["cause"]) == ("lost", f"{cause} (before the point started)")
