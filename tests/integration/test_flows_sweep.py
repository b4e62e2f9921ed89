"""One sweep file, both TensorRT-LLM flows, on this machine: `sweeps/smollm2_cpu_flows.yml` end to end.

The demo model's configuration is measured three ways by the real plays: the engine flow on Triton (ensemble),
the pytorch flow on Triton (the llmapi layout, model.yaml) and the pytorch flow on the OpenAI-compatible server
that stands in for trtllm-serve, started under the supervisor and lease and identified by its per-start model id.
Greedy decoding (top_k 1) makes the three answer the same text, so their accuracy must agree; the report puts
the three side by side.
"""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.test_sweep_playbook import run_ok, stdout

CONFIG = "smollm2-135m_float32_tp1pp1_bs4_isl1024osl128_stream"
VARIANTS = {
    CONFIG: ("engine", "triton"),
    f"{CONFIG}_pytorch-triton": ("pytorch", "triton"),
    f"{CONFIG}_pytorch-serve": ("pytorch", "trtllm-serve"),
}


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_one_sweep_runs_both_flows_and_the_report_compares_them(tmp_path):
    sweep = yaml.safe_load((ROOT / "sweeps" / "smollm2_cpu_flows.yml").read_text())["trtsweep_sweep"]
    runner = run_ok(tmp_path, trtsweep_sweep=sweep)
    results = tmp_path / "results" / sweep["name"]
    with (results / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["point"], r["flow"], r["server"]) for r in rows} == {(p, *v) for p, v in VARIANTS.items()}
    assert {r["config"] for r in rows} == {CONFIG}
    assert {r["protocol"] for r in rows if r["server"] == "trtllm-serve"} == {"openai"}
    for row in rows:
        assert row["failed"] == "0" and row["succeeded"] == "8", row
        assert float(row["output_token_throughput"]) > 0 and float(row["ttft_p99_ms"]) > 0
    # greedy decoding: the same model answers the same text whichever flow and server serve it
    for conc in ("1", "2"):
        scores = {r["point"]: float(r["rougeL"]) for r in rows if r["concurrency"] == conc}
        assert max(scores.values()) - min(scores.values()) < 1e-9, scores

    for point, (flow, srv) in VARIANTS.items():
        record = json.loads((results / point / "status.json").read_text())
        assert record["status"] == "ok", record
        summary = json.loads((results / point / "llm_perf.summary.json").read_text())
        for level in summary["levels"]:  # the server answered with this start's id before and after every level
            identity = level["summary"]["server_identity"]
            assert identity["before"] == identity["after"] == identity["expected"] and "error" not in identity
        state = tmp_path / "work" / sweep["name"] / point / "runs" / record["run_id"] / "triton_server.json"
        assert not state.exists(), "the server of the point was not stopped"
        if flow == "pytorch":
            options = yaml.safe_load((results / point / "llm_api_options.yml").read_text())
            assert options == json.loads((results / point / "point.json").read_text())["llm_api"]
            assert options["max_batch_size"] == 4 and options["max_seq_len"] == 1152
        if (flow, srv) == ("pytorch", "triton"):
            served = results / point / "triton_repo" / "tensorrt_llm"
            model_yaml = yaml.safe_load((served / "1" / "model.yaml").read_text())
            assert model_yaml["triton_config"] == {"max_batch_size": 0, "decoupled": True}  # the LLM API batches
            assert model_yaml["max_batch_size"] == 4
            assert model_yaml["backend"] == "pytorch" and model_yaml["max_seq_len"] == 1152
        if srv == "trtllm-serve":
            assert identity["expected"].startswith("trtsweep-"), identity  # the name of its own link
            assert not (results / point / "triton_repo").exists()

    page = (results / "report.html").read_text()
    assert "Flows and servers (same configuration)" in page
    for name in ("engine / triton", "pytorch / triton", "pytorch / trtllm-serve"):
        assert name in page
    assert runner.stats["failures"] == {}, stdout(runner)[-4000:]
