"""Server-side numbers of each level: a Prometheus `/metrics` endpoint (Triton's, TRT-LLM's batcher and KV-cache
gauges, vLLM's, ...) scraped before and after it, or trtllm-serve's JSON iteration stats read through it.

Counters (``# TYPE ... counter``) are reported as the level's delta, gauges as their value after the level.
For Triton, per model: ``queue_ms_per_request`` and ``compute_ms_per_request`` derived from the deltas of
``nv_inference_queue_duration_us`` / ``nv_inference_compute_infer_duration_us`` and
``nv_inference_request_success``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")
MODEL_LABEL = re.compile(r'model="([^"]*)"')
SETTLE_S = 0.5  # wait after a level's last response before the second scrape
POLL_S = 1.0  # how often iteration stats are taken while a level runs
TIMEOUT_S = 30.0  # trtllm-serve answers /metrics once no stats came for 2 s
Prometheus = tuple[dict[str, float], dict[str, str]]
Scrape = Prometheus | list[dict[str, Any]]  # a Prometheus text's samples and types, or JSON iteration stats


def parse(text: str) -> Prometheus:
    """Prometheus text format -> ({"name{labels}": value}, {name: type})."""
    samples: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
            continue
        match = SAMPLE.match(line)
        if match:
            try:
                samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
            except ValueError:
                continue
    return samples, types


async def scrape(session: aiohttp.ClientSession, url: str) -> Scrape | None:
    """One scrape: Prometheus text, or a JSON list (iteration stats); None when the endpoint does not answer with
    either (metrics are optional, never fatal)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as resp:
            if resp.status != 200:
                return None
            if resp.content_type == "application/json":
                data = await resp.json()
                return data if isinstance(data, list) else None
            return parse(await resp.text())
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):  # asyncio's is not the builtin before 3.11
        return None


def _name(key: str) -> str:
    return key.split("{", 1)[0]


def delta(before: Prometheus, after: Prometheus) -> dict[str, Any]:
    """Counters' changes (non-zero only) and gauges' values after the level, plus Triton per-model timings."""
    samples0, _ = before
    samples1, types = after
    counters = {k: v - samples0.get(k, 0.0) for k, v in samples1.items() if types.get(_name(k)) == "counter"}
    counters = {k: v for k, v in counters.items() if v}
    gauges = {k: v for k, v in samples1.items() if types.get(_name(k)) == "gauge"}
    per_model: dict[str, dict[str, float]] = {}
    for key, value in counters.items():
        if _name(key) != "nv_inference_request_success" or not value:
            continue
        model = MODEL_LABEL.search(key)
        labels = key[len("nv_inference_request_success") :]
        queue = counters.get(f"nv_inference_queue_duration_us{labels}", 0.0)
        compute = counters.get(f"nv_inference_compute_infer_duration_us{labels}", 0.0)
        per_model[model.group(1) if model else labels] = {
            "requests": value, "queue_ms_per_request": queue / value / 1000.0,
            "compute_ms_per_request": compute / value / 1000.0,
        }  # fmt: skip
    return {"counters": counters, "gauges": gauges, "per_model": per_model}


# -- trtllm-serve: iteration stats ---------------------------------------------------------------------------------
# trtllm-serve's GET /metrics (TensorRT-LLM 1.0 .. 1.2, tensorrt_llm/serve/openai_server.py get_iteration_stats) is
# not Prometheus: a JSON list of the executor's IterationStats (cpp/include/tensorrt_llm/executor/types.h) that the
# call takes off a bounded queue (LLM API `iter_stats_max_iterations`), filled only with `enable_iter_perf_stats`.
# Taken, not read: so a level drains it before, polls it while the level runs (a long level would overflow the
# queue) and takes the rest after.


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def iteration_summary(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """A level's iterations -> batch occupancy, queueing, KV-cache use, and how many iterations the server's queue
    dropped before they were read (`iterations_missed`: gaps in the iteration ids)."""
    by_id = {int(s["iter"]): s for s in stats if isinstance(s, dict) and isinstance(s.get("iter"), int)}
    items = [by_id[i] for i in sorted(by_id)]
    if not items:
        return {"iterations": 0}
    batching = [s.get("inflightBatchingStats") or {} for s in items]
    batch = [_number(b.get("numScheduledRequests")) for b in batching]
    latency = [_number(s.get("iterLatencyMS")) for s in items]
    new_active = sum(_number(s.get("numNewActiveRequests")) for s in items)
    queue_total = sum(_number(s.get("newActiveRequestsQueueLatencyMS")) for s in items)  # a total per iteration
    kv = [_number(k.get("usedNumBlocks")) / _number(k.get("maxNumBlocks"))
          for s in items if (k := s.get("kvCacheStats") or {}) and _number(k.get("maxNumBlocks"))]  # fmt: skip
    gpu_mem = [_number(s.get("gpuMemUsage")) for s in items if s.get("gpuMemUsage")]
    return {
        "iterations": len(items),
        "iterations_missed": (max(by_id) - min(by_id) + 1) - len(items),
        "iter_latency_ms_mean": _mean(latency),
        "iter_latency_ms_max": max(latency),
        "batch_mean": _mean(batch),
        "batch_max": max(batch),
        "context_requests": sum(_number(b.get("numContextRequests")) for b in batching),
        "queued_max": max(_number(s.get("numQueuedRequests")) for s in items),
        "completed_requests": sum(_number(s.get("numCompletedRequests")) for s in items),
        "queue_ms_per_request": queue_total / new_active if new_active else None,
        "kv_used_fraction_mean": _mean(kv),
        "kv_used_fraction_max": max(kv) if kv else None,
        "gpu_mem_max_bytes": max(gpu_mem) if gpu_mem else None,
    }


class LevelMetrics:
    """One level's server-side numbers from `url`: a Prometheus endpoint scraped before and after (`delta`), or
    trtllm-serve's iteration stats drained before, polled during and taken after (`iteration_summary`)."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url
        self.before: Scrape | None = None
        self.iterations: list[dict[str, Any]] = []
        self._stop = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.before = await scrape(self.session, self.url)  # iteration stats: earlier ones, dropped
        if isinstance(self.before, list):
            self._poller = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), POLL_S)
                return
            except asyncio.TimeoutError:
                got = await scrape(self.session, self.url)
                self.iterations.extend(got if isinstance(got, list) else [])

    async def finish(self) -> dict[str, Any] | None:
        """After the level's last response (and SETTLE_S): the level's numbers, or None without both scrapes."""
        if self._poller is not None:
            self._stop.set()
            await self._poller  # a poll in flight holds stats already taken off the server's queue
        after = await scrape(self.session, self.url)
        if isinstance(self.before, list) and isinstance(after, list):
            return {"iteration_stats": iteration_summary([*self.iterations, *after])}
        if isinstance(self.before, tuple) and isinstance(after, tuple):
            return delta(self.before, after)
        return None
