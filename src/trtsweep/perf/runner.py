"""Load generation: closed-loop concurrency or open-loop request rate, warm-up excluded from the numbers.

Closed loop (`Level.concurrency`): exactly `concurrency` requests are in flight until `num_requests` have
been sent, or until `duration_s` has passed since the first measured request.

Open loop (`Level.request_rate`): requests are sent on a schedule fixed in advance (Poisson, constant or
gamma arrivals; gamma shape = `burstiness`, 1 = Poisson), at absolute times from the phase start, with an
optional `max_concurrency` cap. Each result keeps its *scheduled* send time as well as the actual one, so
latency is also measured from the schedule (a generator or a cap that falls behind cannot hide queueing:
no coordinated omission), and the schedule lag is reported.

The request order is the data set shuffled once with `seed` and cycled, so runs are reproducible. Every
finished request is handed to `sink` at once, so an interrupted run keeps what it measured.

A level may be stopped early (`stop`, asked before every measured send): nothing more is sent, and the requests
in flight end by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import grpc

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import PreparedRequest, Protocol, RequestResult
from trtsweep.perf.stats import summarize

ARRIVALS = ("poisson", "constant", "gamma")
TRACE = "trace"  # the arrival of a trace replay's level: the trace's own times (`Level.offsets`)


@dataclass(frozen=True)
class Level:
    """One load level: closed loop (concurrency) or open loop (request_rate)."""

    num_requests: int
    concurrency: int | None = None
    request_rate: float | None = None
    warmup_requests: int = 0
    duration_s: float | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    # a trace replay (arrival "trace"): its speed, and each request's due time (s from the phase start, scaled by
    # the speed); request_rate is then the replay's mean rate
    replay_speed: float | None = None
    offsets: tuple[float, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.request_rate is None):
            raise TrtsweepError("a load level needs exactly one of concurrency or request rate")
        if self.request_rate is not None and self.request_rate <= 0:
            raise TrtsweepError(f"--request-rate must be > 0, got {self.request_rate}")
        if (self.arrival == TRACE) != (self.offsets is not None):
            raise TrtsweepError("a trace replay level needs its times, and only it has them")
        if self.arrival not in (*ARRIVALS, TRACE):
            raise TrtsweepError(f"--arrival must be one of {ARRIVALS}, got {self.arrival!r}")
        if self.burstiness <= 0:
            raise TrtsweepError(f"--burstiness must be > 0, got {self.burstiness}")

    @property
    def label(self) -> str:
        if self.replay_speed is not None:
            return f"trace x{self.replay_speed:g}"
        return f"concurrency {self.concurrency}" if self.concurrency else f"rate {self.request_rate:g}/s"

    @property
    def planned_requests(self) -> int | None:
        """The measured requests the level sends; None for a closed loop that runs for `duration_s`."""
        if not self.duration_s:
            return self.num_requests
        if self.request_rate is None:
            return None
        if self.offsets is not None:  # the rows due within the duration
            return max(1, sum(offset < self.duration_s for offset in self.offsets))
        return max(1, round(self.request_rate * self.duration_s))


def request_order(count: int, seed: int) -> list[int]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


def arrival_offsets(level: Level, count: int, seed: int) -> list[float]:
    """Seconds from the phase start at which each of `count` requests is due."""
    assert level.request_rate is not None
    if level.offsets is not None:
        return list(level.offsets[:count])
    rng = random.Random(seed)
    mean = 1.0 / level.request_rate
    offsets, t = [], 0.0
    for _ in range(count):
        offsets.append(t)
        if level.arrival == "constant":
            t += mean
        else:
            shape = 1.0 if level.arrival == "poisson" else level.burstiness
            t += rng.gammavariate(shape, mean / shape)
    return offsets


def classify(exc: BaseException) -> str:
    """A short, stable error class for counting failures: connection, timeout, server_error, protocol_error,
    client_error."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)):
        return "connection"  # refused, reset, or the stream broke off mid-response
    if isinstance(exc, grpc.aio.AioRpcError):
        code = exc.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            return "connection"
        return "timeout" if code == grpc.StatusCode.DEADLINE_EXCEEDED else "server_error"
    if type(exc).__name__ == "ServerError":
        return "server_error"
    if _stray_stream_data(exc):
        return "protocol_error"
    return "client_error"


def _stray_stream_data(exc: BaseException) -> bool:
    """The connection's next response began with stream data: the server wrote events after it had ended an
    earlier response (Triton's HTTP generate_stream does this under concurrency; its gRPC stream does not)."""
    return isinstance(exc, aiohttp.ClientResponseError) and "status line" in str(exc) and "data:" in str(exc)


def describe(exc: BaseException) -> str:
    """One line saying what went wrong."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    if _stray_stream_data(exc):
        return (
            "the response began with stream data left over from an earlier stream on this connection (the "
            "server ended that stream before sending all of it); Triton's HTTP generate_stream does this under "
            "concurrency: measure with -i grpc"
        )
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class StallWatch:
    """Fails a streamed request that has received nothing for `stall_s` (since it was sent or since its last
    chunk): one task scans the requests in flight a few times per stall period, so a lost stream end costs
    the run `stall_s`, not the request timeout, and nothing is paid per chunk."""

    def __init__(self, stall_s: float) -> None:
        self.stall_ns = int(stall_s * 1e9)
        self.period = min(1.0, stall_s / 4)
        self.inflight: dict[int, tuple[RequestResult, asyncio.Future[None]]] = {}

    async def run(self, send: Coroutine[Any, Any, None], result: RequestResult) -> None:
        task = asyncio.ensure_future(send)
        self.inflight[id(result)] = (result, task)
        try:
            await task
        finally:
            self.inflight.pop(id(result), None)

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            now = time.perf_counter_ns()
            for result, task in list(self.inflight.values()):
                last = result.chunk_ns[-1] if result.chunk_ns else result.sent_ns
                if last and now - last > self.stall_ns and not task.done():
                    result.error = f"no data for {self.stall_ns / 1e9:g} s (--stall-timeout)"
                    result.error_class = "timeout"
                    task.cancel()


async def attempt(protocol: Protocol, request: PreparedRequest, result: RequestResult, watch: StallWatch | None,
                  sink: Callable[[RequestResult], None]) -> None:  # fmt: skip
    """Send `request`, recording into `result`, which goes to `sink` whatever happens: a failure is recorded (its
    class and one line), never raised; a cancelled run's request is recorded as cancelled, and the cancel goes on."""
    try:
        if watch is None:
            await protocol.send(request, result)
        else:
            await watch.run(protocol.send(request, result), result)
    except asyncio.CancelledError:
        if result.error_class != "timeout":  # not the stall watchdog: the run itself is being cancelled
            result.error, result.error_class = "cancelled", "cancelled"
            sink(result)
            raise
    except Exception as exc:
        result.error = describe(exc)
        result.error_class = classify(exc)
    sink(result)


Claim = Callable[[], int | None]


def counter(start: int, end: int) -> Claim:
    """Hands out the sequence numbers start..end-1, then None (a closed loop's requests in one process)."""
    seqs = iter(range(start, end))
    return lambda: next(seqs, None)


async def schedule(start: int, offsets: Sequence[float]) -> AsyncIterator[tuple[int, int]]:
    """(seq, due perf_counter ns) of an open loop's requests, `offsets` seconds from the first one's iteration."""
    t0 = time.perf_counter_ns()
    for i, offset in enumerate(offsets):
        yield start + i, t0 + int(offset * 1e9)


class Phase:
    """Sends one phase's requests (warm-up or measured) and reports each result to the sink."""

    def __init__(self, protocol: Protocol, requests: Sequence[PreparedRequest], order: list[int],
                 sink: Callable[[RequestResult], None], warmup: bool, watch: StallWatch | None,
                 stop: Callable[[], bool] = lambda: False) -> None:  # fmt: skip
        self.protocol, self.requests, self.order, self.sink, self.warmup = protocol, requests, order, sink, warmup
        self.watch, self.stop = watch, stop

    async def one(self, seq: int, scheduled_ns: int = 0) -> None:
        request = self.requests[self.order[seq % len(self.order)]]
        result = RequestResult(
            seq=seq, record_index=request.record_index, warmup=self.warmup, scheduled_ns=scheduled_ns
        )
        await attempt(self.protocol, request, result, self.watch, self.sink)

    async def closed(self, claim: Claim, width: int, deadline: float | None) -> None:
        """`width` requests in flight, each followed by the next one `claim` hands out, until it hands out None,
        the deadline (time.monotonic) passes or `stop()` says so."""

        async def worker() -> None:
            while (deadline is None or time.monotonic() < deadline) and not self.stop():
                if (seq := claim()) is None:
                    return
                await self.one(seq)

        await asyncio.gather(*(worker() for _ in range(width)))

    async def opened(self, arrivals: AsyncIterator[tuple[int, int]], cap: int | None) -> None:
        """Each request of `arrivals` (seq, due perf_counter ns) sent when it is due, at most `cap` in flight."""
        gate = asyncio.Semaphore(cap) if cap else None
        tasks = []

        async def gated(seq: int, scheduled: int) -> None:
            if gate is None:
                await self.one(seq, scheduled)
                return
            async with gate:
                await self.one(seq, scheduled)

        async for seq, due in arrivals:
            delay = (due - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if self.stop():
                break
            tasks.append(asyncio.ensure_future(gated(seq, due)))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def watching(protocol: Protocol) -> AsyncIterator[StallWatch | None]:
    """The stall watchdog of a streaming endpoint with --stall-timeout (None otherwise), running meanwhile."""
    ep = protocol.endpoint
    watch = StallWatch(ep.stall_timeout_s) if ep.streaming and ep.stall_timeout_s else None
    watcher = asyncio.create_task(watch.watch()) if watch else None
    try:
        yield watch
    finally:
        if watcher:
            watcher.cancel()


class ClientHealth:
    """How busy the client itself was during a level: event-loop lag and CPU per request.

    A 10 ms sleep is timed over and over while the level runs; its overshoot is the delay any response
    waited before the client could timestamp it. A loop lag p99 near or above the latencies being measured
    means the client, not the server, is what was measured. With worker processes, their samples and CPU are
    added (`absorb`): the lag percentiles are over every process's samples.
    """

    PERIOD_S = 0.010

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.cpu = 0.0
        self.workers = 1

    async def __aenter__(self) -> ClientHealth:
        self.cpu0 = time.process_time()
        self.task = asyncio.create_task(self._watch())
        return self

    async def _watch(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(self.PERIOD_S)
            self.lags.append(time.perf_counter() - t - self.PERIOD_S)

    async def __aexit__(self, *exc: object) -> None:
        self.cpu += time.process_time() - self.cpu0
        self.task.cancel()

    def absorb(self, lags: list[float], cpu: float) -> None:
        self.lags.extend(lags)
        self.cpu += cpu

    def summary(self, requests: int) -> dict[str, Any]:
        lag = summarize(self.lags)
        return {
            "loop_lag_ms": {k: v for k, v in lag.as_dict(1000.0).items() if k in ("p50", "p99", "max")}
            if lag
            else None,
            "cpu_s": self.cpu,
            "cpu_ms_per_request": 1000.0 * self.cpu / requests if requests else None,
            **({"workers": self.workers} if self.workers > 1 else {}),
        }


async def run_level(
    protocol: Protocol, requests: Sequence[PreparedRequest], level: Level, seed: int,
    sink: Callable[[RequestResult], None], stop: Callable[[], bool] = lambda: False, order: list[int] | None = None,
) -> None:  # fmt: skip
    """Send the level's warm-up, then its measured requests, until they are sent or `stop()` says so. Sequence
    number i sends request `order[i % len(order)]` (default: the requests shuffled with `seed`)."""
    order = request_order(len(requests), seed) if order is None else order
    async with watching(protocol) as watch:
        warm = Phase(protocol, requests, order, sink, warmup=True, watch=watch)
        measured = Phase(protocol, requests, order, sink, warmup=False, watch=watch, stop=stop)
        # warm-up always runs closed loop at the level's width, and finishes before measuring starts
        seq = level.warmup_requests
        await warm.closed(counter(0, seq), min(warmup_width(level), seq), None)
        count = level.planned_requests
        if level.concurrency is not None:
            deadline = time.monotonic() + level.duration_s if level.duration_s else None
            end = seq + (10**9 if count is None else count)
            await measured.closed(counter(seq, end), min(level.concurrency, end - seq), deadline)
            return
        assert count is not None
        await measured.opened(schedule(seq, arrival_offsets(level, count, seed)), level.max_concurrency)


def warmup_width(level: Level) -> int:
    """Warm-up runs closed loop at the level's width: its concurrency, else its cap, else 1."""
    return level.concurrency or level.max_concurrency or 1
