"""llm-perf --expect-server-id against a real local Triton (the paced python model): the numbers are this
server's, or the level fails, llm-perf exits non-zero and what was measured stays written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import start_server
from tests.integration.test_server_identity import ansible_module
from trtsweep.errors import TrtsweepError
from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.paced import write_paced_model
from trtsweep.perf.protocols import Endpoint
from trtsweep.serve import server
from trtsweep.serve.spec import ServerSpec, ServerState

WRONG = "trtsweep-0000000000000000"


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerState, ServerSpec]]:
    work = tmp_path_factory.mktemp("paced_id")
    write_paced_model(work / "repo", "paced", 5.0, 1.0)
    state, spec = start_server(work / "repo", work)
    try:
        yield state, spec
    finally:
        server.stop(state)


def data(tmp_path: Path, tokens: int = 4) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": tokens}) + "\n" for i in range(6)))
    return path


def llm_perf(tmp_path: Path, port: int, protocol: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtsweep.perf.cli", "-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "paced",
         "--input-data", str(data(tmp_path)), "--num-requests", "6", "--warmup-requests", "1",
         "--profile-export-file", str(tmp_path / "perf.json"), *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def levels(tmp_path: Path) -> list[dict]:
    return json.loads((tmp_path / "perf.summary.json").read_text())["levels"]


def port_of(spec: ServerSpec, protocol: str) -> int:
    return spec.grpc_port if protocol == "grpc" else spec.http_port


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_the_right_server_id_passes_and_is_recorded_per_level(paced, tmp_path, protocol):
    state, spec = paced
    proc = llm_perf(tmp_path, port_of(spec, protocol), protocol, "--concurrency", "1,2",
                    "--expect-server-id", state.server_id)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for level in levels(tmp_path):
        assert level["summary"]["succeeded"] == 6
        assert level["summary"]["server_identity"] == {
            "expected": state.server_id, "before": state.server_id, "after": state.server_id,
        }  # fmt: skip
        assert "error" not in level["summary"]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_wrong_server_id_fails_the_level_before_any_request(paced, tmp_path, protocol):
    state, spec = paced
    proc = llm_perf(tmp_path, port_of(spec, protocol), protocol, "--concurrency", "1,2", "--expect-server-id", WRONG)
    assert proc.returncode == 2
    error = (
        f"the server at 127.0.0.1:{port_of(spec, protocol)} is '{state.server_id}', not the expected '{WRONG}' "
        "(--expect-server-id), before the first request of concurrency 1: its numbers are not this server's"
    )
    assert proc.stderr.strip().splitlines()[-1] == f"llm-perf: error: {error}"
    (level,) = levels(tmp_path)  # written, and the run stopped there
    assert level["summary"]["requests"] == 0 and level["summary"]["error"] == error
    assert level["summary"]["server_identity"] == {"expected": WRONG, "before": state.server_id, "error": error}


def test_a_server_gone_by_the_end_of_a_level_fails_it_and_keeps_what_was_measured(tmp_path):
    write_paced_model(tmp_path / "repo", "paced", 50.0, 20.0)
    state, spec = start_server(tmp_path / "repo", tmp_path)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trtsweep.perf.cli", "-u", f"127.0.0.1:{spec.grpc_port}", "-i", "grpc", "-m",
             "paced", "--input-data", str(data(tmp_path, tokens=20)), "--concurrency", "2", "--num-requests", "40",
             "--warmup-requests", "0", "--request-timeout", "20", "--expect-server-id", state.server_id,
             "--profile-export-file", str(tmp_path / "perf.json")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(3.0)  # some of the ~430 ms requests are done, others in flight
        os.killpg(state.pid, signal.SIGKILL)
        _out, err = proc.communicate(timeout=120)
    finally:
        server.stop(state)
    assert proc.returncode == 2, err
    gone = f"the server at 127.0.0.1:{spec.grpc_port} no longer answers server metadata after the last request of "
    assert f"llm-perf: error: {gone}concurrency 2: UNAVAILABLE" in err
    (level,) = levels(tmp_path)
    summary = level["summary"]
    assert summary["succeeded"] >= 2 and summary["succeeded"] + summary["failed"] == 40
    assert summary["server_identity"]["before"] == state.server_id and summary["server_identity"]["after"] is None
    assert summary["error"].startswith(f"the server at 127.0.0.1:{spec.grpc_port} no longer answers server metadata")
    rows = json.loads((tmp_path / "perf.json").read_text())["levels"][0]["requests"]
    assert sum(r["error"] is None for r in rows) == summary["succeeded"]


def test_an_openai_server_without_a_model_list_fails_the_identity_check(tmp_path):
    """openai: the id is the first model of GET /v1/models (trtsweep's trtllm-serve answers with its per-start link
    name, tests/integration/test_flows_sweep.py); a server that lists no model cannot be told apart, so the level
    fails rather than report numbers of a server nobody identified."""
    from tests.conftest import free_ports
    from trtsweep.serve.process import http_service

    (port,) = free_ports(1)
    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"input": "hi", "output": "hello"}) + "\n")
    cmd = [sys.executable, "-m", "trtsweep.perf.zeroserver", "--port", str(port), "--chunks", "4"]
    with http_service(cmd, f"http://127.0.0.1:{port}/health", 30):
        config = BenchmarkConfig(endpoint=Endpoint(url=f"127.0.0.1:{port}", model="m"), protocol="openai",
                                 input_data=data, concurrency=[1], expect_server_id=WRONG)  # fmt: skip
        with pytest.raises(TrtsweepError) as err:
            run(config)
    assert "no longer answers server metadata before the first request" in str(err.value)
    assert "GET /v1/models answered HTTP 404" in str(err.value)


def test_the_ansible_module_passes_expect_server_id_and_fails_on_a_mismatch(paced, tmp_path):
    state, spec = paced
    args = {"url": f"127.0.0.1:{spec.grpc_port}", "model": "paced", "input_data": str(data(tmp_path)),
            "export_file": str(tmp_path / "perf.json"), "num_requests": 6}  # fmt: skip
    ok, out = ansible_module(tmp_path, "trtsweep_llm_perf", expect_server_id=state.server_id, **args)
    assert "localhost | SUCCESS" in out, out
    assert ["--expect-server-id", state.server_id] == ok["cmd"][ok["cmd"].index("--expect-server-id") :][:2]
    failed, out = ansible_module(tmp_path, "trtsweep_llm_perf", expect_server_id=WRONG, **args)
    assert "localhost | FAILED!" in out, out
    assert failed["msg"].startswith(f"llm-perf: error: the server at 127.0.0.1:{spec.grpc_port} is '{state.server_id}'")
