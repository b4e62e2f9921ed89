"""The sweep report from a real run's results (tests/data/report_results): results.csv/json, report.csv/md,
report.html, the verdict under the SLOs, and `trtsweep report` rebuilding all of them."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from trtsweep.cli import main
from trtsweep.errors import TrtsweepError
from trtsweep.handoff import select
from trtsweep.report import results_table, writer

DATA = Path(__file__).resolve().parent.parent / "data" / "report_results" / "smollm2-cpu-demo"
FP32 = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
INT8 = "smollm2-135m_int8_tp1pp1_bs4_isl1024osl128_stream"
WRITTEN = ("report.csv", "report.md", "results.csv", "results.json", "report.html")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A copy of the real run's results (the report writes into its directory)."""
    return Path(shutil.copytree(DATA, tmp_path / "smollm2-cpu-demo"))


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


class Page(HTMLParser):
    """The report page's table cells that carry data-value, its charts, and every outside reference."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.svgs = self.paths = self.scripts = 0
        self.outside: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.svgs += tag == "svg"
        self.paths += tag == "path"
        self.scripts += tag == "script"
        for name in ("src", "href", "xlink:href"):
            if attributes.get(name, "").startswith(("http:", "https:", "//")):
                self.outside.append(f"<{tag} {name}={attributes[name]}>")
        if tag == "link":
            self.outside.append(f"<link {attributes}>")
        if tag == "td" and "data-value" in attributes:
            self.cells.append(attributes)


def test_results_csv_has_a_row_per_point_and_level_with_settings_versions_and_every_number(results):
    written = writer.write(results)
    assert all((results / name).is_file() for name in WRITTEN)
    assert written.html == results / "report.html"
    rows = read_csv(results / "results.csv")
    assert [(r["point"], r["concurrency"]) for r in rows] == [(p, c) for p in (FP32, INT8) for c in ("1", "2", "4")]
    assert list(rows[0]) == list(results_table.COLUMNS)
    summary = json.loads((DATA / FP32 / "llm_perf.summary.json").read_text())["levels"][2]["summary"]
    row = rows[2]  # float32 at concurrency 4
    cell = results_table.cell
    for column, value in (
        ("ttft_p99_ms", summary["ttft_ms"]["p99"]),
        ("ttft_mean_ms", summary["ttft_ms"]["mean"]),
        ("tpot_p90_ms", summary["tpot_ms"]["p90"]),
        ("icl_p95_ms", summary["icl_ms"]["p95"]),
        ("e2e_p50_ms", summary["e2e_ms"]["p50"]),
        ("output_token_throughput", summary["output_token_throughput"]),
        ("input_token_throughput", summary["input_token_throughput"]),
        ("request_throughput", summary["request_throughput"]),
        ("rougeL", summary["accuracy"]["rougeL"]),
        ("corpus_chrf", summary["accuracy"]["corpus_chrf"]),
        ("output_tokens_mean", summary["output_tokens"]["mean"]),
        ("input_tokens_mean", summary["input_tokens_total"] / summary["succeeded"]),
        ("server_requests", summary["server_metrics"]["per_model"]["ensemble"]["requests"]),
        ("server_compute_ms", summary["server_metrics"]["per_model"]["ensemble"]["compute_ms_per_request"]),
        ("success_rate", 1.0),
        ("requests", 16),
    ):
        assert row[column] == cell(value), column
    # a CPU point has no GPU: per-GPU numbers are per host
    assert row["gpus"] == "0" and row["gpu_ids"] == ""
    assert row["output_tok_s_per_gpu"] == row["output_token_throughput"]
    assert row["input_tok_s_per_gpu"] == row["input_token_throughput"]
    status = json.loads((DATA / FP32 / "status.json").read_text())
    assert (row["host"], row["run_id"], row["settings_hash"]) == (
        "localhost",
        status["run_id"],
        status["settings_hash"],
    )
    assert (row["trtsweep"], row["trtsweep_build"]) == (status["trtsweep"]["version"], status["trtsweep"]["build"])
    assert row["triton"] == "2.51.0"  # from the server log's version line
    assert row["tensorrt_llm"] == ""  # the hf backend records no TensorRT-LLM version: empty, not invented
    assert (row["model"], row["precision"], row["tp"], row["pp"], row["max_batch_size"]) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct", "float32", "1", "1", "4")  # fmt: skip
    assert row["model_revision"] == json.loads((DATA / FP32 / "repository.json").read_text())["model_revision"]
    assert row["errors"] == "" and row["abandoned"] == ""
    as_json = json.loads((results / "results.json").read_text())
    assert as_json["columns"] == list(results_table.COLUMNS)
    assert [cell(r["ttft_p99_ms"]) for r in as_json["rows"]] == [r["ttft_p99_ms"] for r in rows]


def test_the_verdict_under_the_kept_slos_names_the_best_and_what_the_other_misses(results):
    written = writer.write(results)  # no slo given: the run's slo.json
    assert written.verdict[0].startswith(f"best under the SLOs: {FP32} at concurrency ")
    assert written.verdict[1].startswith(f"{INT8}: misses rougeL 0.047 is 0.229 below {FP32}")
    md = (results / "report.md").read_text()
    assert md.startswith("# smollm2-cpu-demo\n\nbest under the SLOs:") and INT8 in md
    # report.csv keeps its per-level headline table
    old = read_csv(results / "report.csv")
    assert len(old) == 6 and {"point", "host", "ttft_p99_ms", "rougeL"} <= set(old[0])


def test_goodput_counts_the_requests_within_the_latency_slos(results):
    slo = {"ttft_p99_ms": 600.0, "e2e_p99_ms": 5000.0}
    writer.write(results, slo=slo)
    assert json.loads((results / "slo.json").read_text()) == slo  # kept for the next `trtsweep report`
    rows = {(r["point"], r["concurrency"]): r for r in read_csv(results / "results.csv")}
    summary = json.loads((DATA / FP32 / "llm_perf.summary.json").read_text())["levels"][0]["summary"]
    requests = [json.loads(line) for line in (DATA / FP32 / "llm_perf.requests.jsonl").read_text().splitlines()]
    good = sum(
        1
        for r in requests
        if r["level"] == 0 and not r.get("warmup") and not r.get("error")
        and r["ttft_ms"] <= 600.0 and r["e2e_ms"] <= 5000.0
    )  # fmt: skip
    assert 0 < good < 16
    row = rows[(FP32, "1")]
    assert float(row["goodput"]) == pytest.approx(good / summary["window_s"], rel=1e-5)
    assert float(row["good_fraction"]) == pytest.approx(good / 16, rel=1e-5)


def test_without_slos_the_best_is_the_highest_output_per_gpu(results):
    (results / "slo.json").unlink()
    written = writer.write(results)
    assert written.verdict[0].startswith(f"best (no SLOs given: highest output tok/s per GPU): {INT8} at concurrency 2")
    assert all(r["goodput"] == "" for r in read_csv(results / "results.csv"))  # goodput is measured against SLOs


def test_every_number_in_the_page_is_its_results_csv_text_and_the_page_needs_nothing_outside(results):
    writer.write(results)
    page = Page()
    page.feed((results / "report.html").read_text())
    assert page.outside == [] and page.scripts == 0  # works offline: no CDN, no script
    assert page.svgs >= 5 and page.paths > 50  # the charts, inline
    rows = {(r["point"], r["concurrency"]): r for r in read_csv(results / "results.csv")}
    assert len(page.cells) > 100
    columns = set()
    for c in page.cells:
        assert c["data-value"] == rows[(c["data-point"], c["data-concurrency"])][c["data-column"]], c
        columns.add(c["data-column"])
    # the side-by-side table: QPS, output tok/s, TTFT avg and p99 per configuration
    assert {"request_throughput", "output_token_throughput", "ttft_mean_ms", "ttft_p99_ms"} <= columns


def test_failed_points_are_listed_with_stage_and_cause(results):
    failed = "smollm2-135m_int4_tp1pp1_bs4_isl1024osl128_stream"  # hand-made: a point that failed at build
    (results / failed).mkdir()
    record = json.loads((results / INT8 / "status.json").read_text())
    record.update(point=failed, status="failed", stage="build", cause="engine build ran out of memory (hand-made)")
    (results / failed / "status.json").write_text(json.dumps(record))
    written = writer.write(results)
    assert written.not_ok == [f"{failed}: failed on localhost gpus - at stage build: {record['cause']}"]
    page = (results / "report.html").read_text()
    failures = page[page.index("<h2>Failures</h2>") :]
    assert failed in failures and "build" in failures and "engine build ran out of memory" in failures
    assert failed not in {r["point"] for r in read_csv(results / "results.csv")}  # it measured nothing


def test_trtsweep_report_rebuilds_everything(results, capsys):
    writer.write(results)
    before = {name: (results / name).read_text() for name in WRITTEN}
    for name in WRITTEN:
        (results / name).unlink()
    assert main(["report", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"best under the SLOs: {FP32}" in out and f"report: {results / 'report.html'}" in out
    assert {name: (results / name).read_text() for name in WRITTEN} == before  # the same answer from the same files


def test_a_report_with_nothing_to_read_is_one_line(tmp_path):
    with pytest.raises(TrtsweepError, match="nothing was measured"):
        writer.write(tmp_path)


def test_a_report_of_the_results_folders_parent_names_the_sweeps_inside(tmp_path):
    for sweep in ("qwen", "smol"):
        (tmp_path / sweep / "p").mkdir(parents=True)
        (tmp_path / sweep / "p" / "status.json").write_text(json.dumps({"point": "p", "status": "ok"}))
    (tmp_path / "notes").mkdir()
    with pytest.raises(TrtsweepError) as caught:
        writer.write(tmp_path)
    assert str(caught.value) == (f"{tmp_path} holds the results of 2 sweep(s), not one: report one of them "
                                 f"({tmp_path / 'qwen'}, {tmp_path / 'smol'})")  # fmt: skip


def test_errors_and_abandoned_requests_are_counted_by_class(tmp_path):
    point = tmp_path / "p"
    point.mkdir()
    (point / "status.json").write_text(json.dumps({"point": "p", "status": "ok", "gpus": [0, 1]}))
    summary = {"requests": 10, "succeeded": 7, "failed": 3, "errors": {"timeout": 2, "connection": 1},
               "abandoned": {"timeout": 2}, "output_token_throughput": 100.0, "input_token_throughput": None,
               "input_tokens_total": None, "window_s": 2.0}  # fmt: skip
    (point / "llm_perf.summary.json").write_text(json.dumps({"levels": [{"concurrency": 8, "summary": summary}]}))
    (row,) = results_table.collect(tmp_path)
    assert row["errors"] == "connection=1;timeout=2" and row["abandoned"] == "timeout=2"
    assert row["success_rate"] == 0.7 and row["gpus"] == 2 and row["output_tok_s_per_gpu"] == 50.0
    # no tokenizer: input tokens unknown, never 0
    assert row["input_tok_s_per_gpu"] is None and row["input_tokens_mean"] is None


def mark_failed(results: Path, point: str) -> None:
    record = json.loads((results / point / "status.json").read_text())
    record.update(status="failed", stage="benchmark", cause="llm-perf exited 3 (hand-made)")
    (results / point / "status.json").write_text(json.dumps(record))


def edit_levels(results: Path, point: str, edit: Callable[[int, dict], None]) -> None:
    """Apply `edit(concurrency, summary)` to every level of the point's llm_perf.summary.json."""
    path = results / point / "llm_perf.summary.json"
    data = json.loads(path.read_text())
    for level in data["levels"]:
        edit(level["concurrency"], level["summary"])
    path.write_text(json.dumps(data))


def test_a_failed_point_is_never_named_best_and_handoff_picks_the_reports_best(results):
    (results / "slo.json").unlink()  # no SLOs: int8 at concurrency 2 is the fastest
    mark_failed(results, INT8)
    written = writer.write(results)
    assert written.verdict[0].startswith(f"best (no SLOs given: highest output tok/s per GPU): {FP32} at concurrency 2")
    assert f"{INT8}: not a candidate: the point did not finish ok (failed)" in written.verdict
    assert select.best_point(results) == (FP32, written.verdict[0])
    page = (results / "report.html").read_text()
    assert f'<p class="best">best (no SLOs given: highest output tok/s per GPU): {FP32}' in page
    assert {r["point_status"] for r in read_csv(results / "results.csv") if r["point"] == INT8} == {"failed"}


def test_a_level_of_another_server_is_never_best_and_results_csv_says_why(results):
    (results / "slo.json").unlink()
    error = "the server at 127.0.0.1:8001 is 'trtsweep-1', not the expected 'trtsweep-2' (hand-made)"

    def another_server(concurrency: int, summary: dict) -> None:
        if concurrency == 2:  # int8's fastest level
            summary["server_identity"]["error"] = summary["error"] = error

    edit_levels(results, INT8, another_server)
    written = writer.write(results)
    assert written.verdict[0].startswith(f"best (no SLOs given: highest output tok/s per GPU): {INT8} at concurrency 1")
    assert select.best_point(results)[0] == INT8
    errors = {
        r["concurrency"]: r["server_identity_error"] for r in read_csv(results / "results.csv") if r["point"] == INT8
    }
    assert errors == {"1": "", "2": error, "4": ""}
    page = (results / "report.html").read_text()
    assert "not a candidate: not the expected server&#x27;s numbers: the server at 127.0.0.1:8001" in page


class Figures(HTMLParser):
    """Each chart of the page: its SVG's text comments (matplotlib writes every label as one) and its caption."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[dict[str, str]] = []
        self.inside = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "figure":
            self.figures.append({"labels": "", "caption": ""})
        self.inside = tag if tag in ("figcaption", "span") and self.figures else self.inside

    def handle_endtag(self, tag: str) -> None:
        if tag == "figcaption":
            self.inside = ""

    def handle_comment(self, data: str) -> None:
        if self.figures:
            self.figures[-1]["labels"] += f"|{data.strip()}|"

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.figures[-1]["caption"] += data


def test_the_charts_leave_out_unknown_values_and_say_which_under_them(results):
    def unknown(concurrency: int, summary: dict) -> None:
        summary.pop("accuracy")  # int8's rougeL at every level
        if concurrency == 4:
            del summary["ttft_ms"]["p99"]

    edit_levels(results, INT8, unknown)
    writer.write(results)
    first = (results / "report.html").read_text()
    writer.write(results)
    assert (results / "report.html").read_text() == first  # still the same page from the same results
    page = Figures()
    page.feed(first)
    tradeoff, pareto, per_gpu, accuracy, latencies = page.figures
    ttft = "Left out, no value: int8 at concurrency 4 (TTFT p99)."
    assert tradeoff["caption"].endswith(ttft) and pareto["caption"].endswith(ttft)
    assert "|c=4|" in tradeoff["labels"] and tradeoff["labels"].count("|c=4|") == 1  # float32's only
    assert latencies["caption"].endswith(ttft)
    assert "Left out" not in per_gpu["caption"]
    assert accuracy["caption"].endswith("Left out, no value: int8 at concurrency 1, 2, 4 (rougeL).")
    assert "|int8|" not in accuracy["labels"] and "|float32|" in accuracy["labels"]  # no bar at 0: no bar


def test_the_report_reads_the_point_records_and_never_writes_them(results):
    """The fleet writes status.json (a lost point's too, at the run's end: fleet.status.close_run); the report,
    however often a lane refreshes it, only reads them."""
    before = {p: p.read_bytes() for p in sorted(results.glob("*/status.json"))}
    assert before
    writer.write(results)
    writer.write(results, slo={"ttft_p99_ms": 1})
    assert {p: p.read_bytes() for p in sorted(results.glob("*/status.json"))} == before


def test_a_report_of_unchanged_inputs_is_read_back_and_any_change_writes_it_again(results):
    first = writer.write(results)
    page = results / writer.HTML_FILE
    stamp = page.stat().st_mtime_ns
    again = writer.write(results)
    assert page.stat().st_mtime_ns == stamp  # a cached rerun draws no page
    assert (again.text, again.rows, again.not_ok, again.verdict) == (
        first.text,
        first.rows,
        first.not_ok,
        first.verdict,
    )
    point = sorted(p.parent.name for p in results.glob("*/status.json"))[0]
    mark_failed(results, point)
    changed = writer.write(results)
    assert page.stat().st_mtime_ns != stamp
    assert any(point in line for line in changed.not_ok)
    stamp = page.stat().st_mtime_ns
    assert writer.write(results, {"ttft_p99_ms": 1.0}).verdict != changed.verdict  # other SLOs: judged again
    assert page.stat().st_mtime_ns != stamp
    (results / writer.HTML_FILE).unlink()  # a report file gone: written again
    writer.write(results, {"ttft_p99_ms": 1.0})
    assert page.is_file()
