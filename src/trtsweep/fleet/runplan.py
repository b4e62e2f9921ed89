"""One run of a sweep over the fleet: the plan (resume, then placement) and the run's outcome.

`make_plan` is what the sweep's plan play (module `trtsweep_plan`) and `trtsweep plan -i` call:

1. expand the sweep into points (`planning.expand`), then take those of the search's round (`search.rounds`:
   a grid sweep's one round is every point as it is; halving and predicted decide each round from the results of
   the rounds before it);
2. keep the points an earlier run completed with the same settings (`status.select`; force / only);
3. place the rest on the hosts that passed preflight (`placement.place`); a point that fits only hosts
   with problems is failed at stage preflight with their problems as the cause, a point that fits no
   host of the inventory at all fails the plan;
4. write `results/<sweep>/plan.json` (run id, points with host / GPUs / ports / order, lanes, kept points, a
   search's points lost with their host in an earlier run (`lost`: the search's next round measures them again), and
   `current`: every point of the sweep's rounds so far with its settings hash, what the report may judge).

A point to run whose record says an earlier run started it on a host and never recorded its end (that run's controller
went away: the record is still running, or lost) with the same settings hash may have ended on its host all the same,
its archive kept there. The plan keeps such a point on that host (a lane of it with as many GPUs) and names it under
`collect` ({point, run_id, host}), said in the plan's text: the host's collector collects the archive if that run ended
the point ok, instead of running it again (trtsweep.fleet.collect; not with force).
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import placement, status
from trtsweep.search import costs, estimate, predicted, rounds
from trtsweep.search.strategy import SearchSpec
from trtsweep.sweep import draftcheck, promptcheck, pytorch_axes
from trtsweep.sweep.paths import model_dirs
from trtsweep.sweep.planning import check_input_data, default_base_dir, expand

PLAN_FILE = "plan.json"


now = status.now  # a record's time stamps


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def make_plan(
    sweep: Any,
    hosts: dict[str, dict[str, Any]],
    results_root: Path,
    force: bool = False,
    only: str | None = None,
    write: bool = True,
    base_dir: Path | None = None,
    search_round: int = 1,
    run_id: str | None = None,
) -> dict[str, Any]:
    """`hosts`: name -> {gpus, busy_gpus, ports, port_stride, problems}; `base_dir`: where relative input_data
    paths are (planning.expand); `search_round`: the search's round (1: the run's first plan), `run_id` the run's
    id from its first round. Returns the plan (see module doc)."""
    grid = expand(sweep, base_dir)
    base = default_base_dir() if base_dir is None else base_dir
    mode = grid[0]["placement_mode"] if grid else "exclusive"
    results_dir = results_root / sweep["name"]
    every = [placement.host_from_facts(name, facts) for name, facts in hosts.items()]
    # a point no host of the inventory can take is a mistake in the sweep or the inventory: stop here
    placement.check_fit(grid, every)
    if search_round > 1 and write:  # the round before ended: its unfinished points are lost, as at a run's end
        previous = read_json(results_dir / PLAN_FILE)
        if previous is not None and previous.get("run_id") == run_id:
            close_round(results_dir, previous)
    hosts = without_gone(hosts, status.lost_reasons(results_dir, run_id) if run_id and search_round > 1 else {})
    healthy = [h for h in every if not hosts[h.name].get("problems")]
    spec = SearchSpec.from_sweep(sweep.get("search"))
    records = prompt_records(grid, base)
    key = rounds.record_key(grid, spec)
    record = rounds.recorded(results_dir, key) or begin_search(grid, spec, key, records, results_dir, healthy, mode)
    made = None
    if record.strategy == "predicted":
        made = predicted.predictions(grid, sweep["search"], sweep.get("slo"), hosts, results_dir, base)
    searched = rounds.searching(grid)
    points, ledger = rounds.plan_round(grid, spec, record, search_round, results_dir, records,
                                       predicted.scores(made) if made is not None else None,
                                       write and searched)  # fmt: skip
    if write and search_round == 1 and not points and grid and spec.budget_gpu_minutes is not None:
        raise TrtsweepError(
            f"sweep field 'search.budget_gpu_minutes': {spec.budget_gpu_minutes:g} GPU-minutes leave nothing to "
            f"measure with {record.strategy} ({len(grid)} configurations; `trtsweep plan` prints what a budget buys): "
            "raise it"
        )
    to_run, kept, left_out = status.select(points, results_dir, force, only, status.commits_now(hosts))
    # a search's point lost with its host is measured again by the search's next round, not here (a rerun replays)
    lost = [p["id"] for p in to_run if searched and not force and lost_here(results_dir, p)]
    to_run = [p for p in to_run if p["id"] not in lost]
    # prompts over a point's max_input_len fail the plan; deferred to the host without a tokenizer here
    prompt_checks = promptcheck.plan_checks(to_run, base)
    dirs = model_dirs(sweep, base)
    notes = draftcheck.plan_notes(to_run, dirs) + pytorch_axes.plan_notes(to_run, dirs)
    placeable = [p for p in to_run if any(h.fits(p["resources"]) for h in healthy)]
    unplaced = []
    for point in to_run:
        if point in placeable:
            continue
        troubled = [h.name for h in every if h.fits(point["resources"])]
        causes = "; ".join(f"{name}: {' / '.join(hosts[name]['problems'])}" for name in troubled)
        unplaced.append({"point": point["id"], "cause": f"every host that fits it failed preflight: {causes}"})
    placed = placement.place(placeable, healthy, mode) if placeable else {"points": [], "lanes": []}
    collect = [] if force else on_earlier_hosts(placed, earlier_runs(placeable, results_dir))
    plan = {
        "sweep": sweep["name"],
        "run_id": run_id or new_run_id(),
        "created_at": now(),
        "mode": mode,
        "results_dir": str(results_dir),
        "base_dir": str(base),  # where the sweep's relative paths start (its file's directory): the handoff's too
        "points": placed["points"],
        "lanes": placed["lanes"],
        "kept": kept,
        "lost": lost,
        # every point of this sweep's rounds so far (a grid sweep: its matrix), by id with its settings hash: the
        # report judges only these (a point removed from the sweep or measured with other settings is stale)
        "current": {t["point"]: t["settings_hash"] for r in ledger["rounds"] for t in r["tasks"]},
        "collect": collect,
        "left_out": left_out,
        "unplaced": unplaced,
        "prompt_checks": prompt_checks,
        "plan_notes": notes,  # what was not checked at plan time (a draft's tokenizer, a model config) and why
        "hosts": hosts,
        # the next round is planned while this one measured something; a sweep without a capacity search has one
        "search": {
            "strategy": record.strategy,
            "round": search_round,
            "points": len(points),
            "more": searched and bool(points),
            "chosen": record.why,
            "dropped": [d for d in ledger["dropped"] if d["round"] == search_round - 1],
            # before anything runs: what each strategy would spend
            "estimates": estimate.estimates(grid, spec, records, results_dir, record.why) if search_round == 1 else [],
        },
    }
    if write:
        atomic_write_text(results_dir / PLAN_FILE, json.dumps(plan, indent=2) + "\n")
        for entry in unplaced:
            point = next(p for p in to_run if p["id"] == entry["point"])
            status.begin(results_dir, point, plan["run_id"], plan["created_at"])
            status.finish(results_dir, point["id"], plan["run_id"], status="failed", stage="preflight",
                          cause=entry["cause"], finished_at=now())  # fmt: skip
    return plan


def begin_search(grid: list[dict[str, Any]], spec: SearchSpec, key: str, records: int, results_dir: Path,
                 healthy: list[placement.Host], mode: str) -> rounds.Record:  # fmt: skip
    """What a search decides when it begins (rounds.Record): its strategy (auto's choice), the predicted strategy's
    batch (the lanes of the hosts healthy now, unless the sweep gives one) and the cost basis of its budget. A sweep
    without a capacity search has one plain round."""
    if not rounds.searching(grid):
        return rounds.Record(key, "grid", None, 1, costs.Basis())
    strategy, why = estimate.choose(grid, spec, records, results_dir)
    lanes = 1
    if strategy == "predicted" and spec.batch is None:  # as many configurations as the fleet runs at once
        fits = [p for p in grid if any(h.fits(p["resources"]) for h in healthy)]
        lanes = len(placement.place(fits, healthy, mode)["lanes"]) if fits else 1
    return rounds.Record(key, strategy, why, spec.batch or lanes, estimate.basis(results_dir))


def close_round(results_dir: Path, previous: dict[str, Any]) -> None:
    """The end of a search's round (`previous`: its plan): its unfinished points are lost, as at a run's end
    (status.close_run), and a lost point that had started gets in its record when it was lost (`finished_at`: when
    its host was found unreachable, else now), so that what its GPUs held counts (rounds.held_s)."""
    run_id = previous["run_id"]
    unreachable_at = status.run_events(results_dir, run_id).get("unreachable_at", {})
    for record in status.close_run(results_dir, previous):
        if record["status"] != "lost" or not record.get("started_at"):
            continue
        at = unreachable_at.get(record["host"])
        if at is not None or not record.get("finished_at"):
            when = dt.datetime.fromtimestamp(at, dt.timezone.utc).isoformat(timespec="seconds") if at else now()
            status.write(results_dir, {**record, "finished_at": when})


def without_gone(hosts: dict[str, dict[str, Any]], gone: dict[str, str]) -> dict[str, dict[str, Any]]:
    """`hosts` with a problem for each host this run lost (`gone`: host -> why, status.lost_reasons): a later round
    of a search places nothing there."""
    return {name: {**facts, "problems": [*facts.get("problems", []), f"gone earlier in this run: {gone[name]}"]}
            if name in gone else facts for name, facts in hosts.items()}  # fmt: skip


def lost_here(results_dir: Path, point: dict[str, Any]) -> bool:
    """Whether the point's record says it ended with its host's outage (rounds.outage), measuring these very
    settings."""
    record = status.read(results_dir, point["id"]) or {}
    return rounds.outage(record) and record.get("settings_hash") == status.settings_hash(point)


def earlier_runs(points: list[dict[str, Any]], results_dir: Path) -> list[dict[str, str]]:
    """{point, run_id, host} of the points an earlier run started on a host without recording their end (running,
    or lost at that run's end), for the same settings."""
    found = []
    for point in points:
        record = status.read(results_dir, point["id"])
        if (record is not None and record.get("status") in ("running", "lost") and record.get("host")
                and record.get("run_id") and record.get("settings_hash") == status.settings_hash(point)):  # fmt: skip
            found.append({"point": point["id"], "run_id": record["run_id"], "host": record["host"]})
    return found


def on_earlier_hosts(placed: dict[str, Any], earlier: list[dict[str, str]]) -> list[dict[str, str]]:
    """Move each point of `earlier` that was placed elsewhere into a lane of the host that ran it (one with as many
    GPUs as it takes: should that run not have ended it, it runs there); returns the entries whose point is on that
    host now."""
    lanes_of: dict[str, list[dict[str, Any]]] = {}
    for lane in placed["lanes"]:
        lanes_of.setdefault(lane["host"], []).append(lane)
    points = {p["id"]: p for p in placed["points"]}
    kept = []
    for entry in earlier:
        point = points[entry["point"]]
        if point["host"] != entry["host"]:
            needs = len(point["gpus"])
            target = next((ln for ln in lanes_of.get(entry["host"], []) if len(ln["gpus"]) >= needs), None)
            if target is None:
                continue
            source = next(ln for ln in placed["lanes"] if ln["name"] == point["lane"])
            source["points"].remove(point["id"])
            source["load"] -= point["weight"]
            target["points"].insert(0, point["id"])
            target["load"] += point["weight"]
            gpus = placement.own_gpus(target["gpus"], point)
            point.update(host=target["host"], lane=target["name"], gpus=gpus, ports=dict(target["ports"]),
                         visible_devices=",".join(str(i) for i in gpus),
                         colocated=len(lanes_of[target["host"]]) > 1)  # fmt: skip
        kept.append(entry)
    placed["lanes"] = [lane for lane in placed["lanes"] if lane["points"]]
    for lane in placed["lanes"]:
        for order, point_id in enumerate(lane["points"]):
            points[point_id]["order"] = order
    return kept


def prompt_records(grid: list[dict[str, Any]], base_dir: Path) -> int:
    """The prompts file's records: a level's requests where the benchmark gives no num_requests."""
    if not grid:
        return 0
    path = check_input_data(grid[0]["benchmark"]["input_data"], base_dir)
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def plan_text(plan: dict[str, Any]) -> str:
    """The placement as a table: host, lane, the point's own GPUs, ports, order, point."""
    rows = [("host", "lane", "gpus", "ports (http/grpc/metrics)", "#", "point")]
    own = {p["id"]: p.get("gpus") for p in plan.get("points", [])}
    for lane in plan["lanes"]:
        ports = "/".join(str(lane["ports"][r]) for r in placement.PORT_ROLES)
        for order, point_id in enumerate(lane["points"]):
            gpus = own.get(point_id)
            gpus_text = ",".join(str(g) for g in (lane["gpus"] if gpus is None else gpus)) or "cpu"
            rows.append((lane["host"], str(lane["index"]), gpus_text, ports, str(order), point_id))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines += promptcheck.lines(plan.get("prompt_checks", {}))
    lines += plan.get("plan_notes", [])
    lines += plan.get("search", {}).get("estimates", [])
    for name in plan["kept"]:
        lines.append(f"kept (complete from an earlier run with the same settings): {name}")
    for name in plan.get("lost", []):
        lines.append(f"lost with its host in an earlier run, measured again by the search's next round: {name}")
    for entry in plan["collect"]:
        lines.append(f"collected from {entry['host']} if run {entry['run_id']} ended it ok there (that run's "
                     f"controller went away before collecting it), else run: {entry['point']}")  # fmt: skip
    for name in plan["left_out"]:
        lines.append(f"left out (not matched by trtsweep_only): {name}")
    for entry in plan["unplaced"]:
        lines.append(f"failed at preflight: {entry['point']}: {entry['cause']}")
    return "\n".join(lines)
