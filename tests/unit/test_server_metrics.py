"""trtllm-serve's iteration stats (/metrics, JSON) and Triton's Prometheus metrics -> a level's server numbers (KV-cache
reuse included) and results.csv columns."""

from __future__ import annotations

import asyncio
from typing import Any

from trtsweep.perf.server_metrics import LevelMetrics, delta, iteration_kv_reuse, iteration_summary, parse
from trtsweep.report import results_table


def iteration(n: int, scheduled: int, used: int, *, new: int = 0, queue_ms: float = 0.0, done: int = 0,
              queued: int = 0, latency: float = 10.0) -> dict[str, Any]:  # fmt: skip
    """One IterationStats as TensorRT-LLM's JSON has it (the fields trtsweep reads, and some it does not)."""
    return {
        "timestamp": "11-25-2026 08:00:00", "iter": n, "iterLatencyMS": latency, "numNewActiveRequests": new,
        "newActiveRequestsQueueLatencyMS": queue_ms, "numActiveRequests": scheduled, "numQueuedRequests": queued,
        "numCompletedRequests": done, "maxNumActiveRequests": 8, "gpuMemUsage": 1000 + n, "cpuMemUsage": 0,
        "kvCacheStats": {"maxNumBlocks": 100, "usedNumBlocks": used, "freeNumBlocks": 100 - used, "tokensPerBlock": 32},
        "inflightBatchingStats": {"numScheduledRequests": scheduled, "numContextRequests": new, "numGenRequests": 0,
                                  "numPausedRequests": 0, "numCtxTokens": 0, "microBatchId": 0},
    }  # fmt: skip


def test_a_levels_iterations_give_batch_queue_time_kv_use_and_completions():
    stats = [
        iteration(7, 2, 10, new=2, queue_ms=30.0, latency=20.0),  # two requests start, 30 ms in queue in all
        iteration(8, 3, 20, new=1, queue_ms=6.0, queued=2),
        iteration(9, 3, 30, done=1),
        iteration(10, 2, 20, done=2, latency=40.0),
    ]
    summary = iteration_summary(stats)
    assert summary == {
        "iterations": 4, "iterations_missed": 0, "iter_latency_ms_mean": 20.0, "iter_latency_ms_max": 40.0,
        "batch_mean": 2.5, "batch_max": 3.0, "context_requests": 3.0, "queued_max": 2.0, "completed_requests": 3.0,
        "queue_ms_per_request": 12.0, "kv_used_fraction_mean": 0.2, "kv_used_fraction_max": 0.3,
        "gpu_mem_max_bytes": 1010.0,
    }  # fmt: skip


def test_iterations_the_server_dropped_are_counted_and_one_read_twice_is_counted_once():
    stats = [iteration(1, 1, 1), iteration(2, 1, 1), iteration(2, 1, 1), iteration(6, 1, 1)]
    summary = iteration_summary(stats)
    assert (summary["iterations"], summary["iterations_missed"]) == (3, 3)


def test_no_iterations_no_numbers():
    """enable_iter_perf_stats off: trtllm-serve's /metrics is [] and nothing is made up."""
    assert iteration_summary([]) == {"iterations": 0}
    row = results_table._level_columns({"server_metrics": {"iteration_stats": {"iterations": 0}}}, 1)
    assert [row[c] for c in ("server_requests", "server_queue_ms", "server_batch_mean", "server_kv_used_max")] == [
        None, None, None, None,
    ]  # fmt: skip


def test_results_csv_takes_trtllm_serves_numbers_from_its_iterations_and_tritons_from_prometheus():
    serve = {"server_metrics": {"iteration_stats": iteration_summary([iteration(1, 4, 50, new=2, queue_ms=8.0,
                                                                                  done=2)])}}  # fmt: skip
    row = results_table._level_columns(serve, 1)
    assert [row[c] for c in ("server_requests", "server_queue_ms", "server_compute_ms", "server_batch_mean",
                             "server_kv_used_max")] == [2.0, 4.0, None, 4.0, 0.5]  # fmt: skip
    triton = {"server_metrics": {"per_model": {"ensemble": {"requests": 9.0, "queue_ms_per_request": 1.5,
                                                            "compute_ms_per_request": 20.0}}}}  # fmt: skip
    row = results_table._level_columns(triton, 1)
    assert [row[c] for c in ("server_requests", "server_queue_ms", "server_compute_ms", "server_batch_mean")] == [
        9.0, 1.5, 20.0, None,
    ]  # fmt: skip


# -- KV-cache block reuse --------------------------------------------------------------------------------------------


def triton_metrics(reused: int, used: int) -> str:
    """Triton's /metrics with TensorRT-LLM's KV-cache block family as its backend declares it (a gauge per
    kv_cache_block_type, custom_metrics_reporter.cc), beside a counter of Triton's own."""
    kinds = {"max": 100, "free": 100 - used, "used": used, "tokens_per": 32, "reused": reused, "fraction": used / 100}
    lines = [
        "# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics",
        "# TYPE nv_trt_llm_kv_cache_block_metrics gauge",
        *(f'nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="{kind}",model="tensorrt_llm",version="1"}} {value}'
          for kind, value in kinds.items()),
        "# TYPE nv_inference_request_success counter",
        f'nv_inference_request_success{{model="ensemble",version="1"}} {reused}',
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def kv_iteration(n: int, reused: int, missed: int) -> dict[str, Any]:
    """An iteration whose kvCacheStats carries the manager's cumulative reuse counts and its lifetime hit rate."""
    stat = iteration(n, 1, 10)
    stat["kvCacheStats"] |= {"allocTotalBlocks": reused + missed, "allocNewBlocks": missed, "reusedBlocks": reused,
                             "missedBlocks": missed, "cacheHitRate": reused / (reused + missed)}  # fmt: skip
    return stat


def test_tritons_reused_blocks_over_a_level_are_the_change_of_its_cumulative_gauge():
    level = delta(parse(triton_metrics(reused=40, used=10)), parse(triton_metrics(reused=64, used=30)))
    assert level["kv_reuse"] == {"kv_reused_blocks": 24.0, "kv_missed_blocks": None, "kv_hit_rate": None}
    row = results_table._level_columns({"server_metrics": level}, 1)
    assert (row["kv_reused_blocks"], row["kv_hit_rate"]) == (24.0, None)


def test_a_triton_without_the_reused_block_type_gives_no_reuse_numbers():
    """Older backends export max | free | used | tokens_per only; the hf backend no TensorRT-LLM family at all."""
    old = "".join(line + "\n" for line in triton_metrics(5, 10).splitlines() if "reused" not in line)
    assert "kv_reuse" not in delta(parse(old), parse(old))
    hf = '# TYPE nv_inference_request_success counter\nnv_inference_request_success{model="ensemble",version="1"} 3\n'
    level = delta(parse(hf), parse(hf.replace(" 3\n", " 9\n")))
    assert "kv_reuse" not in level
    row = results_table._level_columns({"server_metrics": level}, 1)
    assert (row["kv_reused_blocks"], row["kv_hit_rate"]) == (None, None)


def test_trtllm_serves_reuse_over_a_level_is_its_last_iteration_less_the_last_one_before_it():
    """reusedBlocks / missedBlocks are cumulative: summing them over iterations would count the past again, and the
    server's cacheHitRate is over its whole life; the level's rate comes from the level's own changes."""
    before = kv_iteration(9, reused=100, missed=100)  # earlier levels: a lifetime hit rate of 0.5
    level = [kv_iteration(10, 100, 104), kv_iteration(11, 112, 104), kv_iteration(13, 124, 108)]  # 12 was dropped
    assert iteration_kv_reuse(level, before) == {"kv_reused_blocks": 24.0, "kv_missed_blocks": 8.0,
                                                 "kv_hit_rate": 0.75}  # fmt: skip
    without = iteration_kv_reuse(level, None)  # no iteration before: counted from the level's first
    assert without == {"kv_reused_blocks": 24.0, "kv_missed_blocks": 4.0, "kv_hit_rate": 24 / 28}
    assert iteration_kv_reuse([iteration(1, 1, 10)], None) is None  # no reusedBlocks in the stats: nothing made up
    server = {"iteration_stats": iteration_summary(level), "kv_reuse": iteration_kv_reuse(level, before)}
    row = results_table._level_columns({"server_metrics": server}, 1)
    assert (row["kv_reused_blocks"], row["kv_hit_rate"]) == (24.0, 0.75)


class FakeStats:
    """trtllm-serve's /metrics: each GET takes the iterations queued since the last one."""

    def __init__(self) -> None:
        self.queue: list[dict[str, Any]] = []

    def get(self, url: str, timeout: Any) -> Any:
        taken, self.queue = self.queue, []
        return FakeResponse(taken)


class FakeResponse:
    status, content_type = 200, "application/json"

    def __init__(self, data: list[dict[str, Any]]) -> None:
        self.data = data

    async def __aenter__(self) -> FakeResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def json(self) -> list[dict[str, Any]]:
        return self.data


def test_a_level_starts_its_kv_counts_where_the_level_before_ended():
    """Between levels the drain before a level finds nothing (the level before took every iteration): the level
    before's last iteration is where this one's counts start."""
    server = FakeStats()

    async def level(previous: LevelMetrics | None, stats: list[dict[str, Any]]) -> LevelMetrics:
        metrics = LevelMetrics(server, "http://serve/metrics", previous)  # type: ignore[arg-type]
        await metrics.start()
        server.queue = stats  # the level's iterations, all taken by the scrape after it
        results.append(await metrics.finish())
        return metrics

    async def run() -> None:
        server.queue = [kv_iteration(1, 0, 10)]  # the server's own warm-up, before the first level
        first = await level(None, [kv_iteration(2, 8, 12), kv_iteration(3, 16, 12)])
        await level(first, [kv_iteration(4, 40, 12)])

    results: list[dict[str, Any] | None] = []
    asyncio.run(run())
    first, second = results
    assert first and second
    assert first["kv_reuse"] == {"kv_reused_blocks": 16.0, "kv_missed_blocks": 2.0, "kv_hit_rate": 16 / 18}
    assert second["kv_reuse"] == {"kv_reused_blocks": 24.0, "kv_missed_blocks": 0.0, "kv_hit_rate": 1.0}
