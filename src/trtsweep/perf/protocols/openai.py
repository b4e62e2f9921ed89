"""OpenAI-compatible HTTP: `POST /v1/chat/completions` (messages) or `/v1/completions` (prompt), streaming
(SSE, `stream_options.include_usage` for exact token counts) or not. Used by trtllm-serve, vLLM, SGLang,
Triton's OpenAI frontend, `transformers serve` and similar servers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import PreparedRequest, Protocol, RequestResult, deadline
from trtsweep.perf.protocols.triton_http import ServerError, http_session

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


class OpenAI(Protocol):
    session: aiohttp.ClientSession

    def _base(self) -> str:
        url = self.endpoint.url.rstrip("/")
        url = url if url.startswith(("http://", "https://")) else f"http://{url}"
        return url[: -len("/v1")] if url.endswith("/v1") else url

    async def start(self) -> None:
        ep = self.endpoint
        if ep.openai_endpoint not in PATHS:
            raise TrtsweepError(f"openai endpoint must be one of {sorted(PATHS)}, got {ep.openai_endpoint!r}")
        self.session = http_session(ep)
        self.url = self._base() + PATHS[ep.openai_endpoint]
        try:
            async with deadline(ep.connect_timeout_s), self.session.get(f"{self._base()}/health") as resp:
                await resp.read()  # any HTTP answer proves the server is there; /health is not universal
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            await self.close()
            raise TrtsweepError(
                f"cannot reach OpenAI-compatible server at {self._base()} within {ep.connect_timeout_s:g} s: "
                f"{str(exc) or 'no answer'}"
            ) from exc

    def _body(self, request: PreparedRequest) -> dict[str, Any]:
        ep = self.endpoint
        body: dict[str, Any] = {"model": ep.model, "max_tokens": request.max_tokens, "stream": ep.streaming}
        if ep.openai_endpoint == "chat":
            body["messages"] = request.messages or [{"role": "user", "content": request.prompt}]
        else:
            body["prompt"] = request.prompt
        if ep.streaming:
            body["stream_options"] = {"include_usage": True}
        body.update(ep.extra_inputs)
        return body

    def _text(self, choice: dict[str, Any]) -> str:
        if self.endpoint.openai_endpoint == "chat":
            part = choice.get("delta") or choice.get("message") or {}
            return part.get("content") or ""
        return choice.get("text") or ""

    @staticmethod
    def _usage(payload: dict[str, Any], result: RequestResult) -> None:
        usage = payload.get("usage")
        if usage:
            result.server_input_tokens = usage.get("prompt_tokens")
            result.server_output_tokens = usage.get("completion_tokens")

    async def send(self, request: PreparedRequest, result: RequestResult) -> None:
        result.mark_sent()
        async with self.session.post(self.url, json=self._body(request)) as resp:
            if resp.status != 200:
                raise ServerError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
            if not self.endpoint.streaming:
                payload = await resp.json(content_type=None)
                result.add_chunk("".join(self._text(c) for c in payload.get("choices", [])))
                self._usage(payload, result)
                result.mark_end()
                return
            async for raw in resp.content:
                if not raw.startswith(b"data:"):
                    continue
                data = raw[5:].strip()
                if data == b"[DONE]":
                    break
                payload = json.loads(data)
                if "error" in payload:
                    raise ServerError(str(payload["error"]))
                text = "".join(self._text(c) for c in payload.get("choices", []))
                if text:
                    result.add_chunk(text)
                self._usage(payload, result)
        result.mark_end()

    async def server_id(self) -> str:
        """The model id `GET /v1/models` names first: trtllm-serve answers with its model argument, which trtsweep
        makes a link of each start's own (serve/openai_server.py), so it identifies the server."""
        url = f"{self._base()}/v1/models"
        async with deadline(self.endpoint.connect_timeout_s), self.session.get(url) as resp:
            if resp.status != 200:
                raise ServerError(f"GET /v1/models answered HTTP {resp.status}")
            payload = await resp.json(content_type=None)
        data = payload.get("data") if isinstance(payload, dict) else None
        first = data[0].get("id") if isinstance(data, list) and data and isinstance(data[0], dict) else None
        if not isinstance(first, str):
            raise ServerError("GET /v1/models answered without a model id")
        return first

    async def close(self) -> None:
        if getattr(self, "session", None) is not None:
            await self.session.close()
