"""What each strategy would spend, before anything runs: points and GPU-minutes per strategy, for `trtsweep plan`.

A point costs its load (every stage before the benchmark: download, build, serve...) plus its capacity search:
levels x requests per level x seconds per request, times its GPUs. The per-point numbers come from this sweep's
earlier records where there are some (the mean load seconds, and benchmark seconds per measured request), else
from defaults (LOAD_S, REQUEST_S) that the line says were used. Levels: a full search measures up to the load's
`max_levels`; a round that starts from an earlier capacity (`--search-hint`) about HINTED_LEVELS.

Halving's rounds are counted as if no configuration were dropped early (an upper bound); predicted's as its first
round (a lower bound: it stops there when the measured best beats every prediction) up to the grid.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import read_json
from trtsweep.search.strategy import SearchSpec, Strategy

LOAD_S = 120.0  # a point's stages before its benchmark, without earlier records
REQUEST_S = 1.0  # seconds per measured request (closed loop, at the levels' concurrencies), without records
HINTED_LEVELS = 3


def _history(results_dir: Path) -> tuple[float, float, int] | None:
    """(load seconds per point, benchmark seconds per measured request, points) from earlier ok records."""
    loads, per_request = [], []
    for record_file in results_dir.glob("*/status.json"):
        record = read_json(record_file) or {}
        summary = read_json(record_file.parent / "llm_perf.summary.json") or {}
        stages = record.get("stages") or {}
        requests = sum((lv.get("summary") or {}).get("requests") or 0 for lv in summary.get("levels", []))
        if record.get("status") != "ok" or not stages.get("benchmark") or not requests:
            continue
        loads.append(sum(float(v) for k, v in stages.items() if k != "benchmark"))
        per_request.append(float(stages["benchmark"]) / requests)
    if not loads:
        return None
    return sum(loads) / len(loads), sum(per_request) / len(per_request), len(loads)


def estimates(grid: list[dict[str, Any]], spec: SearchSpec, records: int, results_dir: Path) -> list[str]:
    """One line per strategy: its points and GPU-minutes (grid, halving, predicted), and where the costs come from;
    `records`: the prompts file's (a level's requests when the benchmark gives no num_requests)."""
    if not grid or not grid[0]["benchmark"].get("load"):
        return []
    requests = int(grid[0]["benchmark"].get("num_requests") or records)
    learned = _history(results_dir)
    load_s, request_s = (learned[0], learned[1]) if learned else (LOAD_S, REQUEST_S)
    levels = int(grid[0]["benchmark"]["load"].get("max_levels") or 8)
    gpus = sum(max(1, p["resources"]["gpus"]) for p in grid) / len(grid)

    def minutes(points: float, fidelity: float, search_levels: float) -> float:
        return points * gpus * (load_s + search_levels * max(1, requests * fidelity) * request_s) / 60.0

    configs = [p["id"] for p in grid]
    halving = Strategy(dataclasses.replace(spec, strategy="halving"), configs)
    screens = halving.screening_rounds()
    rounds = [(halving.survivors(n), spec.screening_fidelity(n) if n <= screens else 1.0, n) for n in
              range(1, screens + 2)]  # fmt: skip
    halving_points = sum(count for count, _, _ in rounds)
    halving_min = sum(minutes(c, f, levels if n == 1 else HINTED_LEVELS) for c, f, n in rounds)
    grid_min = minutes(len(grid), 1.0, levels)
    first = min(len(grid), spec.batch or 1)
    source = (f"from {learned[2]} earlier points of this sweep: {load_s:.0f} s before the benchmark, "
              f"{request_s:.2f} s per request" if learned else f"defaults: {LOAD_S:.0f} s before the benchmark, "
              f"{REQUEST_S:.1f} s per request (no earlier results)")  # fmt: skip
    return [
        f"estimate, grid: {len(grid)} points, about {grid_min:.0f} GPU-minutes",
        f"estimate, halving: at most {halving_points} points in {len(rounds)} rounds, about {halving_min:.0f} "
        f"GPU-minutes ({halving_min / grid_min:.0%} of the grid)",
        f"estimate, predicted: from {first} points (about {minutes(first, 1.0, levels):.0f} GPU-minutes, plus what "
        f"AIConfigurator cannot predict) up to the grid's",
        f"estimates {source}; {levels} levels per full capacity search, {requests} requests per level",
    ]
