"""Shared by the benchmark scripts: a local Triton server with paced models, started and stopped by PID."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from trtsweep.perf.paced import write_paced_model
from trtsweep.serve import server
from trtsweep.serve.spec import ServerSpec


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for sock in socks:
        sock.close()
    return ports


@contextlib.contextmanager
def paced_triton(first_ms: float, gap_ms: float) -> Iterator[ServerSpec]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_paced_model(work / "repo", "paced", first_ms, gap_ms, decoupled=True)
        http, grpc, metrics = free_ports(3)
        spec = ServerSpec(model_repository=work / "repo", log_file=work / "triton.log", http_port=http,
                                 grpc_port=grpc, metrics_port=metrics)  # fmt: skip
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`, kill: still stop the server
        state = server.start(spec, work / "state.json")
        try:
            server.wait_ready(state, 120)
            yield spec
        finally:
            server.stop(state)
            signal.signal(signal.SIGTERM, previous)


def prompts(path: Path, tokens: int, count: int = 64) -> Path:
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": tokens}) + "\n" for i in range(count)))
    return path
