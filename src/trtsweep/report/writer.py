"""The sweep report: every point's status and per-level headline numbers (console, CSV, Markdown).

Reads what was fetched to the controller: `results/<sweep>/<point_id>/llm_perf.summary.json` and
`status.json`. The report only reads the point records: the fleet writes them, including the lost points of
a run that ended (trtsweep.fleet.status.close_run, called before the report).

A report whose inputs have not changed since it was written (the point folders, the search's files, the SLOs and
this package's report code, by size and modification time) is not written again: a fully cached rerun reads it back
(`.report-inputs.json`) instead of drawing the same page.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any, NamedTuple

from trtsweep.common.fileio import atomic_write_text, read_json
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import status
from trtsweep.perf.export import CSV_COLUMNS, headline, table
from trtsweep.report import allocation, results_table, search
from trtsweep.report.answer import SLO_FILE, answer, current_points, kept_slo
from trtsweep.search.rounds import outage
from trtsweep.sweep.slo import check as slo_check

SUMMARY_FILE = "llm_perf.summary.json"
PLACEMENT_COLUMNS = ("host", "gpus", "colocated")

HTML_FILE = "report.html"
OUTPUTS = ("report.csv", "report.md", results_table.CSV_FILE, results_table.JSON_FILE, HTML_FILE)
REUSE_FILE = ".report-inputs.json"  # the inputs' digest and the report made from them
# what the report does not read: the run's own hidden state (.run/, .fetched/, the run lock), the plan, the live
# events and the report itself
NOT_INPUTS = ("plan.json", "events.json", "slo.json", *OUTPUTS)


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


def statuses(results_dir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(results_dir.glob(f"*/{status.STATUS_FILE}")):
        record = status.read(results_dir, path.parent.name)
        if record:
            records.append(record)
    return records


def status_lines(records: list[dict[str, Any]], again: dict[str, str] | None = None) -> list[str]:
    """One line per point record; `again`: a search's lost point -> the point of a later round that measured it."""
    lines, again = [], again or {}
    for r in records:
        where = f"{r.get('host')} gpus {','.join(str(g) for g in r.get('gpus', [])) or '-'}"
        where += " (co-located)" if r.get("colocated") else ""
        line = f"{r['point']}: {r['status']} on {where}"
        if r["status"] != "ok":
            line += f" at stage {r['stage']}: {r.get('cause')}" if r.get("stage") else f": {r.get('cause')}"
        if r["point"] in again:
            line += f"; measured again as {again[r['point']]} (ok)"
        lines.append(line)
    return lines


def measured_again(results_dir: Path, records: list[dict[str, Any]]) -> dict[str, str]:
    """A search's points lost with their host that a later round measured again ok (the same configuration, at
    least the same share of the requests): lost point -> the point that measured it. A host outage is not the
    configuration's failure, so these are not points the run failed to measure."""
    searched = {}
    for r in records:
        search = (read_json(results_dir / r["point"] / "point.json") or {}).get("search") or {}
        if search.get("config"):  # (configuration, share of the requests, round, lost with its host, ok)
            share, number = search.get("fidelity") or 1, search.get("round") or 0
            searched[r["point"]] = (search["config"], share, number, outage(r), r["status"] == "ok")
    out = {}
    for point, (config, share, number, lost, _) in searched.items():
        later = [other for other, (c, f, n, _, ok) in searched.items()
                 if lost and ok and c == config and f >= share and n > number]  # fmt: skip
        if later:
            out[point] = later[0]
    return out


class Report(NamedTuple):
    text: str  # the console tables and point lines
    rows: list[dict[str, Any]]  # report.csv's rows
    not_ok: list[str]  # one line per point not ok
    verdict: list[str]  # the best configuration under the SLOs, why not each other one, and the sizing for a target
    html: Path


def inputs_digest(results_dir: Path, slo: dict[str, Any] | None) -> str:
    """A digest of what the report reads (every file of the sweep's folder but NOT_INPUTS, by name, size and
    modification time), the SLOs it judges by, the sweep's current points (plan.json `current`) and the report's own
    code."""
    judged_by = {"slo": slo, "current": current_points(results_dir)}
    digest = hashlib.sha256(json.dumps(judged_by, sort_keys=True, default=str).encode())
    code = Path(__file__).resolve().parent
    top = [p for p in results_dir.iterdir() if not p.name.startswith(".") and p.name not in NOT_INPUTS]
    files = [(results_dir, p) for t in top for p in (t.rglob("*") if t.is_dir() else [t])]
    files += [(code, p) for p in code.rglob("*")]
    for base, path in sorted(files):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.relative_to(base)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _reused(results_dir: Path, digest: str) -> Report | None:
    """The report written from these very inputs, if it and all its files are still there."""
    kept = read_json(results_dir / REUSE_FILE)
    if not kept or kept.get("digest") != digest or not all((results_dir / name).is_file() for name in OUTPUTS):
        return None
    return Report(kept["text"], kept["rows"], kept["not_ok"], kept["verdict"], results_dir / HTML_FILE)


def write(results_dir: Path, slo: dict[str, Any] | None = None) -> Report:
    """Write report.csv, report.md, results.csv, results.json and report.html into `results_dir` (unless they
    were written from the same inputs already: then that report is returned).

    `slo` (the sweep's, validated) is kept in the directory (slo.json) so that a later `trtsweep report` judges
    the same way."""
    slo_file = results_dir / SLO_FILE
    if slo is not None:
        slo = slo_check(slo)
        if read_json(slo_file) != slo:
            atomic_write_text(slo_file, json.dumps(slo, indent=2) + "\n")
    else:
        slo = kept_slo(results_dir) or None
    digest = inputs_digest(results_dir, slo)
    reused = _reused(results_dir, digest)
    if reused is not None:
        return reused
    report = _write(results_dir, slo)
    kept = {"digest": digest, "text": report.text, "rows": report.rows, "not_ok": report.not_ok,
            "verdict": report.verdict}  # fmt: skip
    atomic_write_text(results_dir / REUSE_FILE, json.dumps(kept, default=str))
    return report


def sweeps_below(folder: Path) -> list[str]:
    """The names of the sweeps' results folders in `folder` (a plan, or a point's record, inside)."""
    if not folder.is_dir():
        return []
    found = [d for d in folder.iterdir() if d.is_dir()]
    return sorted(d.name for d in found if (d / "plan.json").is_file() or any(d.glob(f"*/{status.STATUS_FILE}")))


def _write(results_dir: Path, slo: dict[str, Any] | None) -> Report:
    from trtsweep.report import page  # matplotlib: only when a page is drawn

    rows = collect(results_dir)
    records = statuses(results_dir)
    if not rows and not records:
        inside = sweeps_below(results_dir)
        if inside:  # the results folder's parent (results/, not results/<sweep>)
            names = ", ".join(str(results_dir / name) for name in inside)
            raise TrtsweepError(f"{results_dir} holds the results of {len(inside)} sweep(s), not one: report one of "
                                f"them ({names})")  # fmt: skip
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
    again = measured_again(results_dir, records)
    points = status_lines(records, again)
    not_ok = [line for line, r in zip(points, records, strict=True) if r["status"] != "ok" and r["point"] not in again]
    # the one answer (report.answer): the verdict and sizing over the current plan's full measurements
    found = answer(results_dir, slo or {})
    results_table.write(results_dir, found.all_rows)
    searched = search.lines(results_dir)
    ran_on = allocation.lines(records)
    lines = found.lines() + searched + ran_on
    html = results_dir / HTML_FILE
    atomic_write_text(html, page.render(results_dir.name, found, records, searched, ran_on))
    text = "\n\n".join([*sections, "points:\n" + "\n".join(f"  {line}" for line in points)])
    legend = (
        "latencies in ms; TTFT = time to first token; ICL = inter-chunk latency (every gap, vLLM's ITL); "
        "TPOT = (E2E-TTFT)/(tokens-1) per request (AIPerf's ITL); tok/s over the benchmark window"
    )
    said = "\n".join(lines)
    atomic_write_text(results_dir / "report.md", f"# {results_dir.name}\n\n{said}\n\n{legend}\n\n```\n{text}\n```\n")
    return Report(f"{text}\n\n{legend}", rows, not_ok, lines, html)
