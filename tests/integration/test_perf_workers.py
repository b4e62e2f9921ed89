"""llm-perf --workers against the zero-cost server (its own process, stopped by PID): a closed loop keeps exactly its
concurrency in flight over the workers, an open loop's requests follow the parent's one schedule, every request is
in the profile once, the summary's percentiles are over the profile's requests, and --workers 1 runs in this
process as before. Worker processes are all gone when the run returns."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trtsweep.perf import workers
from trtsweep.perf.benchmark import BenchmarkConfig, LevelReport, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.runner import Level, arrival_offsets
from trtsweep.perf.selftest import zero_server
from trtsweep.perf.stats import summarize

CHUNKS = 4


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Each request: first chunk 20 ms after it arrives, then one every 5 ms (a request lasts about 35 ms)."""
    with zero_server(CHUNKS, first_ms=20.0, gap_ms=5.0) as url:
        yield url


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": CHUNKS}) + "\n" for i in range(16)))
    return path


def bench(url: str, data: Path, export: Path, **load: Any) -> LevelReport:
    config = BenchmarkConfig(endpoint=Endpoint(url=url, model="zero"), protocol="http", input_data=data,
                             export_file=export, **{"num_requests": 120, "warmup_requests": 4, **load})  # fmt: skip
    (report,) = run(config)
    assert multiprocessing.active_children() == []  # every worker ended with the run
    return report


def max_in_flight(rows: list[dict[str, Any]]) -> int:
    events = sorted([(r["sent_ms"], 1) for r in rows] + [(r["end_ms"], -1) for r in rows])  # an end before a send
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def check_profile(export: Path, report: LevelReport, requests: int) -> list[dict[str, Any]]:
    """Every request once in every file, each complete; the summary's percentiles are those of the rows."""
    profile = json.loads(export.read_text())
    (level,) = profile["levels"]
    rows = level["requests"]
    assert rows == list(report.rows())
    assert sorted(r["seq"] for r in rows) == list(range(requests))
    assert all(r["error"] is None and r["chunks"] == CHUNKS for r in rows)
    measured = [r for r in rows if not r["warmup"]]
    for key in ("ttft_ms", "e2e_ms", "tpot_ms"):
        every = summarize([r[key] for r in measured])
        assert every is not None and every.count == len(measured)
        for p in ("p50", "p90", "p99", "min", "max"):
            assert level["summary"][key][p] == pytest.approx(every.as_dict(1.0)[p], rel=1e-9)
    assert level["summary"]["requests"] == len(measured)
    assert json.loads(export.with_suffix(".summary.json").read_text())["levels"][0]["summary"] == level["summary"]
    assert len(export.with_suffix(".csv").read_text().splitlines()) == 2
    assert not list(export.parent.glob("*.inflight*"))  # the spool and its shards are processed and removed
    return rows


def test_a_closed_loop_splits_its_concurrency_exactly_over_the_workers(server, data, tmp_path):
    export = tmp_path / "c.json"
    report = bench(server, data, export, concurrency=[10], workers=4)
    assert report.summary["client"]["workers"] == 4
    rows = check_profile(export, report, 124)
    # 3 + 3 + 2 + 2 in flight: all ten at once at some moment, never more (a rounded-up share would make 12)
    assert max_in_flight([r for r in rows if not r["warmup"]]) == 10
    assert max_in_flight([r for r in rows if r["warmup"]]) <= 4


def test_an_open_loop_with_workers_follows_the_one_schedule(server, data, tmp_path, spooled):
    """The requests are sent at the parent's arrival times (the same Poisson schedule one process uses), never
    before them, and spread over the workers."""
    export = tmp_path / "o.json"
    report = bench(server, data, export, request_rate=[150.0], workers=3, seed=7)
    assert report.summary["client"]["workers"] == 3
    check_profile(export, report, 124)
    measured = sorted((r for r in spooled if not r.warmup), key=lambda r: r.seq)
    offsets = arrival_offsets(Level(num_requests=120, request_rate=150.0), 120, 7)
    t0 = measured[0].scheduled_ns
    assert [r.scheduled_ns - t0 for r in measured] == pytest.approx([int(o * 1e9) for o in offsets], abs=2)
    assert all(r.sent_ns >= r.scheduled_ns for r in measured)
    assert report.summary["schedule_lag_ms"]["max"] >= 0.0 and "ttft_from_schedule_ms" in report.summary


def test_an_open_loop_cap_holds_over_the_workers(server, data, tmp_path):
    export = tmp_path / "cap.json"
    report = bench(server, data, export, request_rate=[1000.0], max_concurrency=5, workers=2)
    rows = check_profile(export, report, 124)
    assert max_in_flight([r for r in rows if not r["warmup"]]) <= 5


def test_workers_1_sends_from_this_process_as_before(server, data, tmp_path, monkeypatch):
    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("--workers 1 started worker processes")

    monkeypatch.setattr(workers.Pool, "run_level", no_pool)
    monkeypatch.setattr(workers.Pool, "_grow", no_pool)
    export = tmp_path / "one.json"
    report = bench(server, data, export, concurrency=[3], workers=1)
    rows = check_profile(export, report, 124)
    assert "workers" not in report.summary["client"]
    assert max_in_flight([r for r in rows if not r["warmup"]]) == 3


@pytest.mark.quiet  # a TTFT p99 limit of 120 ms against 60 ms answers: a busy machine misses it at once
def test_a_search_level_stopped_early_stops_every_worker(tmp_path, capsys):
    """2 slots of about 120 ms, concurrency 16 over 2 workers: the level cannot meet its TTFT p99 limit after a few
    requests, and neither worker sends the rest of its 24 (those in flight end by themselves)."""
    from trtsweep.perf import cli

    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"input": "hi", "output": "hello"}) + "\n")
    with zero_server(6, first_ms=60.0, gap_ms=12.0, slots=2) as url:
        rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--input-data", str(data),
                       "--max-tokens", "6", "--profile-export-file", str(tmp_path / "s.json"), "--num-requests", "24",
                       "--search", "slo", "--search-max", "16", "--search-max-levels", "2",
                       "--search-slo", "ttft_p99_ms=120", "--workers", "2"])  # fmt: skip
    assert rc == 0
    assert multiprocessing.active_children() == []
    saturated = json.loads((tmp_path / "s.summary.json").read_text())["levels"][1]
    assert saturated["concurrency"] == 16 and saturated["summary"]["client"]["workers"] == 2
    assert saturated["summary"]["stopped_early"].startswith("2 of 24 requests over the TTFT p99 limit of 120 ms")
    assert saturated["summary"]["requests"] < 24 and saturated["summary"]["failed"] == 0
    assert "stopped early" in capsys.readouterr().err
