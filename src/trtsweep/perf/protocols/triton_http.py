"""Triton HTTP generate extension: `POST /v2/models/<m>/generate_stream` (SSE) for decoupled models or
when streaming, `POST /v2/models/<m>/generate` otherwise. A `num_output_tokens` field in the responses
(trtsweep's ensembles have it) is summed into the request's exact output token count."""

from __future__ import annotations

import asyncio
import json
from time import perf_counter_ns

import aiohttp

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import (
    NUM_OUTPUT_TOKENS,
    Endpoint,
    PreparedRequest,
    Protocol,
    RequestResult,
    TextSoFar,
    deadline,
    served_name,
)


class ServerError(Exception):
    """An error the server reported in a response body."""


def http_session(ep: Endpoint) -> aiohttp.ClientSession:
    """One pooled session for all requests, bounded by the request timeout (stalls: runner.StallWatch)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=ep.request_timeout_s, sock_connect=ep.connect_timeout_s),
        read_bufsize=1 << 20,
    )


class TritonHttp(Protocol):
    session: aiohttp.ClientSession

    def _base(self) -> str:
        url = self.endpoint.url
        return url if url.startswith(("http://", "https://")) else f"http://{url}"

    async def start(self) -> None:
        ep = self.endpoint
        self.session = http_session(ep)
        url = f"{self._base()}/v2/models/{ep.model}"
        try:
            async with deadline(ep.connect_timeout_s):
                async with self.session.get(f"{url}/ready") as resp:
                    if resp.status != 200:
                        raise TrtsweepError(f"model {ep.model!r} is not ready on {self._base()} (HTTP {resp.status})")
                async with self.session.get(f"{url}/config") as resp:
                    config = await resp.json()
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            await self.close()
            raise TrtsweepError(
                f"cannot reach Triton HTTP at {self._base()} within {ep.connect_timeout_s:g} s: "
                f"{str(exc) or 'no answer'}"
            ) from exc
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled", False))
        names = {t["name"] for t in config.get("input", [])}
        self.stream_name = served_name("stream", names) if served_name("stream", names) in names else None
        self.max_tokens_name = served_name(ep.max_tokens_name, names)
        self.text_so_far = self.max_tokens_name != ep.max_tokens_name  # the llmapi model streams the text so far
        self.url_stream = f"{url}/generate_stream"
        self.url_single = f"{url}/generate"

    async def send(self, request: PreparedRequest, result: RequestResult) -> None:
        ep = self.endpoint
        body: dict[str, object] = {ep.text_input_name: request.prompt, self.max_tokens_name: request.max_tokens}
        if self.stream_name:
            body[self.stream_name] = ep.streaming
        body.update(ep.extra_inputs)
        use_stream = ep.streaming or self.decoupled
        result.mark_sent()
        async with self.session.post(self.url_stream if use_stream else self.url_single, json=body) as resp:
            if not use_stream:
                payload = await resp.json(content_type=None)
                if resp.status != 200 or "error" in payload:
                    raise ServerError(payload.get("error", f"HTTP {resp.status}"))
                result.add_chunk(_text(payload.get(ep.text_output_name)))
                _count(payload, result)
                result.mark_end()
                return
            if resp.status != 200:
                raise ServerError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
            # the hot loop only timestamps events (into chunk_ns, where the stall watch sees them); they are
            # decoded once the stream has ended, in one json.loads call (per-call overhead is most of the cost
            # of decoding a small event), and events without text are dropped then
            stamps = result.chunk_ns
            events: list[bytes] = []
            async for raw in resp.content:
                if raw.startswith(b"data:"):
                    stamps.append(perf_counter_ns())
                    events.append(raw[5:])
                    if b'"error"' in raw and "error" in (payload := json.loads(raw[5:])):
                        raise ServerError(payload["error"])
        result.mark_end()
        result.chunk_ns = []
        so_far = TextSoFar() if self.text_so_far else None
        for stamp, payload in zip(stamps, json.loads(b"[" + b",".join(events) + b"]"), strict=True):
            text = _text(payload.get(ep.text_output_name))
            if text and so_far is not None:
                try:
                    text = so_far.new(text)
                except ValueError as exc:
                    raise ServerError(str(exc)) from None
            if text:
                result.chunk_ns.append(stamp)
                result.chunk_text.append(text)
            _count(payload, result)

    async def server_id(self) -> str:
        async with deadline(self.endpoint.connect_timeout_s), self.session.get(f"{self._base()}/v2") as resp:
            if resp.status != 200:
                raise ServerError(f"GET /v2 answered HTTP {resp.status}")
            metadata = await resp.json(content_type=None)
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str):
            raise ServerError("GET /v2 answered without a server name: not Triton server metadata")
        return name

    async def close(self) -> None:
        if getattr(self, "session", None) is not None:
            await self.session.close()


def _count(payload: dict, result: RequestResult) -> None:
    value = payload.get(NUM_OUTPUT_TOKENS)
    if isinstance(value, list):  # one count per beam: the first beam is the one whose text is measured
        value = value[0] if value else None
    if isinstance(value, int):
        result.add_server_output_tokens(value)


def _text(value: object) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return "" if value is None else str(value)
