"""Load generation: closed-loop concurrency levels, a warm-up phase excluded from the numbers.

`run_level()` keeps exactly `concurrency` requests in flight until `num_requests` have been sent. The
request order is the data set shuffled once with `seed` and cycled, so runs are reproducible. Every
finished request is appended to `sink` at once, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
from tritonclient.utils import InferenceServerException

from trtsweep.perf.protocols.base import PreparedRequest, Protocol, RequestResult


@dataclass(frozen=True)
class Level:
    concurrency: int
    num_requests: int
    warmup_requests: int = 0


def request_order(count: int, seed: int) -> list[int]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


def classify(exc: BaseException) -> str:
    """A short, stable error class for counting failures."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, (aiohttp.ClientConnectionError, ConnectionError)):
        return "connection"
    if isinstance(exc, InferenceServerException):
        status = (exc.status() or "").upper()
        return "connection" if "UNAVAILABLE" in status else "server_error"
    if type(exc).__name__ == "ServerError":
        return "server_error"
    return "client_error"


async def _phase(
    protocol: Protocol,
    requests: Sequence[PreparedRequest],
    order: list[int],
    start: int,
    count: int,
    concurrency: int,
    warmup: bool,
    sink: Callable[[RequestResult], None],
) -> int:
    next_seq = start
    end = start + count

    async def worker() -> None:
        nonlocal next_seq
        while next_seq < end:
            seq = next_seq
            next_seq += 1
            request = requests[order[seq % len(order)]]
            result = RequestResult(seq=seq, record_index=request.record_index, warmup=warmup)
            try:
                await protocol.send(request, result)
            except asyncio.CancelledError:
                result.error, result.error_class = "cancelled", "cancelled"
                sink(result)
                raise
            except Exception as exc:
                result.error = str(exc) or type(exc).__name__
                result.error_class = classify(exc)
            sink(result)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))
    return end


async def run_level(
    protocol: Protocol,
    requests: Sequence[PreparedRequest],
    level: Level,
    seed: int,
    sink: Callable[[RequestResult], None],
) -> None:
    order = request_order(len(requests), seed)
    seq = await _phase(protocol, requests, order, 0, level.warmup_requests, level.concurrency, True, sink)
    await _phase(protocol, requests, order, seq, level.num_requests, level.concurrency, False, sink)
