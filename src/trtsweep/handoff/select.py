"""Which point a bundle hands off: the best one, judged as the report judges it, or one named by hand."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.report.answer import answer


def read_json(path: Path) -> Any:
    """A JSON record of the results; a missing or broken one is an error that says what to do."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TrtsweepError(f"{path}: missing (was the point run with this trtsweep version? rerun it)") from exc
    except json.JSONDecodeError as exc:
        raise TrtsweepError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def best_point(results_dir: Path) -> tuple[str, str]:
    """(the point the report names best: the sweep's one answer, trtsweep.report.answer, under the SLOs kept in
    slo.json; the report's sentence saying so)."""
    found = answer(results_dir)
    first = found.verdict_lines()[0]
    if found.best is None:
        raise TrtsweepError(f"{results_dir}: {first}; nothing to hand off (give --point to choose one)")
    return found.best["point"], first


@dataclass(frozen=True)
class Chosen:
    """A measured point and its records (results/<sweep>/<point>/)."""

    id: str
    how: str  # how it was chosen: the report's sentence naming it best, or by hand
    dir: Path
    status: dict[str, Any]  # status.json
    point: dict[str, Any]  # point.json
    repo: dict[str, Any]  # repository.json


def choose(results_dir: Path, point_id: str) -> Chosen:
    """The point `point_id` of the sweep (`best` for the best one); only a measured point (status ok) is handed off."""
    how = "by hand (--point)"
    if point_id == "best":
        point_id, how = best_point(results_dir)
    point_dir = results_dir / point_id
    status = read_json(point_dir / "status.json")
    if status.get("status") != "ok":
        raise TrtsweepError(
            f"point {point_id}: status {status.get('status')!r}, not ok; only a measured point can be handed off"
        )
    point, repo = read_json(point_dir / "point.json"), read_json(point_dir / "repository.json")
    return Chosen(id=point_id, how=how, dir=point_dir, status=status, point=point, repo=repo)
