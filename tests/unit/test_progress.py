"""The live view of a sweep run, from the events the trtsweep_events callback writes."""

from __future__ import annotations

import json

from trtsweep.fleet.progress import load, render


def test_live_view_counts_per_host_current_stage_and_estimate():
    events = {
        "started": 1000.0,
        "planned": ["a", "b", "c", "d"],
        "kept": ["old"],
        "lanes": {
            "h1--lane0": {"host": "h1", "points": ["a", "b"], "point": "b", "stage": "benchmark", "since": 1090.0},
            "h2--lane0": {"host": "h2", "points": ["c", "d"], "point": "c", "unreachable": True},
        },
        "points": {
            "a": {"state": "ok", "seconds": 60.0},
            "b": {"state": "running"},
            "c": {"state": "lost"},
        },
        "unreachable": {"h2": "ssh: connect timed out"},
    }
    text = render(events, now=1100.0)
    lines = text.splitlines()
    assert lines[0] == (
        "2/4 done (0 failed, 1 host(s) unreachable)  running 1  elapsed 1m40s  remaining ~2m00s  kept 1"
    )
    assert lines[1] == "  h1  2 points  ok 1  failed 0  lost 0  | lane0 b benchmark 10s"
    assert lines[2] == "  h2  2 points  ok 0  failed 0  lost 1  | lane0 UNREACHABLE"


def test_a_collectors_warnings_show_under_its_host_the_newest_last():
    events = {"started": 0.0, "planned": ["a"], "lanes": {"h1--lane0": {"host": "h1", "points": ["a"]}},
              "warnings": {"h1": [f"broken journal line {n}" for n in range(5)]}}  # fmt: skip
    lines = render(events, now=1.0).splitlines()
    assert lines[2:] == [f"  ! h1: broken journal line {n}" for n in (2, 3, 4)]


def test_load_takes_each_hosts_warnings_from_its_progress_file(tmp_path):
    (tmp_path / ".run").mkdir()
    (tmp_path / "events.json").write_text(json.dumps({"run_id": "r1", "lanes": {}}))
    (tmp_path / ".run" / "progress-h1.json").write_text(
        json.dumps({"run_id": "r1", "host": "h1", "lanes": {}, "points": {}, "warnings": ["cut line"]})
    )
    (tmp_path / ".run" / "progress-h2.json").write_text(
        json.dumps({"run_id": "old", "host": "h2", "warnings": ["another run's"]})
    )
    assert load(tmp_path / "events.json")["warnings"] == {"h1": ["cut line"]}
