"""A capacity search end to end on the CPU test bed: the sweep's `benchmark.load` through the real Triton server
and the hf backend, llm-perf bisecting the concurrency under the sweep's SLOs, results.csv's capacity columns and
the report's sizing line for `slo.target_request_rate`."""

from __future__ import annotations

import csv
import json

import pytest

from tests.integration.test_sweep_playbook import run_ok, stdout

SWEEP = {
    "name": "smollm2-capacity",
    "backend": "hf",
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smollm2-135m"}],
    "precisions": ["float32"],
    "parallelism": [{"tp": 1, "pp": 1}],
    "max_batch_sizes": [4],
    "lengths": [{"input": 1024, "output": 16}],
    "streaming": [True],
    "benchmark": {
        "protocol": "grpc",
        "input_data": "data/prompts.jsonl",
        "num_requests": 4,
        "warmup_requests": 1,
        "max_tokens": 8,
        "chat_template": True,
        "extra_inputs": {"top_k": 1},
        "load": {"search": "slo", "variable": "concurrency", "max": 4, "max_levels": 3},
    },
    # every level succeeds: the saturating level meets the SLOs, the capacity is the search's max, bound open
    "slo": {"min_success_rate": 0.5, "target_request_rate": 10},
}


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_a_capacity_search_runs_through_the_sweep_and_sizes_the_configuration(tmp_path):
    runner = run_ok(tmp_path, trtsweep_sweep=SWEEP)
    results = tmp_path / "results" / SWEEP["name"]
    (point,) = [p for p in results.iterdir() if (p / "llm_perf.summary.json").is_file()]
    search = json.loads((point / "llm_perf.summary.json").read_text())["search"]
    assert [s["value"] for s in search["levels"]] == [1, 4], search  # synchronous, then saturating: it met the SLOs
    assert search["bound"] == "open" and search["capacity"]["concurrency"] == 4, search
    with (results / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["concurrency"] for r in rows} == {"1", "4"}
    capacity = {(r["capacity_concurrency"], r["capacity_bound"], r["capacity_levels"]) for r in rows}
    assert capacity == {("4", "open", "2")}
    rps = float(rows[0]["capacity_rps"])
    assert rps == pytest.approx(search["capacity"]["request_rate"], rel=1e-3)
    out = stdout(runner)
    assert "serving 10 req/s within the SLOs:" in out and "(at least: the search max met the SLOs)" in out, out[-4000:]
