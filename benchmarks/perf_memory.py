"""llm-perf's own memory and post-processing time on a long run (issue 10: "RSS flat over 10 minutes").

Runs the llm-perf CLI in a child process against the zero-cost server (trtsweep.perf.zeroserver) for one
level of --duration seconds at --concurrency, with a per-request export, and samples the child's RSS
(/proc/PID/status VmRSS) every --interval seconds. Prints one table row: RSS at the start of the load,
its peak and end during the load, the time from the end of the load to the client's exit (post-processing:
statistics and export; an upper bound, it includes the client's start-up) with its peak RSS, the requests
measured and the export's size.
Targets (issue 10): RSS during load within 100 MB of its start; post-processing under 10 s per 100k requests.
Run: .venv/bin/python benchmarks/perf_memory.py [--duration 600] [--concurrency 256]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trtsweep.perf.selftest import CHUNKS, format_rows, zero_server


def rss_mb(pid: int) -> float | None:
    """Resident set size of a process in MB, None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def measure(url: str, data: Path, export: Path, duration: float, concurrency: int, interval: float) -> dict:
    cmd = [sys.executable, "-m", "trtsweep.perf.cli", "-u", url, "-i", "http", "-m", "zero",
           "--input-data", str(data), "--concurrency", str(concurrency), "--duration", str(duration),
           "--warmup-requests", str(concurrency), "--profile-export-file", str(export)]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    load: list[float] = []
    post: list[float] = []
    load_end = start + duration
    while proc.poll() is None:
        value = rss_mb(proc.pid)
        if value is not None:
            (load if time.monotonic() < load_end else post).append(value)
        time.sleep(interval)
    exited = time.monotonic()
    if proc.returncode != 0:
        raise SystemExit(f"llm-perf exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
    summary = json.loads(export.with_suffix(".summary.json").read_text())
    requests = summary["levels"][0]["summary"]["requests"]
    return {
        "concurrency": concurrency, "duration_s": duration, "requests": requests,
        "rss_start_mb": load[1] if len(load) > 1 else "-", "rss_peak_load_mb": max(load, default=0.0),
        "rss_end_load_mb": load[-1] if load else "-", "post_s": exited - load_end,
        "rss_peak_post_mb": max(post, default=0.0), "export_mb": export.stat().st_size / 1e6,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "p.jsonl"
        lines = (json.dumps({"input": f"q{i}", "max_tokens": CHUNKS}) + "\n" for i in range(64))
        data.write_text("".join(lines))
        with zero_server(CHUNKS) as url:
            row = measure(url, data, Path(tmp) / "perf.json", args.duration, args.concurrency, args.interval)
    print(format_rows([row]))


if __name__ == "__main__":
    main()
