"""The sweep report: every point's status and per-level headline numbers (console, CSV, Markdown).

Reads what was fetched to the controller: `results/<sweep>/<point_id>/llm_perf.summary.json` and
`status.json`. Given the run's plan, the points this run planned but never finished are marked lost
first (their host went away), with the reason the run's events recorded (`events.json`, written by the
trtsweep_events callback) where there is one.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, NamedTuple

from trtsweep.common.fileio import atomic_write_text
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status
from trtsweep.perf.export import CSV_COLUMNS, headline, table
from trtsweep.report import page, results_table, verdict
from trtsweep.sweep.slo import check as slo_check

SUMMARY_FILE = "llm_perf.summary.json"
EVENTS_FILE = "events.json"
PLACEMENT_COLUMNS = ("host", "gpus", "colocated")

HTML_FILE = "report.html"


def collect(results_dir: Path) -> list[dict[str, Any]]:
    """One row per (point, level), sorted by point id then concurrency."""
    rows = []
    for summary_file in sorted(results_dir.glob(f"*/{SUMMARY_FILE}")):
        point = summary_file.parent.name
        try:
            data = json.loads(summary_file.read_text())
        except json.JSONDecodeError as exc:
            raise TrtsweepError(f"{summary_file}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        record = status.read(results_dir, point) or {}
        where = {
            "host": record.get("host"),
            "gpus": ",".join(str(g) for g in record.get("gpus", [])),
            "colocated": record.get("colocated"),
        }
        for level in data.get("levels", []):
            rows.append({"point": point, **where, **headline(level, level.get("summary", {}))})
    return rows


def _events(results_dir: Path, run_id: str) -> dict[str, Any]:
    """The events of run `run_id` (empty when the file is missing, unreadable or another run's)."""
    try:
        events = json.loads((results_dir / EVENTS_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return events if isinstance(events, dict) and events.get("run_id") == run_id else {}


def lost_reasons(results_dir: Path, run_id: str) -> dict[str, str]:
    """Host -> why it went away, from the run's events file (empty when there is none)."""
    unreachable = _events(results_dir, run_id).get("unreachable", {})
    return {host: f"host {host} unreachable: {msg}" for host, msg in unreachable.items()}


def last_stages(results_dir: Path, run_id: str) -> dict[str, str]:
    """Point -> the stage its lane was in when the run's events last saw it (the controller's record only knows
    the stage a point started with until it ends). Only the point a lane was running has one: the callback starts
    each point at the first stage, so no point carries the stage its lane's previous point reached."""
    lanes = _events(results_dir, run_id).get("lanes", {})
    return {lane["point"]: lane["stage"] for lane in lanes.values() if lane.get("point") and lane.get("stage")}


def statuses(results_dir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(results_dir.glob(f"*/{status.STATUS_FILE}")):
        record = status.read(results_dir, path.parent.name)
        if record:
            records.append(record)
    return records


def status_lines(records: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in records:
        where = f"{r.get('host')} gpus {','.join(str(g) for g in r.get('gpus', [])) or '-'}"
        where += " (co-located)" if r.get("colocated") else ""
        line = f"{r['point']}: {r['status']} on {where}"
        if r["status"] != "ok":
            line += f" at stage {r['stage']}: {r.get('cause')}" if r.get("stage") else f": {r.get('cause')}"
        lines.append(line)
    return lines


class Report(NamedTuple):
    text: str  # the console tables and point lines
    rows: list[dict[str, Any]]  # report.csv's rows
    not_ok: list[str]  # one line per point not ok
    verdict: list[str]  # the best configuration under the SLOs, and why not each other one
    html: Path


def write(results_dir: Path, plan: dict[str, Any] | None = None, slo: dict[str, Any] | None = None) -> Report:
    """Write report.csv, report.md, results.csv, results.json and report.html into `results_dir`.

    `slo` (the sweep's, validated) is kept in the directory (slo.json) so that a later `trtsweep report` judges
    the same way."""
    if plan is not None:
        run_id = plan["run_id"]
        status.outcome(
            results_dir, plan["points"], run_id, lost_reasons(results_dir, run_id), last_stages(results_dir, run_id)
        )
    slo_file = results_dir / "slo.json"
    if slo is not None:
        atomic_write_text(slo_file, json.dumps(slo_check(slo), indent=2) + "\n")
    elif slo_file.is_file():
        slo = slo_check(json.loads(slo_file.read_text()))
    rows = collect(results_dir)
    records = statuses(results_dir)
    if not rows and not records:
        raise TrtsweepError(f"{results_dir}: no {SUMMARY_FILE} or {status.STATUS_FILE} found; nothing was measured")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["point", *PLACEMENT_COLUMNS, *(c for c, _ in CSV_COLUMNS)])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(results_dir / "report.csv", buffer.getvalue())
    sections = []
    for point in dict.fromkeys(r["point"] for r in rows):
        levels = [{k: v for k, v in r.items() if k not in PLACEMENT_COLUMNS} for r in rows if r["point"] == point]
        sections.append(f"{point}\n{table(levels)}")
    points = status_lines(records)
    not_ok = [line for line, r in zip(points, records, strict=True) if r["status"] != "ok"]
    full = results_table.collect(results_dir, slo)
    results_table.write(results_dir, full)
    judged = verdict.judge(full, slo or {})
    lines = verdict.summary_lines(judged)
    html = results_dir / HTML_FILE
    atomic_write_text(html, page.render(results_dir.name, full, judged, records))
    text = "\n\n".join([*sections, "points:\n" + "\n".join(f"  {line}" for line in points)])
    legend = (
        "latencies in ms; TTFT = time to first token; ICL = inter-chunk latency (every gap, vLLM's ITL); "
        "TPOT = (E2E-TTFT)/(tokens-1) per request (AIPerf's ITL); tok/s over the benchmark window"
    )
    answer = "\n".join(lines)
    atomic_write_text(results_dir / "report.md", f"# {results_dir.name}\n\n{answer}\n\n{legend}\n\n```\n{text}\n```\n")
    return Report(f"{text}\n\n{legend}", rows, not_ok, lines, html)
