"""Open a sweep's report.html in a real headless Chromium (Debian's `chromium`) and check what it shows.

Used by the end-to-end sweep test with the results of a real run: the page loads without console errors, its
charts are drawn (inline SVG with paths), every number in its tables carries the same text as results.csv, and a
screenshot is saved (into $TRTSWEEP_SCREENSHOT_DIR when set, for people to look at).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]  # fmt: skip


def chromium() -> str:
    """The browser, or an assertion saying how to get it (never a skip)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, (
        "no chromium on PATH: the report test needs Debian's chromium (apt-get install chromium; .ci/run does)"
    )
    return found


class Cells(HTMLParser):
    """Every table cell with data-value, and the counts of SVG elements and paths."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.svgs = self.paths = 0
        self._open: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.svgs += 1
        elif tag == "path":
            self.paths += 1
        elif tag == "td" and "data-value" in attributes:
            self._open = {**attributes, "text": ""}

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._open is not None:
            self.cells.append(self._open)
            self._open = None


def check_report_page(results_dir: Path, work: Path) -> Path:
    """Render results_dir/report.html in Chromium and check it against results.csv; return the screenshot."""
    browser, page = chromium(), (results_dir / "report.html").resolve()
    profile = work / "chromium-profile"
    dump = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert dump.returncode == 0, dump.stderr[-3000:]
    console = [line for line in dump.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    parsed = Cells()
    parsed.feed(dump.stdout)
    assert parsed.svgs >= 5 and parsed.paths > 50, (parsed.svgs, parsed.paths)  # the charts were drawn
    with (results_dir / "results.csv").open() as handle:
        rows = {(r["point"], r["concurrency"]): r for r in csv.DictReader(handle)}
    assert parsed.cells, "no table cell carries data-value"
    for c in parsed.cells:
        expected = rows[(c["data-point"], c["data-concurrency"])][c["data-column"]]
        assert c["data-value"] == expected, (c, expected)
        shown = c["text"].strip()
        if expected and shown != "-" and c["data-column"] not in ("point",):
            assert abs(float(shown) - float(expected)) <= 0.5 * 10 ** -(len(shown.partition(".")[2])) + 1e-9, c
    shot = Path(os.environ.get("TRTSWEEP_SCREENSHOT_DIR") or work) / "report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    argv = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,2600", f"--screenshot={shot}"]
    taken = subprocess.run([*argv, page.as_uri()], capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0 and shot.stat().st_size > 50_000, taken.stderr[-2000:]
    return shot
