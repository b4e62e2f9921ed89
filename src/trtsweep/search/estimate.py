"""What each strategy would spend, before anything runs: points and GPU-minutes per strategy, what a budget buys,
and `auto`'s choice, for `trtsweep plan` and the search's first round; for a sweep without a capacity search, what
its grid of fixed levels costs.

A point's cost is trtsweep.search.costs' (its load plus levels x requests x seconds per request, times its GPUs),
from this sweep's earlier records where there are some (the mean load seconds, and benchmark seconds per measured
request), else from the defaults, which the line says were used.

Halving's rounds are counted as if no configuration were dropped early (an upper bound); predicted's as its first
round (a lower bound: it stops there when the measured best beats every prediction) up to the grid. `auto` takes
the cheaper of grid and halving (a tie: grid); predicted is taken only when named, as its cost depends on what
AIConfigurator answers.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import read_json
from trtsweep.search import costs
from trtsweep.search.rounds import sizes
from trtsweep.search.strategy import SearchSpec, Strategy


def _samples(results_dir: Path) -> list[tuple[float, float, int]]:
    """(load seconds, benchmark seconds, measured requests) of this sweep's earlier ok records."""
    out = []
    for record_file in sorted(results_dir.glob("*/status.json")):
        record = read_json(record_file) or {}
        summary = read_json(record_file.parent / "llm_perf.summary.json") or {}
        stages = record.get("stages") or {}
        requests = sum((lv.get("summary") or {}).get("requests") or 0 for lv in summary.get("levels", []))
        if record.get("status") == "ok" and stages.get("benchmark") and requests:
            out.append((sum(float(v) for k, v in stages.items() if k != "benchmark"), float(stages["benchmark"]),
                        int(requests)))  # fmt: skip
    return out


def basis(results_dir: Path) -> costs.Basis:
    """The seconds a search of this sweep starts pricing with: its earlier records', else the defaults."""
    return costs.measured(_samples(results_dir), costs.Basis(), "earlier points of this sweep")


def _strategy(grid: list[dict[str, Any]], spec: SearchSpec, name: str, records: int, priced: costs.Basis) -> Strategy:
    return Strategy(dataclasses.replace(spec, strategy=name), [p["id"] for p in grid], {}, 1, sizes(grid, records),
                    priced)  # fmt: skip


def _minutes(grid: list[dict[str, Any]], spec: SearchSpec, records: int, priced: costs.Basis) -> tuple[float, float]:
    """(grid, halving) GPU-minutes, none dropped early, whatever the budget."""
    spec = dataclasses.replace(spec, budget_gpu_minutes=None)
    halving = _strategy(grid, spec, "halving", records, priced).schedule_s(len(grid)) / 60.0
    return _grid_minutes(grid, spec, records, priced), halving


def _grid_minutes(grid: list[dict[str, Any]], spec: SearchSpec, records: int, priced: costs.Basis) -> float:
    """GPU-minutes of every configuration measured in full."""
    whole = _strategy(grid, dataclasses.replace(spec, budget_gpu_minutes=None), "grid", records, priced)
    return sum(whole.cost_s(t, {}) for t in whole.round(1, {})[0]) / 60.0


def choose(grid: list[dict[str, Any]], spec: SearchSpec, records: int, results_dir: Path) -> tuple[str, str | None]:
    """(strategy, why): the named one; `auto`'s choice and why (a sweep without a capacity search: grid)."""
    if spec.strategy != "auto":
        return spec.strategy, None
    if not grid or not grid[0]["benchmark"].get("load"):
        return "grid", None
    grid_min, halving_min = _minutes(grid, spec, records, basis(results_dir))
    chosen = "halving" if halving_min < grid_min else "grid"
    return chosen, (f"search auto: {chosen}, the cheaper estimate (grid about {grid_min:.1f} GPU-minutes, halving "
                    f"about {halving_min:.1f}; predicted is taken only when named: its cost depends on "
                    f"AIConfigurator's answers)")  # fmt: skip


def estimates(grid: list[dict[str, Any]], spec: SearchSpec, records: int, results_dir: Path,
              chosen: str | None = None) -> list[str]:  # fmt: skip
    """One line per strategy: its points and GPU-minutes (grid, halving, predicted), where the costs come from,
    auto's choice (`chosen`: the one the search recorded when it began, else made now) and what the budget buys;
    `records`: the prompts file's (a level's requests when the benchmark gives no num_requests)."""
    if not grid:
        return []
    requests = int(grid[0]["benchmark"].get("num_requests") or records)
    priced = basis(results_dir)
    if not grid[0]["benchmark"].get("load"):  # a grid of fixed levels: what it costs, no strategy to choose
        levels = len(grid[0]["benchmark"].get("concurrency") or [1])
        return [f"estimate: {len(grid)} points, about {_grid_minutes(grid, spec, records, priced):.0f} GPU-minutes",
                f"estimates {priced.source}; {levels} levels per point, {requests} requests per level"]  # fmt: skip
    levels = int(grid[0]["benchmark"]["load"].get("max_levels") or 8)
    halving = _strategy(grid, spec, "halving", records, priced)
    steps = halving.screening_rounds() + 1
    halving_points = sum(halving.survivors(n) for n in range(1, steps + 1))
    grid_min, halving_min = _minutes(grid, spec, records, priced)
    first = min(len(grid), spec.batch or 1)
    lines = [
        f"estimate, grid: {len(grid)} points, about {grid_min:.0f} GPU-minutes",
        f"estimate, halving: at most {halving_points} points in {steps} rounds, about {halving_min:.0f} "
        f"GPU-minutes ({halving_min / grid_min:.0%} of the grid)",
        f"estimate, predicted: from {first} points (about {grid_min * first / len(grid):.0f} GPU-minutes, plus what "
        f"AIConfigurator cannot predict) up to the grid's",
        f"estimates {priced.source}; {levels} levels per full capacity search, {requests} requests per level",
    ]
    lines += [why] if (why := chosen or choose(grid, spec, records, results_dir)[1]) else []
    if spec.budget_gpu_minutes is not None:
        lines.append(_buys(grid, spec, records, priced))
    return lines


def _buys(grid: list[dict[str, Any]], spec: SearchSpec, records: int, priced: costs.Basis) -> str:
    """What the budget buys each strategy before anything runs (its first round, trimmed as the search trims it)."""
    budget = spec.budget_gpu_minutes
    whole, _ = _strategy(grid, spec, "grid", records, priced).round(1, {})
    screened, _ = _strategy(grid, spec, "halving", records, priced).round(1, {})
    left = [p["id"] for p in grid[len(whole) :]]
    unmeasured = f" (left unmeasured: {', '.join(left)})" if left else ""
    how = "screens" if screened and screened[0].screening else "measures in full"
    return (f"budget {budget:g} GPU-minutes: grid measures {len(whole)} of {len(grid)} configurations{unmeasured}; "
            f"halving {how} {len(screened)} of {len(grid)}, keeping what its later rounds need; predicted measures "
            f"the best predicted first, as many as the budget leaves room for")  # fmt: skip
