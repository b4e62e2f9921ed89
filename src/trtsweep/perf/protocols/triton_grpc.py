"""Triton KServe v2 over gRPC: bidirectional streaming (ModelStreamInfer) for decoupled models, unary
ModelInfer otherwise. The model's config decides; `stream` is set from --streaming."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import PreparedRequest, Protocol, RequestResult


class TritonGrpc(Protocol):
    client: grpcclient.InferenceServerClient
    decoupled: bool
    input_dtypes: dict[str, str]

    async def start(self) -> None:
        ep = self.endpoint
        self.client = grpcclient.InferenceServerClient(url=ep.url)
        try:
            ready = await asyncio.wait_for(self.client.is_model_ready(ep.model), ep.connect_timeout_s)
            if not ready:
                raise TrtsweepError(f"model {ep.model!r} is not ready on {ep.url}")
            config = (await self.client.get_model_config(ep.model, as_json=True))["config"]
            metadata = await self.client.get_model_metadata(ep.model, as_json=True)
        except (asyncio.TimeoutError, InferenceServerException) as exc:
            await self.close()
            msg = "no answer" if isinstance(exc, asyncio.TimeoutError) else exc.message()
            raise TrtsweepError(
                f"cannot reach Triton gRPC at {ep.url} within {ep.connect_timeout_s:g} s: {msg}"
            ) from exc
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled", False))
        self.input_dtypes = {t["name"]: t["datatype"] for t in metadata["inputs"]}
        self.batched = int(config.get("max_batch_size", 0)) > 0
        for name in (ep.text_input_name, ep.max_tokens_name, *ep.extra_inputs):
            if name not in self.input_dtypes:
                raise TrtsweepError(f"model {ep.model!r} has no input {name!r}; it has {sorted(self.input_dtypes)}")
        self.has_stream_input = "stream" in self.input_dtypes

    def _tensor(self, name: str, value: Any) -> grpcclient.InferInput:
        dtype = self.input_dtypes[name]
        array = np.array([value], dtype=object if dtype == "BYTES" else triton_to_np_dtype(dtype))
        if self.batched:
            array = array.reshape(1, 1)
        tensor = grpcclient.InferInput(name, list(array.shape), dtype)
        tensor.set_data_from_numpy(array)
        return tensor

    def _inputs(self, request: PreparedRequest) -> list[grpcclient.InferInput]:
        ep = self.endpoint
        inputs = [
            self._tensor(ep.text_input_name, request.prompt.encode("utf-8")),
            self._tensor(ep.max_tokens_name, request.max_tokens),
        ]
        if self.has_stream_input:
            inputs.append(self._tensor("stream", ep.streaming))
        inputs.extend(self._tensor(name, value) for name, value in ep.extra_inputs.items())
        return inputs

    def _text(self, result: Any) -> str:
        out = result.as_numpy(self.endpoint.text_output_name)
        if out is None or out.size == 0:
            return ""
        value = out.reshape(-1)[0]
        return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)

    async def send(self, request: PreparedRequest, result: RequestResult) -> None:
        inputs = self._inputs(request)
        outputs = [grpcclient.InferRequestedOutput(self.endpoint.text_output_name)]
        if not self.decoupled:
            result.mark_sent()
            response = await self.client.infer(
                self.endpoint.model, inputs, outputs=outputs, client_timeout=self.endpoint.request_timeout_s
            )
            result.add_chunk(self._text(response))
            result.mark_end()
            return

        async def one_request():
            yield {
                "model_name": self.endpoint.model,
                "inputs": inputs,
                "outputs": outputs,
                "enable_empty_final_response": True,
            }

        result.mark_sent()
        stream = self.client.stream_infer(one_request(), stream_timeout=self.endpoint.request_timeout_s)
        try:
            async for response, error in stream:
                if error is not None:
                    raise error
                final = response.get_response().parameters.get("triton_final_response")
                text = self._text(response)
                if text:
                    result.add_chunk(text)
                if final is not None and final.bool_param:
                    result.mark_end()
                    return
        finally:
            stream.cancel()
        raise InferenceServerException("stream closed before the final response")

    async def close(self) -> None:
        if getattr(self, "client", None) is not None:
            await self.client.close()
