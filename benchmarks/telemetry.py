"""What GPU telemetry costs a measurement: the sampler's CPU per sample, and llm-perf's TTFT against a server of known
timing (trtsweep.perf.zeroserver: TTFT = --first-ms) with and without `--gpu-telemetry` on every GPU of the host.

Run on a GPU host (NVML): `python benchmarks/telemetry.py [--rounds 3] [--interval 0.5]`. Prints a table: per
setting, the client's TTFT p50 / p99 error against the server's own first-chunk time, and the client CPU-ms per
request; then the sampler's CPU-ms per sample of all GPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from trtsweep.perf import cli
from trtsweep.perf.telemetry import nvml_sampler

FIRST_MS = 50.0


@contextlib.contextmanager
def zero_server(port: int) -> Iterator[str]:
    argv = [sys.executable, "-m", "trtsweep.perf.zeroserver", "--port", str(port), "--chunks", "16",
            "--first-ms", str(FIRST_MS), "--gap-ms", "5", "--slots", "64"]  # fmt: skip
    proc = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def measure(url: str, work: Path, telemetry: list[str]) -> dict[str, float]:
    data = work / "p.jsonl"
    data.write_text("".join(json.dumps({"input": f"hi {i}", "output": "hello"}) + "\n" for i in range(64)))
    rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--input-data", str(data),
                   "--max-tokens", "16", "--profile-export-file", str(work / "perf.json"), "--num-requests", "400",
                   "--concurrency", "32", "--streaming", "--workers", "1", *telemetry])  # fmt: skip
    if rc != 0:
        raise SystemExit(f"llm-perf exited {rc}")
    level = json.loads((work / "perf.summary.json").read_text())["levels"][0]["summary"]
    client = level.get("client") or {}
    return {"p50": level["ttft_ms"]["p50"] - FIRST_MS, "p99": level["ttft_ms"]["p99"] - FIRST_MS,
            "cpu_ms": client.get("cpu_ms_per_request") or float("nan"),
            "samples": (level.get("gpu_telemetry") or {}).get("samples", 0)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--port", type=int, default=18555)
    args = parser.parse_args()
    import pynvml

    pynvml.nvmlInit()
    gpus = list(range(pynvml.nvmlDeviceGetCount()))
    sampler, why = nvml_sampler(gpus, args.interval)
    if sampler is None:
        raise SystemExit(f"no GPU telemetry here: {why}")
    start = time.thread_time()
    for _ in range(200):
        sampler.read(False)
    per_sample_ms = (time.thread_time() - start) / 200 * 1000
    start = time.thread_time()
    for _ in range(10):
        sampler.read(True)
    energy_ms = (time.thread_time() - start) / 10 * 1000
    flags = {"without": [], f"with ({len(gpus)} GPUs, every {args.interval} s)": [
        "--gpu-telemetry", ",".join(map(str, gpus)), "--gpu-telemetry-interval", str(args.interval)]}  # fmt: skip
    found: dict[str, list[dict[str, float]]] = {name: [] for name in flags}
    with tempfile.TemporaryDirectory() as tmp, zero_server(args.port) as url:
        for _ in range(args.rounds):  # interleaved, so drift hits both alike
            for name, extra in flags.items():
                found[name].append(measure(url, Path(tmp), extra))
    print(f"{'telemetry':<36} {'TTFT p50 err ms':>16} {'TTFT p99 err ms':>16} {'client CPU ms/req':>18} {'samples':>8}")
    for name, runs in found.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name:<36} {med['p50']:>16.2f} {med['p99']:>16.2f} {med['cpu_ms']:>18.3f} {med['samples']:>8.0f}")
    print(f"sampler: {per_sample_ms:.3f} CPU-ms per sample of {len(gpus)} GPUs "
          f"({per_sample_ms / args.interval / 10:.3f}% of one core at one sample per {args.interval} s); "
          f"{energy_ms:.1f} CPU-ms for a sample with the energy counters (a level's first and last)")  # fmt: skip


if __name__ == "__main__":
    main()
