"""A search's rounds as sweep points, and what each round measured, read back from the results.

Round `n` of a search (trtsweep.search.strategy) becomes points like any other, placed and run by the same plays:
a configuration measured at the full benchmark keeps its grid id (a grid sweep's points are unchanged); a screening
measurement is the point `<id>_s<n>` with a fraction of the benchmark's requests per level, and a later round's
capacity search starts from the screening's capacity (`benchmark.load.hint`); a full measurement made again after
its point was lost with its host is `<id>_r<n>` (the lost point's record stays: what it cost counts). Each round
point carries `search` ({strategy, round, config, fidelity}) into point.json and the report.

What the search decided when it began and cannot read back from the points' records is its `Record`, kept in the
ledger: the strategy (`auto`'s choice, and why), the predicted strategy's batch (the lanes of the hosts healthy
then) and the cost basis its budget priced rounds with. A later round and a rerun of the same configurations and
`search:` take the recorded ones, so that `plan_round`, which replays the search from round 1 on the recorded
results (a round's outcome is its points' records and capacity searches), decides round `n` the same way. It
writes the ledger `search.json`: the record, every round's tasks and outcomes, every drop with its evidence, the
GPU-minutes spent.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.fleet import status
from trtsweep.perf.search import LIMITS
from trtsweep.search import costs
from trtsweep.search.strategy import History, Outcome, SearchSpec, Strategy, Task, spent_minutes

LEDGER = "search.json"
# a point whose server its supervisor stopped because the run's lease lapsed on the host (trtsweep.serve.supervisor's
# reason, in the point's cause): the host lost the controller (a cut link, a dead controller), not the configuration
LEASE_LAPSED = "stopped by its supervisor (lease expired)"


@dataclass(frozen=True)
class Record:
    """What the search decided when it began (see the module doc); `key` names the configurations and `search:` it
    was decided for."""

    key: str
    strategy: str
    why: str | None
    batch: int
    basis: costs.Basis

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "basis": self.basis.as_dict()}


def searching(grid: list[dict[str, Any]]) -> bool:
    """Whether the sweep searches its configurations (a capacity search ranks them): else one plain round."""
    return bool(grid) and bool(grid[0]["benchmark"].get("load"))


def record_key(grid: list[dict[str, Any]], spec: SearchSpec) -> str:
    points = [(p["id"], status.settings_hash(p)) for p in grid]
    return hashlib.sha256(json.dumps([points, spec.__dict__], sort_keys=True).encode()).hexdigest()[:20]


def recorded(results_dir: Path, key: str) -> Record | None:
    """The record the ledger keeps for these configurations and `search:` (None: none, or another search's)."""
    kept = (read_json(results_dir / LEDGER) or {}).get("record")
    if not isinstance(kept, dict) or kept.get("key") != key:
        return None
    return Record(kept["key"], kept["strategy"], kept.get("why"), int(kept["batch"]),
                  costs.Basis.from_dict(kept.get("basis")))  # fmt: skip


def point_id(config: str, task: Task, number: int) -> str:
    if task.screening:
        return f"{config}_s{number}"
    return f"{config}_r{number}" if task.again else config


def round_point(grid_point: dict[str, Any], task: Task, number: int, spec: SearchSpec, requests: int) -> dict[str, Any]:
    """The point that measures `task` in round `number`; `requests`: the full benchmark's requests per level. A grid
    search's first measurement of a configuration is its grid point as it is."""
    point = copy.deepcopy(grid_point)
    if spec.strategy == "grid" and not task.again:
        return point
    point["id"] = point_id(grid_point["id"], task, number)
    point["search"] = {"strategy": spec.strategy, "round": number, "config": grid_point["id"],
                       "fidelity": task.fidelity}  # fmt: skip
    benchmark = point["benchmark"]
    if task.screening:
        benchmark["num_requests"] = costs.Size(requests=requests).requests_at(task.fidelity)
    if task.hint is not None and benchmark.get("load"):
        benchmark["load"]["hint"] = list(task.hint)
    return point


def _summary(point_dir: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    data = read_json(point_dir / "llm_perf.summary.json") or {}
    return data.get("search"), data.get("levels") or []


def _seconds(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


def held_s(record: dict[str, Any]) -> float:
    """Seconds the point held its GPUs: its stages; a lost point (no stages: its host went away) from its start to
    when it was lost (its record's `finished_at`)."""
    stages = record.get("stages") or {}
    if stages:
        return sum(float(s) for s in stages.values())
    start, end = record.get("started_at"), record.get("finished_at")
    return max(0.0, _seconds(end) - _seconds(start)) if start and end else 0.0


def outage(record: dict[str, Any]) -> bool:
    """Whether the record ended with its host's outage, not its configuration's doing: lost (the host went away), or
    failed because the run's lease lapsed on the host."""
    return record.get("status") == "lost" or (
        record.get("status") == "failed" and LEASE_LAPSED in str(record.get("cause") or "")
    )


def outcome(results_dir: Path, point: dict[str, Any], number: int) -> Outcome | None:
    """What the round point measured (None: not finished yet)."""
    record = status.read(results_dir, point["id"])
    if record is None or record.get("status") not in status.FINAL:
        return None
    config, fidelity = point.get("search", {}).get("config", point["id"]), point.get("search", {}).get("fidelity", 1.0)
    gpus = max(1, len(record.get("gpus") or []))
    base = {"config": config, "round": number, "point": point["id"], "gpu_s": held_s(record) * gpus,
            "fidelity": fidelity}  # fmt: skip
    if record["status"] != "ok":
        return Outcome(ok=False, lost=outage(record), **base,
                       cause=f"{record['status']} at stage {record.get('stage')}: {record.get('cause')}")  # fmt: skip
    search, levels = _summary(results_dir / point["id"])
    if not search:
        return Outcome(ok=False, cause="no capacity search in its summary", **base)
    stages = {k: float(v) for k, v in (record.get("stages") or {}).items()}
    spend = {"load_s": sum(v for k, v in stages.items() if k != "benchmark"),
             "benchmark_s": stages.get("benchmark", 0.0),
             "requests": sum(int((lv.get("summary") or {}).get("requests") or 0) for lv in levels)}  # fmt: skip
    capacity = search.get("capacity") or {}
    value, variable = capacity.get("value"), search.get("variable") or "concurrency"
    steps = search.get("levels") or []
    failed = [s["value"] for s in steps if not s.get("met") and value is not None and s["value"] > value]
    at = next((lv.get("summary") or {} for lv in levels if value is not None and lv.get(variable) == value), {})
    latency = {key: (at.get(metric) or {}).get("p99") for key, (metric, _) in LIMITS.items()}
    tokens = capacity.get("output_token_throughput")
    return Outcome(ok=True, tokens_per_gpu=tokens / gpus if tokens else None, capacity_rps=capacity.get("request_rate"),
                   capacity_concurrency=capacity.get("concurrency"), load=value, variable=variable,
                   failed_level=min(failed) if failed else None, bound=search.get("bound"), levels=len(steps),
                   latency=latency, **spend, **base)  # fmt: skip


def full_requests(point: dict[str, Any], records: int) -> int:
    return int(point["benchmark"].get("num_requests") or records)


def sizes(grid: list[dict[str, Any]], records: int) -> dict[str, costs.Size]:
    """Config -> what its full measurement is (GPUs, requests per level, the capacity search's levels; without a
    capacity search, its fixed concurrency levels)."""
    return {p["id"]: costs.Size(gpus=max(1, p["resources"]["gpus"]), requests=full_requests(p, records),
                                levels=_levels(p["benchmark"]))
            for p in grid}  # fmt: skip


def _levels(bench: dict[str, Any]) -> int:
    if bench.get("load"):
        return int(bench["load"].get("max_levels") or 8)
    return max(1, len(bench.get("concurrency") or [1]))


def plan_round(
    grid: list[dict[str, Any]], spec: SearchSpec, record: Record, number: int, results_dir: Path, records: int,
    predictions: dict[str, float | None] | None = None, write: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Round `number`'s points (empty: the search is over) and the ledger so far. `grid`: the sweep's points;
    `spec`: its `search:` (its strategy resolved by `record`); `records`: the prompts file's records (a level's
    requests when the benchmark gives no num_requests); `write`: write the ledger."""
    by_id = {p["id"]: p for p in grid}
    resolved = SearchSpec(**{**spec.__dict__, "strategy": record.strategy})
    strategy = Strategy(resolved, list(by_id), predictions, record.batch, sizes(grid, records), record.basis)
    history: History = {}
    ledger: dict[str, Any] = {"strategy": record.strategy, "chosen": record.why, "spec": spec.__dict__,
                              "record": record.as_dict(), "configs": list(by_id), "predictions": predictions,
                              "rounds": [], "dropped": []}  # fmt: skip
    points: list[dict[str, Any]] = []
    for current in range(1, number + 1):
        tasks, drops = strategy.round(current, history)
        ledger["dropped"] += [d.as_dict() for d in drops]
        points = [round_point(by_id[t.config], t, current, resolved, full_requests(by_id[t.config], records))
                  for t in tasks]  # fmt: skip
        if not tasks:
            break
        entry: dict[str, Any] = {"round": current, "tasks": [_task(t, p) for t, p in zip(tasks, points, strict=True)]}
        if current < number:
            measured = {t.config: outcome(results_dir, p, current) for t, p in zip(tasks, points, strict=True)}
            history[current] = {c: o for c, o in measured.items() if o is not None}
            entry["outcomes"] = [o.__dict__ for o in history[current].values()]
        ledger["rounds"].append(entry)
    ledger["gpu_minutes"] = round(spent_minutes(history), 3)
    if write:
        atomic_write_text(results_dir / LEDGER, json.dumps(ledger, indent=1) + "\n")
    return points, ledger


def _task(task: Task, point: dict[str, Any]) -> dict[str, Any]:
    """A round's task in the ledger: its point id and that point's settings hash (the report's candidates are the
    points of the sweep's rounds with these hashes, trtsweep.report.answer)."""
    return {"config": task.config, "point": point["id"], "fidelity": task.fidelity, "again": task.again,
            "hint": list(task.hint) if task.hint else None, "settings_hash": status.settings_hash(point)}  # fmt: skip
