"""Server-side numbers of each level: a Prometheus `/metrics` endpoint (Triton's, TRT-LLM's batcher and KV-cache
gauges, vLLM's, ...) scraped before and after it, or trtllm-serve's JSON iteration stats read through it.

Counters (``# TYPE ... counter``) are reported as the level's delta, gauges as their value after the level.
For Triton, per model: ``queue_ms_per_request`` and ``compute_ms_per_request`` derived from the deltas of
``nv_inference_queue_duration_us`` / ``nv_inference_compute_infer_duration_us`` and
``nv_inference_request_success``.

Both sources also give the level's KV-cache block reuse as the server counts it (`kv_reuse`: `kv_reused_blocks`,
`kv_missed_blocks`, `kv_hit_rate`). TensorRT-LLM's counts are cumulative since the server started, so a level's are
its change over the level (never a sum over iterations): Triton's gauge ``nv_trt_llm_kv_cache_block_metrics
{kv_cache_block_type="reused"}`` after less before (Triton exports no missed count, so no hit rate), and
trtllm-serve's ``kvCacheStats`` ``reusedBlocks`` / ``missedBlocks`` at the level's last iteration less those at
the last iteration before it (`iteration_kv_reuse`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")
MODEL_LABEL = re.compile(r'model="([^"]*)"')
# TensorRT-LLM's Triton backend: gauges (the group is made with the default kind) labelled model, version and
# kv_cache_block_type = max | free | used | tokens_per | reused | fraction, "reused" set to the executor's
# KvCacheStats.reusedBlocks (NVIDIA/TensorRT-LLM@0c8de69a, 1.2.0rc8:
# triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc kv_cache_labels_, and
# src/model_instance_state.cc "Reused KV cache blocks"; "reused" is absent from older backends, which have only
# max | free | used | tokens_per). That count is BlockManager's mReusedBlocks, only ever incremented
# (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp loadOrAllocateBlocks): cumulative since the server started.
KV_FAMILY = "nv_trt_llm_kv_cache_block_metrics"
KV_REUSED = re.compile(r'kv_cache_block_type="reused"')
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
    out: dict[str, Any] = {"counters": counters, "gauges": gauges, "per_model": per_model}
    reused = _triton_reused(samples0, samples1)
    if reused is not None:
        out["kv_reuse"] = kv_reuse(reused, None)
    return out


def kv_reuse(reused: float, missed: float | None) -> dict[str, float | None]:
    """A level's KV-cache block reuse as the server counts it: blocks matched and reused, blocks not matched (where
    the server says), and reused / (reused + missed) (None without a missed count or any block looked up)."""
    looked_up = reused + missed if missed is not None else 0.0
    return {"kv_reused_blocks": reused, "kv_missed_blocks": missed,
            "kv_hit_rate": reused / looked_up if looked_up else None}  # fmt: skip


def _triton_reused(before: dict[str, float], after: dict[str, float]) -> float | None:
    """The change of Triton's cumulative "reused" gauge over the level, summed over models (None without it)."""
    keys = [k for k in after if _name(k) == KV_FAMILY and KV_REUSED.search(k) and k in before]
    return sum(after[k] - before[k] for k in keys) if keys else None


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
        **spec_decoding([s.get("specDecodingStats") for s in items]),
    }


# specDecodingStats of an iteration (executor SpecDecodingStats, cpp/include/tensorrt_llm/executor/types.h; JSON names
# numDraftTokens, numAcceptedTokens, numRequestsWithDraftTokens, acceptanceLength, iterLatencyMS, draftOverhead from
# cpp/tensorrt_llm/executor/jsonSerialization.cpp): the iteration's own counts, which the PyTorch executor fills while
# a speculative_config drafts (tensorrt_llm/_torch/pyexecutor/py_executor.py _update_iter_stats). A level's rates are
# taken from its sums, never as a mean of per-iteration rates: acceptance_rate = accepted / drafted tokens,
# acceptance_length = (accepted + requests drafted for) / requests drafted for (tokens a drafted request gains a step).


def spec_decoding(stats: list[Any]) -> dict[str, Any]:
    """A level's speculative decoding from its iterations' specDecodingStats ({} when none has them)."""
    items = [s for s in stats if isinstance(s, dict)]
    if not items:
        return {}
    drafted = sum(_number(s.get("numDraftTokens")) for s in items)
    accepted = sum(_number(s.get("numAcceptedTokens")) for s in items)
    requests = sum(_number(s.get("numRequestsWithDraftTokens")) for s in items)
    return {
        "spec_draft_tokens": drafted,
        "spec_accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "acceptance_length": (accepted + requests) / requests if requests else None,
    }


# kvCacheStats of an iteration (executor KvCacheStats, cpp/include/tensorrt_llm/executor/types.h; JSON names from
# cpp/tensorrt_llm/executor/jsonSerialization.cpp): reusedBlocks, missedBlocks and cacheHitRate are the KV-cache
# manager's cumulative counts and rate since the server started (kvCacheManager.h getKvCacheStats), which trtllm-serve's
# PyTorch executor copies into every iteration's stats (tensorrt_llm/_torch/pyexecutor/py_executor.py
# _update_iter_stats: reused_blocks, missed_blocks, cache_hit_rate). cacheHitRate is over the server's whole life, so
# the level's rate is computed from the level's changes instead.


def _in_order(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The iterations (those with an id) by id."""
    return sorted((s for s in stats if isinstance(s, dict) and isinstance(s.get("iter"), int)), key=lambda s: s["iter"])


def _latest(stats: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The iteration with the highest id (None without one)."""
    items = _in_order(stats)
    return items[-1] if items else None


def _kv_count(stat: dict[str, Any], field: str) -> float | None:
    value = (stat.get("kvCacheStats") or {}).get(field)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def iteration_kv_reuse(stats: list[dict[str, Any]], before: dict[str, Any] | None) -> dict[str, Any] | None:
    """A level's KV-cache reuse from its iterations: the cumulative reusedBlocks / missedBlocks of its last iteration
    less those of `before`, the last iteration before the level (without one, of the level's first iteration, whose
    own reuse is then left out). Iterations the server's queue dropped lose nothing. None without reusedBlocks."""
    items = _in_order(stats)
    if not items:
        return None
    start, end = before or items[0], items[-1]
    reused0, reused1 = _kv_count(start, "reusedBlocks"), _kv_count(end, "reusedBlocks")
    if reused0 is None or reused1 is None:
        return None
    missed0, missed1 = _kv_count(start, "missedBlocks"), _kv_count(end, "missedBlocks")
    missed = missed1 - missed0 if missed0 is not None and missed1 is not None else None
    return kv_reuse(reused1 - reused0, missed)


class LevelMetrics:
    """One level's server-side numbers from `url`: a Prometheus endpoint scraped before and after (`delta`), or
    trtllm-serve's iteration stats drained before, polled during and taken after (`iteration_summary`).
    `previous`, the level before's, hands on the last iteration it read: the start of this level's KV-cache counts
    when the drain before this level finds no newer one."""

    def __init__(self, session: aiohttp.ClientSession, url: str, previous: LevelMetrics | None = None) -> None:
        self.session, self.url = session, url
        self.before: Scrape | None = None
        self.iterations: list[dict[str, Any]] = []
        self.last_iteration = previous.last_iteration if previous else None
        self._stop = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.before = await scrape(self.session, self.url)  # iteration stats: earlier ones, dropped
        if isinstance(self.before, list):
            self.last_iteration = _latest(self.before) or self.last_iteration
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
            stats, before = [*self.iterations, *after], self.last_iteration
            self.last_iteration = _latest(stats) or before
            kv = iteration_kv_reuse(stats, before)
            return {"iteration_stats": iteration_summary(stats), **({"kv_reuse": kv} if kv else {})}
        if isinstance(self.before, tuple) and isinstance(after, tuple):
            return delta(self.before, after)
        return None
