"""Triton KServe v2 over gRPC, on the raw protobuf service (no per-response numpy objects).

Decoupled models are called through bidirectional streams (ModelStreamInfer): each stream is kept open and
reused by one request at a time, so a benchmark opens about `concurrency` streams, not one per request; the
final response of a request is the one flagged `triton_final_response` (empty final responses enabled).
Other models get unary ModelInfer. `stream` is set from --streaming when the model has that input.
"""

from __future__ import annotations

import struct
from typing import Any

import grpc
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import (
    NUM_OUTPUT_TOKENS,
    PreparedRequest,
    Protocol,
    RequestResult,
    TextSoFar,
    deadline,
    served_name,
)

MAX_MESSAGE = 1 << 30
PACK = {"BOOL": "?", "INT8": "b", "UINT8": "B", "INT16": "h", "UINT16": "H", "INT32": "i", "UINT32": "I",
        "INT64": "q", "UINT64": "Q", "FP32": "f", "FP64": "d"}  # fmt: skip


class ServerError(Exception):
    """An error the server reported for a request."""


def encode(datatype: str, value: Any) -> bytes:
    """One element as Triton's raw little-endian contents (BYTES: 4-byte length + data)."""
    if datatype == "BYTES":
        data = value if isinstance(value, bytes) else str(value).encode()
        return struct.pack("<I", len(data)) + data
    if datatype not in PACK:
        raise TrtsweepError(f"input datatype {datatype} is not supported by llm-perf")
    return struct.pack("<" + PACK[datatype], value)


def first_text(raw: bytes) -> str:
    """Concatenated elements of a raw BYTES output."""
    parts, offset = [], 0
    while offset + 4 <= len(raw):
        (length,) = struct.unpack_from("<I", raw, offset)
        parts.append(raw[offset + 4 : offset + 4 + length])
        offset += 4 + length
    return b"".join(parts).decode("utf-8", errors="replace")


class TritonGrpc(Protocol):
    async def start(self) -> None:
        ep = self.endpoint
        self.channel = grpc.aio.insecure_channel(
            ep.url, options=[("grpc.max_send_message_length", MAX_MESSAGE),
                             ("grpc.max_receive_message_length", MAX_MESSAGE)],
        )  # fmt: skip
        self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        self.idle: list[grpc.aio.StreamStreamCall] = []
        self.next_id = 0
        try:
            ready = await self.stub.ModelReady(
                service_pb2.ModelReadyRequest(name=ep.model), timeout=ep.connect_timeout_s
            )
            if not ready.ready:
                raise TrtsweepError(f"model {ep.model!r} is not ready on {ep.url}")
            config: model_config_pb2.ModelConfig = (
                await self.stub.ModelConfig(service_pb2.ModelConfigRequest(name=ep.model), timeout=ep.connect_timeout_s)
            ).config
        except grpc.aio.AioRpcError as exc:
            await self.close()
            reason = "no answer" if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED else exc.details()
            message = f"cannot reach Triton gRPC at {ep.url} within {ep.connect_timeout_s:g} s: {reason}"
            raise TrtsweepError(message) from None
        self.decoupled = config.model_transaction_policy.decoupled
        batch = [1] if config.max_batch_size > 0 else []
        dtypes = {t.name: model_config_pb2.DataType.Name(t.data_type)[len("TYPE_") :] for t in config.input}
        dtypes = {k: "BYTES" if v == "STRING" else v for k, v in dtypes.items()}
        self.max_tokens_name = served_name(ep.max_tokens_name, dtypes)
        self.text_so_far = self.max_tokens_name != ep.max_tokens_name  # the llmapi model streams the text so far
        for name in (ep.text_input_name, self.max_tokens_name, *ep.extra_inputs):
            if name not in dtypes:
                raise TrtsweepError(f"model {ep.model!r} has no input {name!r}; it has {sorted(dtypes)}")
        fixed = dict(ep.extra_inputs)
        if served_name("stream", dtypes) in dtypes:
            fixed.setdefault(served_name("stream", dtypes), ep.streaming)
        self.dtypes, self.shape = dtypes, [*batch, 1]
        wanted = [ep.text_output_name]
        if any(t.name == NUM_OUTPUT_TOKENS and t.data_type == model_config_pb2.TYPE_INT32 for t in config.output):
            wanted.append(NUM_OUTPUT_TOKENS)
        self.outputs = [service_pb2.ModelInferRequest.InferRequestedOutputTensor(name=name) for name in wanted]
        # the tensors every request shares, built once
        # a list value is one tensor of that many elements ([1, n] with a batch dimension)
        values = {name: value if isinstance(value, list) else [value] for name, value in fixed.items()}
        self.fixed_tensors = [
            self._tensor(name, [*batch, len(v)] if isinstance(fixed[name], list) else None)
            for name, v in values.items()
        ]
        self.fixed_contents = [b"".join(encode(dtypes[name], x) for x in v) for name, v in values.items()]

    def _tensor(self, name: str, shape: list[int] | None = None) -> service_pb2.ModelInferRequest.InferInputTensor:
        return service_pb2.ModelInferRequest.InferInputTensor(
            name=name, datatype=self.dtypes[name], shape=shape or self.shape
        )

    def _request(self, request: PreparedRequest) -> service_pb2.ModelInferRequest:
        ep = self.endpoint
        self.next_id += 1
        req = service_pb2.ModelInferRequest(
            model_name=ep.model, id=str(self.next_id),
            inputs=[self._tensor(ep.text_input_name), self._tensor(self.max_tokens_name), *self.fixed_tensors],
            outputs=self.outputs,
            raw_input_contents=[encode("BYTES", request.prompt.encode()),
                                encode(self.dtypes[self.max_tokens_name], request.max_tokens), *self.fixed_contents],
        )  # fmt: skip
        if self.decoupled:
            req.parameters["triton_enable_empty_final_response"].bool_param = True
        return req

    def _read(self, response: service_pb2.ModelInferResponse, result: RequestResult) -> str:
        """This response's text; its num_output_tokens (first beam), if any, is added to the result."""
        text = ""
        for index, output in enumerate(response.outputs):
            if index >= len(response.raw_output_contents):
                break
            if output.name == self.endpoint.text_output_name:
                text = first_text(response.raw_output_contents[index])
            elif output.name == NUM_OUTPUT_TOKENS and len(response.raw_output_contents[index]) >= 4:
                result.add_server_output_tokens(struct.unpack_from("<i", response.raw_output_contents[index])[0])
        return text

    async def send(self, request: PreparedRequest, result: RequestResult) -> None:
        req = self._request(request)
        timeout = self.endpoint.request_timeout_s
        if not self.decoupled:
            result.mark_sent()
            response = await self.stub.ModelInfer(req, timeout=timeout)
            result.add_chunk(self._read(response, result))
            result.mark_end()
            return
        stream = self.idle.pop() if self.idle else self.stub.ModelStreamInfer()
        reusable, so_far = False, TextSoFar() if self.text_so_far else None
        try:
            result.mark_sent()
            await stream.write(req)
            async with deadline(timeout):
                while True:
                    message = await stream.read()
                    if message is grpc.aio.EOF:
                        raise ServerError("stream closed before the final response")
                    if message.error_message:
                        raise ServerError(message.error_message)
                    response = message.infer_response
                    text = self._read(response, result)
                    if text and so_far is not None:
                        try:
                            text = so_far.new(text)
                        except ValueError as exc:
                            raise ServerError(str(exc)) from None
                    if text:
                        result.add_chunk(text)
                    final = response.parameters.get("triton_final_response")
                    if final is not None and final.bool_param:
                        result.mark_end()
                        reusable = True
                        return
        finally:
            if reusable:
                self.idle.append(stream)
            else:
                stream.cancel()

    async def server_id(self) -> str:
        reply = await self.stub.ServerMetadata(
            service_pb2.ServerMetadataRequest(), timeout=self.endpoint.connect_timeout_s
        )
        return str(reply.name)

    async def close(self) -> None:
        for stream in getattr(self, "idle", []):
            stream.cancel()
        if getattr(self, "channel", None) is not None:
            await self.channel.close()
