"""The sweep's answer: the one function that decides which configuration to put in production, called by everything
that shows it: the report (console verdict, report.md, report.html), `trtsweep handoff --point best`, `trtsweep
compare` and the sizing for a target rate. None of them judges rows of its own.

What is judged (`Answer.rows`): the rows of results.csv (every measured level, `results_table.collect`) of the points
of the sweep's current plan (plan.json `current`: every point of the sweep's rounds with its settings hash) that
measured those very settings, at the full benchmark. Set aside, listed and never judged (`Answer.set_aside`):
- a search's screening measurement (`search_fidelity` below 1: a fraction of the requests, the search's evidence);
- a stale point: a folder of a point the current sweep no longer has (removed from the sweep file, or a round of an
  earlier search), or one whose record measured other settings (its `settings_hash` is not the sweep's now).
Results without a plan naming its points (written before plans did) are judged whole, saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtsweep.common.fileio import read_json
from trtsweep.errors import TrtsweepError
from trtsweep.report import results_table, sizing, verdict
from trtsweep.sweep.slo import check as slo_check

PLAN_FILE = "plan.json"
SLO_FILE = "slo.json"
SCREENING = "screening measurement(s) of the search (its evidence, at a share of the requests), never an answer"
NO_PLAN = "no plan.json names the sweep's points: every measured point is judged"


@dataclass(frozen=True)
class Answer:
    slo: dict[str, Any]
    all_rows: list[dict[str, Any]]  # results.csv: every measured level
    rows: list[dict[str, Any]]  # the judged rows: current plan, current settings, full benchmark
    screening: list[str]  # a search's screening points: its evidence, never judged
    stale: dict[str, str]  # point -> why it is stale, never judged
    judged: dict[str, Any]  # verdict.judge(rows)
    sizing: list[str]  # the replicas and GPUs for slo.target_request_rate (sizing.lines over rows)
    planned: bool  # whether a plan named the sweep's points

    @property
    def best(self) -> dict[str, Any] | None:
        return self.judged["best"]

    def verdict_lines(self) -> list[str]:
        """The verdict in words (first line: the answer), then what was not judged and why."""
        lines = verdict.summary_lines(self.judged)
        if not self.rows and (self.screening or self.stale):
            lines[0] = "no configuration was measured at the full benchmark of this sweep"
        if self.screening:
            lines.append(f"not judged: {len(self.screening)} {SCREENING}: {', '.join(self.screening)}")
        lines += [f"{point}: not judged: {why}" for point, why in self.stale.items()]
        return lines if self.planned else [*lines, NO_PLAN]

    def lines(self) -> list[str]:
        return self.verdict_lines() + self.sizing


def current_points(results_dir: Path) -> dict[str, str] | None:
    """The sweep's current points by id with their settings hash (plan.json `current`), None without one."""
    plan = read_json(results_dir / PLAN_FILE)
    current = plan.get("current") if isinstance(plan, dict) else None
    return current if isinstance(current, dict) else None


def kept_slo(results_dir: Path) -> dict[str, Any]:
    """The SLOs the sweep's report judged by (slo.json, kept by the report), {} without any."""
    path = results_dir / SLO_FILE
    if not path.is_file():
        return {}
    try:
        return slo_check(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        raise TrtsweepError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def _screening(row: dict[str, Any]) -> bool:
    return row.get("search_fidelity") is not None and row["search_fidelity"] < 1


def _stale(row: dict[str, Any], current: dict[str, str] | None) -> str | None:
    """Why the row's point is stale (None: it is a point of the current plan with its settings)."""
    if current is None:
        return None
    if row["point"] not in current:
        return "stale: not a point of the sweep's current plan (removed from the sweep, or an earlier search's)"
    if row.get("settings_hash") != current[row["point"]]:
        return (f"stale: measured other settings (settings hash {row.get('settings_hash') or 'none'}, the sweep's "
                f"is {current[row['point']]}): rerun it")  # fmt: skip
    return None


def answer(results_dir: Path, slo: dict[str, Any] | None = None) -> Answer:
    """The sweep's answer from what `results_dir` holds; `slo`: the sweep's (checked), else the kept slo.json."""
    slo = kept_slo(results_dir) if slo is None else slo
    all_rows = results_table.collect(results_dir, slo)
    current = current_points(results_dir)
    screening = list(dict.fromkeys(r["point"] for r in all_rows if _screening(r)))
    stale = {r["point"]: why for r in all_rows if r["point"] not in screening and (why := _stale(r, current))}
    rows = [r for r in all_rows if r["point"] not in screening and r["point"] not in stale]
    return Answer(slo=slo, all_rows=all_rows, rows=rows, screening=screening, stale=stale,
                  judged=verdict.judge(rows, slo), sizing=sizing.lines(rows, slo.get("target_request_rate")),
                  planned=current is not None)  # fmt: skip
