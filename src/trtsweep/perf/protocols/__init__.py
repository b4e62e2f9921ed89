"""Protocol clients of llm-perf. Each turns one prepared request into timestamped chunks."""

from __future__ import annotations

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import Endpoint, Protocol


def make_protocol(name: str, endpoint: Endpoint) -> Protocol:
    """The client for `-i/--protocol` name."""
    if name == "grpc":
        from trtsweep.perf.protocols.triton_grpc import TritonGrpc

        return TritonGrpc(endpoint)
    if name == "http":
        from trtsweep.perf.protocols.triton_http import TritonHttp

        return TritonHttp(endpoint)
    if name == "openai":
        from trtsweep.perf.protocols.openai import OpenAI

        return OpenAI(endpoint)
    raise TrtsweepError(f"unknown protocol {name!r}; expected one of: grpc, http, openai")


__all__ = ["Endpoint", "Protocol", "make_protocol"]
