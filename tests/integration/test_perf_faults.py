"""llm-perf under faults: a server that dies mid-run, Ctrl-C, an unreachable server. Nothing measured is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_ports, start_server
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
