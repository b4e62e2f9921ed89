"""A lane's journal on its host: one JSON object per line, appended as the lane goes, read by the controller.

    {"event": "start", "point": id, "t": epoch}              a point starts (the controller records it running)
    {"event": "stage", "point": id, "stage": name, "t": ...}  it enters a stage
    {"event": "end", "point": id, "status": "ok" | "failed", "stage": last stage, "failure": {msg, details} | null,
     "failed_task": step | null, "stage_times": {stage: epoch, ..., "end": epoch}, "archive": path | null}
    {"event": "lane_end", "t": ...}                           the lane has nothing more to run
    {"event": "lane_lost", "why": one line, "t": ...}         the lane's process (on Slurm: its step) ended before the
                                                              lane did; the runner writes it, with the signal or
                                                              Slurm's word: its unfinished points are lost

The controller polls with `python -m trtsweep.lane.journal DIR --offsets JSON --wait S`: it prints one JSON object,
the lines written after the offsets it already read (complete lines only), the new offsets, and whether the host's
runner is still alive, waiting up to S seconds for something new so that a quiet host costs one call per S seconds.

A line that is not a JSON object (a writer killed mid-line, a disk that filled mid-write and then had space again:
the cut line runs into the next whole one) never stops the reading: the whole line found after the cut is read as
usual, and what is left is handed on in its place as `{"event": "broken", "offset": byte, "text": its start}` for the
controller to report.

A point that ended on its host after the controller's last collection (the controller went away) keeps its archive
there; the next run of the sweep asks for it (`python -m trtsweep.lane.journal RUNS --host NAME --ended JSON`, JSON:
point -> the earlier run's id): it prints, per point, the `end` line of that run's journals on this host when the
point ended ok and its archive is still there, so that the controller collects it instead of running the point again.

The runner's start (action plugin trtsweep_lanes) writes the runner's pid (`RUNNER_PID`) as it starts it; the
runner registers (`RUNNER_FILE`: pid and start ticks) once it runs. Until it has registered, the poll judges it by
that pid (a process whose command line names this folder's host spec): one that is gone ended before it registered,
one that has not registered within `REGISTER_S` of its start is ended by the poll; either way it is not alive.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from trtsweep.common.procs import age_s, alive

SUFFIX = ".jsonl"
SPEC_FILE = "host.json"  # the host spec the runner was started with (the controller's action plugin writes it)
RUNNER_PID = "runner.pid"  # the pid the start gave the runner (written by the start, before the runner runs)
RUNNER_FILE = "runner.json"  # the host runner's pid and start ticks (written by the runner, read by `poll`)
RUNNER_LOG = "runner.log"
FULL_BELOW = 1 << 20  # bytes free below which the disk of a runner that died is said to be full
REGISTER_S = 120.0  # a runner that has not registered this long after its start is ended (a start that hangs)
BROKEN_CHARS = 200  # of a broken line, handed on to the controller


def append(path: Path, event: dict[str, Any]) -> None:
    """Append one event as one line, flushed to disk before returning (a reader never sees half a line as whole)."""
    line = json.dumps({"t": time.time(), **event}, sort_keys=True) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _line(text: str, offset: int) -> list[dict[str, Any]]:
    """The events of one line starting at byte `offset`: the line's object; or, for a line cut short with a whole
    one after it, a `broken` event for the cut part and the whole line's object; or a `broken` event alone."""
    event = _object(text)
    if event is not None:
        return [event]
    at = text.find('{"', 1)
    while at > 0:
        event = _object(text[at:])
        if event is not None:
            return [{"event": "broken", "offset": offset, "text": text[:at][:BROKEN_CHARS]}, event]
        at = text.find('{"', at + 1)
    return [{"event": "broken", "offset": offset, "text": text[:BROKEN_CHARS]}]


def read_new(folder: Path, offsets: dict[str, int]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Lane -> the complete lines written since `offsets` (lane -> bytes already read), and the new offsets; a line
    that is not a JSON object is a `broken` event in its place (see the module's doc)."""
    events: dict[str, list[dict[str, Any]]] = {}
    after = dict(offsets)
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        lane = path.name[: -len(SUFFIX)]
        start = offsets.get(lane, 0)
        with path.open("rb") as handle:
            handle.seek(start)
            data = handle.read()
        whole = data[: data.rfind(b"\n") + 1]
        if not whole:
            continue
        events[lane] = []
        offset = start
        for raw in whole.split(b"\n")[:-1]:
            text = raw.decode("utf-8", errors="replace").strip()
            if text:
                events[lane] += _line(text, offset)
            offset += len(raw) + 1
        after[lane] = start + len(whole)
    return events, after


def _names_spec(pid: int, spec: Path) -> bool:
    """Whether process `pid` runs with `spec` on its command line (this folder's runner, or its start)."""
    try:
        return str(spec).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def runner_state(folder: Path, register_s: float = REGISTER_S) -> tuple[bool | None, str]:
    """Whether the host's runner still runs (None: no start is known yet) and, when it does not, how it ended. The
    folder gone (a node rebooted with the cache on local scratch, a cleanup job) ends it: nothing of the run can be
    read or written there any more."""
    if not folder.is_dir():
        return False, f"lost its run folder {folder} (removed while the run went on)"
    try:
        record = json.loads((folder / RUNNER_FILE).read_text())
        return alive(int(record["pid"]), record.get("ticks")), "ended before its lanes did"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    pid_file = folder / RUNNER_PID
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return None, ""
    if not _names_spec(pid, folder / SPEC_FILE):
        return False, f"(pid {pid}) ended before it registered"
    # its age as this host's clock says (not runner.pid's mtime: on NFS the file server's clock sets it)
    if (age_s(pid) or 0.0) > register_s:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        return False, f"(pid {pid}) had not registered {register_s:g} s after its start and was ended"
    return True, ""


def log_tail(folder: Path, lines: int = 20) -> list[str]:
    """The runner log's last lines, then a line saying the disk is full when it is (a runner that died of a full
    disk could not write why into its log)."""
    try:
        tail = (folder / RUNNER_LOG).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        tail = []
    with contextlib.suppress(OSError):
        free = shutil.disk_usage(folder).free
        if free < FULL_BELOW:
            tail.append(f"the disk holding {folder} is full ({free} bytes free)")
    return tail


def poll(folder: Path, offsets: dict[str, int], wait_s: float, step_s: float = 0.25,
         register_s: float = REGISTER_S) -> dict[str, Any]:  # fmt: skip
    """What `main` prints: new events, offsets, runner alive (and, when it is not, how it ended and its log's tail);
    waits up to `wait_s` for a new event."""
    deadline = time.monotonic() + wait_s
    while True:
        events, after = read_new(folder, offsets)
        running, ended = runner_state(folder, register_s)
        if events or running is False or time.monotonic() >= deadline:
            out: dict[str, Any] = {"events": events, "offsets": after, "runner_alive": running}
            if running is False:
                out.update(runner_ended=ended, runner_log=log_tail(folder))
            return out
        time.sleep(step_s)


def ended(runs: Path, host: str, wanted: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Point -> its `end` line in run `wanted[point]`'s journals of `host` under `runs` (the sweep's `.runs` folder:
    `<run>-<host>`, or `r<round>-<run>-<host>` for a search's later round), for the points that ended ok there and
    whose archive is still on the host."""
    found: dict[str, dict[str, Any]] = {}
    for run in set(wanted.values()):
        for folder in [runs / f"{run}-{host}", *sorted(runs.glob(f"r[0-9]*-{run}-{host}"))]:
            for lines in read_new(folder, {})[0].values():
                for event in lines:
                    point = event.get("point")
                    if (event.get("event") == "end" and wanted.get(str(point)) == run and event.get("status") == "ok"
                            and event.get("archive") and Path(event["archive"]).is_file()):  # fmt: skip
                        found[str(point)] = event
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trtsweep.lane.journal")
    parser.add_argument("folder", type=Path, help="the run's folder on this host (with --ended: the sweep's .runs)")
    parser.add_argument("--offsets", type=json.loads, default={})
    parser.add_argument("--wait", type=float, default=0.0)
    parser.add_argument("--register", type=float, default=REGISTER_S, help="seconds a runner has to register")
    parser.add_argument("--ended", type=json.loads, help="point -> an earlier run's id: that run's ok ends")
    parser.add_argument("--host", help="with --ended: this host's name in its run folders")
    args = parser.parse_args(argv)
    if args.ended is not None:
        print(json.dumps(ended(args.folder, args.host, args.ended)))
    else:
        print(json.dumps(poll(args.folder, args.offsets, args.wait, register_s=args.register)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
