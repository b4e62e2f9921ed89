"""llm-perf under faults: a server that dies mid-run, Ctrl-C, an unreachable server. Nothing measured is lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_ports, start_server
from trtsweep.perf.paced import write_paced_model
from trtsweep.serve import server


def data(tmp_path: Path, tokens: int = 20) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"input": f"q{i}", "max_tokens": tokens}) + "\n" for i in range(10)))
    return path


def llm_perf(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trtsweep.perf.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.fixture
def paced(tmp_path):
    write_paced_model(tmp_path / "repo", "paced", 50.0, 20.0)
    state, spec = start_server(tmp_path / "repo", tmp_path)
    yield state, spec
    server.stop(state)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_server_dying_mid_run_is_counted_and_the_run_finishes(paced, tmp_path, protocol):
    state, spec = paced
    port = spec.grpc_port if protocol == "grpc" else spec.http_port
    export = tmp_path / "out" / "perf.json"
    proc = llm_perf("-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "paced", "--input-data", str(data(tmp_path)),
                    "--concurrency", "2", "--num-requests", "40", "--warmup-requests", "0",
                    "--request-timeout", "20", "--profile-export-file", str(export))  # fmt: skip
    time.sleep(3.0)  # some requests done (each takes ~430 ms), others in flight
    os.killpg(state.pid, signal.SIGKILL)  # a crash, not a graceful stop
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    summary = json.loads(Path(f"{export.with_suffix('')}.summary.json").read_text())["levels"][0]["summary"]
    assert summary["succeeded"] >= 4 and summary["failed"] >= 1
    assert summary["succeeded"] + summary["failed"] == 40
    assert set(summary["errors"]) <= {"connection", "server_error", "timeout"}
    rows = json.loads(export.read_text())["levels"][0]["requests"]
    assert sum(r["error"] is None for r in rows) == summary["succeeded"]
    assert all(r["error_class"] for r in rows if r["error"])


def test_ctrl_c_writes_partial_results(paced, tmp_path):
    _, spec = paced
    export = tmp_path / "out" / "perf.json"
    proc = llm_perf("-u", f"127.0.0.1:{spec.grpc_port}", "-m", "paced", "--input-data", str(data(tmp_path)),
                    "--concurrency", "2", "--num-requests", "100", "--warmup-requests", "0",
                    "--profile-export-file", str(export))  # fmt: skip
    time.sleep(3.0)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; partial results written" in err
    rows = json.loads(export.read_text())["levels"][0]["requests"]
    done = [r for r in rows if r["error"] is None]
    assert len(done) >= 4 and all(r["chunks"] == 20 for r in done)
    assert "Traceback" not in err


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_unreachable_server_is_a_one_line_error_within_the_connect_timeout(tmp_path, protocol):
    (port,) = free_ports(1)
    started = time.monotonic()
    proc = llm_perf("-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "ensemble", "--input-data",
                    str(data(tmp_path)), "--connect-timeout", "3")  # fmt: skip
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert time.monotonic() - started < 15
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"llm-perf: error: cannot reach Triton {'gRPC' if protocol == 'grpc' else 'HTTP'}"
    )


@pytest.mark.parametrize("protocol", ["grpc", "http", "openai"])
def test_a_server_that_never_answers_is_a_one_line_error_naming_the_deadline(tmp_path, protocol):
    """The port is open (a listening socket of the test's own that accepts and then says nothing): the connect
    timeout ends the wait, in one line saying no answer came (the deadline's exception has no text of its own)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        proc = llm_perf("-u", f"127.0.0.1:{silent.getsockname()[1]}", "-i", protocol, "-m", "ensemble",
                        "--input-data", str(data(tmp_path)), "--connect-timeout", "2")  # fmt: skip
        _out, err = proc.communicate(timeout=60)
    finally:
        silent.close()
    lines = err.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, err
    assert lines[0].startswith("llm-perf: error: cannot reach ") and lines[0].endswith("within 2 s: no answer"), err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "smtp"], "llm-perf: error: unknown protocol 'smtp'; expected one of: grpc, http, openai"),
        (["--input-data", "/nonexistent.jsonl"], "llm-perf: error: /nonexistent.jsonl: cannot read input data"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path, args, message):
    base = ["-u", "127.0.0.1:1", "-m", "ensemble", "--input-data", str(data(tmp_path))]
    proc = llm_perf(*base, *args)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err.strip().splitlines() == [err.strip().splitlines()[0]]
    assert err.startswith(message)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_stalled_stream_fails_after_the_stall_timeout_not_the_request_timeout(tmp_path, protocol):
    write_paced_model(tmp_path / "repo", "slow", 4000.0, 10.0, decoupled=True)  # the first chunk after 4 s
    state, spec = start_server(tmp_path / "repo", tmp_path)
    try:
        port = spec.grpc_port if protocol == "grpc" else spec.http_port
        export = tmp_path / "perf.json"
        started = time.monotonic()
        proc = llm_perf("-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "slow", "--input-data", str(data(tmp_path)),
                        "--concurrency", "2", "--num-requests", "2", "--warmup-requests", "0", "--stall-timeout", "1",
                        "--request-timeout", "60", "--profile-export-file", str(export))  # fmt: skip
        _out, err = proc.communicate(timeout=60)
        # every request failed: the level measured nothing, so llm-perf says so and exits 3 (it exited 0)
        assert proc.returncode == 3, err
        assert "llm-perf: error: concurrency 2: no request succeeded (2 timeout); what was measured is written" in err
        assert time.monotonic() - started < 20
        summary = json.loads(Path(f"{export.with_suffix('')}.summary.json").read_text())["levels"][0]["summary"]
        assert summary["failed"] == 2 and summary["errors"] == {"timeout": 2}
        assert summary["abandoned"] == {"stall": 2}
        assert "2 requests abandoned (2 stall), each cancelled on the wire" in err
    finally:
        server.stop(state)


def test_an_abandoned_grpc_request_is_cancelled_on_the_server(tmp_path):
    """llm-perf gives up at its request timeout and cancels the call; the server stops working on it (the paced
    model checks its response sender, as an LLM backend does) instead of streaming on for 20 s."""
    write_paced_model(tmp_path / "repo", "long", 100.0, 400.0, decoupled=True)  # 50 chunks over 20 s
    state, spec = start_server(tmp_path / "repo", tmp_path)
    try:
        export = tmp_path / "perf.json"
        proc = llm_perf("-u", f"127.0.0.1:{spec.grpc_port}", "-i", "grpc", "-m", "long", "--input-data",
                        str(data(tmp_path, tokens=50)), "--concurrency", "1", "--num-requests", "1",
                        "--warmup-requests", "0", "--request-timeout", "2",
                        "--profile-export-file", str(export))  # fmt: skip
        _out, err = proc.communicate(timeout=60)
        gave_up = time.monotonic()
        assert proc.returncode == 3, err  # the level measured nothing
        summary = json.loads(Path(f"{export.with_suffix('')}.summary.json").read_text())["levels"][0]["summary"]
        assert summary["abandoned"] == {"timeout": 1}
        log = Path(spec.log_file)
        while "paced: request cancelled by the client" not in log.read_text():
            assert time.monotonic() - gave_up < 5, "the server kept working on the abandoned request"
            time.sleep(0.2)
    finally:
        server.stop(state)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_long_stream_that_keeps_sending_is_not_a_stall(tmp_path, protocol):
    write_paced_model(tmp_path / "repo", "steady", 400.0, 400.0, decoupled=True)  # 8 chunks over 3.2 s
    state, spec = start_server(tmp_path / "repo", tmp_path)
    try:
        port = spec.grpc_port if protocol == "grpc" else spec.http_port
        export = tmp_path / "perf.json"
        proc = llm_perf("-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "steady", "--input-data",
                        str(data(tmp_path, tokens=8)), "--concurrency", "2", "--num-requests", "2",
                        "--warmup-requests", "0", "--stall-timeout", "1",
                        "--profile-export-file", str(export))  # fmt: skip
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        rows = json.loads(export.read_text())["levels"][0]["requests"]
        assert [(r["error"], r["chunks"]) for r in rows] == [(None, 8), (None, 8)]
    finally:
        server.stop(state)


class StrayDataServer:
    """Speaks just enough HTTP/1.1 for llm-perf's Triton HTTP client, and after every streamed response writes
    one more event outside it, as Triton's HTTP generate_stream does under concurrency."""

    STRAY = b'data: {"model_name":"m","text_output":"late"}\n\n'

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                length = int(next((ln.split(":")[1] for ln in head.split("\r\n") if ln.lower().startswith(
                    "content-length")), "0"))  # fmt: skip
                await reader.readexactly(length)
                if head.startswith("GET"):
                    body = b'{"name":"m","inputs":[],"outputs":[]}'
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                 % (len(body), body))  # fmt: skip
                    continue
                events = [b'data: {"model_name":"m","text_output":"t%d "}\n\n' % i for i in range(3)]
                chunked = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                             + chunked)  # fmt: skip
                await writer.drain()
                await asyncio.sleep(0.05)  # the client has sent its next request on this connection by now
                writer.write(self.STRAY)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def __enter__(self) -> int:
        self.thread.start()
        srv = asyncio.run_coroutine_threadsafe(asyncio.start_server(self.handle, "127.0.0.1", 0), self.loop).result()
        self.server = srv
        return srv.sockets[0].getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def test_stream_data_after_the_end_of_a_response_is_a_protocol_error(tmp_path):
    export = tmp_path / "perf.json"
    with StrayDataServer() as port:
        proc = llm_perf("-u", f"127.0.0.1:{port}", "-i", "http", "-m", "m", "--input-data", str(data(tmp_path)),
                        "--concurrency", "1", "--num-requests", "6", "--warmup-requests", "0",
                        "--profile-export-file", str(export))  # fmt: skip
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    rows = json.loads(export.read_text())["levels"][0]["requests"]
    bad = [r for r in rows if r["error"]]
    good = [r for r in rows if not r["error"]]
    assert bad and good and all(r["text"] == "t0 t1 t2 " for r in good)
    assert {r["error_class"] for r in bad} == {"protocol_error"}
    assert "left over from an earlier stream" in bad[0]["error"] and "-i grpc" in bad[0]["error"]


def test_the_sweep_fails_a_benchmark_whose_level_measured_nothing(tmp_path):
    """Before: a level where every request failed was a row of dashes and the point was ok."""
    write_paced_model(tmp_path / "repo", "late", 5000.0, 10.0, decoupled=True)  # first chunk after 5 s
    state, spec = start_server(tmp_path / "repo", tmp_path)
    try:
        args = {"url": f"127.0.0.1:{spec.grpc_port}", "model": "late", "input_data": str(data(tmp_path)),
                "export_file": str(tmp_path / "perf.json"), "num_requests": 1, "warmup_requests": 0,
                "request_timeout": 1, "stall_timeout": 0}  # fmt: skip
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run([str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "trtsweep_llm_perf",
                               "-a", json.dumps(args)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        assert done.returncode != 0, done.stdout
        assert "concurrency 1: no request succeeded (1 timeout)" in done.stdout
        assert (tmp_path / "perf.summary.json").exists()  # what was measured is kept
    finally:
        server.stop(state)
