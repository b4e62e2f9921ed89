"""How many replicas of each configuration serve the sweep's `slo.target_request_rate` within its SLOs.

A configuration measured by a capacity search (the sweep's `benchmark.load`; results.csv's capacity columns) serves
`capacity_rps` requests per second per replica within the SLOs, so a target rate takes
replicas = ceil(target / capacity_rps) of it, and replicas x its GPUs GPUs. The configuration needing the fewest
GPUs (then the fewest replicas, then the point id) is named first. A capacity whose bound is "open" (the search's
max still met the SLOs) is a lower bound, so its replica count is enough, maybe more than needed; a bound of "none"
(no load measured met the SLOs) sizes nothing. A point that did not finish ok, or whose numbers are another
server's, is not sized. Pure: rows in (results.csv's, `results_table.collect`), lines out.
"""

from __future__ import annotations

import math
from typing import Any

from trtsweep.report.verdict import excluded

HEAD = "serving {target:g} req/s within the SLOs"
OPEN = "(at least: the search max met the SLOs)"
NONE = "cannot meet the SLOs at any load measured"


def size(rows: list[dict[str, Any]], target: float) -> list[dict[str, Any]]:
    """One entry per configuration with a capacity search, in row order: {"point", "bound", "capacity_rps",
    "capacity_concurrency", "gpus" (per replica), "replicas" and "total_gpus" (None when it is not sized),
    "excluded" (why it is not sized, or None), "fewest" (the one needing the fewest GPUs)}."""
    out = []
    for point in dict.fromkeys(r["point"] for r in rows):
        mine = [r for r in rows if r["point"] == point]
        first = mine[0]
        if first.get("capacity_bound") is None:
            continue  # no capacity search
        reason = next((why for r in mine if (why := excluded(r))), None)
        rate, gpus = first.get("capacity_rps"), first.get("gpus") or 0
        sized = reason is None and first["capacity_bound"] != "none" and rate is not None and rate > 0
        replicas = math.ceil(target / rate) if sized else None
        out.append({"point": point, "bound": first["capacity_bound"], "capacity_rps": rate,
                    "capacity_concurrency": first.get("capacity_concurrency"), "gpus": gpus, "replicas": replicas,
                    "total_gpus": replicas * gpus if replicas is not None else None, "excluded": reason,
                    "fewest": False})  # fmt: skip
    candidates = [entry for entry in out if entry["replicas"] is not None]
    if candidates:
        min(candidates, key=lambda e: (e["total_gpus"], e["replicas"], e["point"]))["fewest"] = True
    return out


def _need(entry: dict[str, Any]) -> str:
    gpus = f"{entry['total_gpus']} GPUs" if entry["gpus"] else "no GPU"
    return f"{entry['replicas']} replica{'s' if entry['replicas'] != 1 else ''}, {gpus}"


def _line(entry: dict[str, Any]) -> str:
    if entry["excluded"]:
        return f"  {entry['point']}: not sized: {entry['excluded']}"
    if entry["bound"] == "none":
        return f"  {entry['point']}: {NONE}"
    if entry["replicas"] is None:
        return f"  {entry['point']}: not sized: its capacity's request rate is unknown"
    at = f" at concurrency {entry['capacity_concurrency']}" if entry["capacity_concurrency"] is not None else ""
    capacity = f"{entry['capacity_rps']:.4g} req/s per replica{at}"
    if entry["bound"] == "open":
        capacity += f" {OPEN}"
    fewest = " (fewest)" if entry["fewest"] else ""
    return f"  {entry['point']}: {capacity} -> {_need(entry)}{fewest}"


def lines(rows: list[dict[str, Any]], target: float | None) -> list[str]:
    """The sizing in words (none without a target): a first line naming the configuration that needs the fewest
    GPUs, then one line per configuration with a capacity search, the fewest first."""
    if not target:
        return []
    head = HEAD.format(target=target)
    entries = size(rows, target)
    if not entries:
        return [f"{head}: no configuration was measured with a capacity search (benchmark.load)"]
    fewest = next((e for e in entries if e["fewest"]), None)
    if fewest is None:
        first = f"{head}: no configuration can ({NONE}, or not sized)"
    else:
        first = f"{head}: {fewest['point']} needs {_need(fewest)} (fewest)"
        first += f" {OPEN}" if fewest["bound"] == "open" else ""
    order = sorted(entries, key=lambda e: (e["total_gpus"] is None, e["total_gpus"] or 0, e["replicas"] or 0))
    return [first, *(_line(entry) for entry in order)]
