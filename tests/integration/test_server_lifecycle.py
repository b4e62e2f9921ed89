"""The local Triton runtime's lifecycle with tiny python models: ready, busy ports, failures, cleanup."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_ports
from trtsweep.errors import TrtsweepError
from trtsweep.serve import server
from trtsweep.serve.probes import busy_ports
from trtsweep.serve.spec import ServerSpec, ServerState

CONFIG = """
backend: "python"
max_batch_size: 0
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""
MODEL = """
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        {init}

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x")
                .as_numpy())]) for r in requests]
"""


def model_repo(root: Path, init: str = "pass") -> Path:
    model = root / "repo" / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format())
    (model / "1" / "model.py").write_text(MODEL.format(init=init))
    return root / "repo"


def spec_for(repo: Path, tmp_path: Path) -> ServerSpec:
    http, grpc, metrics = free_ports(3)
    return ServerSpec(
        model_repository=repo, log_file=tmp_path / "log.txt", http_port=http, grpc_port=grpc, metrics_port=metrics
    )


def test_start_ready_stop_frees_ports(tmp_path):
    spec = spec_for(model_repo(tmp_path), tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    try:
        server.wait_ready(state, 120)
        assert ServerState.load(tmp_path / "state.json").pid == state.pid
        with urllib.request.urlopen(f"http://127.0.0.1:{spec.metrics_port}/metrics", timeout=5) as resp:
            assert b"nv_inference_request_success" in resp.read()
        assert "--http-address=127.0.0.1" in state.argv
    finally:
        assert server.stop(state) is True
    assert not server.is_running(state)
    assert busy_ports("127.0.0.1", spec.ports()) == {}
    assert server.stop(state) is False  # already gone: nothing is signalled


def test_port_in_use_is_a_one_line_error_and_nothing_starts(tmp_path):
    spec = spec_for(model_repo(tmp_path), tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", spec.grpc_port))
        busy.listen()
        with pytest.raises(TrtsweepError) as err:
            server.start(spec, tmp_path / "state.json")
    assert (
        str(err.value) == f"grpc port {spec.grpc_port} on 127.0.0.1 already in use; stop that server or pick free ports"
    )
    assert not (tmp_path / "state.json").exists()


def test_missing_repository(tmp_path):
    spec = spec_for(tmp_path / "nope", tmp_path)
    with pytest.raises(TrtsweepError, match=r"model repository .* does not exist"):
        server.start(spec, tmp_path / "state.json")


def test_model_that_fails_to_load_stops_the_server_and_names_the_cause(tmp_path):
    spec = spec_for(model_repo(tmp_path, init='raise RuntimeError("weights are corrupt")'), tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    with pytest.raises(TrtsweepError) as err:
        server.wait_ready(state, 120)
    first_line = str(err.value).splitlines()[0]
    assert first_line.startswith("triton server exited before becoming ready")
    assert "model 'm' failed to load: Internal: RuntimeError: weights are corrupt" in first_line
    assert not server.is_running(state)


def test_server_not_ready_in_time_is_stopped(tmp_path):
    spec = spec_for(model_repo(tmp_path, init="time.sleep(120)"), tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    with pytest.raises(TrtsweepError, match=r"^triton server not ready after 3 s"):
        server.wait_ready(state, 3)
    assert not server.is_running(state)
    assert busy_ports("127.0.0.1", spec.ports()) == {}
