"""Protocol clients of llm-perf. Each turns one prepared request into timestamped chunks."""

from __future__ import annotations

import importlib

from trtsweep.errors import TrtsweepError
from trtsweep.perf.protocols.base import Endpoint, Protocol

# -i/--protocol name -> the module and class of its client
PROTOCOLS = {"grpc": ("trtsweep.perf.protocols.triton_grpc", "TritonGrpc"),
             "http": ("trtsweep.perf.protocols.triton_http", "TritonHttp"),
             "openai": ("trtsweep.perf.protocols.openai", "OpenAI")}  # fmt: skip


def protocol_class(name: str) -> type[Protocol]:
    """The client class for `-i/--protocol` name (its module imported)."""
    if name not in PROTOCOLS:
        raise TrtsweepError(f"unknown protocol {name!r}; expected one of: {', '.join(PROTOCOLS)}")
    module, cls = PROTOCOLS[name]
    found: type[Protocol] = getattr(importlib.import_module(module), cls)
    return found


def make_protocol(name: str, endpoint: Endpoint) -> Protocol:
    """The client for `-i/--protocol` name."""
    return protocol_class(name)(endpoint)


__all__ = ["Endpoint", "Protocol", "make_protocol"]
