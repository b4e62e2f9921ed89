"""The live view of a sweep run, from the events the trtsweep_events callback writes."""

from __future__ import annotations

from trtsweep.fleet.progress import render


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
