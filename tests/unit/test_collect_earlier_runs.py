"""Nothing measured is lost when the controller goes away: a point that ended on its host after the controller's last
collection keeps its archive there, and the next run of the sweep collects it instead of running the point again.
The plan names such points (trtsweep.fleet.runplan: an unfinished record of an earlier run, the same settings) and
keeps them on the host that ran them; the host says which of them that run ended ok (trtsweep.lane.journal.ended);
the collector records them as this run's and leaves them out of the host spec (trtsweep.fleet.collect).

Fails on a rerun that ran every unfinished point again, whatever its host had measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from trtsweep.fleet import runplan, status
from trtsweep.fleet.collect import Collector
from trtsweep.lane import journal

EARLIER, NOW = "20261127T000000Z-aaaaaa", "20261127T010000Z-bbbbbb"


def point(point_id: str, host: str, lane: str, gpus: list[int], order: int = 0) -> dict[str, Any]:
    return {"id": point_id, "sweep": "s", "model": {"repo_id": "o/m"}, "benchmark": {"input_data": "p.jsonl"},
            "weight": 1.0, "host": host, "lane": lane, "gpus": gpus, "visible_devices": ",".join(map(str, gpus)),
            "ports": {"http": 8000}, "order": order, "colocated": False}  # fmt: skip


def lane(name: str, host: str, points: list[str], gpus: list[int]) -> dict[str, Any]:
    base = 9000 if host == "h1" else 8000
    return {"name": name, "host": host, "index": 0, "gpus": gpus, "points": points, "load": float(len(points)),
            "ports": {"http": base, "grpc": base + 1, "metrics": base + 2}}  # fmt: skip


def unfinished(results: Path, placed_point: dict[str, Any], host: str, state: str = "running") -> None:
    """The record an earlier run left: started on `host`, never recorded as ended."""
    status.begin(results, {**placed_point, "host": host}, EARLIER, status.now())
    if state != "running":
        record = status.read(results, placed_point["id"])
        assert record is not None
        status.write(results, {**record, "status": state})


def test_the_plan_keeps_an_unfinished_point_of_an_earlier_run_on_its_host_and_says_so(tmp_path):
    results = tmp_path / "results"
    a, b, c = (
        point("a", "h2", "h2--lane0", [0]),
        point("b", "h2", "h2--lane0", [0], 1),
        point("c", "h1", "h1--lane0", [0]),
    )
    placed = {"points": [a, b, c],
              "lanes": [lane("h1--lane0", "h1", ["c"], [0]), lane("h2--lane0", "h2", ["a", "b"], [0])]}  # fmt: skip
    unfinished(results, a, "h1")  # a's earlier run ran it on h1: this plan placed it on h2
    unfinished(results, b, "h2", "lost")
    unfinished(results, {**c, "precision": "int8"}, "h1")  # other settings then: run again
    earlier = runplan.earlier_runs([a, b, c], results)
    assert earlier == [{"point": "a", "run_id": EARLIER, "host": "h1"}, {"point": "b", "run_id": EARLIER, "host": "h2"}]
    assert runplan.on_earlier_hosts(placed, earlier) == earlier
    assert [(ln["name"], ln["points"], ln["load"]) for ln in placed["lanes"]] == [
        ("h1--lane0", ["a", "c"], 2.0), ("h2--lane0", ["b"], 1.0)]  # fmt: skip
    assert (a["host"], a["lane"], a["ports"], a["order"], c["order"], b["order"]) == (
        "h1", "h1--lane0", {"http": 9000, "grpc": 9001, "metrics": 9002}, 0, 1, 0)  # fmt: skip
    text = runplan.plan_text({"lanes": placed["lanes"], "kept": [], "collect": earlier, "left_out": [],
                              "unplaced": []})  # fmt: skip
    assert (f"collected from h1 if run {EARLIER} ended it ok there (that run's controller went away before "
            "collecting it), else run: a") in text.splitlines()  # fmt: skip


def test_a_point_whose_earlier_host_has_no_fitting_lane_now_is_run_where_it_was_placed():
    a = point("a", "h2", "h2--lane0", [0, 1])
    placed = {"points": [a], "lanes": [lane("h2--lane0", "h2", ["a"], [0, 1]), lane("h1--lane0", "h1", [], [0])]}
    assert runplan.on_earlier_hosts(placed, [{"point": "a", "run_id": EARLIER, "host": "h1"}]) == []
    assert a["host"] == "h2" and [ln["name"] for ln in placed["lanes"]] == ["h2--lane0"]


def host_runs(tmp_path: Path) -> Path:
    """The sweep's .runs folder on host h1 after run EARLIER: a ended ok (its archive there), b failed, c ended ok
    but its archive is gone, d ended ok in another run."""
    runs = tmp_path / "work" / "s" / ".runs"
    folder = runs / f"{EARLIER}-h1"
    folder.mkdir(parents=True)
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "llm_perf.summary.json").write_text("{}")
    archive = tmp_path / "work" / "s" / "a" / "runs" / EARLIER / "results.tar.gz"
    archive.parent.mkdir(parents=True)
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path / "host"), "."], check=True)
    gone = str(tmp_path / "gone.tar.gz")
    for event in ({"event": "end", "point": "a", "status": "ok", "archive": str(archive)},
                  {"event": "end", "point": "b", "status": "failed", "archive": str(archive)},
                  {"event": "end", "point": "c", "status": "ok", "archive": gone}):  # fmt: skip
        journal.append(folder / "h1--lane0.jsonl", {"stage": "benchmark", "stage_times": {"end": 1.0}, **event})
    (runs / "20261126T000000Z-cccccc-h1").mkdir()
    journal.append(runs / "20261126T000000Z-cccccc-h1" / "h1--lane0.jsonl",
                   {"event": "end", "point": "d", "status": "ok", "archive": str(archive)})  # fmt: skip
    return runs


def test_the_host_says_which_points_an_earlier_run_ended_ok_with_their_archive_there(tmp_path, capsys):
    runs = host_runs(tmp_path)
    wanted = {p: EARLIER for p in "abcd"}
    assert journal.main([str(runs), "--host", "h1", "--ended", json.dumps(wanted)]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["a"]
    assert journal.ended(runs, "h2", wanted) == {}  # another host's runs are its own


def test_the_collector_records_an_earlier_runs_point_as_this_runs_and_leaves_it_out_of_the_host_spec(tmp_path):
    results, runs = tmp_path / "results", host_runs(tmp_path)
    a, b = point("a", "h1", "h1--lane0", [0]), point("b", "h1", "h1--lane0", [0], 1)
    for placed_point in (a, b):
        unfinished(results, placed_point, "h1")
    plan = {"run_id": NOW, "sweep": "s", "points": [a, b], "hosts": {},
            "lanes": [lane("h1--lane0", "h1", ["a", "b"], [0])],
            "collect": [{"point": p, "run_id": EARLIER, "host": "h1"} for p in "ab"]}  # fmt: skip
    collector = Collector(results, plan, "h1")
    ends = journal.ended(runs, "h1", collector.earlier())

    def copy(remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(Path(remote).read_bytes())

    assert collector.take_earlier(ends, copy) == ["a"]
    record = status.read(results, "a")
    assert record is not None and (record["status"], record["run_id"], record["collected_from"]) == ("ok", NOW, EARLIER)
    assert (results / "a" / "llm_perf.summary.json").is_file()
    spec = collector.host_spec({"trtsweep_work_dir": str(tmp_path / "work")}, "lease")
    assert [p["id"] for p in spec["lanes"][0]["points"]] == ["b"]  # a is not run again; b is
    later = Collector(results, plan, "h1")  # the collection's own task
    later.take_collected()
    assert later.summary() == {"points_ok": ["a"], "points_failed": [], "points_unfinished": ["b"]}
