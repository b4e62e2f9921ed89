"""A compact live view of a sweep run, from `results/<sweep>/events.json` (callback trtsweep_events).

fleet  4/6 done (1 failed, 1 lost)  running 2  elapsed 3m12s  remaining ~1m40s
  h1  2 lanes  done 2  failed 0  lost 0  | lane0 smol_bf16... benchmark 12s | lane1 idle
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

FINISHED = ("ok", "failed", "lost")


WARNINGS_SHOWN = 3  # a host's last warnings in the live view (all of them: progress-<host>.json, the point records)


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def render(events: dict[str, Any], now: float | None = None, width: int = 48) -> str:
    now = time.time() if now is None else now
    points: dict[str, dict[str, Any]] = events.get("points", {})
    lanes: dict[str, dict[str, Any]] = events.get("lanes", {})
    planned = events.get("planned", [])
    states = {p: points.get(p, {}).get("state", "pending") for p in planned}
    done = [p for p, s in states.items() if s in FINISHED]
    failed = sum(s == "failed" for s in states.values())
    unreachable = events.get("unreachable", {})
    running = [name for name, lane in lanes.items() if lane.get("point") and states.get(lane["point"]) == "running"]
    elapsed = (events.get("finished") or now) - events.get("started", now)
    seconds = [points[p].get("seconds") or 0 for p in done if points.get(p, {}).get("state") in ("ok", "failed")]
    left = len(planned) - len(done)
    parallel = max(1, len([ln for ln in lanes.values() if not ln.get("unreachable")]))
    estimate = f"~{_duration(sum(seconds) / len(seconds) * left / parallel)}" if seconds and left else "-"
    head = (
        f"{len(done)}/{len(planned)} done ({failed} failed, {len(unreachable)} host(s) unreachable)  "
        f"running {len(running)}  elapsed {_duration(elapsed)}  remaining {estimate}"
    )
    if events.get("kept"):
        head += f"  kept {len(events['kept'])}"
    lines = [head]
    for host in dict.fromkeys(lane["host"] for lane in lanes.values()):
        own = {name: lane for name, lane in lanes.items() if lane["host"] == host}
        ids = [p for lane in own.values() for p in lane.get("points", [])]
        count = {s: sum(states.get(p) == s for p in ids) for s in FINISHED}
        cells = []
        for name, lane in own.items():
            label = name.rsplit("--", 1)[-1]
            current = lane.get("point")
            if lane.get("unreachable"):
                cells.append(f"{label} UNREACHABLE")
            elif current and states.get(current) == "running":
                since = _duration(now - lane.get("since", now))
                cells.append(f"{label} {current[:width]} {lane.get('stage', '?')} {since}")
            else:
                cells.append(f"{label} idle")
        lines.append(
            f"  {host}  {len(ids)} points  ok {count['ok']}  failed {count['failed']}  lost {count['lost']}"
            f"  | {' | '.join(cells)}"
        )
    for host, said in events.get("warnings", {}).items():  # a collector's warnings (a broken journal line), newest
        lines += [f"  ! {host}: {line}" for line in said[-WARNINGS_SHOWN:]]
    return "\n".join(lines)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def load(path: Path) -> dict[str, Any]:
    """The run's events (`path`, events.json) with what each host's collector has seen (`.run/progress-<host>.json`
    beside it, this run's only): every lane's current point and stage, every point's state."""
    events = _read(path)
    for progress in sorted((path.parent / ".run").glob("progress-*.json")):
        seen = _read(progress)
        if seen.get("run_id") != events.get("run_id"):
            continue
        events.setdefault("points", {}).update(seen.get("points", {}))
        if seen.get("warnings"):
            events.setdefault("warnings", {})[seen.get("host", progress.stem)] = seen["warnings"]
        for name, lane in seen.get("lanes", {}).items():
            if name in events.get("lanes", {}):
                current = {k: v for k, v in events["lanes"][name].items() if k not in ("point", "stage", "since")}
                events["lanes"][name] = {**current, **lane}
    return events
