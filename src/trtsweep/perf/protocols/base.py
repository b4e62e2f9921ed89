"""What every protocol client implements, and the per-request record it fills in.

Timestamps are `time.perf_counter_ns()` values taken in the event loop the moment a request is handed
to the transport (`sent_ns`), each response chunk is decoded (`chunk_ns`), and the final response
arrives (`end_ns`).
"""

from __future__ import annotations

import abc
import asyncio
import sys
import time
from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

NUM_OUTPUT_TOKENS = "num_output_tokens"  # Triton output: tokens in this response (trtsweep's ensembles)
# the ensemble's request inputs -> their names in the PyTorch flow's Triton `llmapi` model
LLMAPI_NAMES = {"max_tokens": "sampling_param_max_tokens", "stream": "streaming"}


class TextSoFar:
    """The llmapi model streams the text so far in every response (the LLM API's `output.text`), where the ensemble
    streams the new part: `new()` turns the former into the latter, so chunks add up to the answer either way."""

    def __init__(self) -> None:
        self.seen = ""

    def new(self, text: str) -> str:
        if not text.startswith(self.seen):
            raise ValueError(f"a streamed text_output does not extend the text before it: {self.seen[-30:]!r} "
                             f"then {text[:30]!r}")  # fmt: skip
        new, self.seen = text[len(self.seen) :], text
        return new


def served_name(name: str, inputs: Collection[str]) -> str:
    """`name` as the served model calls it: the ensemble's own, or the llmapi model's counterpart where only that
    one is served (so one request works against both flows' Triton repositories)."""
    other = LLMAPI_NAMES.get(name)
    return other if name not in inputs and other in inputs else name


@dataclass(frozen=True)
class Endpoint:
    """Where and what to call."""

    url: str
    model: str
    streaming: bool = True
    connect_timeout_s: float = 10.0
    request_timeout_s: float = 600.0
    # streaming: the longest wait for the next chunk (first one included) before the request fails as a
    # timeout; a stream whose end was lost by the server fails after this instead of the request timeout
    stall_timeout_s: float | None = 60.0
    text_input_name: str = "text_input"
    max_tokens_name: str = "max_tokens"
    text_output_name: str = "text_output"
    extra_inputs: dict[str, Any] = field(default_factory=dict)
    openai_endpoint: str = "chat"  # openai protocol: chat (/v1/chat/completions) or completions


@dataclass
class PreparedRequest:
    """One request as sent: the prompt after templating and its output-length budget."""

    record_index: int
    prompt: str
    max_tokens: int
    messages: list[dict[str, str]] | None = None
    prefix_tokens: int = 0  # tokens of a prefix it shares with other requests (trtsweep.perf.workloads)


@dataclass
class RequestResult:
    """Everything measured for one request."""

    seq: int
    record_index: int
    warmup: bool
    scheduled_ns: int = 0  # open loop: when the schedule wanted it sent (0 in closed loop)
    sent_ns: int = 0
    chunk_ns: list[int] = field(default_factory=list)
    chunk_text: list[str] = field(default_factory=list)
    end_ns: int = 0
    error: str | None = None
    error_class: str | None = None
    # exact counts when the server reports them: OpenAI usage, or the num_output_tokens output of a
    # trtsweep-generated Triton ensemble (summed over the streamed responses)
    server_input_tokens: int | None = None
    server_output_tokens: int | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunk_text)

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_ns > 0

    def mark_sent(self) -> None:
        self.sent_ns = time.perf_counter_ns()

    def add_chunk(self, text: str) -> None:
        self.chunk_ns.append(time.perf_counter_ns())
        self.chunk_text.append(text)

    def add_server_output_tokens(self, count: int) -> None:
        self.server_output_tokens = (self.server_output_tokens or 0) + count

    def mark_end(self) -> None:
        self.end_ns = time.perf_counter_ns()


class Protocol(abc.ABC):
    """A client for one server protocol; one instance serves all concurrent requests of a run."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect and check that the server and model are ready (TrtsweepError otherwise)."""

    @abc.abstractmethod
    async def send(self, request: PreparedRequest, result: RequestResult) -> None:
        """Send one request, recording timestamps into `result`; raise on failure."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections."""

    @abc.abstractmethod
    async def server_id(self) -> str:
        """The id the server reports (Triton: `--id`, `name` of GET /v2; OpenAI: the first model id of GET
        /v1/models); raises when it does not answer (TrtsweepError, or the transport's own error)."""


def deadline(seconds: float) -> AbstractAsyncContextManager[Any]:
    """A deadline over a block of awaits, raising asyncio.TimeoutError (the builtin TimeoutError from 3.11 on):
    asyncio.timeout from 3.11, async-timeout's same context manager on a 3.10 host (Ubuntu 22.04's Python)."""
    if sys.version_info >= (3, 11):
        return asyncio.timeout(seconds)
    import async_timeout

    return async_timeout.timeout(seconds)
