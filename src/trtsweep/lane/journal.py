"""A lane's journal on its host: one JSON object per line, appended as the lane goes, read by the controller.

    {"event": "start", "point": id, "t": epoch}              a point starts (the controller records it running)
    {"event": "stage", "point": id, "stage": name, "t": ...}  it enters a stage
    {"event": "end", "point": id, "status": "ok" | "failed", "stage": last stage, "failure": {msg, details} | null,
     "failed_task": step | null, "stage_times": {stage: epoch, ..., "end": epoch}, "archive": path | null}
    {"event": "lane_end", "t": ...}                           the lane has nothing more to run

The controller polls with `python -m trtsweep.lane.journal DIR --offsets JSON --wait S`: it prints one JSON object,
the lines written after the offsets it already read (complete lines only), the new offsets, and whether the host's
runner is still alive, waiting up to S seconds for something new so that a quiet host costs one call per S seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from trtsweep.common.procs import alive

SUFFIX = ".jsonl"
RUNNER_FILE = "runner.json"  # the host runner's pid and start ticks (written by the runner, read by `poll`)
RUNNER_LOG = "runner.log"


def append(path: Path, event: dict[str, Any]) -> None:
    """Append one event as one line, flushed to disk before returning (a reader never sees half a line as whole)."""
    line = json.dumps({"t": time.time(), **event}, sort_keys=True) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_new(folder: Path, offsets: dict[str, int]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Lane -> the complete lines written since `offsets` (lane -> bytes already read), and the new offsets."""
    events: dict[str, list[dict[str, Any]]] = {}
    after = dict(offsets)
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        lane = path.name[: -len(SUFFIX)]
        start = offsets.get(lane, 0)
        with path.open("rb") as handle:
            handle.seek(start)
            data = handle.read()
        whole = data[: data.rfind(b"\n") + 1]
        if whole:
            events[lane] = [json.loads(line) for line in whole.decode().splitlines() if line.strip()]
            after[lane] = start + len(whole)
    return events, after


def runner_alive(folder: Path) -> bool | None:
    """Whether the host's runner still runs (None: it has not written its pid yet)."""
    try:
        record = json.loads((folder / RUNNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return alive(int(record["pid"]), record.get("ticks"))


def log_tail(folder: Path, lines: int = 20) -> list[str]:
    try:
        return (folder / RUNNER_LOG).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def poll(folder: Path, offsets: dict[str, int], wait_s: float, step_s: float = 0.25) -> dict[str, Any]:
    """What `main` prints: new events, offsets, runner alive; waits up to `wait_s` for a new event."""
    deadline = time.monotonic() + wait_s
    while True:
        events, after = read_new(folder, offsets)
        running = runner_alive(folder)
        if events or running is False or time.monotonic() >= deadline:
            out: dict[str, Any] = {"events": events, "offsets": after, "runner_alive": running}
            if running is False:
                out["runner_log"] = log_tail(folder)
            return out
        time.sleep(step_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trtsweep.lane.journal")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--offsets", type=json.loads, default={})
    parser.add_argument("--wait", type=float, default=0.0)
    args = parser.parse_args(argv)
    print(json.dumps(poll(args.folder, args.offsets, args.wait)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
