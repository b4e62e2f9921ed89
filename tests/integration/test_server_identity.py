"""The server answering is the one this run started: per-start server ids, another server holding the ports,
and adopting a running server only when nothing about it changed (real local Triton, tiny python models)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.conftest import ROOT, free_ports
from tests.integration.test_server_lifecycle import model_repo, spec_for
from trtsweep.common.procs import start_ticks
from trtsweep.errors import TrtsweepError
from trtsweep.serve import server
from trtsweep.serve.identity import adoption_differences, identity_problem, repository_hash
from trtsweep.serve.probes import Answer, busy_ports, grpc_answer
from trtsweep.serve.spec import ServerState

OTHER = "someone-else"


def _handler(name: str) -> type[BaseHTTPRequestHandler]:
    class StandIn(BaseHTTPRequestHandler):
        """Another sweep's server: ready, and it says who it is."""

        def do_GET(self) -> None:
            body = {"/v2/health/ready": b"", "/v2": json.dumps({"name": name, "version": "2.51.0"}).encode()}
            if self.path not in body:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body[self.path])))
            self.end_headers()
            self.wfile.write(body[self.path])

        def log_message(self, *args: object) -> None:
            pass

    return StandIn


@contextlib.contextmanager
def other_server(http_port: int, *listen_ports: int, name: str = OTHER) -> Iterator[None]:
    """Binds the HTTP port (answering server metadata as `name`) and holds the other ports open."""
    httpd = ThreadingHTTPServer(("127.0.0.1", http_port), _handler(name))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    socks = []
    try:
        for port in listen_ports:
            sock = socket.socket()
            sock.bind(("127.0.0.1", port))
            sock.listen()
            socks.append(sock)
        yield
    finally:
        for sock in socks:
            sock.close()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def metadata_name(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2", timeout=5) as resp:
        return json.load(resp)["name"]


def gated_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A model whose initialize waits for a file: Triton binds no port before its models are loaded, so the
    test decides when our server reaches its ports."""
    go = tmp_path / "go"
    return model_repo(tmp_path, init=f"while not __import__('os').path.exists({str(go)!r}): time.sleep(0.05)"), go


def test_every_start_gets_its_own_id_and_ready_means_our_id_answers(tmp_path):
    spec = spec_for(model_repo(tmp_path), tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    try:
        server.wait_ready(state, 120)
        assert state.server_id.startswith("trtsweep-") and len(state.server_id) == len("trtsweep-") + 16
        assert f"--id={state.server_id}" in state.argv
        saved = ServerState.load(tmp_path / "state.json")
        assert saved.server_id == state.server_id
        assert saved.repository_hash == repository_hash(spec.model_repository)
        assert metadata_name(spec.http_port) == state.server_id
        assert grpc_answer("127.0.0.1", spec.grpc_port) == Answer("grpc", spec.grpc_port, state.server_id)
        assert identity_problem(state) is None
    finally:
        server.stop(state)
    second = server.start(spec, tmp_path / "state.json")
    try:
        assert second.server_id != state.server_id
    finally:
        server.stop(second)


@pytest.mark.parametrize("ours_exited_first", [False, True], ids=["ours-still-starting", "ours-exited"])
def test_ports_answered_by_another_server_fail_wait_ready_naming_both_ids(tmp_path, ours_exited_first):
    repo, go = gated_repo(tmp_path)
    spec = spec_for(repo, tmp_path)
    state = server.start(spec, tmp_path / "state.json")  # our state file exists, our server loads its model
    try:
        # another sweep's server takes the ports now, before ours can bind them (its model waits for `go`)
        with other_server(spec.http_port, spec.grpc_port, spec.metrics_port):
            if ours_exited_first:
                go.touch()  # ours finishes loading, cannot bind, exits
                deadline = time.monotonic() + 120
                while server.is_running(state) and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not server.is_running(state)
            with pytest.raises(TrtsweepError) as err:
                server.wait_ready(state, 120)
            assert metadata_name(spec.http_port) == OTHER  # the other server is left alone
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith(
            f"port {spec.http_port} on 127.0.0.1 is answered by another server (id '{OTHER}'), not the one this "
            f"run started (id '{state.server_id}', pid {state.pid}): "
        )
        assert ("it exited" if ours_exited_first else "it was still starting, stopped") in message
        assert not server.is_running(state)
    finally:
        go.touch()
        server.stop(state)


class _GrpcStandIn(service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self) -> None:
        self.name = ""

    def ServerMetadata(self, request, context):
        return service_pb2.ServerMetadataResponse(name=self.name, version="2.51.0")


def test_grpc_port_answered_by_another_server_fails_too(tmp_path):
    """HTTP answers with our id, gRPC with another's: not ready, and the gRPC port is named (stand-ins for both,
    a sleeping process for ours)."""
    http, grpc_port, metrics = free_ports(3)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    ticks = start_ticks(proc.pid)
    assert ticks is not None
    state = ServerState(
        pid=proc.pid, start_ticks=ticks, argv=["sleep"], ports={"http": http, "grpc": grpc_port, "metrics": metrics},
        bind_address="127.0.0.1", health_url=f"http://127.0.0.1:{http}/v2/health/ready",
        log_file=str(tmp_path / "log"), server_id="trtsweep-ours",
    )  # fmt: skip
    servicer = _GrpcStandIn()
    rpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, rpc)
    rpc.add_insecure_port(f"127.0.0.1:{grpc_port}")
    rpc.start()
    try:
        with other_server(http, metrics, name="trtsweep-ours"):
            servicer.name = "trtsweep-ours"
            server.wait_ready(state, 30)  # both answer with our id: ready
            servicer.name = OTHER
            assert identity_problem(state) == f"grpc port {grpc_port} answers with id '{OTHER}', not 'trtsweep-ours'"
            with pytest.raises(TrtsweepError) as err:
                server.wait_ready(state, 30)
        assert str(err.value).startswith(
            f"port {grpc_port} on 127.0.0.1 is answered by another server (id '{OTHER}'), not the one this run "
            f"started (id 'trtsweep-ours', pid {proc.pid}): it was still starting, stopped"
        )
        assert not server.is_running(state)
    finally:
        rpc.stop(None)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(10)


def test_adoption_needs_the_same_command_repository_and_identity(tmp_path):
    spec = spec_for(model_repo(tmp_path), tmp_path)
    state = server.start(spec, tmp_path / "state.json")
    try:
        server.wait_ready(state, 120)
        assert adoption_differences(state, spec) == []
        verbose = spec_for(spec.model_repository, tmp_path)
        verbose.http_port, verbose.grpc_port, verbose.metrics_port = spec.http_port, spec.grpc_port, spec.metrics_port
        verbose.log_verbose = 1
        assert adoption_differences(state, verbose) == [
            "command line (was ['--log-verbose=0'], now ['--log-verbose=1'])"
        ]
        gpus = spec_for(spec.model_repository, tmp_path)
        gpus.http_port, gpus.grpc_port, gpus.metrics_port = spec.http_port, spec.grpc_port, spec.metrics_port
        gpus.visible_devices = "0"
        assert adoption_differences(state, gpus) == ["visible_devices (was None, now '0')"]
        impostor = ServerState(**{**state.__dict__, "server_id": "trtsweep-0000000000000000"})
        assert adoption_differences(impostor, spec) == [
            f"server identity: http port {spec.http_port} answers with id '{state.server_id}', "
            "not 'trtsweep-0000000000000000'"
        ]
        with (spec.model_repository / "m" / "1" / "model.py").open("a") as handle:
            handle.write("# edited\n")
        assert adoption_differences(state, spec) == [f"model repository contents ({spec.model_repository})"]
    finally:
        server.stop(state)


def ansible_module(tmp_path: Path, module: str = "trtsweep_triton_server", **args: object) -> tuple[dict, str]:
    """Run one of our modules through the real `ansible` CLI; (result, all output)."""
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    proc = subprocess.run([str(bin_dir / "ansible"), "localhost", "-m", module, "-a",
                           json.dumps(args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    text = proc.stdout
    assert "=>" in text, text + proc.stderr
    result, _ = json.JSONDecoder().raw_decode(text[text.index("=>") + 2 :].lstrip())
    return result, proc.stdout + proc.stderr


def test_module_adopts_an_unchanged_server_and_replaces_a_changed_one(tmp_path):
    spec = spec_for(model_repo(tmp_path), tmp_path)
    args = {"state": "started", "state_file": str(tmp_path / "state.json"),
            "model_repository": str(spec.model_repository), "log_file": str(spec.log_file),
            "http_port": spec.http_port, "grpc_port": spec.grpc_port, "metrics_port": spec.metrics_port}  # fmt: skip
    try:
        first, out = ansible_module(tmp_path, **args)
        assert first["changed"] is True and first["replaced"] is False, out
        assert first["server_id"] == metadata_name(spec.http_port)

        again, out = ansible_module(tmp_path, **args)
        assert again["changed"] is False and again["replaced"] is False, out
        assert (again["pid"], again["server_id"], again["msg"]) == (first["pid"], first["server_id"], "already running")

        with (spec.model_repository / "m" / "1" / "model.py").open("a") as handle:
            handle.write("# a new version of the model\n")
        replaced, out = ansible_module(tmp_path, **args)
        assert replaced["changed"] is True and replaced["replaced"] is True, out
        assert replaced["pid"] != first["pid"] and replaced["server_id"] != first["server_id"]
        assert replaced["msg"] == (
            f"replaced the running server (pid {first['pid']}, id '{first['server_id']}'): model repository contents "
            f"({spec.model_repository})"
        )
        assert "[WARNING]: replaced the running server" in out
        assert metadata_name(spec.http_port) == replaced["server_id"]

        changed_args, out = ansible_module(tmp_path, **{**args, "log_verbose": 1})
        assert changed_args["replaced"] is True, out
        assert "command line (was ['--log-verbose=0'], now ['--log-verbose=1'])" in changed_args["msg"]

        stopped, out = ansible_module(tmp_path, state="stopped", state_file=args["state_file"])
        assert stopped["changed"] is True, out
        assert busy_ports("127.0.0.1", spec.ports()) == {}
    finally:
        if (tmp_path / "state.json").exists():
            server.stop(ServerState.load(tmp_path / "state.json"))
