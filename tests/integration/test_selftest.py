"""llm-perf selftest runs against its built-in server and reports sane numbers (no speed targets here)."""

from __future__ import annotations

import pytest

from trtsweep.perf import selftest

pytestmark = pytest.mark.quiet  # the measured TTFT checked to 50 ms of the server's: nothing beside it


def test_selftest_reports_timing_error_and_capacity(tmp_path):
    err = selftest.timing_error(tmp_path)
    assert -1.0 < err["ttft_error_p50_ms"] < 50.0  # measured TTFT is never below what the server did
    rows = selftest.capacity(tmp_path, [1, 4], duration=1.0)
    assert [r["concurrency"] for r in rows] == [1, 4]
    for row in rows:
        assert row["llm_perf_req_s"] > 0 and row["bare_req_s"] > 0
        # every response carries CHUNKS chunks, counted as tokens without a tokenizer
        assert abs(row["llm_perf_chunks_s"] / row["llm_perf_req_s"] - selftest.CHUNKS) < 0.5
        assert row["cpu_ms_per_request"] > 0
    assert selftest.format_rows(rows).splitlines()[0].split()[0] == "concurrency"
