"""Worker processes: one asyncio process tops out far below what a large server returns, so a level can be sent by
several processes, each with its own event loop and connections, on the same schedule as one process.

* Closed loop: the concurrency is split exactly over the workers (`split`: 10 over 4 = 3, 3, 2, 2); each keeps its
  share in flight, every request taking the next sequence number from one counter in shared memory, so the level
  sends exactly the requests one process would (its count, or until the deadline).
* Open loop: one arrival process, the parent's: it computes the schedule as one process does and hands each request
  out (`LEAD_S` before it is due) to the worker with the fewest outstanding; the worker sends it when it is due, and
  its latencies count from that scheduled time. A --max-concurrency cap is split over the workers as a concurrency.
* Warm-up runs first on every worker, and measuring starts when all of them are done with it.

Each worker appends its results to its own shard of the level's spool (`Spool.shard`), so memory stays flat; the
parent gets a small `Outcome` per request (progress, the first send, a search's early stop), and after the level
reads every shard back, merged, into the one summary and the same files: percentiles are over all requests.
A worker ignores Ctrl-C: the parent's end (its pipe closing) cancels the worker's requests in flight, which are
spooled as cancelled, and ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any, NamedTuple

from trtsweep.errors import TrtsweepError
from trtsweep.perf.metrics import request_metrics
from trtsweep.perf.protocols import make_protocol
from trtsweep.perf.protocols.base import Endpoint, PreparedRequest, RequestResult, deadline
from trtsweep.perf.runner import (
    ClientHealth,
    Level,
    Phase,
    arrival_offsets,
    describe,
    warmup_width,
    watching,
)
from trtsweep.perf.spool import Spool

# default worker count: one per this many requests in flight (closed loop) or requests/s (open loop). One process
# drains about 65k chunks/s of 64 zero-cost streams (benchmarks/client_capacity.py); these keep a worker near a third
# of that with streams of about 150 tokens/s, so its event loop stays responsive and its timestamps exact
STREAMS_PER_WORKER = 128
RATE_PER_WORKER = 100.0
LEAD_S = 0.05  # open loop: a request is handed to its worker this long before it is due
FLUSH_S = 0.01  # a worker sends its outcomes to the parent this often
START_S = 60.0  # a worker's start (imports, connecting) must end within this


class Outcome(NamedTuple):
    """What the parent hears of each finished request (its record is in the spool)."""

    warmup: bool
    ok: bool
    sent_ns: int
    ttft: float | None
    e2e: float | None


def outcome(result: RequestResult) -> Outcome:
    m = request_metrics(result, "", None, None)
    return Outcome(result.warmup, result.ok, result.sent_ns, m.ttft, m.e2e)


def split(total: int, parts: int) -> list[int]:
    """`total` over `parts` as evenly as integers go, larger shares first: split(10, 4) == [3, 3, 2, 2]."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def level_workers(level: Level, requested: int | None, available: int) -> int:
    """Processes that send `level`: `requested` (--workers), else what its load needs, at most `available` - 1; never
    more than the requests it keeps in flight (its concurrency or cap); 1 means this process, as without workers."""
    if requested is not None:
        count = requested
    elif level.concurrency is not None:
        count = min(math.ceil(level.concurrency / STREAMS_PER_WORKER), max(1, available - 1))
    else:
        assert level.request_rate is not None
        count = min(math.ceil(level.request_rate / RATE_PER_WORKER), max(1, available - 1))
    width = level.concurrency or level.max_concurrency
    return max(1, min(count, width) if width else count)


@dataclass(frozen=True)
class PhaseSpec:
    """One phase (warm-up or measured) of a level as one worker sends it."""

    warmup: bool
    spool: str  # the worker's shard of the level's spool: opened by the warm-up phase, closed by the measured one
    width: int  # closed loop: requests in flight; open loop: the cap (0: none)
    end: int = 0  # closed loop: sequence numbers are claimed from the shared counter up to this
    deadline: float | None = None  # closed loop: time.monotonic() after which nothing more is sent
    open: bool = False  # open loop: ("at", [(seq, due_ns), ...]) messages follow, then ("end",)


class Channel:
    """One end of a worker's pipe in an event loop: each message is handed to `on_message` as it arrives (None: the
    other end closed)."""

    def __init__(self, conn: Connection, on_message: Callable[[Any], None]) -> None:
        self.conn, self.on_message = conn, on_message
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(conn.fileno(), self._readable)
        self.open = True

    def _readable(self) -> None:
        try:
            while self.open and self.conn.poll():
                self.on_message(self.conn.recv())
        except (EOFError, OSError):
            self.close()
            self.on_message(None)

    def send(self, message: Any) -> None:
        self.conn.send(message)

    def close(self) -> None:
        if self.open:
            self.open = False
            self.loop.remove_reader(self.conn.fileno())
            self.conn.close()


def _claim(counter: Synchronized[int], end: int) -> Callable[[], int | None]:
    def claim() -> int | None:
        with counter.get_lock():
            seq = counter.value
            if seq >= end:
                return None
            counter.value = seq + 1
            return seq

    return claim


def worker_main(conn: Connection, protocol: str, endpoint: Endpoint, requests: Sequence[PreparedRequest],
                order: list[int], counter: Synchronized[int], stopped: Synchronized[int]) -> None:  # fmt: skip
    """A worker process: connect, then send the phases the parent asks for until its pipe closes (sequence number i
    sends request `order[i % len(order)]`, as in the parent)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(_serve(conn, protocol, endpoint, requests, order, counter, stopped))


async def _serve(conn: Connection, name: str, endpoint: Endpoint, requests: Sequence[PreparedRequest],
                 order: list[int], counter: Synchronized[int], stopped: Synchronized[int]) -> None:  # fmt: skip
    main = asyncio.current_task()
    assert main is not None
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    channel = Channel(conn, lambda m: inbox.put_nowait(m) if m is not None else main.cancel())
    protocol = make_protocol(name, endpoint)
    try:
        await protocol.start()
    except Exception as exc:
        channel.send(("error", describe(exc)))
        return
    channel.send(("ready",))
    spool: Spool | None = None
    outbox: list[Outcome] = []

    def sink(result: RequestResult) -> None:
        assert spool is not None
        spool.add(result)
        outbox.append(outcome(result))

    def flush() -> None:
        if outbox:
            channel.send(("outcomes", outbox[:]))
            outbox.clear()

    async def flusher() -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            flush()

    ended = [True]  # the open loop's arrivals were read to their ("end",)

    async def arrivals() -> AsyncIterator[tuple[int, int]]:
        ended[0] = False
        while (message := await inbox.get())[0] == "at":
            for item in message[1]:
                yield item
        ended[0] = True

    try:
        while True:
            spec: PhaseSpec = await inbox.get()
            if spec.warmup:
                spool = Spool(Path(spec.spool))
            stop = (lambda: False) if spec.warmup else (lambda: bool(stopped.value))
            sending = asyncio.create_task(flusher())
            try:
                async with ClientHealth() as health, watching(protocol) as watch:
                    phase = Phase(protocol, requests, order, sink, spec.warmup, watch, stop)
                    if spec.open:
                        await phase.opened(arrivals(), spec.width or None)
                        while not ended[0]:  # stopped early: the hand-out's rest is dropped
                            ended[0] = (await inbox.get())[0] == "end"
                    else:
                        await phase.closed(_claim(counter, spec.end), spec.width, spec.deadline)
            finally:
                sending.cancel()
                with contextlib.suppress(OSError):
                    flush()
                if spool is not None and not spec.warmup:
                    spool.close()
            channel.send(("done", health.lags, health.cpu))
    finally:
        await protocol.close()
        channel.close()


@dataclass
class _Worker:
    process: BaseProcess
    channel: Channel
    replies: asyncio.Queue[Any]
    outstanding: int = 0  # open loop: handed out and not yet finished


class Pool:
    """Worker processes for the levels that need more than one: started when a level first needs them, kept for
    the levels after it, ended by `close`."""

    def __init__(self, protocol: str, endpoint: Endpoint, requests: Sequence[PreparedRequest],
                 order: list[int]) -> None:  # fmt: skip
        self.protocol, self.endpoint, self.requests, self.order = protocol, endpoint, requests, order
        self.context = multiprocessing.get_context("spawn")  # no fork of a process with an event loop and gRPC
        self.workers: list[_Worker] = []
        self.on_outcome: Callable[[int, Outcome], None] = lambda index, outcome: None

    async def _grow(self, count: int) -> None:
        if not self.workers:  # made with the first worker: a run without workers has no shared memory or its tracker
            self.counter: Synchronized[int] = self.context.Value("q", 0)
            self.stopped: Synchronized[int] = self.context.Value("b", 0, lock=False)  # type: ignore[assignment]
        started = []
        for index in range(len(self.workers), count):
            ours, theirs = self.context.Pipe()
            args = (theirs, self.protocol, self.endpoint, self.requests, self.order, self.counter, self.stopped)
            process = self.context.Process(target=worker_main, args=args, name=f"llm-perf-worker-{index}", daemon=True)
            process.start()
            theirs.close()
            replies: asyncio.Queue[Any] = asyncio.Queue()
            channel = Channel(ours, lambda m, i=index, q=replies: self._message(i, q, m))  # type: ignore[misc]
            self.workers.append(_Worker(process, channel, replies))
            started.append(self.workers[-1])
        for worker in started:
            async with deadline(START_S):
                reply = await self._reply(worker)
            if reply[0] == "error":
                raise TrtsweepError(f"{worker.process.name}: {reply[1]}")

    def _message(self, index: int, replies: asyncio.Queue[Any], message: Any) -> None:
        if message is not None and message[0] == "outcomes":
            for item in message[1]:
                self.on_outcome(index, item)
        else:
            replies.put_nowait(message)

    async def _reply(self, worker: _Worker) -> Any:
        reply = await worker.replies.get()
        if reply is None:
            raise TrtsweepError(f"{worker.process.name} ended unexpectedly (exit code {worker.process.exitcode})")
        return reply

    async def _phase(self, workers: list[_Worker], specs: list[PhaseSpec], health: ClientHealth,
                     during: Callable[[], Any] | None = None) -> None:  # fmt: skip
        for worker, spec in zip(workers, specs, strict=True):
            worker.channel.send(spec)
        if during is not None:
            await during()
        for worker in workers:
            _, lags, cpu = await self._reply(worker)
            health.absorb(lags, cpu)

    async def run_level(self, level: Level, count: int, spool: Spool, tally: Callable[[Outcome], None],
                        stop: Callable[[], bool], health: ClientHealth, seed: int) -> None:  # fmt: skip
        """Send `level` from `count` workers: each finished request is in `spool` (a shard of it per worker) and
        `tally`-ed; `stop()` is asked as outcomes come in and, once true, nothing more is sent."""
        await self._grow(count)
        workers = self.workers[:count]
        shards = [str(spool.shard(i)) for i in range(count)]
        self.stopped.value = 0
        health.workers = count

        def on_outcome(index: int, item: Outcome) -> None:
            spool.note(item.sent_ns)
            if not item.warmup:
                workers[index].outstanding -= 1
            tally(item)
            if not self.stopped.value and stop():
                self.stopped.value = 1

        self.on_outcome = on_outcome
        warm = level.warmup_requests
        self.counter.value = 0
        shares = split(warmup_width(level), count)
        await self._phase(workers, [PhaseSpec(True, shards[i], min(s, warm), warm) for i, s in enumerate(shares)],
                          health)  # fmt: skip
        planned = level.planned_requests
        if level.concurrency is not None:
            self.counter.value = warm
            end = warm + (10**9 if planned is None else planned)
            until = time.monotonic() + level.duration_s if level.duration_s else None
            shares = split(level.concurrency, count)
            specs = [PhaseSpec(False, shards[i], s, end, until) for i, s in enumerate(shares)]
            await self._phase(workers, specs, health)
            return
        assert planned is not None
        caps = split(level.max_concurrency, count) if level.max_concurrency else [0] * count
        offsets = arrival_offsets(level, planned, seed)
        specs = [PhaseSpec(False, shards[i], cap, open=True) for i, cap in enumerate(caps)]
        await self._phase(workers, specs, health, lambda: self._hand_out(workers, warm, offsets))

    async def _hand_out(self, workers: list[_Worker], start: int, offsets: Sequence[float]) -> None:
        """The one arrival process of an open loop: each request goes, LEAD_S before it is due, to the worker with
        the fewest outstanding; then every worker is told there are no more."""
        lead = int(LEAD_S * 1e9)
        t0 = time.perf_counter_ns() + lead
        i = 0
        while i < len(offsets) and not self.stopped.value:
            horizon = time.perf_counter_ns() + lead
            batches: list[list[tuple[int, int]]] = [[] for _ in workers]
            while i < len(offsets) and (due := t0 + int(offsets[i] * 1e9)) <= horizon:
                worker = min(range(len(workers)), key=lambda w: workers[w].outstanding)
                batches[worker].append((start + i, due))
                workers[worker].outstanding += 1
                i += 1
            for worker, batch in zip(workers, batches, strict=True):
                if batch:
                    worker.channel.send(("at", batch))
            if i < len(offsets):
                next_due = t0 + int(offsets[i] * 1e9) - lead
                await asyncio.sleep(max(FLUSH_S, (next_due - time.perf_counter_ns()) / 1e9))
        for worker in workers:
            worker.channel.send(("end",))

    def close(self) -> None:
        """End every worker: its pipe closes (its requests in flight are cancelled and spooled), then it is joined,
        and killed by its PID if it has not ended within 10 s."""
        for worker in self.workers:
            worker.channel.close()
        for worker in self.workers:
            worker.process.join(10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(5)
        self.workers.clear()
