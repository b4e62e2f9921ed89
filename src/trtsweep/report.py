"""The sweep report: every point's per-level headline numbers in one table (console, CSV, Markdown).

Reads `results/<sweep>/<point_id>/llm_perf.summary.json` files as fetched to the controller.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from trtsweep.errors import TrtsweepError
from trtsweep.fileio import atomic_write_text
from trtsweep.perf.export import CSV_COLUMNS, headline, table

SUMMARY_FILE = "llm_perf.summary.json"


def collect(results_dir: Path) -> list[dict[str, Any]]:
    """One row per (point, level), sorted by point id then concurrency."""
    rows = []
    for summary_file in sorted(results_dir.glob(f"*/{SUMMARY_FILE}")):
        point = summary_file.parent.name
        try:
            data = json.loads(summary_file.read_text())
        except json.JSONDecodeError as exc:
            raise TrtsweepError(f"{summary_file}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        for level in data.get("levels", []):
            rows.append({"point": point, **headline(level, level.get("summary", {}))})
    return rows


def write(results_dir: Path) -> tuple[str, list[dict[str, Any]]]:
    """Write report.csv and report.md into `results_dir`; return the console text and the rows."""
    rows = collect(results_dir)
    if not rows:
        raise TrtsweepError(f"{results_dir}: no {SUMMARY_FILE} found; nothing was measured")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["point", *(c for c, _ in CSV_COLUMNS)])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(results_dir / "report.csv", buffer.getvalue())
    sections = []
    for point in dict.fromkeys(r["point"] for r in rows):
        sections.append(f"{point}\n{table([r for r in rows if r['point'] == point])}")
    text = "\n\n".join(sections)
    legend = (
        "latencies in ms; TTFT = time to first token; ICL = inter-chunk latency (every gap, vLLM's ITL); "
        "TPOT = (E2E-TTFT)/(tokens-1) per request (AIPerf's ITL); tok/s over the benchmark window"
    )
    atomic_write_text(results_dir / "report.md", f"# {results_dir.name}\n\n{legend}\n\n```\n{text}\n```\n")
    return f"{text}\n\n{legend}", rows
