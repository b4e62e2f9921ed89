"""How much load can llm-perf itself generate on this machine? (issue: "the client must not be measured")

For each concurrency: responses/s and streamed chunks/s that llm-perf sustains, its CPU per request and
event-loop lag, next to a bare aiohttp loop that only drains the same streams:
  * against the built-in zero-cost HTTP server (trtsweep.perf.zeroserver, 20 chunks per response);
  * against a real Triton server (local runtime) with a zero-delay python model streaming 20 chunks,
    over HTTP generate_stream and gRPC streaming.
Run: .venv/bin/python benchmarks/client_capacity.py [--concurrency 1,4,16,64,256,512] [--duration 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))
from _triton import paced_triton, prompts

from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.selftest import CHUNKS, format_rows, zero_server


async def bare(url: str, model: str, concurrency: int, duration: float) -> float:
    """Responses/s of a loop that only drains the streams; a failed request is not counted (Triton's HTTP
    generate_stream loses events under concurrency, see README) and a stalled one gives up after 10 s."""
    body = {"text_input": "q", "max_tokens": CHUNKS}
    done = 0
    deadline = time.monotonic() + duration
    timeout = aiohttp.ClientTimeout(total=60, sock_read=10)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                try:
                    async with session.post(f"http://{url}/v2/models/{model}/generate_stream", json=body) as resp:
                        async for _ in resp.content:
                            pass
                    done += 1
                except (aiohttp.ClientError, TimeoutError):
                    pass

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / duration


def llm_perf(url: str, model: str, protocol: str, data: Path, concurrency: int, duration: float) -> dict:
    config = BenchmarkConfig(endpoint=Endpoint(url=url, model=model), protocol=protocol, input_data=data,
                             concurrency=[concurrency], duration_s=duration, warmup_requests=concurrency)  # fmt: skip
    (report,) = run(config)
    return report.summary


def row(target: str, protocol: str, c: int, s: dict, bare_rps: float | None) -> dict:
    return {
        "target": target, "protocol": protocol, "concurrency": c, "req_s": s["request_throughput"],
        "chunks_s": s["output_token_throughput"], "bare_req_s": bare_rps if bare_rps is not None else "-",
        "vs_bare": s["request_throughput"] / bare_rps if bare_rps else "-",
        "failed": s["failed"], "cpu_ms_req": s["client"]["cpu_ms_per_request"],
        "loop_lag_p99_ms": s["client"]["loop_lag_ms"]["p99"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", default="1,4,16,64,256,512")
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = prompts(Path(tmp) / "p.jsonl", CHUNKS)
        with zero_server(CHUNKS) as url:
            for c in levels:
                s = llm_perf(url, "zero", "http", data, c, args.duration)
                rows.append(row("zero-cost aiohttp", "http", c, s, asyncio.run(bare(url, "zero", c, args.duration))))
        with paced_triton(0.0, 0.0) as spec:
            for c in levels:
                http = f"127.0.0.1:{spec.http_port}"
                s = llm_perf(http, "paced", "http", data, c, args.duration)
                rows.append(row("triton python", "http", c, s, asyncio.run(bare(http, "paced", c, args.duration))))
                s = llm_perf(f"127.0.0.1:{spec.grpc_port}", "paced", "grpc", data, c, args.duration)
                rows.append(row("triton python", "grpc", c, s, None))
    print(format_rows(rows))


if __name__ == "__main__":
    main()
