"""report.html of a real run (tests/data/report_results) in a real headless Chromium, driven through the DevTools
protocol: no console message or uncaught exception, no request that leaves the file (it works offline), the
charts drawn (inline SVG with visible paths), every number of its tables the text of results.csv (and shown
rounded from it), and a full-page screenshot (into $TRTSWEEP_SCREENSHOT_DIR when set, else the test's tmp dir).

No Chromium is a failure that says how to install it, never a skip (.ci/run installs Debian's chromium).
"""

from __future__ import annotations

import base64
import csv
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from tests.integration.report_browser import CHROMIUM_FLAGS, chromium
from trtsweep.report import writer

DATA = Path(__file__).resolve().parent.parent / "data" / "report_results" / "smollm2-cpu-demo"
WIDTH = 1280

# What the page shows, read in the browser after layout: every chart (its size and visible paths) and every
# table cell that carries its results.csv text.
INSPECT = """JSON.stringify({
  svgs: [...document.querySelectorAll("svg")].map(svg => {
    const box = svg.getBoundingClientRect();
    const paths = [...svg.querySelectorAll("path")]
      .filter(p => p.getAttribute("d") && p.getBBox().width + p.getBBox().height > 0);
    return {width: box.width, height: box.height, paths: paths.length};
  }),
  cells: [...document.querySelectorAll("td[data-value]")].map(td => ({
    point: td.dataset.point, concurrency: td.dataset.concurrency, column: td.dataset.column,
    value: td.dataset.value, text: td.innerText.trim()})),
  height: document.documentElement.scrollHeight,
  verdict: document.querySelector(".verdict").innerText,
})"""


class Page:
    """One Chromium tab over the DevTools protocol, recording what would show in its console."""

    def __init__(self, ws: websocket.WebSocket) -> None:
        self.ws, self.next_id, self.problems = ws, 0, []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = self._receive(60)
            if message is not None and message.get("id") == self.next_id:
                assert "error" not in message, (method, message["error"])
                return message.get("result", {})

    def events_until(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self._receive(deadline - time.monotonic())
            if message is not None and message.get("method") == method:
                return
        raise AssertionError(f"no {method} within {timeout} s")

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._receive(deadline - time.monotonic())

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        self.ws.settimeout(max(timeout, 0.01))
        try:
            message = json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return None
        self._record(message)
        return message

    def _record(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.problems.append(f"console.{params.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.problems.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.problems.append(f"log {entry.get('level')}: {entry.get('text')} {entry.get('url', '')}".rstrip())
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:")):
                self.problems.append(f"request leaves the page: {url}")
        elif method == "Network.loadingFailed":
            self.problems.append(f"load failed: {params.get('errorText')}")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Page]:
    """Headless Chromium with every host unresolvable (a page that needs the network shows it), one tab."""
    profile = tmp_path / "chromium-profile"
    proc = subprocess.Popen(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WIDTH},1000", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        port_file, deadline = profile / "DevToolsActivePort", time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            assert proc.poll() is None, f"chromium exited with {proc.returncode} before its DevTools port was open"
            assert time.monotonic() < deadline, "chromium opened no DevTools port within 60 s"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as answer:
            tab = next(t for t in json.load(answer) if t["type"] == "page")
        ws = websocket.create_connection(tab["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        page = Page(ws)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        yield page
        ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def open_page(page: Page, path: Path) -> dict[str, Any]:
    """Load the file, let it settle, and return what INSPECT reads from it."""
    page.call("Page.navigate", url=path.resolve().as_uri())
    page.events_until("Page.loadEventFired", 60)
    page.drain(0.5)  # anything the page would log after load
    return json.loads(page.call("Runtime.evaluate", expression=INSPECT, returnByValue=True)["result"]["value"])


def screenshot(page: Page, height: int, path: Path) -> Path:
    page.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=height, deviceScaleFactor=1, mobile=False)
    shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """The real run's results, their report rebuilt by this checkout."""
    out = Path(shutil.copytree(DATA, tmp_path / "smollm2-cpu-demo"))
    writer.write(out)
    return out


def test_the_report_of_a_real_run_in_headless_chromium(browser, results, tmp_path):
    shown = open_page(browser, results / "report.html")
    assert browser.problems == []  # no console message, no exception, nothing fetched from outside the file
    charts = [s for s in shown["svgs"] if s["width"] > 100 and s["height"] > 50]
    assert len(charts) >= 5, shown["svgs"]  # throughput/TTFT, Pareto, per GPU, accuracy, latency percentiles
    assert all(s["paths"] >= 5 for s in charts), charts  # each one drawn, not an empty frame
    with (results / "results.csv").open(newline="") as handle:
        rows = {(r["point"], r["concurrency"]): r for r in csv.DictReader(handle)}
    assert len(shown["cells"]) > 100
    for c in shown["cells"]:
        expected = rows[(c["point"], c["concurrency"])][c["column"]]
        assert c["value"] == expected, c  # the cell carries results.csv's text
        if expected and c["text"] != "-" and c["column"] != "point":  # and shows it, rounded
            decimals = len(c["text"].partition(".")[2])
            assert abs(float(c["text"]) - float(expected)) <= 0.5 * 10**-decimals + 1e-9, (c, expected)
    assert shown["verdict"].startswith("best under the SLOs: smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream")
    target = Path(os.environ.get("TRTSWEEP_SCREENSHOT_DIR") or tmp_path) / "report.png"
    shot = screenshot(browser, min(shown["height"], 8000), target)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    print(f"report screenshot: {shot}")


def test_the_browser_check_sees_a_console_error_and_an_outside_request(browser, results):
    page = results / "report.html"
    text = page.read_text()
    page.write_text(text.replace("</body>", '<img src="https://cdn.example.com/x.png"><script>console.error("boom");'
                                 "undefined_function();</script></body>"))  # fmt: skip
    open_page(browser, page)
    problems = "\n".join(browser.problems)
    assert "console.error: boom" in problems
    assert "undefined_function is not defined" in problems
    assert "request leaves the page: https://cdn.example.com/x.png" in problems
