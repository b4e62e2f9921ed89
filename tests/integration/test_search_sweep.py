"""A search over configurations end to end on the CPU test bed (`search: {strategy: halving}`): the real Triton
server and hf backend, a screening round of both configurations with half the requests per level, the better one
measured again at the full benchmark (its capacity search started from the screening's), the other dropped with
its evidence; the report answers from the full measurement only, and a rerun replays the rounds without running
anything."""

from __future__ import annotations

import csv
import json

import pytest

from tests.integration.test_capacity_sweep import SWEEP as CAPACITY
from tests.integration.test_sweep_playbook import LANE_TASKS, run_ok, stdout, task_changes

SWEEP = {
    **CAPACITY,
    "name": "smollm2-halving",
    "precisions": ["float32", "int8"],
    "benchmark": {**CAPACITY["benchmark"], "num_requests": 16},
    "slo": {"min_success_rate": 0.5},
    "search": {"strategy": "halving", "finalists": 1, "screening": 0.5},
}
F32, INT8 = (f"smollm2-135m_{p}_tp1pp1_bs4_isl1024osl16_stream" for p in ("float32", "int8"))


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_a_halving_search_screens_both_measures_the_better_and_answers_from_it(tmp_path):
    runner = run_ok(tmp_path, trtsweep_sweep=SWEEP)
    results = tmp_path / "results" / SWEEP["name"]
    ledger = json.loads((results / "search.json").read_text())
    assert [t["point"] for t in ledger["rounds"][0]["tasks"]] == [f"{F32}_s1", f"{INT8}_s1"]
    # the search's evidence is what its points measured: each outcome against the point's own summary and record
    measured, held = {}, 0.0
    for outcome in [o for r in ledger["rounds"] for o in r.get("outcomes", [])]:
        summary = json.loads((results / outcome["point"] / "llm_perf.summary.json").read_text())
        record = json.loads((results / outcome["point"] / "status.json").read_text())
        capacity, gpus = summary["search"]["capacity"], max(1, len(record["gpus"]))
        measured[outcome["point"]] = capacity["output_token_throughput"] / gpus
        assert outcome["tokens_per_gpu"] == pytest.approx(measured[outcome["point"]]), outcome
        assert outcome["capacity_concurrency"] == capacity["concurrency"] and outcome["levels"] == len(
            summary["search"]["levels"])  # fmt: skip
        assert outcome["gpu_s"] == pytest.approx(sum(record["stages"].values()) * gpus)
        held += outcome["gpu_s"]
    better, worse = sorted((F32, INT8), key=lambda c: -measured[f"{c}_s1"])
    assert [t["point"] for t in ledger["rounds"][1]["tasks"]] == [better]  # the final: the grid id
    (drop,) = ledger["dropped"]
    assert drop["config"] == worse and drop["round"] == 1 and drop["why"].startswith("rank 2 of 2 (keeping 1)")
    # the screening measured half the requests per level; the final all of them
    for point, requests in ((f"{F32}_s1", 8), (f"{INT8}_s1", 8), (better, 16)):
        summary = json.loads((results / point / "llm_perf.summary.json").read_text())
        assert {lv["summary"]["requests"] for lv in summary["levels"]} == {requests}, point
    with (results / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["point"], r["search_round"], r["search_fidelity"]) for r in rows} == {
        (f"{F32}_s1", "1", "0.5"), (f"{INT8}_s1", "1", "0.5"), (better, "2", "1")}  # fmt: skip
    out = stdout(runner)
    assert f"best under the SLOs: {better} at concurrency" in out, out[-4000:]
    assert "_s1 at concurrency" not in out  # a screening measurement is never the answer
    report = (results / "report.md").read_text()  # the answer's lines unwrapped
    assert len(measured) == 3  # the ledger's outcomes: both screenings and the final
    assert f"search halving: 2 configurations, 2 rounds, 3 points measured, {held / 60:.1f} GPU-minutes" in report
    assert f"dropped after round 1: {worse}: rank 2 of 2" in report and f"answer: {better}:" in report
    # a rerun replays the rounds from the records: every round's points are complete, nothing runs
    again = run_ok(tmp_path, trtsweep_sweep=SWEEP)
    changes = task_changes(again)
    assert not any(changed for task, changed in changes.items() if task.startswith(LANE_TASKS)), changes
    assert f"best under the SLOs: {better} at concurrency" in stdout(again)
