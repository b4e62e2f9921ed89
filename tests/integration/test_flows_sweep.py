"""One sweep file, both TensorRT-LLM flows, on this machine: `sweeps/smollm2_cpu_flows.yml` end to end.

The demo model's configuration is measured three ways by the real plays: the engine flow on Triton (ensemble),
the pytorch flow on Triton (the llmapi layout, model.yaml) and the pytorch flow on the OpenAI-compatible server
that stands in for trtllm-serve, started under the supervisor and lease and identified by its per-start model id.
Greedy decoding (top_k 1) makes the three answer the same text, so their accuracy must agree; the report puts
the three side by side. Then the pytorch-flow points are handed off like the engine flow's, and the playbook of the
handoff deploys them here (the llmapi Triton repository and the trtllm-serve stand-in, left running and smoke-tested;
the second deploy of one changes nothing), stopped by the test by PID.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import ansible_runner
import pytest
import yaml

from tests.conftest import ROOT, free_ports
from tests.integration.test_sweep_playbook import run_ok, stdout
from trtsweep.handoff.bundle import write_bundle
from trtsweep.serve.server import stop
from trtsweep.serve.spec import ServerState

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
    # the sweep file as it is, with short answers (what is compared is the same whatever their length; CI's time is not)
    sweep["benchmark"] |= {"num_requests": 4, "max_tokens": 16}
    runner = run_ok(tmp_path, trtsweep_sweep=sweep, trtsweep_sweep_dir=str(ROOT / "sweeps"))  # where its paths start
    results = tmp_path / "results" / sweep["name"]
    with (results / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["point"], r["flow"], r["server"]) for r in rows} == {(p, *v) for p, v in VARIANTS.items()}
    assert {r["config"] for r in rows} == {CONFIG}
    assert {r["protocol"] for r in rows if r["server"] == "trtllm-serve"} == {"openai"}
    for row in rows:
        assert row["failed"] == "0" and row["succeeded"] == "4", row
        assert float(row["output_token_throughput"]) > 0 and float(row["ttft_p99_ms"]) > 0
        if row["server"] == "trtllm-serve":  # its /metrics iteration stats: the level's 4 requests and the warm-up
            assert float(row["server_requests"]) == 5 and float(row["server_queue_ms"]) >= 0, row
            assert float(row["server_batch_mean"]) == 1.0, row  # the stand-in runs one request per forward pass
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

    deploy_the_pytorch_flow_handoffs(tmp_path, results)


def handoff_play(tmp_path: Path, bundle: Path, ports: dict[str, int]) -> ansible_runner.Runner:
    private = tmp_path / f"handoff-runner-{len(list(tmp_path.glob('handoff-runner-*')))}"
    private.mkdir()
    extravars = {"handoff_bundle": str(bundle), "trtsweep_work_dir": str(tmp_path / "work"),
                 "trtsweep_results_dir": str(tmp_path / "results"),
                 **{f"handoff_{kind}_port": port for kind, port in ports.items()}}  # fmt: skip
    return ansible_runner.run(
        private_data_dir=str(private), project_dir=str(ROOT), playbook="playbooks/handoff.yml", extravars=extravars,
        envvars={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}, quiet=True, timeout=900,
    )  # fmt: skip


def smoke_message(runner: ansible_runner.Runner) -> str:
    """The message of the play's smoke-test verdict, as the play wrote it (one line)."""
    for event in runner.events:
        data = event.get("event_data", {})
        if event["event"] == "runner_on_ok" and data.get("task") == "Smoke test passed":
            return str(data["res"].get("msg", ""))
    return ""


def deploy_the_pytorch_flow_handoffs(tmp_path: Path, results: Path) -> None:
    for point, kinds in ((f"{CONFIG}_pytorch-triton", ("http", "grpc", "metrics")),
                         (f"{CONFIG}_pytorch-serve", ("http",))):  # fmt: skip
        bundle = tmp_path / f"bundle-{point}"
        # the prompts read where the run read them (its plan.json: the sweep file's directory)
        manifest = write_bundle(results, point, bundle, image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0")
        state_file = tmp_path / "work" / "handoff" / manifest["name"] / "triton_server.json"
        ports = dict(zip(kinds, free_ports(len(kinds)), strict=True))
        try:
            first = handoff_play(tmp_path, bundle, ports)
            assert first.rc == 0, stdout(first)[-6000:]
            assert "smoke test 4/4 ok" in smoke_message(first), stdout(first)[-3000:]
            server = ServerState.load(state_file)
            if point.endswith("serve"):  # what runs is the bundle's server, with the point's options
                options = tmp_path / "work" / "handoff" / manifest["name"] / "llm_api_options.yml"
                assert yaml.safe_load(options.read_text()) == yaml.safe_load(
                    (bundle / "llm_api_options.yml").read_text()
                )
                assert "trtsweep.serve.hf_openai" in server.argv and str(options) in server.argv
                second = handoff_play(tmp_path, bundle, ports)
                assert second.rc == 0, stdout(second)[-6000:]
                assert second.stats["changed"] == {}, second.stats  # idempotent: the running server adopted
                assert ServerState.load(state_file).pid == server.pid
            else:
                served = tmp_path / "work" / "handoff" / manifest["name"] / "triton_repo" / "tensorrt_llm" / "1"
                model_yaml = yaml.safe_load((served / "model.yaml").read_text())
                assert Path(model_yaml["model"]).is_dir() and "${" not in (served / "model.yaml").read_text()
        finally:
            if state_file.exists():
                stop(ServerState.load(state_file), wait_ports=False)
