"""A speculative-decoding point end to end on this machine: `ansible-playbook sweep.yml` with one PyTorch-flow point
of the demo model (n-gram drafting, speculative_config decoding_type NGram) served by the trtllm-serve stand-in,
whose iteration stats report the drafted and accepted tokens; results.csv has the point's speculative variant and
each level's acceptance. One point, one level of a few short requests: kept short for CI."""

from __future__ import annotations

import csv
import json

import pytest

from tests.integration.test_sweep_playbook import run_ok

NGRAM = {"name": "ngram", "decoding_type": "NGram", "max_draft_len": 4, "options": {"max_matching_ngram_size": 2}}
SWEEP = {
    "name": "smollm2-cpu-speculative",
    "backend": "hf",
    "flow": "pytorch",
    "servers": ["trtllm-serve"],
    "models": [{"repo_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "name": "smollm2-135m"}],
    "precisions": ["float32"],
    "parallelism": [{"tp": 1, "pp": 1}],
    "max_batch_sizes": [2],
    "lengths": [{"input": 1024, "output": 32}],
    "streaming": [True],
    "speculative": [NGRAM],
    "benchmark": {"concurrency": [2], "input_data": "data/prompts.jsonl", "num_requests": 4, "warmup_requests": 0,
                  "max_tokens": 32, "chat_template": True, "extra_inputs": {"top_k": 1}},
}  # fmt: skip
POINT = "smollm2-135m_float32_tp1pp1_bs2_isl1024osl32_stream_spec-ngram_pytorch-serve"


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_speculative_point_reports_its_acceptance(tmp_path):
    run_ok(tmp_path, trtsweep_sweep=SWEEP)
    results = tmp_path / "results" / SWEEP["name"]
    with (results / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["point"] for r in rows] == [POINT]
    row = rows[0]
    assert (row["speculative"], row["failed"], row["succeeded"]) == ("ngram", "0", "4"), row
    rate, length = float(row["acceptance_rate"]), float(row["acceptance_length"])
    assert 0 <= rate <= 1 and 1 <= length <= 1 + NGRAM["max_draft_len"], row
    # the client's own count: the stand-in streams a chunk per step, as trtllm-serve, so output tokens less chunks is
    # the accepted tokens the iteration stats count
    assert int(row["accepted_tokens"]) == int(row["server_accepted_tokens"]) > 0, row
    assert row["acceptance_check"] == "agree" and float(row["tokens_per_chunk"]) >= 1, row
    options = json.loads((results / POINT / "point.json").read_text())["llm_api"]
    assert options["speculative_config"] == {"decoding_type": "NGram", "max_draft_len": 4, "max_matching_ngram_size": 2}
    stats = json.loads((results / POINT / "llm_perf.summary.json").read_text())["levels"][0]["summary"]
    iterations = stats["server_metrics"]["iteration_stats"]
    assert iterations["spec_draft_tokens"] >= iterations["spec_accepted_tokens"] > 0, iterations
