"""A near-zero-cost streaming server for calibrating clients (llm-perf selftest, benchmarks/).

It speaks both dialects llm-perf uses over HTTP, answering every request with `chunks` SSE events:
* Triton generate extension: `POST /v2/models/<m>/generate_stream`, `GET /v2/models/<m>/ready|config`;
* OpenAI: `POST /v1/chat/completions` and `/v1/completions` (with a final `usage` event), `GET /health`.
Chunk times are exact when `first_ms`/`gap_ms` are set: each event is due at request arrival + first_ms
+ i * gap_ms (absolute deadlines on the event loop, so errors do not accumulate); 0/0 streams as fast as
the socket takes it. With `slots` > 0 at most that many requests are served at once; the others wait, in the
order they came, before their first chunk (their chunk times count from when a slot frees), so a closed loop
above `slots` queues for about a whole request time: a server of known capacity. Run it in its own process
(`python -m trtsweep.perf.zeroserver`) so it does not share a core's event loop with the client under test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--first-ms", type=float, default=0.0)
    parser.add_argument("--gap-ms", type=float, default=0.0)
    parser.add_argument("--slots", type=int, default=0, help="requests served at once; the rest wait (0: no limit)")
    args = parser.parse_args(argv)
    server = ZeroServer(args.chunks, args.first_ms, args.gap_ms, args.slots)
    web.run_app(server.app(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
