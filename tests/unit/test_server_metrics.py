"""trtllm-serve's iteration stats (/metrics, JSON) -> a level's server numbers and results.csv columns."""

from __future__ import annotations

from typing import Any

from trtsweep.perf.server_metrics import iteration_summary
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
