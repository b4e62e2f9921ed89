"""A near-zero-cost streaming server for calibrating clients (llm-perf selftest, benchmarks/).

It speaks both dialects llm-perf uses over HTTP, answering every request with `chunks` SSE events:
* Triton generate extension: `POST /v2/models/<m>/generate_stream`, `GET /v2/models/<m>/ready|config`;
* OpenAI: `POST /v1/chat/completions` and `/v1/completions` (with a final `usage` event), `GET /health`.
Chunk times are exact when `first_ms`/`gap_ms` are set: each event is due at request arrival + first_ms
+ i * gap_ms (absolute deadlines on the event loop, so errors do not accumulate); 0/0 streams as fast as
the socket takes it. With `slots` > 0 at most that many requests are served at once; the others wait, in the
order they came, before their first chunk (their chunk times count from when a slot frees), so a closed loop
above `slots` queues for about a whole request time: a server of known capacity. Run it in its own process
(`python -m trtsweep.perf.zeroserver`) so it does not share a core's event loop with the client under test; with
`--processes N` it is N such processes on one port (SO_REUSEPORT: the kernel spreads the connections), so that a
client of several worker processes measures itself, not the server. `--raw` serves the Triton dialect alone, without
pacing or slots, from a bare asyncio protocol (one socket write per event, about a third of aiohttp's cost): the
server for measuring a client's capacity (benchmarks/client_capacity.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from typing import Any

from aiohttp import web


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class ZeroServer:
    def __init__(self, chunks: int, first_ms: float, gap_ms: float, slots: int = 0) -> None:
        self.chunks, self.first, self.gap = chunks, first_ms / 1000.0, gap_ms / 1000.0
        self.slots = asyncio.Semaphore(slots) if slots else None  # FIFO: waiters are woken in arrival order

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self.slots if self.slots is not None else contextlib.nullcontext()

    async def _stream(self, request: web.Request, event) -> web.StreamResponse:  # type: ignore[no-untyped-def]
        async with self._slot():
            start = time.perf_counter()
            body = await request.json()
            n = int(body.get("max_tokens") or body.get("max_completion_tokens") or self.chunks)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(n):
                delay = start + self.first + self.gap * i - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await resp.write(event(i, n))
            return resp

    async def triton(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, lambda i, n: _sse({"model_name": "zero", "text_output": f"t{i} "}))

    async def openai(self, request: web.Request) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")

        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(i: int, n: int) -> bytes:
            last = i == n - 1
            choice: dict = {"index": 0, "finish_reason": "length" if last else None}
            choice.update({"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "})
            out = _sse({"id": "zero", "object": kind, "created": 0, "model": "zero", "choices": [choice]})
            if last:
                usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
                out += _sse(
                    {"id": "zero", "object": kind, "created": 0, "model": "zero", "choices": [], "usage": usage}
                )
                out += b"data: [DONE]\n\n"
            return out

        return await self._stream(request, event)

    @staticmethod
    async def ready(request: web.Request) -> web.Response:
        return web.json_response(
            {"input": [{"name": "text_input"}, {"name": "max_tokens"}]} if request.path.endswith("/config") else {}
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v2/models/{model}/generate_stream", self.triton)
        app.router.add_get("/v2/models/{model}/ready", self.ready)
        app.router.add_get("/v2/models/{model}/config", self.ready)
        app.router.add_post("/v1/chat/completions", self.openai)
        app.router.add_post("/v1/completions", self.openai)
        app.router.add_get("/health", self.ready)
        return app


OK = b"HTTP/1.1 200 OK\r\nContent-Type: "
READY = json.dumps({"input": [{"name": "text_input"}, {"name": "max_tokens"}]}).encode()


class RawZero(asyncio.Protocol):
    """HTTP/1.1 keep-alive, Triton dialect only: a POST streams `max_tokens` (else `chunks`) SSE events, each its
    own chunk of the chunked body and its own write, paced as ZeroServer's from when the request's bytes came in (all
    at once when unpaced); any GET answers READY (ready, config, health). With `stamp`, each event's text says when
    the request came in and when the event was written (`t<i>@<arrival ns>@<written ns> `, perf_counter), so a
    client's timestamps can be checked against what the server really did rather than what it meant to do."""

    def __init__(self, chunks: int, first_ms: float = 0.0, gap_ms: float = 0.0, stamp: bool = False) -> None:
        self.chunks, self.first, self.gap, self.stamp, self.buffer = chunks, first_ms / 1e3, gap_ms / 1e3, stamp, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        arrival = time.perf_counter_ns()
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
            size = int(fields.get("content-length", 0))
            if len(self.buffer) < end + 4 + size:
                return
            body, self.buffer = self.buffer[end + 4 : end + 4 + size], self.buffer[end + 4 + size :]
            if head[0].startswith("POST"):
                self._stream(int(json.loads(body or b"{}").get("max_tokens") or self.chunks), arrival)
            else:
                self.transport.write(b"%sapplication/json\r\nContent-Length: %d\r\n\r\n%s" % (OK, len(READY), READY))

    def _stream(self, n: int, arrival: int) -> None:
        self.transport.write(b"%stext/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" % OK)
        if not (self.first or self.gap or self.stamp):
            for i in range(n):
                self._event(i, n, arrival)
            return
        loop = asyncio.get_running_loop()
        start = loop.time() - (time.perf_counter_ns() - arrival) / 1e9
        for i in range(n):
            loop.call_at(start + self.first + self.gap * i, self._event, i, n, arrival)

    def _event(self, i: int, n: int, arrival: int) -> None:
        text = f"t{i}@{arrival}@{time.perf_counter_ns()} " if self.stamp else f"t{i} "
        event = _sse({"model_name": "zero", "text_output": text})
        self.transport.write(b"%x\r\n%s\r\n%s" % (len(event), event, b"0\r\n\r\n" if i == n - 1 else b""))


async def _raw(port: int, reuse_port: bool, *args: Any) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: RawZero(*args), "127.0.0.1", port, reuse_port=reuse_port)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--first-ms", type=float, default=0.0)
    parser.add_argument("--gap-ms", type=float, default=0.0)
    parser.add_argument("--slots", type=int, default=0, help="requests served at once; the rest wait (0: no limit)")
    parser.add_argument("--processes", type=int, default=1, help="server processes sharing the port (SO_REUSEPORT)")
    parser.add_argument("--raw", action="store_true", help="Triton dialect only, no slots: least cost per event")
    parser.add_argument("--stamp", action="store_true", help="--raw: each event's text says when it was written")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # one of --processes' others
    args = parser.parse_args(argv)
    one = [sys.executable, "-m", "trtsweep.perf.zeroserver", "--port", str(args.port), "--chunks", str(args.chunks),
           "--first-ms", str(args.first_ms), "--gap-ms", str(args.gap_ms), "--slots", str(args.slots),
           *(["--raw"] if args.raw else []), *(["--stamp"] if args.stamp else [])]  # fmt: skip
    # the others are this process's children, in its process group: stopped with it, and by PID on its way out
    others = [subprocess.Popen([*one, "--reuse-port"]) for _ in range(args.processes - 1)]
    try:
        if args.raw:
            with contextlib.suppress(KeyboardInterrupt):
                reuse = args.reuse_port or args.processes > 1
                asyncio.run(_raw(args.port, reuse, args.chunks, args.first_ms, args.gap_ms, args.stamp))
            return
        server = ZeroServer(args.chunks, args.first_ms, args.gap_ms, args.slots)
        web.run_app(server.app(), host="127.0.0.1", port=args.port, print=None, access_log=None,
                    reuse_port=args.reuse_port or args.processes > 1)  # fmt: skip
    finally:
        for proc in others:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
