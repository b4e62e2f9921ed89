"""A search's rounds as sweep points, and what each round measured, read back from the results.

Round `n` of a search (trtsweep.search.strategy) becomes points like any other, placed and run by the same plays:
a configuration measured at the full benchmark keeps its grid id (a grid sweep's points are unchanged); a screening
measurement is the point `<id>_s<n>` with a fraction of the benchmark's requests per level, and a later round's
capacity search starts from the screening's capacity (`benchmark.load.hint`). Each round point carries `search`
({strategy, round, config, fidelity}) into point.json and the report.

`plan_round` replays the search from round 1 on the recorded results (a round's outcome is its points' records and
capacity searches), so round `n` is decided the same way on a rerun, and writes the ledger `search.json`: every
round's tasks and outcomes, every drop with its evidence, the GPU-minutes spent.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.fleet import status
from trtsweep.perf.search import LIMITS
from trtsweep.search.strategy import Outcome, SearchSpec, Strategy, Task, spent_minutes

LEDGER = "search.json"
MIN_SCREENING_REQUESTS = 8  # a screening level's requests at least (a p99 of fewer says little)


def point_id(config: str, task: Task, number: int) -> str:
    return f"{config}_s{number}" if task.screening else config


def round_point(grid_point: dict[str, Any], task: Task, number: int, spec: SearchSpec, requests: int) -> dict[str, Any]:
    """The point that measures `task` in round `number`; `requests`: the full benchmark's requests per level."""
    point = copy.deepcopy(grid_point)
    if spec.strategy == "grid":
        return point
    point["id"] = point_id(grid_point["id"], task, number)
    point["search"] = {"strategy": spec.strategy, "round": number, "config": grid_point["id"],
                       "fidelity": task.fidelity}  # fmt: skip
    benchmark = point["benchmark"]
    if task.screening:
        benchmark["num_requests"] = max(MIN_SCREENING_REQUESTS, round(requests * task.fidelity))
    if task.hint is not None and benchmark.get("load"):
        benchmark["load"]["hint"] = list(task.hint)
    return point


def _summary_levels(point_dir: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    data = read_json(point_dir / "llm_perf.summary.json") or {}
    return data.get("search"), data.get("levels") or []


def outcome(results_dir: Path, point: dict[str, Any], number: int) -> Outcome | None:
    """What the round point measured (None: not finished yet)."""
    record = status.read(results_dir, point["id"])
    if record is None or record.get("status") not in ("ok", "failed", "lost"):
        return None
    config, fidelity = point.get("search", {}).get("config", point["id"]), point.get("search", {}).get("fidelity", 1.0)
    held = sum(float(s) for s in (record.get("stages") or {}).values())
    gpu_s = held * max(1, len(record.get("gpus") or []))
    base = {"config": config, "round": number, "point": point["id"], "gpu_s": gpu_s, "fidelity": fidelity}
    if record["status"] != "ok":
        return Outcome(ok=False, cause=f"{record['status']} at stage {record.get('stage')}: {record.get('cause')}",
                       **base)  # fmt: skip
    search, levels = _summary_levels(results_dir / point["id"])
    if not search:
        return Outcome(ok=False, cause="no capacity search in its summary", **base)
    capacity = search.get("capacity") or {}
    value = capacity.get("value")
    steps = search.get("levels") or []
    failed = [s["value"] for s in steps if not s.get("met") and value is not None and s["value"] > value]
    at = next((lv.get("summary") or {} for lv in levels if value is not None and lv.get("concurrency") == value), {})
    latency = {key: (at.get(metric) or {}).get("p99") for key, (metric, _) in LIMITS.items()}
    tokens = capacity.get("output_token_throughput")
    return Outcome(ok=True, tokens_per_gpu=tokens / max(1, len(record.get("gpus") or [])) if tokens else None,
                   capacity_rps=capacity.get("request_rate"), capacity_concurrency=value,
                   failed_level=min(failed) if failed else None, bound=search.get("bound"), levels=len(steps),
                   latency=latency, **base)  # fmt: skip


def full_requests(point: dict[str, Any], records: int) -> int:
    return int(point["benchmark"].get("num_requests") or records)


def plan_round(
    grid: list[dict[str, Any]], spec: SearchSpec, number: int, results_dir: Path, records: int,
    predictions: dict[str, float | None] | None = None, batch: int = 1, write: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Round `number`'s points (empty: the search is over) and the ledger so far. `grid`: the sweep's points;
    `records`: the prompts file's records (a level's requests when the benchmark gives no num_requests)."""
    by_id = {p["id"]: p for p in grid}
    strategy = Strategy(spec, list(by_id), predictions, batch)
    history: dict[int, dict[str, Outcome]] = {}
    ledger: dict[str, Any] = {"strategy": spec.strategy, "spec": spec.__dict__, "configs": list(by_id),
                              "predictions": predictions, "rounds": [], "dropped": []}  # fmt: skip
    points: list[dict[str, Any]] = []
    for current in range(1, number + 1):
        tasks, drops = strategy.round(current, history)
        ledger["dropped"] += [d.as_dict() for d in drops]
        points = [round_point(by_id[t.config], t, current, spec, full_requests(by_id[t.config], records))
                  for t in tasks]  # fmt: skip
        if not tasks:
            break
        entry: dict[str, Any] = {"round": current, "tasks": [_task(t, p) for t, p in zip(tasks, points, strict=True)]}
        if current < number:
            measured = {p["search"]["config"] if "search" in p else p["id"]: outcome(results_dir, p, current)
                        for p in points}  # fmt: skip
            history[current] = {c: o for c, o in measured.items() if o is not None}
            entry["outcomes"] = [o.__dict__ for o in history[current].values()]
        ledger["rounds"].append(entry)
    ledger["gpu_minutes"] = round(spent_minutes(history), 3)
    if write and spec.strategy != "grid":
        atomic_write_text(results_dir / LEDGER, json.dumps(ledger, indent=1) + "\n")
    return points, ledger


def _task(task: Task, point: dict[str, Any]) -> dict[str, Any]:
    """A round's task in the ledger: its point id and that point's settings hash (the report's candidates are the
    points of the sweep's rounds with these hashes, trtsweep.report.answer)."""
    return {"config": task.config, "point": point["id"], "fidelity": task.fidelity,
            "hint": list(task.hint) if task.hint else None, "settings_hash": status.settings_hash(point)}  # fmt: skip
