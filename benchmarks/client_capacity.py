"""How much load can llm-perf itself generate on this machine? (issues: "the client must not be measured", 26 "a
client that keeps up")

1. Worker processes (--workers): for 1, 2, 4, ... workers, the responses/s and streamed chunks/s llm-perf sustains
   against the zero-cost server (trtsweep.perf.zeroserver --raw: one write per event, 20 chunks per response,
   --server-processes processes on one port so that the server is not the limit), at a closed-loop concurrency of
   --per-worker streams per worker; next to a bare aiohttp loop that only drains the same streams from as many
   processes (the ceiling of any Python client here); `scaling` = chunks/s / (workers x the one-worker chunks/s):
   1.0 is linear.
2. TTFT and inter-chunk error with workers: against the zero-cost server (--raw --stamp) sending its first chunk
   50 ms after a request's bytes come in and then one every 10 ms, each event stamped with when the request came in
   and when the event was written: measured minus what the server did, at p50 and p99 (and TTFT minus the nominal
   50 ms, which adds the server's own timer overshoot).
3. --triton: the original comparison against a real Triton server (local runtime) with a zero-delay python model,
   over HTTP generate_stream and gRPC streaming, one process.
Run: .venv/bin/python benchmarks/client_capacity.py [--workers 1,2,4,8] [--per-worker 64] [--duration 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from trtsweep.perf.benchmark import BenchmarkConfig, LevelReport, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.selftest import CHUNKS, format_rows, zero_server
from trtsweep.perf.workers import cores, split


def prompts(path: Path, tokens: int, count: int = 64) -> Path:
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": tokens}) + "\n" for i in range(count)))
    return path


async def bare(url: str, model: str, concurrency: int, duration: float) -> tuple[float, float]:
    """(responses/s, chunks/s) of a loop that only drains the streams; a failed request is not counted (Triton's
    HTTP generate_stream loses events under concurrency, see README) and a stalled one gives up after 10 s."""
    body = {"text_input": "q", "max_tokens": CHUNKS}
    done = [0, 0]
    deadline = time.monotonic() + duration
    timeout = aiohttp.ClientTimeout(total=60, sock_read=10)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:

        async def worker() -> None:
            while time.monotonic() < deadline:
                try:
                    chunks = 0
                    async with session.post(f"http://{url}/v2/models/{model}/generate_stream", json=body) as resp:
                        async for line in resp.content:
                            chunks += line.startswith(b"data:")
                    done[0] += 1
                    done[1] += chunks
                except (aiohttp.ClientError, TimeoutError):
                    pass

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done[0] / duration, done[1] / duration


def _bare_process(url: str, concurrency: int, duration: float) -> tuple[float, float]:
    return asyncio.run(bare(url, "zero", concurrency, duration))


def bare_processes(url: str, concurrency: int, processes: int, duration: float) -> tuple[float, float]:
    """The bare loop in `processes` processes, the concurrency split over them as llm-perf's workers split it."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        rates = pool.starmap(_bare_process, [(url, share, duration) for share in split(concurrency, processes)])
    return sum(r for r, _ in rates), sum(c for _, c in rates)


def bench(url: str, model: str, protocol: str, data: Path, concurrency: int, duration: float, workers: int = 1,
          export: Path | None = None) -> LevelReport:  # fmt: skip
    config = BenchmarkConfig(endpoint=Endpoint(url=url, model=model), protocol=protocol, input_data=data,
                             concurrency=[concurrency], duration_s=duration, warmup_requests=concurrency,
                             workers=workers, export_file=export)  # fmt: skip
    (report,) = run(config)
    return report


def llm_perf(url: str, model: str, protocol: str, data: Path, concurrency: int, duration: float,
             workers: int = 1) -> dict[str, Any]:  # fmt: skip
    return bench(url, model, protocol, data, concurrency, duration, workers).summary


def scaling(url: str, data: Path, counts: list[int], per_worker: int, duration: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in counts:
        c = per_worker * n
        s = llm_perf(url, "zero", "http", data, c, duration, n)
        bare_rps, bare_cps = bare_processes(url, c, n, duration)
        one = rows[0]["chunks_s"] if rows else s["output_token_throughput"]
        rows.append({
            "workers": n, "concurrency": c, "req_s": s["request_throughput"], "chunks_s": s["output_token_throughput"],
            "scaling": s["output_token_throughput"] / (n * one), "bare_req_s": bare_rps, "bare_chunks_s": bare_cps,
            "vs_bare": s["output_token_throughput"] / bare_cps if bare_cps else "-", "failed": s["failed"],
            "cpu_ms_req": s["client"]["cpu_ms_per_request"], "loop_lag_p99_ms": s["client"]["loop_lag_ms"]["p99"],
        })  # fmt: skip
    return rows


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def timing_error(tmp: Path, counts: list[int], per_worker: int, duration: float, processes: int,
                 first_ms: float = 50.0, gap_ms: float = 10.0) -> list[dict[str, Any]]:  # fmt: skip
    """Measured minus true TTFT and inter-chunk gaps, true being what the stamping server did: its first write after
    the request's bytes came in, and the time between its writes; and measured TTFT minus the nominal first_ms."""
    rows = []
    data = prompts(tmp / "t.jsonl", 10)
    with zero_server(10, first_ms, gap_ms, processes, raw=True, stamp=True) as url:
        for n in counts:
            report = bench(url, "zero", "http", data, per_worker * n, duration, n, tmp / f"timing{n}.json")
            ttft, icl = [], []
            for row in report.rows():
                if row["warmup"] or row["error"]:
                    continue
                stamps = [[int(x) for x in token.split("@")[1:]] for token in row["text"].split()]
                (arrival, first), *_ = stamps
                ttft.append(row["chunk_ms"][0] - row["sent_ms"] - (first - arrival) / 1e6)
                written, received = [w for _, w in stamps], row["chunk_ms"]
                for i in range(1, len(written)):
                    icl.append((received[i] - received[i - 1]) - (written[i] - written[i - 1]) / 1e6)
            s = report.summary
            rows.append({
                "workers": n, "concurrency": per_worker * n, "requests": s["succeeded"],
                "ttft_err_p50_ms": p(ttft, 50), "ttft_err_p99_ms": p(ttft, 99), "icl_err_p50_ms": p(icl, 50),
                "icl_err_p99_ms": p(icl, 99), "ttft_vs_nominal_p50_ms": s["ttft_ms"]["p50"] - first_ms,
                "ttft_vs_nominal_p99_ms": s["ttft_ms"]["p99"] - first_ms,
                "loop_lag_p99_ms": s["client"]["loop_lag_ms"]["p99"],
            })  # fmt: skip
    return rows


def triton(data: Path, levels: list[int], duration: float) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).parent))
    from _triton import paced_triton

    rows = []
    with paced_triton(0.0, 0.0) as spec:
        for c in levels:
            http, grpc = f"127.0.0.1:{spec.http_port}", f"127.0.0.1:{spec.grpc_port}"
            for protocol, url in (("http", http), ("grpc", grpc)):
                s = llm_perf(url, "paced", protocol, data, c, duration)
                bare_rps = asyncio.run(bare(http, "paced", c, duration))[0] if protocol == "http" else None
                rows.append({
                    "protocol": protocol, "concurrency": c, "req_s": s["request_throughput"],
                    "chunks_s": s["output_token_throughput"], "bare_req_s": bare_rps or "-",
                    "vs_bare": s["request_throughput"] / bare_rps if bare_rps else "-", "failed": s["failed"],
                    "cpu_ms_req": s["client"]["cpu_ms_per_request"],
                    "loop_lag_p99_ms": s["client"]["loop_lag_ms"]["p99"],
                })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    most = max(1, cores() - 1)
    default = ",".join(str(2**i) for i in range(8) if 2**i <= max(2, most // 2))
    parser.add_argument("--workers", default=default, help=f"worker counts (default here: {default})")
    parser.add_argument("--per-worker", type=int, default=64, help="closed-loop streams per worker")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per level")
    parser.add_argument("--server-processes", type=int, default=max(1, cores() // 2 - 1),
                        help="zero-cost server processes on the port")  # fmt: skip
    parser.add_argument("--aiohttp-server", action="store_true", help="capacity against the aiohttp zero server")
    parser.add_argument("--timing-per-worker", type=int, default=8, help="streams per worker for the timing error")
    parser.add_argument("--triton", default="", help="also the one-process table against Triton: its concurrencies")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    print(f"{os.cpu_count()} cores ({cores()} usable), zero-cost server: {args.server_processes} processes, "
          f"{CHUNKS} chunks per response, {args.duration:g} s per level", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        data = prompts(Path(tmp) / "p.jsonl", CHUNKS)
        with zero_server(CHUNKS, processes=args.server_processes, raw=not args.aiohttp_server) as url:
            rows = scaling(url, data, counts, args.per_worker, args.duration)
        print(f"\ncapacity (closed loop, {args.per_worker} streams per worker) vs a bare aiohttp loop in as many "
              f"processes\n{format_rows(rows)}", flush=True)  # fmt: skip
        timing = timing_error(Path(tmp), counts, args.timing_per_worker, args.duration, args.server_processes)
        print(f"\ntiming error, ms (server: first chunk 50 ms after a request came in, then every 10 ms; err: "
              f"measured - what the server did, by its stamps; vs_nominal: measured - 50 ms; {args.timing_per_worker} "
              f"streams per worker)\n{format_rows(timing)}", flush=True)  # fmt: skip
        if args.triton:
            levels = [int(c) for c in args.triton.split(",")]
            print(f"\none process against Triton (python model, no delay)\n{format_rows(triton(data, levels, 5.0))}")


if __name__ == "__main__":
    main()
