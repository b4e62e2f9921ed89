"""Disaggregated serving end to end on this machine: `ansible-playbook sweep.yml` with the demo model on the hf backend
(trtllm-serve's stand-ins), n-gram speculative decoding, and the disaggregated axis [none, c1x1-g2x1]: an aggregated
point (one server) and a disaggregated one (one context and two generation workers behind the stand-in proxy, which
reads the config the real proxy would). Both measured, with the drafted and accepted tokens the generation worker
reports; the disaggregated point's record names every worker and the proxy, and none of them runs afterwards. Two
points, one level of four 16-token answers each: kept short for CI."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from tests.conftest import free_block
from tests.integration.test_speculative_sweep import NGRAM
from tests.integration.test_speculative_sweep import SWEEP as SPECULATIVE
from tests.integration.test_sweep_playbook import run_ok
from trtsweep.common.procs import running

C1G2 = {"context": {"tp": 1}, "generation": {"tp": 1, "instances": 2}}
# the speculative e2e test's sweep (n-gram drafting on the hf stand-ins) with 16-token answers, aggregated and
# disaggregated
SWEEP = {**SPECULATIVE, "name": "smollm2-cpu-disagg", "lengths": [{"input": 1024, "output": 16}],
         "disaggregated": ["none", C1G2], "benchmark": {**SPECULATIVE["benchmark"], "max_tokens": 16}}  # fmt: skip
BASE = "smollm2-135m_float32_tp1pp1_bs2_isl1024osl16_stream"
AGGREGATED = f"{BASE}_spec-ngram_pytorch-serve"
DISAGGREGATED = f"{BASE}_disagg-c1x1-g2x1_spec-ngram_pytorch-serve"


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_an_aggregated_and_a_disaggregated_point_with_speculative_decoding(tmp_path, monkeypatch):
    monkeypatch.setenv("UCX_TLS", "tcp")  # a site's UCX setting: the workers inherit it and the record says so
    base = free_block(10)
    run_ok(tmp_path, trtsweep_sweep=SWEEP, ports=[base, base + 1, base + 2])
    results = tmp_path / "results" / SWEEP["name"]
    with (results / "results.csv").open() as handle:
        rows = {row["point"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {AGGREGATED, DISAGGREGATED}
    for point, row in rows.items():
        assert (row["speculative"], row["failed"], row["succeeded"]) == ("ngram", "0", "4"), row
        rate, length = float(row["acceptance_rate"]), float(row["acceptance_length"])
        assert 0 <= rate <= 1 and 1 <= length <= 1 + NGRAM["max_draft_len"], row
        stats = json.loads((results / point / "llm_perf.summary.json").read_text())["levels"][0]["summary"]
        iterations = stats["server_metrics"]["iteration_stats"]
        assert iterations["spec_draft_tokens"] >= iterations["spec_accepted_tokens"] > 0, (point, iterations)
    assert (rows[AGGREGATED]["disaggregated"], rows[DISAGGREGATED]["disaggregated"]) == ("", "c1x1-g2x1")

    point = results / DISAGGREGATED
    record = json.loads((point / "disaggregated.json").read_text())
    members = {m["name"]: m for m in record["members"]}
    assert list(members) == ["context0", "generation0", "generation1", "proxy"]
    assert [members[n]["port"] for n in members] == [base + 3, base + 4, base + 5, base]
    assert record["iteration_stats_from"] == "generation0" and "no KV cache transfer" in record["kv_cache_transfer"]
    # the transfer environment the workers ran with, as the point's record keeps it (the test's own UCX variable)
    assert record["transfer_environment"].get("UCX_TLS") == "tcp" and record["transfer_environment_from"] == "the lane"
    config = yaml.safe_load((point / "disagg_proxy.yml").read_text())
    assert config == record["proxy_config"] and config["generation_servers"]["urls"] == [
        f"127.0.0.1:{base + 4}", f"127.0.0.1:{base + 5}"]  # fmt: skip
    for name in ("context0", "generation0", "generation1"):
        options = yaml.safe_load((point / f"llm_api_options_{name}.yml").read_text())
        assert options["speculative_config"]["decoding_type"] == "NGram"
        assert options.get("disable_overlap_scheduler") is (True if name == "context0" else None)
    proxy_log = (point / "proxy.log").read_text()
    for gen in ("generation0", "generation1"):  # both generation workers served requests: round robin
        assert f"generation 127.0.0.1:{members[gen]['port']}" in proxy_log
    pids = [pid for m in record["members"] for pid in (m["pid"], m["supervisor_pid"])]
    assert not [pid for pid in pids if running(pid)]
    assert not list((tmp_path / "work").rglob("disagg_group*.json"))
