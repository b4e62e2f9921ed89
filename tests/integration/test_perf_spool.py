"""llm-perf keeps its requests on disk, not in memory: every finished request is in the level's spool the moment
it ends (so a killed client loses nothing it measured), and the level's summary and exports are rebuilt from
the spool in one pass (tests/integration/test_perf_*.py check the numbers; benchmarks/perf_memory.py the RSS)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trtsweep.perf.selftest import zero_server


def _data(path: Path) -> Path:
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": 4}) + "\n" for i in range(16)))
    return path


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    complete = path.read_text().split("\n")[:-1]  # the last line may be half written
    return [json.loads(line) for line in complete]


def test_each_finished_request_is_on_disk_while_the_level_runs_and_survives_a_kill(tmp_path):
    export = tmp_path / "perf.json"
    spool = tmp_path / "perf.inflight.jsonl"
    with zero_server(chunks=4, gap_ms=2.0) as url:
        cmd = [sys.executable, "-m", "trtsweep.perf.cli", "-u", url, "-i", "http", "-m", "zero",
               "--input-data", str(_data(tmp_path / "p.jsonl")), "--concurrency", "4", "--duration", "60",
               "--warmup-requests", "0", "--profile-export-file", str(export)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while len(_lines(spool)) < 50 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
            # the old client held every result in a list until the level ended: nothing was on disk yet
            assert len(_lines(spool)) >= 50, proc.stderr.read().decode() if proc.poll() is not None else "no spool"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    rows = _lines(spool)
    assert len(rows) >= 50
    assert all(r["end_ns"] > r["sent_ns"] > 0 and r["error"] is None and len(r["chunk_ns"]) == 4 for r in rows)
    assert len({r["seq"] for r in rows}) == len(rows)


def test_the_exports_are_rebuilt_from_the_spool(tmp_path):
    from trtsweep.perf.benchmark import BenchmarkConfig, run
    from trtsweep.perf.protocols import Endpoint

    export = tmp_path / "perf.json"
    with zero_server(chunks=3) as url:
        config = BenchmarkConfig(endpoint=Endpoint(url=url, model="zero"), protocol="http",
                                 input_data=_data(tmp_path / "p.jsonl"), concurrency=[1, 4], num_requests=40,
                                 warmup_requests=2, export_file=export)  # fmt: skip
        reports = run(config)
    assert not (tmp_path / "perf.inflight.jsonl").exists()  # processed, then removed
    profile = json.loads(export.read_text())
    lines = [json.loads(line) for line in (tmp_path / "perf.requests.jsonl").read_text().splitlines()]
    for index, (level, report) in enumerate(zip(profile["levels"], reports, strict=True)):
        assert level["summary"] == json.loads(json.dumps(report.summary))
        assert level["summary"]["succeeded"] == 40
        assert level["requests"] == [row for row in lines if row["level"] == index] == list(report.rows())
        assert len(level["requests"]) == 42 and sum(row["warmup"] for row in level["requests"]) == 2
    assert min(row["sent_ms"] for row in lines) == 0.0  # times count from the run's first request
    assert len(profile["records"]) == 16
