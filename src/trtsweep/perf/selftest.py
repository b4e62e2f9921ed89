"""`llm-perf selftest`: how far this machine's client can be trusted, measured before it is trusted.

Against a built-in zero-cost streaming server (`trtsweep.perf.zeroserver`, its own process) it reports:
1. timestamp error: a server that sends its first chunk 50 ms after arrival and then one every 10 ms;
   measured TTFT and inter-chunk latency minus those values;
2. capacity: responses/s and chunks/s llm-perf sustains at each concurrency against a zero-delay server,
   next to a bare aiohttp loop that only drains the same streams (the ceiling of any Python client here),
   with llm-perf's event-loop lag and CPU per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.serve.process import http_service

CHUNKS = 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def zero_server(chunks: int = CHUNKS, first_ms: float = 0.0, gap_ms: float = 0.0, processes: int = 1,
                raw: bool = False, stamp: bool = False, slots: int = 0) -> Iterator[str]:  # fmt: skip
    """Run the zero-cost server in a child process (`processes` of them on one port; `raw`: its least-cost Triton
    dialect, `stamp`: with its write times in the text; `slots`: requests served at once); yield its address; stop it
    by PID (its process group)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "trtsweep.perf.zeroserver", "--port", str(port), "--chunks", str(chunks),
           "--first-ms", str(first_ms), "--gap-ms", str(gap_ms), "--processes", str(processes), "--slots", str(slots),
           *(["--raw"] if raw else []), *(["--stamp"] if stamp else [])]  # fmt: skip
    with http_service(cmd, f"http://127.0.0.1:{port}/health", 20.0):
        yield f"127.0.0.1:{port}"


def _data(path: Path, chunks: int) -> Path:
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": chunks}) + "\n" for i in range(64)))
    return path


def _bench(url: str, data: Path, concurrency: int, duration: float, protocol: str = "http") -> dict[str, Any]:
    config = BenchmarkConfig(endpoint=Endpoint(url=url, model="zero"), protocol=protocol, input_data=data,
                             concurrency=[concurrency], duration_s=duration, warmup_requests=concurrency)  # fmt: skip
    (report,) = run(config)
    return report.summary


async def _bare(url: str, concurrency: int, duration: float, chunks: int) -> tuple[int, int]:
    """Drain streams with nothing but aiohttp: (responses, chunks) in `duration` seconds."""
    body = {"text_input": "q", "max_tokens": chunks}
    done = [0, 0]
    deadline = time.monotonic() + duration
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def worker() -> None:
            while time.monotonic() < deadline:
                async with session.post(f"http://{url}/v2/models/zero/generate_stream", json=body) as resp:
                    async for line in resp.content:
                        if line.startswith(b"data:"):
                            done[1] += 1
                done[0] += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done[0], done[1]


def timing_error(workdir: Path, first_ms: float = 50.0, gap_ms: float = 10.0) -> dict[str, float]:
    with zero_server(10, first_ms, gap_ms) as url:
        s = _bench(url, _data(workdir / "t.jsonl", 10), 1, 3.0)
    return {
        "ttft_error_p50_ms": s["ttft_ms"]["p50"] - first_ms, "ttft_error_p99_ms": s["ttft_ms"]["p99"] - first_ms,
        "icl_error_p50_ms": s["icl_ms"]["p50"] - gap_ms, "icl_error_p99_ms": s["icl_ms"]["p99"] - gap_ms,
        "loop_lag_p99_ms": s["client"]["loop_lag_ms"]["p99"],
    }  # fmt: skip


def capacity(workdir: Path, levels: list[int], duration: float) -> list[dict[str, Any]]:
    rows = []
    data = _data(workdir / "c.jsonl", CHUNKS)
    with zero_server(CHUNKS) as url:
        for c in levels:
            s = _bench(url, data, c, duration)
            responses, chunks = asyncio.run(_bare(url, c, duration, CHUNKS))
            rows.append({
                "concurrency": c, "llm_perf_req_s": s["request_throughput"],
                "llm_perf_chunks_s": s["output_token_throughput"], "bare_req_s": responses / duration,
                "bare_chunks_s": chunks / duration, "ratio": s["request_throughput"] / (responses / duration),
                "loop_lag_p99_ms": s["client"]["loop_lag_ms"]["p99"],
                "cpu_ms_per_request": s["client"]["cpu_ms_per_request"],
            })  # fmt: skip
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    cells = [[f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def main(levels: list[int], duration: float) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        err = timing_error(Path(tmp))
        rows = capacity(Path(tmp), levels, duration)
    return (
        f"timestamp error (server: first chunk 50 ms, then every 10 ms)\n{format_rows([err])}\n\n"
        f"capacity against a zero-cost server, {CHUNKS} chunks per response\n{format_rows(rows)}"
    )
