"""llm-perf's own memory and post-processing time on a long run (issue 10: "RSS flat over 10 minutes"; issue 26:
"post-processing after a long level").

Runs the llm-perf CLI in a child process against the zero-cost server (trtsweep.perf.zeroserver) for one
level of --duration seconds at --concurrency (from --workers processes, when given), with a per-request export, and
samples the child's RSS (/proc/PID/status VmRSS) and the size of the level's spool (`perf.inflight*.jsonl`) every
--interval seconds. Prints one table row: RSS at the start of the load, its peak and end during the load; the time
from the nominal end of the load (start + duration) to the client's exit (`post_s`: an upper bound, it includes the
client's start-up) and from the last growth of the spool, the load's real end, to the exit (`after_load_s`: the
post-processing, statistics and export, and the exit), each also per 100k requests, with the client's CPU seconds
in that time (its own process, up to its last sample: on a busy machine the steadier number); the peak RSS after
the load, the requests measured and the export's size.
Targets (issues 10, 26): RSS during load within 100 MB of its start; post-processing under 10 s per 100k requests,
under 5 s with workers.
Run: .venv/bin/python benchmarks/perf_memory.py [--duration 600] [--concurrency 256] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
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


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) the process has used (its own, not its children's), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spool_bytes(export: Path) -> int:
    """Bytes in the level's spool and its workers' shards (0 once they are removed)."""
    total = 0
    for path in export.parent.glob(f"{export.stem}.inflight*.jsonl"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total


def measure(url: str, data: Path, export: Path, duration: float, concurrency: int, interval: float,
            workers: int | None) -> dict:  # fmt: skip
    cmd = [sys.executable, "-m", "trtsweep.perf.cli", "-u", url, "-i", "http", "-m", "zero",
           "--input-data", str(data), "--concurrency", str(concurrency), "--duration", str(duration),
           "--warmup-requests", str(concurrency), "--profile-export-file", str(export),
           *(["--workers", str(workers)] if workers else [])]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    load: list[float] = []
    post: list[float] = []
    load_end = start + duration
    spooled, grown = 0, start
    cpu = cpu_grown = 0.0
    while proc.poll() is None:
        value = rss_mb(proc.pid)
        if value is not None:
            (load if time.monotonic() < load_end else post).append(value)
        cpu = cpu_s(proc.pid) or cpu
        if (size := spool_bytes(export)) > spooled:
            spooled, grown, cpu_grown = size, time.monotonic(), cpu
        time.sleep(interval)
    exited = time.monotonic()
    if proc.returncode != 0:
        raise SystemExit(f"llm-perf exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
    summary = json.loads(export.with_suffix(".summary.json").read_text())
    requests = summary["levels"][0]["summary"]["requests"]
    per_100k = 1e5 / max(requests, 1)
    return {
        "concurrency": concurrency, "workers": workers or "auto", "duration_s": duration, "requests": requests,
        "rss_start_mb": load[1] if len(load) > 1 else "-", "rss_peak_load_mb": max(load, default=0.0),
        "rss_end_load_mb": load[-1] if load else "-", "post_s": exited - load_end,
        "post_s_per_100k": (exited - load_end) * per_100k, "after_load_s": exited - grown,
        "after_load_s_per_100k": (exited - grown) * per_100k, "after_load_cpu_s": cpu - cpu_grown,
        "rss_peak_post_mb": max(post, default=0.0),
        "export_mb": export.stat().st_size / 1e6,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--workers", type=int, default=None, help="llm-perf --workers (default: llm-perf's choice)")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between RSS and spool samples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "p.jsonl"
        lines = (json.dumps({"input": f"q{i}", "max_tokens": CHUNKS}) + "\n" for i in range(64))
        data.write_text("".join(lines))
        with zero_server(CHUNKS) as url:
            row = measure(url, data, Path(tmp) / "perf.json", args.duration, args.concurrency, args.interval,
                          args.workers)  # fmt: skip
    print(format_rows([row]))


if __name__ == "__main__":
    main()
