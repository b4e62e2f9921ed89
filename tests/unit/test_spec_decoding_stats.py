"""Speculative decoding's acceptance over a level, from trtllm-serve's iteration stats (specDecodingStats), into
results.csv's acceptance_rate / acceptance_length, and the point's axes into its speculative / attention_dp / moe_ep
columns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trtsweep.perf.server_metrics import iteration_summary, spec_decoding
from trtsweep.report import results_table


def iteration(n: int, drafted: int | None, accepted: int = 0, requests: int = 0) -> dict[str, Any]:
    stat: dict[str, Any] = {"iter": n, "iterLatencyMS": 5.0, "inflightBatchingStats": {"numScheduledRequests": 2}}
    if drafted is not None:  # the executor's JSON names (jsonSerialization.cpp SpecDecodingStats)
        stat["specDecodingStats"] = {"numDraftTokens": drafted, "numAcceptedTokens": accepted,
                                     "numRequestsWithDraftTokens": requests, "acceptanceLength": 0.0,
                                     "iterLatencyMS": 1.0, "draftOverhead": 0.1}  # fmt: skip
    return stat


def test_a_levels_acceptance_is_taken_from_its_sums_not_a_mean_of_iterations():
    level = [iteration(1, 8, 6, 2), iteration(2, 4, 0, 1), iteration(3, 0, 0, 0)]
    summary = iteration_summary(level)
    assert summary["spec_draft_tokens"] == 12 and summary["spec_accepted_tokens"] == 6
    assert summary["acceptance_rate"] == pytest.approx(0.5)
    assert summary["acceptance_length"] == pytest.approx((6 + 3) / 3)


def test_no_speculative_decoding_no_acceptance_numbers():
    assert "acceptance_rate" not in iteration_summary([iteration(1, None), iteration(2, None)])
    assert spec_decoding([{"numDraftTokens": 0, "numAcceptedTokens": 0, "numRequestsWithDraftTokens": 0}]) == {
        "spec_draft_tokens": 0.0,
        "spec_accepted_tokens": 0.0,
        "acceptance_rate": None,
        "acceptance_length": None,
    }


def test_results_csv_has_the_axes_and_the_acceptance(tmp_path):
    point = {
        "id": "p_spec-ngram_pytorch-serve",
        "config": "p_spec-ngram",
        "flow": "pytorch",
        "server": "trtllm-serve",
        "model": {"repo_id": "a/b"},
        "benchmark": {},
        "speculative": "ngram",
        "attention_dp": True,
        "moe_ep": 4,
    }
    where = tmp_path / point["id"]
    where.mkdir()
    (where / "point.json").write_text(json.dumps(point))
    (where / "status.json").write_text(json.dumps({"status": "ok", "gpus": [0, 1, 2, 3]}))
    summary = {"requests": 1, "succeeded": 1,
               "server_metrics": {"iteration_stats": iteration_summary([iteration(1, 10, 7, 2)])}}  # fmt: skip
    (where / "llm_perf.summary.json").write_text(json.dumps({"levels": [{"concurrency": 4, "summary": summary}]}))
    rows = results_table.collect(tmp_path)
    got = {k: rows[0][k] for k in ("speculative", "attention_dp", "moe_ep", "gpus", "acceptance_rate",
                                   "acceptance_length")}  # fmt: skip
    assert got == {"speculative": "ngram", "attention_dp": True, "moe_ep": 4, "gpus": 4, "acceptance_rate": 0.7,
                   "acceptance_length": 4.5}  # fmt: skip
