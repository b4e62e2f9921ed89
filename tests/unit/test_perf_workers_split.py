"""llm-perf worker processes, the parts without a server: the exact split of a concurrency, how many workers a level
gets, --workers on the command line, and a level's spool shards read back into one summary whose percentiles are
over every request (never an average of per-worker percentiles)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from trtsweep.perf import cli
from trtsweep.perf.metrics import LevelStats, request_metrics
from trtsweep.perf.protocols.base import RequestResult
from trtsweep.perf.runner import Level
from trtsweep.perf.spool import Spool
from trtsweep.perf.workers import level_workers, split

MS = 1_000_000


def test_a_concurrency_is_split_exactly_over_the_workers():
    assert split(10, 4) == [3, 3, 2, 2]
    assert split(8, 8) == [1] * 8
    assert split(3, 5) == [1, 1, 1, 0, 0]
    for total, parts in itertools.product(range(0, 70), range(1, 17)):
        shares = split(total, parts)
        assert len(shares) == parts and sum(shares) == total
        assert max(shares) - min(shares) <= 1 and shares == sorted(shares, reverse=True)


def test_workers_1_is_one_process_and_the_default_follows_the_load_within_the_cores():
    closed = Level(num_requests=10, concurrency=1024)
    assert level_workers(closed, 1, 16) == 1
    assert level_workers(closed, 12, 16) == 12  # as asked, even above what the load needs
    assert level_workers(closed, None, 16) == 8  # 1024 streams: one worker per 128
    assert level_workers(closed, None, 3) == 2  # at most the cores less one
    assert level_workers(closed, None, 1) == 1
    assert level_workers(Level(num_requests=10, concurrency=64), None, 16) == 1
    assert level_workers(Level(num_requests=10, concurrency=3), 8, 16) == 3  # never more than its concurrency
    assert level_workers(Level(num_requests=10, request_rate=350.0), None, 16) == 4  # one per 100 requests/s
    assert level_workers(Level(num_requests=10, request_rate=5000.0), None, 16) == 15
    assert level_workers(Level(num_requests=10, request_rate=2000.0, max_concurrency=2), None, 16) == 2
    assert level_workers(Level(num_requests=10, request_rate=5.0), None, 16) == 1


def test_the_command_line_takes_workers():
    args = cli.parser().parse_args(["-m", "zero", "--workers", "4", "--concurrency", "10"])
    assert cli.config_from_args(args).workers == 4
    assert cli.config_from_args(cli.parser().parse_args(["-m", "zero"])).workers is None
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["-m", "zero", "--workers", "0"])


def _result(seq: int, sent_ms: float, ttft_ms: float, e2e_ms: float) -> RequestResult:
    sent = int(sent_ms * MS)
    first, end = sent + int(ttft_ms * MS), sent + int(e2e_ms * MS)
    return RequestResult(seq=seq, record_index=0, warmup=False, sent_ns=sent, chunk_ns=[first, end],
                         chunk_text=["a", "b"], end_ns=end)  # fmt: skip


def test_shards_read_back_as_one_level_with_percentiles_over_every_request(tmp_path: Path):
    """Two workers with very different latencies: the level's p50/p99 are those of all requests together; the mean
    of the workers' own percentiles (what averaging would give) is far from them."""
    spool = Spool(tmp_path / "x.inflight.jsonl")
    fast = [_result(i, 10.0 * i, 1.0 + i % 7, 5.0 + i % 11) for i in range(0, 300, 2)]
    slow = [_result(i, 10.0 * i, 40.0 + i % 5, 400.0 + 3 * (i % 13)) for i in range(1, 101, 2)]
    for index, results in enumerate((fast, slow)):
        shard = Spool(spool.shard(index))
        for r in sorted(results, key=lambda r: r.end_ns):  # a worker spools each request as it ends
            shard.add(r)
        shard.close()
    back = list(spool.results())
    assert sorted(r.seq for r in back) == sorted(r.seq for r in fast + slow)  # every request, once
    ends = [r.end_ns for r in back]
    assert ends == sorted(ends)  # merged in the order they finished
    stats = LevelStats()
    for r in back:
        stats.add(r, request_metrics(r, "", None, None))
    summary = stats.summary()
    for name, key in (("e2e", "e2e_ms"), ("ttft", "ttft_ms")):
        every = [getattr(request_metrics(r, "", None, None), name) * 1e3 for r in fast + slow]
        for p, q in (("p50", 50), ("p99", 99)):
            assert summary[key][p] == pytest.approx(float(np.percentile(every, q)), rel=1e-9)
            per_worker = [np.percentile([getattr(request_metrics(r, "", None, None), name) * 1e3 for r in part], q)
                          for part in (fast, slow)]  # fmt: skip
            assert abs(summary[key][p] - float(np.mean(per_worker))) > 1.0
    assert summary["requests"] == len(fast) + len(slow)
    spool.remove()
    assert not list(tmp_path.iterdir())  # the shards go with the spool
